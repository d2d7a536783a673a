"""codex item notifications → host chat messages.

A host that speaks chat completions keeps a transcript of ``assistant`` messages (with
``tool_calls``) and ``tool`` results. This module projects one codex turn onto that shape:

* every tool item (command execution, file change, MCP tool call, dynamic tool call, web search,
  image view) becomes an assistant message with one ``tool_calls`` entry, followed by its ``tool``
  result; the call id is derived from the codex item id, so the same turn always projects the same
  ids;
* assistant text between tool calls is kept, in order, as interim assistant messages; the turn's
  final assistant text (the last agent message) comes last;
* items left open when the turn ends (interrupt, steer, a ``cancel`` decision) are closed in the
  projection — their partial output is kept and marked, never lost;
* a command or patch codex ran without any item notification (codex #47433: the sandbox denied
  it at once) is added afterwards from what codex recorded (:meth:`Projector.reconcile`), in the
  order codex recorded it, with its output — and never twice.

It also names what happened for the host's progress display (:class:`ToolCall`). Pure state: no
I/O, and it never raises on a malformed or unexpected notification sequence.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

JsonObject = dict[str, Any]
TOOL_RESULT_MAX_CHARS = 20_000
_ID_SAFE = re.compile(r"[^A-Za-z0-9_-]")
TOOL_ITEM_TYPES = frozenset(
    {"commandExecution", "fileChange", "mcpToolCall", "dynamicToolCall", "webSearch",
     "imageView"}
)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool item as the host sees it: its call id, tool name and arguments."""

    call_id: str
    name: str
    arguments: JsonObject
    item_id: str


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """A tool call as codex recorded it for the model: its call id (a tool item's id), the
    tool's name, its arguments as the model sent them (JSON, or a patch's text) and the output
    the model was shown (``None``: none recorded)."""

    call_id: str
    name: str
    arguments: str
    output: str | None


#: The recorded calls that become command and file-change items (whose item id is the call id);
#: other tools (the plan, MCP, host tools) have no item or a different id and are not added.
RECORDED_COMMANDS = frozenset({"exec_command", "shell", "shell_command"})
RECORDED_TOOLS = RECORDED_COMMANDS | {"apply_patch"}
_PATCH_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$", re.MULTILINE)
_EXIT_CODE = re.compile(r"^Process exited with code (-?\d+)\s*$", re.MULTILINE)


@dataclass(slots=True)
class _Open:
    item: JsonObject
    text: list[str] = field(default_factory=list)  # streamed deltas (agent text, command output)


def tool_call_id(item_id: str) -> str:
    """The deterministic host call id for a codex item id."""
    return "codex_" + _ID_SAFE.sub("_", item_id or "item")[:80]


def describe_tool(item: Mapping[str, Any],
                  names: Mapping[str, str] | None = None) -> tuple[str, JsonObject]:
    """``(tool name, arguments)`` for a codex tool item; a host tool's call is named as the
    host names it (``names``: codex's name → the host's, where they differ)."""
    kind = item.get("type")
    if kind == "commandExecution":
        args: JsonObject = {"command": item.get("command") or ""}
        if item.get("cwd"):
            args["cwd"] = item["cwd"]
        return "exec_command", args
    if kind == "fileChange":
        changes = []
        for change in item.get("changes") or ():
            if isinstance(change, Mapping):
                change_kind = change.get("kind")
                kind_name = change_kind.get("type") if isinstance(change_kind, Mapping) else None
                changes.append({"path": change.get("path"), "kind": kind_name or "update"})
        return "apply_patch", {"changes": changes}
    if kind == "mcpToolCall":
        arguments = item.get("arguments")
        return (f"mcp.{item.get('server')}.{item.get('tool')}",
                arguments if isinstance(arguments, dict) else {"arguments": arguments})
    if kind == "dynamicToolCall":
        arguments = item.get("arguments")
        tool = str(item.get("tool") or "dynamic_tool")
        return ((names or {}).get(tool, tool),
                arguments if isinstance(arguments, dict) else {"arguments": arguments})
    if kind == "webSearch":
        return "web_search", {"query": item.get("query") or ""}
    if kind == "imageView":
        return "view_image", {"path": item.get("path") or ""}
    return str(kind or "tool"), {}


def _clip(text: str) -> str:
    if len(text) <= TOOL_RESULT_MAX_CHARS:
        return text
    return text[:TOOL_RESULT_MAX_CHARS] + f"\n… [{len(text) - TOOL_RESULT_MAX_CHARS} more chars]"


def _mcp_result_text(result: Any) -> str:
    if isinstance(result, Mapping):
        parts = []
        for block in result.get("content") or ():
            if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        if parts:
            return "\n".join(parts)
        if result.get("structuredContent") is not None:
            return json.dumps(result["structuredContent"])
    return "" if result is None else json.dumps(result, default=str)


def tool_result(item: Mapping[str, Any], streamed: str = "", *, closed_early: bool = False) -> str:
    """The ``tool`` message content for a (completed or force-closed) tool item."""
    kind = item.get("type")
    status = str(item.get("status") or ("interrupted" if closed_early else "completed"))
    if kind == "commandExecution":
        output = item.get("aggregatedOutput")
        text = output if isinstance(output, str) else streamed
        exit_code = item.get("exitCode")
        if closed_early:
            head = "[interrupted before the command finished]"
        elif status == "declined":
            head = "[the command was declined]"
        elif exit_code is not None:
            head = f"[exit code {exit_code}]"
        else:
            head = f"[{status}]"
        return _clip(f"{head}\n{text}" if text else head)
    if kind == "fileChange":
        paths = [c.get("path") for c in item.get("changes") or () if isinstance(c, Mapping)]
        label = "interrupted" if closed_early else status
        return f"[file change {label}] " + ", ".join(str(p) for p in paths if p)
    if kind == "mcpToolCall":
        error = item.get("error")
        if isinstance(error, Mapping) and error.get("message"):
            return _clip(f"[error] {error['message']}")
        body = _mcp_result_text(item.get("result"))
        return _clip(body) if body else f"[{'interrupted' if closed_early else status}]"
    if kind == "dynamicToolCall":
        items = item.get("contentItems") or ()
        texts = [str(c["text"]) for c in items if isinstance(c, Mapping) and c.get("text")]
        return _clip("\n".join(texts)) if texts else f"[{status}]"
    return f"[{'interrupted' if closed_early else status}]"


class Projector:
    """Accumulates one turn's items. Feed :meth:`feed` every in-scope notification, then call
    :meth:`finish` once the turn is over."""

    def __init__(self, tool_names: Mapping[str, str] | None = None) -> None:
        #: codex's name → the host's, for host tools codex knows by another name
        self.tool_names = dict(tool_names or {})
        self.messages: list[JsonObject] = []
        self.tool_iterations = 0
        self.final_text = ""
        self.partial_final = False
        self._open: dict[str, _Open] = {}
        self._order: list[str] = []
        self._completed_text_ids: set[str] = set()
        self._done: set[str] = set()
        self._pending_text: list[tuple[str, str]] = []  # (item id, text) of agent messages
        self._announced: set[str] = set()  # interim messages already handed out
        self._sources: list[str] = []  # the codex item id behind each of ``messages``
        self._finished = False

    # ---------------------------------------------------------------- feeding

    def feed(self, method: str, params: Mapping[str, Any]) -> ToolCall | None:
        """Apply one notification. Returns the tool call it started or completed, if any."""
        if self._finished or not isinstance(params, Mapping):
            return None
        if method == "item/started":
            return self._started(params.get("item"))
        if method == "item/completed":
            return self._completed(params.get("item"))
        if method in ("item/agentMessage/delta", "item/commandExecution/outputDelta"):
            item_id = params.get("itemId")
            delta = params.get("delta")
            if isinstance(item_id, str) and isinstance(delta, str):
                entry = self._open.get(item_id)
                if entry is None and method == "item/agentMessage/delta" \
                        and item_id not in self._done:
                    entry = self._open[item_id] = _Open({"type": "agentMessage", "id": item_id})
                    self._order.append(item_id)
                if entry is not None:
                    entry.text.append(delta)
        return None

    def _started(self, item: Any) -> ToolCall | None:
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
            return None
        item_id = item["id"]
        if item_id in self._done:
            return None
        if item_id not in self._open:
            self._order.append(item_id)
            self._open[item_id] = _Open(dict(item))
        else:
            self._open[item_id].item.update(item)
        if item.get("type") in TOOL_ITEM_TYPES:
            name, args = describe_tool(item, self.tool_names)
            return ToolCall(tool_call_id(item_id), name, args, item_id)
        return None

    def _completed(self, item: Any) -> ToolCall | None:
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
            return None
        item_id = item["id"]
        if item_id in self._done:
            return None  # duplicated item/completed: counted once
        entry = self._open.pop(item_id, None)
        streamed = "".join(entry.text) if entry else ""
        self._done.add(item_id)
        return self._emit(dict(item), streamed, closed_early=False)

    def _emit(self, item: JsonObject, streamed: str, *, closed_early: bool) -> ToolCall | None:
        kind = item.get("type")
        item_id = str(item.get("id"))
        if kind == "agentMessage":
            text = item.get("text")
            text = text if isinstance(text, str) and text else streamed
            if text:
                self._pending_text.append((item_id, text))
                self.partial_final = closed_early
                if not closed_early:
                    self._completed_text_ids.add(item_id)
            return None
        if kind not in TOOL_ITEM_TYPES:
            return None
        self._flush_interim_text()
        name, args = describe_tool(item, self.tool_names)
        call = ToolCall(tool_call_id(item_id), name, args, item_id)
        self._add(len(self.messages), item_id, call, tool_result(item, streamed,
                                                                 closed_early=closed_early))
        return call

    def _add(self, index: int, item_id: str, call: ToolCall, result: str) -> None:
        """A tool call and its result, as two messages at ``index``."""
        self.messages[index:index] = [
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": call.call_id, "type": "function",
                             "function": {"name": call.name,
                                          "arguments": json.dumps(call.arguments)}}]},
            {"role": "tool", "tool_call_id": call.call_id, "name": call.name, "content": result}]
        self._sources[index:index] = [item_id, item_id]
        self.tool_iterations += 1

    def take_interim(self) -> list[str]:
        """Completed agent messages that a later item has shown to be interim (commentary before
        a tool, say) and that were not handed out yet — each is returned once."""
        out = []
        for item_id, text in self._pending_text:
            if item_id in self._completed_text_ids and item_id not in self._announced:
                self._announced.add(item_id)
                out.append(text)
        return out

    def _flush_interim_text(self) -> None:
        for item_id, text in self._pending_text:
            self._text(item_id, text)
        self._pending_text.clear()

    def _text(self, item_id: str, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})
        self._sources.append(item_id)

    # ---------------------------------------------------------------- finishing

    def finish(self) -> list[JsonObject]:
        """Close every open item, place the final assistant text last; returns the messages."""
        if self._finished:
            return self.messages
        closed_early = False
        for item_id in list(self._order):
            entry = self._open.pop(item_id, None)
            if entry is not None:
                self._done.add(item_id)
                self._emit(entry.item, "".join(entry.text), closed_early=True)
                closed_early = True
        if closed_early and len(self._pending_text) > 1:
            # A message cut off (by a steer, say) keeps its place: the answer that came after
            # it — not the fragment — is the final one.
            rank = {item_id: index for index, item_id in enumerate(self._order)}
            self._pending_text.sort(key=lambda pending: rank.get(pending[0], len(rank)))
            self.partial_final = self._pending_text[-1][0] not in self._completed_text_ids
        self._finished = True
        if self._pending_text:
            for item_id, text in self._pending_text:
                self._text(item_id, text)
            self.final_text = self._pending_text[-1][1]
            self._pending_text.clear()
        elif self.messages and self.messages[-1].get("role") == "assistant" \
                and isinstance(self.messages[-1].get("content"), str):
            self.final_text = self.messages[-1]["content"]
        return self.messages

    def knows(self, item_id: str) -> bool:
        """True when an item with this id was started or completed in this turn."""
        return item_id in self._open or item_id in self._done

    def reconcile(self, calls: Sequence[RecordedCall], order: Sequence[str]) -> int:
        """After :meth:`finish`: add the command and patch calls codex recorded for this turn that
        no item notification announced. ``order`` is the ids of what codex recorded (messages and
        calls), in its order: each call goes before the first projected message codex recorded
        after it (else before the final answer). Returns how many were added; a call already
        projected (or added) is never added again."""
        rank = {item_id: index for index, item_id in enumerate(order)}
        added = 0
        for recorded in calls:
            if recorded.call_id in self._done or recorded.name not in RECORDED_TOOLS:
                continue
            self._done.add(recorded.call_id)
            name, args, result = _recorded_tool(recorded)
            after = rank.get(recorded.call_id, len(rank))
            index = next((i for i, source in enumerate(self._sources)
                          if rank.get(source, -1) > after), None)
            if index is None:
                last = self.messages[-1] if self.messages else None
                final = last is not None and last.get("role") == "assistant" \
                    and isinstance(last.get("content"), str)
                index = len(self.messages) - 1 if final else len(self.messages)
            self._add(index, recorded.call_id,
                      ToolCall(tool_call_id(recorded.call_id), name, args, recorded.call_id),
                      result)
            added += 1
        return added

    def has_completed_answer(self) -> bool:
        """True when a completed agent message is the latest thing in the turn (no tool after)."""
        return bool(self._pending_text) and not self._open


def _recorded_tool(call: RecordedCall) -> tuple[str, JsonObject, str]:
    """``(tool name, arguments, result)`` of a recorded call, as :func:`describe_tool` and
    :func:`tool_result` give them for the item it would have been."""
    output = call.output or ""
    if call.name == "apply_patch":
        changes = [{"path": path, "kind": kind.lower()}
                   for kind, path in _PATCH_FILE.findall(call.arguments)]
        body = output.split("\nOutput:\n", 1)[-1].strip()
        paths = ", ".join(str(c["path"]) for c in changes)
        return "apply_patch", {"changes": changes}, _clip(
            f"[file change] {paths}" + (f"\n{body}" if body else ""))
    try:
        parsed = json.loads(call.arguments)
    except ValueError:
        parsed = None
    arguments: Mapping[str, Any] = parsed if isinstance(parsed, Mapping) else {}
    command = arguments.get("cmd") or arguments.get("command") or ""
    if isinstance(command, list):
        command = shlex.join(str(part) for part in command)
    args: JsonObject = {"command": str(command)}
    if arguments.get("workdir"):
        args["cwd"] = arguments["workdir"]
    code = _EXIT_CODE.search(output)
    body = output.split("\nOutput:\n", 1)[1] if "\nOutput:\n" in output else output
    head = f"[exit code {code.group(1)}]" if code else "[completed]"
    return "exec_command", args, _clip(f"{head}\n{body}" if body else head)
