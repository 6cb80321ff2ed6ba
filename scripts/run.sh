#!/usr/bin/env bash
# Sets up everything code-exec-mcp needs on a Debian 12 machine (as root), builds the jar if it is missing or
# older than the sources, and starts the server in the foreground (Streamable HTTP on 127.0.0.1:8080 unless
# HOST/PORT say otherwise; TRANSPORT=stdio for stdio). All configuration comes from environment variables.
set -euo pipefail
cd "$(dirname "$0")/.."
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
./scripts/install-deps.sh >&2
jar=target/code-exec-mcp.jar
if [ ! -f "$jar" ] || [ -n "$(find src pom.xml console -name node_modules -prune -o -newer "$jar" -print -quit)" ]; then
  echo "run.sh: building $jar" >&2
  ./mvnw -B -q package -DskipTests >&2
fi
exec "$JAVA_HOME/bin/java" -jar "$jar" "$@"
