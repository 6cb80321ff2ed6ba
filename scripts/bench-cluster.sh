#!/usr/bin/env bash
# Cluster benchmark (issue #6): the gateway → worker hop against the same jar in local mode (python hello p50, as
# a ratio, warm and cold), and throughput at concurrency 8 with 3 workers against 1 (a CPU-bound hello and a
# sleep-bound run), all in one run on this machine. Expects target/code-exec-mcp.jar (./mvnw -B -q package
# -DskipTests) and the e2e Node project (npm ci in e2e/). Tunables: see the top of e2e/bench/cluster-bench.js.
set -euo pipefail
cd "$(dirname "$0")/.."
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
NODE=${NODE:-/usr/bin/node}
[ -f "${CODE_EXEC_JAR:-target/code-exec-mcp.jar}" ] || { echo "bench-cluster.sh: target/code-exec-mcp.jar missing: run ./mvnw -B -q package -DskipTests first" >&2; exit 1; }
exec "$NODE" e2e/bench/cluster-bench.js
