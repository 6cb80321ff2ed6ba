#!/usr/bin/env bash
# Benchmark of code mode (docs/code-mode.md), in one run on one machine: one tool call from sandboxed code
# (Python `mcp_tools.fx.add(...)`, Node `await fx.add(...)`, each call timed inside the sandbox) against the same call
# made directly by the TypeScript MCP SDK client to the same upstream (e2e/fixtures/upstream-mcp.mjs over Streamable
# HTTP on 127.0.0.1), interleaved rounds, per-call p50/p95 and the overhead (goal: p50 at most 2 ms more than
# direct); a 64 KiB result both ways; the first call of a fresh run (with the import); and where a call's time goes
# (the library, the sandbox's HTTP request and the relay, the server, the upstream leg). Only loopback traffic.
# Builds nothing: expects target/code-exec-mcp.jar (./mvnw -B -q package -DskipTests), Node 20 and e2e/node_modules
# (cd e2e && npm ci: the MCP SDK, for the direct client and the fixture). About 1.5-2 minutes with the defaults, plus
# the server's Go cache warm-up on a fresh DATA_DIR (about 1.5 minutes on 2 cores; BENCH_DATA_DIR keeps one).
# Tunables (env, defaults shown): BENCH_CM_ROUNDS=20 BENCH_CM_CALLS=50 (add calls per side per round)
#                 BENCH_CM_BIG_CALLS=10 BENCH_CM_BIG_KB=64 BENCH_CM_PARTS_CALLS=15 (each breakdown request per run)
#                 BENCH_CM_WARMUP_CALLS=5000 (untimed, from code and as many direct) BENCH_JSON=path/to/results.json
#                 CODE_EXEC_JAR=other.jar BENCH_DATA_DIR=dir (the server's DATA_DIR, kept: a second run skips the
#                 Go cache warm-up)
set -euo pipefail
cd "$(dirname "$0")/.."
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
NODE=${NODE:-/usr/bin/node}
JAR=${CODE_EXEC_JAR:-target/code-exec-mcp.jar}
[ -f "$JAR" ] || { echo "bench-code-mode.sh: $JAR missing: run ./mvnw -B -q package -DskipTests first" >&2; exit 1; }
[ -d e2e/node_modules/@modelcontextprotocol/sdk ] || { echo "bench-code-mode.sh: e2e/node_modules missing: run (cd e2e && npm ci) first" >&2; exit 1; }
exec "$NODE" e2e/bench/code-mode-bench.js
