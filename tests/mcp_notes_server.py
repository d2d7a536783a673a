"""A minimal MCP server over stdio for the tests (newline-delimited JSON-RPC, no dependencies):
one tool, ``lookup``, that answers with the arguments it got and appends each call to the file
named by ``$MCP_CALLS_FILE`` — so a test sees that a call arrived, and with which arguments.

Run by Hermes' own MCP client as a ``config.yaml`` ``mcp_servers`` entry (``command: python``,
``args: [this file]``)."""

from __future__ import annotations

import json
import os
import sys

TOOL = {"name": "lookup", "description": "Look a note up by its key.",
        "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}},
                        "required": ["key"]}}


def answer(message: dict) -> dict | None:
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        result = {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {"listChanged": False}},
                  "serverInfo": {"name": "notes", "version": "1.0.0"}}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        arguments = params.get("arguments") or {}
        calls = os.environ.get("MCP_CALLS_FILE")
        if calls:
            with open(calls, "a") as handle:
                handle.write(json.dumps({"tool": params.get("name"),
                                         "arguments": arguments}) + "\n")
        result = {"content": [{"type": "text",
                               "text": f"note {arguments.get('key')!r}: the kettle is blue"}],
                  "isError": False}
    elif method == "ping":
        result = {}
    elif "id" in message:
        return {"jsonrpc": "2.0", "id": message["id"],
                "error": {"code": -32601, "message": f"method not found: {method}"}}
    else:
        return None  # a notification
    return {"jsonrpc": "2.0", "id": message.get("id"), "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None and "id" in reply:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
