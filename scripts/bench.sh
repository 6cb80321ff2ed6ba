#!/usr/bin/env bash
# Benchmark: execute_code end to end over HTTP versus the bare spawn of the same interpreter, in one run.
# Builds nothing: expects target/code-exec-mcp.jar (./mvnw -B -q package -DskipTests; or CODE_EXEC_JAR) and the e2e
# Node project (npm ci in e2e/; the benchmark itself needs only Node 20's built-ins). Two sections, in this order:
# 1. e2e/bench/fresh.js, a fresh server as a user meets it (issue 20): new processes on new DATA_DIRs, start to
#    healthy (HTTP, on a new and on a used DATA_DIR; stdio to the initialize response) with the idle RSS; on one new
#    server from its first call, hello in python, node, shell, bash, typescript, go, java, c against the bare spawn;
#    a new session's first calls; python-hello throughput at concurrency 4 over a new server's first runs; python
#    hello under SANDBOX=gvisor (where runsc is installed: a warm sandbox ready, and calls in a row); a last
#    line (`fresh goals`) checks issue 20's goals.
# 2. e2e/bench/bench.js, a server after its JIT warm-up: a compact table of per-case p50/p95 for MCP and bare spawn
#    with their ratios, and python-hello throughput at concurrency 4 with its ratio; issue #4: warm hello, pandas warm
#    (preload) vs cold, a python session call, idle pool/session PSS, a "bars (issue #4)" line.
# Tunables (env, defaults shown): BENCH_FRESH=1 (0 skips section 1) BENCH_FRESH_ONLY=0 (1 runs only section 1)
#                 BENCH_FRESH_STARTS=3 BENCH_FRESH_CALLS=100 BENCH_FRESH_COMPILED_CALLS=20 (typescript, go, java, c)
#                 BENCH_FRESH_SESSION_CALLS=50 BENCH_FRESH_THROUGHPUT_RUNS=2000 (per side) BENCH_FRESH_GVISOR_CALLS=30
#                 BENCH_FRESH_THROUGHPUT_SECONDS=60 (a cap per side, for a slow or busy machine)
#                 BENCH_FRESH_BURST=20 (node and typescript hello, that many calls at once)
#                 BENCH_AOT=on (off: the fresh servers start without the JVM's AOT cache, scripts/aot-cache.sh)
#                 BENCH_ITERATIONS=30 BENCH_WARMUP=3
#                 BENCH_THROUGHPUT_WARMUP=12000 (untimed runs first) BENCH_THROUGHPUT_ROUNDS=4 (alternating MCP/bare)
#                 BENCH_THROUGHPUT_SECONDS=20 BENCH_THROUGHPUT_MAX=1600 (per side, over all rounds)
#                 BENCH_CASES="python,node,shell,go" BENCH_JSON=path/to/results.json (both sections; fresh.js's
#                 figures under "fresh")
#                 BENCH_PANDAS_ITERATIONS=10 BENCH_SESSION_ITERATIONS=100 BENCH_SESSION_WARMUP=3000
#                 BENCH_ISSUE4=1 CODE_EXEC_JAR=other.jar
set -euo pipefail
cd "$(dirname "$0")/.."
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
NODE=${NODE:-/usr/bin/node}
JAR=${CODE_EXEC_JAR:-target/code-exec-mcp.jar}
[ -f "$JAR" ] || { echo "bench.sh: $JAR missing: run ./mvnw -B -q package -DskipTests first" >&2; exit 1; }
# both sections add their figures to one file
[ -z "${BENCH_JSON:-}" ] || rm -f "$BENCH_JSON"
if [ "${BENCH_FRESH:-1}" != 0 ]; then
    # the server as the README's command starts it: with the AOT cache of this jar (BENCH_AOT=off: without)
    [ "${BENCH_AOT:-on}" = off ] || ./scripts/aot-cache.sh "${CODE_EXEC_JAR:-target/code-exec-mcp.jar}" >/dev/null
    "$NODE" e2e/bench/fresh.js
elif [ "${BENCH_FRESH_ONLY:-0}" = 1 ]; then
    echo "bench.sh: BENCH_FRESH=0 and BENCH_FRESH_ONLY=1 leave nothing to run" >&2; exit 1
fi
[ "${BENCH_FRESH_ONLY:-0}" = 1 ] && exit 0
exec "$NODE" e2e/bench/bench.js
