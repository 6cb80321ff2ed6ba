#!/usr/bin/env bash
# Sets up everything code-exec-mcp needs on a Debian 12 machine (as root), builds the jar if it is missing or
# older than the sources, and starts the server in the foreground (Streamable HTTP on 127.0.0.1:8080 unless
# HOST/PORT say otherwise; TRANSPORT=stdio for stdio). All configuration comes from environment variables.
# Run by a normal user, it runs itself again through sudo, keeping those variables (scripts/lib/as-root.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib/as-root.sh"
as_root "$here/run.sh" "$@"
cd "$here/.."
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
./scripts/install-deps.sh >&2
jar=target/code-exec-mcp.jar
if [ ! -f "$jar" ] || [ -n "$(find src pom.xml console -name node_modules -prune -o -newer "$jar" -print -quit)" ]; then
  echo "run.sh: building $jar" >&2
  ./mvnw -B -q package -DskipTests >&2
fi
# The JDK's ahead-of-time cache (classes loaded and linked, method profiles), trained on this jar by a run of the
# real server (scripts/aot-cache.sh: once per build, about a minute): a fresh server then starts and answers its
# first calls far sooner (docs/benchmarks.md). AOT_CACHE=off skips it. JVM log lines go to stderr: in stdio mode
# stdout is the protocol's.
jvm=(-Xlog:disable -Xlog:all=warning:stderr)
if [ "${AOT_CACHE:-on}" != off ]; then
  aot=$(./scripts/aot-cache.sh "$jar")
  [ -n "$aot" ] && jvm+=(-XX:AOTCache="$aot")
fi
exec "$JAVA_HOME/bin/java" "${jvm[@]}" -jar "$jar" "$@"
