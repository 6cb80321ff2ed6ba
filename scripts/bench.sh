#!/usr/bin/env bash
# Benchmark: execute_code end to end over HTTP versus the bare spawn of the same interpreter, in one run.
# Builds nothing: expects target/code-exec-mcp.jar (./mvnw -B -q package -DskipTests) and the e2e Node project
# (npm ci in e2e/; the benchmark itself needs only Node 20's built-ins). Prints a compact table: per-case p50/p95
# for MCP and bare spawn with their ratios, and python-hello throughput at concurrency 4 with its ratio; issue #4:
# warm hello, pandas warm (preload) vs cold, a python session call, idle pool/session PSS, a "bars (issue #4)" line.
# Tunables (env, defaults shown): BENCH_ITERATIONS=30 BENCH_WARMUP=3
#                 BENCH_THROUGHPUT_WARMUP=12000 (untimed runs first) BENCH_THROUGHPUT_ROUNDS=4 (alternating MCP/bare)
#                 BENCH_THROUGHPUT_SECONDS=20 BENCH_THROUGHPUT_MAX=1600 (per side, over all rounds)
#                 BENCH_CASES="python,node,shell,go" BENCH_JSON=path/to/results.json
#                 BENCH_PANDAS_ITERATIONS=10 BENCH_SESSION_ITERATIONS=100 BENCH_SESSION_WARMUP=3000
#                 BENCH_ISSUE4=1 CODE_EXEC_JAR=other.jar
set -euo pipefail
cd "$(dirname "$0")/.."
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
NODE=${NODE:-/usr/bin/node}
[ -f target/code-exec-mcp.jar ] || { echo "bench.sh: target/code-exec-mcp.jar missing: run ./mvnw -B -q package -DskipTests first" >&2; exit 1; }
exec "$NODE" e2e/bench/bench.js
