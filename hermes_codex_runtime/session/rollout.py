"""What codex recorded of one turn in a local thread's rollout file: the tool calls the model made
and the outputs it was shown, in order — the source that also holds a call codex ran without any
item notification.

codex #47433: a command the sandbox denies at once reaches the model with its output, yet no
``item/started``/``item/completed`` reaches the client, and ``thread/read`` (or
``thread/turns/list``, ``thread/items/list``) lacks it too. The rollout file (``thread.path`` of
``thread/start`` / ``thread/resume``) is what codex replays to the model on a resume, so it holds
exactly what the model saw. (codex's raw response events would carry the same items live, but
only on an experimental connection, for every thread on it, doubling every output on the wire.)

:func:`mark` notes where the file ends before a turn starts; :func:`read_turn` reads from there
the records between that turn's ``task_started`` and ``task_complete``. The file is codex's
internal JSONL: a record it does not recognise is skipped, an unreadable file gives nothing —
never an error. Only a thread on a local app-server has a file here to read.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hermes_codex_runtime.projector import RecordedCall

log = logging.getLogger(__name__)

#: A turn's records are read up to this many bytes (codex truncates what the model is shown).
MAX_TURN_BYTES = 64 * 1024 * 1024
_CALLS = ("function_call", "custom_tool_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")
_CALL_MARKERS = tuple(f'"{kind}"'.encode() for kind in _CALLS)
#: Only lines that carry one of these are parsed (the instructions and context are skipped).
_WANTED = ("task_started", "task_complete", "_call", '"assistant"')


@dataclass(frozen=True, slots=True)
class Mark:
    """Where a thread's rollout file ended before a turn started."""

    path: str
    offset: int


@dataclass(frozen=True, slots=True)
class RecordedTurn:
    """One turn as codex recorded it: its tool calls with their outputs, and the ids of its
    assistant messages and calls in the recorded order."""

    calls: tuple[RecordedCall, ...]
    order: tuple[str, ...]


def mark(path: str | None) -> Mark | None:
    """The end of the rollout file at ``path`` now (0 for a file codex has not written yet)."""
    if not path:
        return None
    try:
        offset = os.path.getsize(path)
    except OSError:
        offset = 0
    return Mark(path, offset)


def read_turn(at: Mark, turn_id: str) -> RecordedTurn | None:
    """The records of turn ``turn_id`` written after ``at``; ``None`` when the file cannot be
    read, holds no such turn, or records no tool call since ``at`` (a text-only turn: nothing
    to reconcile, and its lines are not parsed)."""
    try:
        with open(at.path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size - at.offset > MAX_TURN_BYTES:
                log.info("codex's record of turn %s is larger than %d bytes; not read", turn_id,
                         MAX_TURN_BYTES)
                return None
            handle.seek(at.offset if at.offset <= size else 0)  # a file rewritten: from the top
            return _turn(handle.read(MAX_TURN_BYTES), turn_id)
    except OSError as exc:
        log.debug("codex's rollout %s could not be read: %s", at.path, exc)
        return None


def _turn(data: bytes, turn_id: str) -> RecordedTurn | None:
    if not any(marker in data for marker in _CALL_MARKERS):
        return None
    inside = found = False
    calls: dict[str, tuple[str, str]] = {}
    outputs: dict[str, str] = {}
    order: list[str] = []
    for raw in data.splitlines():
        line = raw.decode("utf-8", "replace")
        if not any(word in line for word in _WANTED):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line codex is still writing
        payload = record.get("payload") if isinstance(record, Mapping) else None
        if not isinstance(payload, Mapping):
            continue
        kind = payload.get("type")
        if record.get("type") == "event_msg" and kind in ("task_started", "task_complete"):
            ours = payload.get("turn_id") == turn_id
            if kind == "task_started":
                inside = ours
                found = found or ours
            elif ours:
                break
            continue
        if inside and record.get("type") == "response_item":
            _item(payload, calls, outputs, order)
    if not found:
        return None
    recorded = tuple(RecordedCall(call_id, name, arguments, outputs.get(call_id))
                     for call_id, (name, arguments) in calls.items())
    return RecordedTurn(recorded, tuple(order))


def _item(payload: Mapping[str, Any], calls: dict[str, tuple[str, str]],
          outputs: dict[str, str], order: list[str]) -> None:
    kind = payload.get("type")
    if kind == "message" and payload.get("role") == "assistant":
        if isinstance(payload.get("id"), str):
            order.append(payload["id"])
        return
    call_id = payload.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        return
    if kind in _CALLS and call_id not in calls:
        arguments = payload.get("arguments") if kind == "function_call" else payload.get("input")
        calls[call_id] = (str(payload.get("name") or ""), arguments
                          if isinstance(arguments, str) else json.dumps(arguments))
        order.append(call_id)
    elif kind in _OUTPUTS:
        outputs[call_id] = _output_text(payload.get("output"))


def _output_text(output: Any) -> str:
    """A recorded output as text: a string, or the text parts of a content list."""
    if isinstance(output, str):
        return output
    if isinstance(output, Mapping):
        output = output.get("content", output.get("output"))
        if isinstance(output, str):
            return output
    if isinstance(output, list):
        return "\n".join(str(part.get("text")) for part in output
                         if isinstance(part, Mapping) and isinstance(part.get("text"), str))
    return "" if output is None else json.dumps(output)


#: The thread's first record (``session_meta``) is read up to this many bytes (it carries the
#: base instructions, a few KiB, and the dynamic tools).
MAX_META_BYTES = 4 * 1024 * 1024


def dynamic_tools(path: str | None) -> tuple[dict[str, Any], ...] | None:
    """The dynamic tools codex keeps for the thread whose rollout is at ``path`` (its
    ``session_meta``; a resume cannot change them), or ``None`` when that is unknown."""
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            first = handle.readline(MAX_META_BYTES)
        record = json.loads(first)
    except (OSError, ValueError):
        return None
    payload = record.get("payload") if isinstance(record, Mapping) else None
    if not isinstance(payload, Mapping) or record.get("type") != "session_meta":
        return None
    tools = payload.get("dynamic_tools")
    if tools is None:
        return ()
    if not isinstance(tools, list):
        return None
    return tuple(dict(tool) for tool in tools if isinstance(tool, Mapping))
