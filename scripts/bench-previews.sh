#!/usr/bin/env bash
# Benchmark of port previews (docs/previews.md, docs/benchmarks.md): requests/s and p50/p95 latency of a 1 KiB page
# served by python3's ThreadingHTTPServer (HTTP/1.1 keep-alive) in a bash session, fetched through the preview URL
# by a keep-alive Node client against the same page fetched by a Python client inside the same session, at
# concurrency 1 and 8 (and with a new connection per request at 1); prints both and the ratios.
# Builds nothing: expects target/code-exec-mcp.jar (./mvnw -B -q package -DskipTests) and Node 20 (built-ins only).
# Tunables (env, defaults shown): BENCH_PREVIEWS_REQUESTS=2000 BENCH_PREVIEWS_ROUNDS=2 BENCH_PREVIEWS_WARMUP=200
#                 BENCH_PREVIEWS_CONCURRENCY=1,8 BENCH_JSON=path CODE_EXEC_JAR=other.jar
set -euo pipefail
cd "$(dirname "$0")/.."
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
JAR=${CODE_EXEC_JAR:-target/code-exec-mcp.jar}
[ -f "$JAR" ] || { echo "bench-previews.sh: $JAR missing: run ./mvnw -B -q package -DskipTests first" >&2; exit 1; }
exec "${NODE:-/usr/bin/node}" e2e/bench/previews-bench.js
