"""The prior transcript, rendered for a FRESH codex thread.

When a host session moves onto a new codex thread (the stored one could not be resumed, the host's
prompt changed, the session ran on another provider before), the thread starts blind. The seed
tells the model what already happened: prior user/assistant text, tool names and short previews of
tool results, under a header saying these turns already happened. System rows are skipped; the
trailing user row (the message being sent now) is dropped; only the most recent
``max_chars`` survive, behind an "earlier turns omitted" marker. It rides once, appended to
``developerInstructions`` on ``thread/start`` — never on ``thread/resume``.

Rendering walks the transcript backwards and stops once the budget is spent, so a 10,000-message
transcript costs milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

DEFAULT_MAX_CHARS = 32_000
TOOL_PREVIEW_CHARS = 300
HEADER = (
    "## Conversation so far\n"
    "The turns below already happened in this conversation before this thread started (you "
    "are continuing it). They are context, not new requests: do not act on them again unless "
    "the user asks."
)
OMITTED = "[earlier turns omitted]"


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, bytes | bytearray):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif str(part.get("type", "")).endswith("image") or part.get("type") == "image_url":
                    parts.append("[image]")
        return "\n".join(p for p in parts if p)
    return ""


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tool_names(message: Mapping[str, Any]) -> list[str]:
    names = []
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping):
            function = call.get("function")
            name = function.get("name") if isinstance(function, Mapping) else call.get("name")
            if isinstance(name, str) and name:
                names.append(name)
    return names


def _render(message: Mapping[str, Any]) -> str | None:
    role = message.get("role")
    if role == "user":
        text = _text_of(message.get("content")).strip()
        return f"User: {text}" if text else None
    if role == "assistant":
        text = _text_of(message.get("content")).strip()
        names = _tool_names(message)
        lines = []
        if text:
            lines.append(f"Assistant: {text}")
        if names:
            lines.append(f"Assistant called tools: {', '.join(names)}")
        return "\n".join(lines) or None
    if role == "tool":
        text = _text_of(message.get("content"))
        if not text and message.get("content") is not None:
            try:
                text = json.dumps(message.get("content"))
            except (TypeError, ValueError):
                text = str(message.get("content"))
        name = message.get("name")
        label = f"Tool result ({name})" if isinstance(name, str) and name else "Tool result"
        return f"{label}: {_clip(text, TOOL_PREVIEW_CHARS)}" if text.strip() else None
    return None  # system, developer and anything unknown


def render_history_seed(messages: Sequence[Any], *, max_chars: int = DEFAULT_MAX_CHARS,
                        drop_trailing_user: bool = True) -> str | None:
    """The seed text for ``messages`` (oldest first), or ``None`` when there is nothing to tell."""
    end = len(messages)
    if drop_trailing_user:
        while end > 0:
            last = messages[end - 1]
            if isinstance(last, Mapping) and last.get("role") == "user":
                end -= 1
                break
            if isinstance(last, Mapping) and last.get("role") in ("system", "developer"):
                end -= 1
                continue
            break
    budget = max(0, max_chars - len(HEADER) - len(OMITTED) - 4)
    blocks: list[str] = []
    used = 0
    truncated = False
    for index in range(end - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, Mapping):
            continue
        block = _render(message)
        if block is None:
            continue
        if blocks and block == blocks[-1] and message.get("role") == "user":
            continue  # a user turn a transcript repeats back to back (a host's store) is one
        cost = len(block) + 2
        if used + cost > budget:
            truncated = True
            if not blocks and budget > 1:  # one huge message: keep its most recent part
                blocks.append("…" + block[-(budget - 1):])  # "…" is one character
            break
        blocks.append(block)
        used += cost
    if not blocks:
        return None
    blocks.reverse()
    body = "\n\n".join(blocks)
    return f"{HEADER}\n\n{OMITTED}\n\n{body}" if truncated else f"{HEADER}\n\n{body}"
