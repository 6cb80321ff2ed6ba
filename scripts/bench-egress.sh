#!/usr/bin/env bash
# Benchmark of egress (docs/network.md), in one run on one machine: a 50 MiB download from a loopback HTTP
# fixture through the proxy (curl in a sandbox) vs the host's curl directly (MB/s, ratio; goal >= 0.8x) and vs the
# host's curl through a bare one-hop relay (e2e/bench/reference-relay.c, built with cc: the floor of any proxy); python hello
# p50/p95 and throughput at concurrency 4 on a server with EGRESS off and one with EGRESS=on (calls with
# network:false), each against the bare spawn of python3, and their on/off ratio; a python requests.get of 1 KiB
# through the proxy (call p50, the proxy's per-connection ms, the same script on the host). Only loopback traffic.
# Builds nothing: expects target/code-exec-mcp.jar (./mvnw -B -q package -DskipTests) and Node 20 (built-ins only).
# Tunables (env, defaults shown): BENCH_EGRESS_ITERATIONS=10 BENCH_EGRESS_WARMUP=2 BENCH_HELLO_ITERATIONS=100
#                 BENCH_THROUGHPUT_SECONDS=10 (per side) BENCH_THROUGHPUT_ROUNDS=4 BENCH_WARMUP_RUNS=500 (per server)
#                 BENCH_REQUESTS_ITERATIONS=30 BENCH_JSON=path/to/results.json
#                 BENCH_BEFORE_JAR=old.jar (also compare the server from before egress) CODE_EXEC_JAR=other.jar
#                 BENCH_DATA_DIR=dir (the servers' DATA_DIR, kept: a second run skips the Go cache warm-up)
set -euo pipefail
cd "$(dirname "$0")/.."
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
NODE=${NODE:-/usr/bin/node}
[ -f target/code-exec-mcp.jar ] || { echo "bench-egress.sh: target/code-exec-mcp.jar missing: run ./mvnw -B -q package -DskipTests first" >&2; exit 1; }
[ -x /usr/bin/curl ] || { echo "bench-egress.sh: curl missing (the direct download uses /usr/bin/curl)" >&2; exit 1; }
exec "$NODE" e2e/bench/egress-bench.js
