"""``hermes-codex-runtime replay mcp``: an MCP server on stdio whose tools let an agent drive
replays (:mod:`.tools`: list_sessions, plan_replay, start_replay, get_run, cancel_run,
get_report).

Newline-delimited JSON-RPC 2.0 (MCP's stdio transport). ``initialize`` answers with the
protocol version the client asked for when it is one this server speaks (else its newest),
``notifications/*`` get no reply, ``ping`` answers ``{}``, an unknown method is ``-32601``. A
tool that fails returns ``isError: true`` with the reason as text — never a JSON-RPC error —
so the agent sees why. An agent's MCP configuration runs it as the command
``hermes-codex-runtime replay mcp`` (the README shows the host's own entry).
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from hermes_codex_runtime import __version__
from hermes_codex_runtime.replay.tools import ReplayTools, ToolError

PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MAX_LINE = 4 * 2**20


def _reply(out: TextIO, message_id: Any, result: Any = None,
           error: tuple[int, str] | None = None) -> None:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": message_id}
    if error is not None:
        body["error"] = {"code": error[0], "message": error[1]}
    else:
        body["result"] = result
    out.write(json.dumps(body, ensure_ascii=False) + "\n")
    out.flush()


def handle(tools: ReplayTools, message: Any) -> tuple[Any, tuple[int, str] | None] | None:
    """The reply to one message: ``(result, None)``, ``(None, error)``, or ``None`` for a
    notification."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" \
            or not isinstance(message.get("method"), str):
        return None, (-32600, "invalid request")
    method = message["method"]
    if "id" not in message:
        return None  # a notification (notifications/initialized, cancelled, …)
    raw = message.get("params")
    params: dict[str, Any] = raw if isinstance(raw, dict) else {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        return {"protocolVersion": version, "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "hermes-codex-replay", "version": __version__},
                "instructions": "Replay a recorded session through codex: list_sessions,"
                                " then plan_replay (show the plan to the user), start_replay "
                                "with its plan_token, get_run until it ends, get_report."}, None
    if method == "ping":
        return {}, None
    if method == "tools/list":
        return {"tools": [tool.spec() for tool in tools.tools.values()]}, None
    if method == "tools/call":
        try:
            result = tools.call(params.get("name"), params.get("arguments"))
        except ToolError as exc:
            return {"content": [{"type": "text", "text": str(exc)}], "isError": True}, None
        except Exception as exc:  # a bug must not end the server; the agent sees it
            return {"content": [{"type": "text", "text": f"internal error: "
                                                         f"{type(exc).__name__}: {exc}"}],
                    "isError": True}, None
        return {"content": [{"type": "text",
                             "text": json.dumps(result, ensure_ascii=False, indent=1)}],
                "structuredContent": result, "isError": False}, None
    return None, (-32601, f"method not found: {method}")


def serve(tools: ReplayTools, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> int:
    """Answer messages until stdin closes; returns the exit status."""
    while True:
        line = stdin.readline(MAX_LINE + 1)
        if not line:
            return 0
        if len(line) > MAX_LINE:
            _reply(stdout, None, error=(-32700, "message too large"))
            while line and not line.endswith("\n"):  # skip the rest of it
                line = stdin.readline(MAX_LINE)
            continue
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            _reply(stdout, None, error=(-32700, "parse error"))
            continue
        answer = handle(tools, message)
        if answer is None:
            continue
        result, error = answer
        _reply(stdout, message.get("id") if isinstance(message, dict) else None, result, error)
