#!/usr/bin/env bash
# Benchmark of declared packages (docs/packages.md), in one run on one
# machine, servers started fresh:
# 1. python `print(6*7)` with packages ["tinylib==1.0"] already in the store against the same run without packages
#    (goal: p50 at most 5 ms more), end to end from the client and the server's durationMs and sandbox start, beside
#    the same run with `import tinylib` and the bare spawn of /usr/bin/python3 on the host; interleaved rounds, on
#    (a) a server with WARM_POOL=off (both sides cold: what the store and its mount cost) and (b) one with the
#    default warm pool (what a user sees: the side without packages served warm; the side with packages warm when
#    the server hands a warm sandbox the set's entry, else cold; the report's `started` column says which);
# 2. the first install of a small set on an emptied store (tinylib==1.0; tinylib==2.0, which pulls in tinydep):
#    installMs, the round trip, the index's requests, p50 over repetitions;
# 3. the store's size after them (GET /api/admin/packages, and du of DATA_DIR/packages).
# The index is e2e/fixtures/pypi-index.mjs on 127.0.0.1 (pinned as pypi.test, EGRESS_ALLOW_CIDRS=127.0.0.1/32): only
# loopback traffic, no PyPI, no npm registry.
# Builds nothing: expects target/code-exec-mcp.jar (./mvnw -B -q package -DskipTests), Node 20, python3 on the host
# (the fixture builds its wheels with it) and e2e/ (the benchmark needs only Node's built-ins). About 2-2.5 minutes
# with the defaults on 2 cores, the first server's Go cache warm-up on a fresh DATA_DIR included (BENCH_DATA_DIR
# keeps one; a second run then saves that part).
# Tunables (env, defaults shown): BENCH_PKG_ROUNDS=100 (timed rounds per server, each side once per round)
#                 BENCH_PKG_WARMUP=5 (untimed rounds first) BENCH_PKG_INSTALLS=5 (repetitions of part 2)
#                 BENCH_JSON=path/to/results.json CODE_EXEC_JAR=other.jar
#                 BENCH_DATA_DIR=dir (the servers' DATA_DIR, kept: a second run skips the Go cache warm-up)
set -euo pipefail
cd "$(dirname "$0")/.."
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
NODE=${NODE:-/usr/bin/node}
JAR=${CODE_EXEC_JAR:-target/code-exec-mcp.jar}
[ -f "$JAR" ] || { echo "bench-packages.sh: $JAR missing: run ./mvnw -B -q package -DskipTests first" >&2; exit 1; }
command -v python3 >/dev/null || { echo "bench-packages.sh: python3 missing (the index fixture builds its wheels with it)" >&2; exit 1; }
exec "$NODE" e2e/bench/packages-bench.js
