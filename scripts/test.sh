#!/usr/bin/env bash
# Runs the whole test suite on a Debian 12 machine (as root): installs what the project needs, then
#  1. ./mvnw verify — unit and integration tests (engine, sandbox incl. adversarial cases, MCP/HTTP edge,
#     the official MCP conformance suite against the real HTTP stack), and builds target/code-exec-mcp.jar;
#  2. scripts/e2e.sh — the real jar driven by the official TypeScript MCP SDK over HTTP and stdio;
#  3. scripts/container-test.sh — the container image built with podman from a local Debian base, run and driven
#     over MCP and REST, then compose.yaml up and down through docker-compose on the podman socket.
# Run by a normal user, it runs itself again through sudo, keeping JAVA_HOME and the rest of the environment
# (scripts/lib/as-root.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib/as-root.sh"
as_root "$here/test.sh" "$@"
cd "$here/.."
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
export PATH="$JAVA_HOME/bin:$PATH"
# A test whose requirement is missing (a sandbox that can run code, root, cgroups, a runtime install-deps.sh
# installs) fails here instead of skipping: a green run has exercised them all (docs/testing.md).
export CODEEXEC_STRICT_TESTS=1
./scripts/install-deps.sh --test
./mvnw -B verify
./scripts/e2e.sh
./scripts/container-test.sh
