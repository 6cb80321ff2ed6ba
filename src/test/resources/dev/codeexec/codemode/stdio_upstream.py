#!/usr/bin/python3
"""A stdio MCP server for the code mode tests: its tool `environment` answers the environment and the working
directory its process was started with; `add` adds a and b. Newline-delimited JSON-RPC on stdin/stdout."""
import json
import os
import sys


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


TOOLS = [
    {"name": "environment", "description": "The process's environment and working directory.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "add", "description": "Adds a and b.",
     "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}},
]

for line in sys.stdin:
    if not line.strip():
        continue
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue  # a notification, or an answer to a request of ours (there are none)
    method, params = msg["method"], msg.get("params") or {}
    if method == "initialize":
        result = {"protocolVersion": params.get("protocolVersion"), "capabilities": {"tools": {}},
                  "serverInfo": {"name": "stdio-fixture", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call" and params.get("name") == "environment":
        seen = {"env": dict(os.environ), "cwd": os.getcwd()}
        result = {"content": [{"type": "text", "text": json.dumps(seen)}], "structuredContent": seen}
    elif method == "tools/call" and params.get("name") == "add":
        args = params.get("arguments") or {}
        total = args.get("a", 0) + args.get("b", 0)
        result = {"content": [{"type": "text", "text": str(total)}], "structuredContent": {"sum": total}}
    elif method == "ping":
        result = {}
    else:
        send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no " + method}})
        continue
    send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
