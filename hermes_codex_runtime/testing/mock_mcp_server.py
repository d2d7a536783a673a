"""A stdio MCP server for tests (``python -m hermes_codex_runtime.testing.mock_mcp_server``).

Tools: ``echo`` (returns its ``text``) and ``confirm`` (asks the user through MCP elicitation —
which codex turns into an ``mcpServer/elicitation/request`` to its client — and reports the
answer). Newline-delimited JSON-RPC 2.0 on stdio, standard library only. Every message it
receives is appended to ``$MOCK_MCP_LOG`` when set.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

PROTOCOL_VERSION = "2025-06-18"


def server_table(log_path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """An ``[mcp_servers.<name>]`` table of codex's ``config.toml`` that runs this server with
    this interpreter (every message logged to ``log_path`` when given)."""
    from pathlib import Path

    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    if log_path is not None:
        env["MOCK_MCP_LOG"] = os.fspath(log_path)
    return {"command": sys.executable,
            "args": ["-m", "hermes_codex_runtime.testing.mock_mcp_server"], "env": env}
TOOLS = [
    {"name": "echo", "description": "Echo the given text back.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]}},
    {"name": "confirm", "description": "Ask the user to confirm something.",
     "inputSchema": {"type": "object", "properties": {"question": {"type": "string"}},
                     "required": ["question"]}},
]


def _write(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def _log(message: dict[str, Any]) -> None:
    path = os.environ.get("MOCK_MCP_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(message) + "\n")


def _read() -> dict[str, Any] | None:
    line = sys.stdin.readline()
    if not line:
        return None
    message = json.loads(line)
    _log(message)
    return message if isinstance(message, dict) else {}


def _elicit(question: str) -> dict[str, Any]:
    _write({"id": "elicit-1", "method": "elicitation/create", "params": {
        "message": question,
        "requestedSchema": {"type": "object",
                            "properties": {"ok": {"type": "boolean", "title": "OK?"}}},
    }})
    while True:
        message = _read()
        if message is None:
            return {"action": "cancel"}
        if message.get("id") == "elicit-1" and "method" not in message:
            result = message.get("result")
            return result if isinstance(result, dict) else {"action": "error",
                                                            "error": message.get("error")}


def main() -> int:
    """Serve until stdin closes."""
    while True:
        message = _read()
        if message is None:
            return 0
        method, rid = message.get("method"), message.get("id")
        if rid is None:
            continue  # notifications
        if method == "initialize":
            _write({"id": rid, "result": {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "mock-mcp", "version": "1.0"}}})
        elif method == "tools/list":
            _write({"id": rid, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            params = message.get("params") or {}
            args = params.get("arguments") or {}
            if params.get("name") == "echo":
                text = f"echo: {args.get('text', '')}"
            elif params.get("name") == "confirm":
                answer = _elicit(str(args.get("question", "Proceed?")))
                text = f"user answered: {json.dumps(answer, sort_keys=True)}"
            else:
                _write({"id": rid, "error": {"code": -32602, "message": "unknown tool"}})
                continue
            _write({"id": rid, "result": {"content": [{"type": "text", "text": text}],
                                          "isError": False}})
        elif method == "ping":
            _write({"id": rid, "result": {}})
        else:
            _write({"id": rid, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    sys.exit(main())
