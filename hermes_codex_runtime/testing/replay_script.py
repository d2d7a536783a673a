"""A scripted agent for the mock provider that makes replays comparable: its answers depend on
the model codex asked for and on the user's message, and a message that mentions "notes" makes
it write a file with codex's shell tool — so a recorded session has a tool call, and each replay
variant leaves its own change on disk.

Used by the replay tests, ``make demo`` and the replay benchmark.
"""

from __future__ import annotations

from typing import Any

from hermes_codex_runtime.testing import mock_provider as mp

NOTES_FILE = "notes.txt"


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the newest user message in a Responses request (codex's own context
    messages, which start with ``<``, are skipped)."""
    for item in reversed(body.get("input") or []):
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        content = item.get("content")
        parts = [content] if isinstance(content, str) else [
            str(p.get("text") or "") for p in content or [] if isinstance(p, dict)]
        text = "\n".join(p for p in parts if p).strip()
        if text and not text.startswith("<"):
            return text
    return ""


def after_tool(body: dict[str, Any]) -> bool:
    """Whether the request follows a tool call (its last input item is a tool result)."""
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    return bool(items) and items[-1].get("type") in ("function_call_output",
                                                     "custom_tool_call_output")


def agent(body: dict[str, Any]) -> mp.Reply:
    """The scripted answer to one request."""
    model = str(body.get("model") or "?")
    text = last_user_text(body)
    usage = mp.Usage(input=1200, cached=400, output=80, reasoning=16)
    if after_tool(body):
        return mp.text(f"[{model}] I wrote {NOTES_FILE}.", usage=usage)
    if "notes" in text.lower():
        return mp.exec_command(f"printf '%s\\n' 'notes by {model}' > {NOTES_FILE}",
                               usage=usage)
    return mp.text(f"[{model}] You said: {text[:80]}", usage=usage)
