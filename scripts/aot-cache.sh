#!/usr/bin/env bash
# Makes sure the JDK's ahead-of-time cache for a jar is there and current: JAR.aot beside JAR (code-exec-mcp.jar →
# code-exec-mcp.aot), trained by a run of the real server on a temporary DATA_DIR (`java -jar JAR train-aot`, see
# src/main/java/dev/codeexec/AotTraining.java) when it is missing or older than the jar; about a minute, once per
# build. Prints the cache's path on stdout (nothing when the training failed: the server then starts without one).
# Used by scripts/run.sh and scripts/bench.sh. Usage: scripts/aot-cache.sh JAR   (JAVA_HOME: the JDK that runs it)
set -euo pipefail
jar=$1
JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
aot=${jar%.jar}.aot
if [ ! -f "$aot" ] || [ "$jar" -nt "$aot" ]; then
  echo "aot-cache: training the JVM's AOT cache $aot (once per build)" >&2
  rm -f "$aot"
  "$JAVA_HOME/bin/java" -Xlog:disable -Xlog:all=warning:stderr -XX:AOTCacheOutput="$aot" -jar "$jar" train-aot >&2 \
    || { echo "aot-cache: the training failed; the server starts without the cache" >&2; rm -f "$aot"; }
fi
[ -f "$aot" ] && echo "$aot"
exit 0
