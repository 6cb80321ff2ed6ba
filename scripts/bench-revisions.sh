#!/usr/bin/env bash
# Benchmark of the two MCP revisions on /mcp (issue 41; docs/benchmarks.md): an execute_code shell call's p50/p95
# under 2025-11-25 (a session) and under 2026-07-28 (stateless), interleaved in one run against one fresh server,
# beside the bare spawn of sh -c 'echo hi'; plus what a new client pays first (the 2025-11-25 handshake, the
# 2026-07-28 server/discover).
# Builds nothing: expects target/code-exec-mcp.jar (./mvnw -B -q package -DskipTests); e2e/bench/revisions-bench.js
# uses Node built-ins only.
# Tunables (env): BENCH_REVISIONS_ITERATIONS=100 BENCH_REVISIONS_WARMUP=20 BENCH_JSON=path CODE_EXEC_JAR=other.jar
set -euo pipefail
cd "$(dirname "$0")/.."
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
[ -f target/code-exec-mcp.jar ] || { echo "bench-revisions.sh: target/code-exec-mcp.jar missing: run ./mvnw -B -q package -DskipTests first" >&2; exit 1; }
exec "${NODE:-/usr/bin/node}" e2e/bench/revisions-bench.js
