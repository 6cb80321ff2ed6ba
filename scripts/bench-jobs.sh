#!/usr/bin/env bash
# Benchmark of background jobs (docs/jobs.md, docs/benchmarks.md): python hello p50 through execute_code while two
# CPU-bound jobs run, against the same with none (goal: at most 1.5x), each beside the bare spawn of python3.
# Builds nothing: expects target/code-exec-mcp.jar (./mvnw -B -q package -DskipTests) and e2e's npm packages.
# Tunables (env): BENCH_JOBS_ROUNDS=40 BENCH_JOBS_WARMUP=5 BENCH_JSON=path CODE_EXEC_JAR=other.jar
set -euo pipefail
cd "$(dirname "$0")/.."
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
[ -f target/code-exec-mcp.jar ] || { echo "bench-jobs.sh: target/code-exec-mcp.jar missing: run ./mvnw -B -q package -DskipTests first" >&2; exit 1; }
exec "${NODE:-/usr/bin/node}" e2e/bench/jobs-bench.js
