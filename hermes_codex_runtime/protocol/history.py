"""A host's chat messages (the chat-completions shape: ``user``, ``assistant`` with
``tool_calls``, ``tool``) as Responses API items, for ``thread/inject_items``: turns a thread
never ran (another provider answered them) appended to what its model sees.

Pure data. System messages are left out (a thread's instructions are its own); a tool call and
its result keep their call id, so the model sees them paired as it would have made them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from hermes_codex_runtime.protocol.schema_types import ResponseItem


def _parts(content: Any) -> list[tuple[str, str]]:
    """(kind, value) of a message's content: ``text`` or ``image`` (a URL)."""
    if isinstance(content, str):
        return [("text", content)] if content else []
    parts: list[tuple[str, str]] = []
    if isinstance(content, Sequence) and not isinstance(content, bytes | bytearray):
        for part in content:
            if isinstance(part, str) and part:
                parts.append(("text", part))
            elif isinstance(part, Mapping):
                if isinstance(part.get("text"), str) and part["text"]:
                    parts.append(("text", part["text"]))
                image = part.get("image_url")
                url = image.get("url") if isinstance(image, Mapping) else image
                if isinstance(url, str) and url:
                    parts.append(("image", url))
    return parts


def _message(role: str, content: Any) -> ResponseItem | None:
    text_type = "output_text" if role == "assistant" else "input_text"
    body: list[dict[str, Any]] = []
    for kind, value in _parts(content):
        if kind == "text":
            body.append({"type": text_type, "text": value})
        elif role == "user":
            body.append({"type": "input_image", "image_url": value})
        else:
            body.append({"type": text_type, "text": "[image]"})
    return {"type": "message", "role": role, "content": body} if body else None


def _tool_calls(message: Mapping[str, Any]) -> list[ResponseItem]:
    items: list[ResponseItem] = []
    for call in message.get("tool_calls") or ():
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        name = function.get("name") if isinstance(function, Mapping) else call.get("name")
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        call_id = call.get("id")
        if not isinstance(name, str) or not isinstance(call_id, str):
            continue
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {}, default=str)
        items.append({"type": "function_call", "name": name, "arguments": arguments,
                      "call_id": call_id})
    return items


def history_items(messages: Sequence[Any]) -> list[ResponseItem]:
    """``messages`` as Responses items, in order (what cannot be expressed is left out)."""
    items: list[ResponseItem] = []
    answered: set[str] = set()
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role == "user":
            item = _message("user", message.get("content"))
            if item is not None:
                items.append(item)
        elif role == "assistant":
            item = _message("assistant", message.get("content"))
            if item is not None:
                items.append(item)
            calls = _tool_calls(message)
            items.extend(calls)
            answered.update(str(call["call_id"]) for call in calls)
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if isinstance(call_id, str) and call_id in answered:
                output = _parts(message.get("content"))
                items.append({"type": "function_call_output", "call_id": call_id,
                              "output": "\n".join(v for k, v in output if k == "text")})
    return items
