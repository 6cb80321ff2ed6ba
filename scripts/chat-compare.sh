#!/usr/bin/env bash
# The comparison command (docs/chat.md, "Measuring what code mode saves"): runs one task list in both chat modes,
# code and direct, against a running server through POST /api/chat, a fresh conversation per task and mode, and
# prints per task and in total the model rounds, input/output tokens, tool calls and time side by side, with the
# ratio direct/code. The server needs LLM_MODEL (the chat on) and, for the default tasks, an upstream named fx with
# the tools of e2e/fixtures/upstream-mcp.mjs; give your own task file for your own upstreams.
# Usage: CHAT_URL=http://127.0.0.1:8080 CHAT_API_KEY=<tenant key> scripts/chat-compare.sh
#          [--tasks FILE] [--modes code,direct] [--json FILE] [--keep] [--timeout-ms N] [--url URL]
# (default tasks: e2e/bench/chat-tasks.json; --keep leaves the conversations on the server; --json writes each
# answer's figures). Node 20, nothing to install. It spends the model's tokens: it is not part of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE=${NODE:-node}
exec "$NODE" e2e/bench/chat-compare.js "$@"
