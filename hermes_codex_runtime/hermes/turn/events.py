"""codex's progress as Hermes shows it — and nothing shown raw.

Owns :func:`bridge`: each :data:`~hermes_codex_runtime.events.CodexEvent` of a turn reaches the
agent's display, the way Hermes' own turns reach it (a handler per kind gets that kind's event,
typed):

* **answer text** through ``_fire_stream_delta``; where another segment begins (a tool, another
  message) the current one is closed as Hermes closes it before its tools —
  ``stream_delta_callback(None)`` (the gateway finalizes the message, the CLI closes its boxes)
  and ``_stream_needs_break`` (the next text starts with a paragraph break, so a client joining
  ``message.delta`` shows two texts); commentary also takes Hermes' interim-message path;
* **reasoning** through ``_fire_reasoning_delta`` (the CLI's reasoning box; a summary that was
  not streamed is shown whole when its item completes) and as ``reasoning.available`` (the API
  stream; chats with ``thinking_progress``); the turn's last summary becomes ``last_reasoning``;
* **tools** as ``tool.started``/``tool.completed`` and the tool-card callbacks; a command's live
  output through :mod:`.live_output`; a proposed file change as ``diff.proposed`` and a preview
  in the CLI; the plan — codex's, or the list Hermes' own ``todo`` tool left on codex — as
  ``todo.updated`` and a checklist (CLI, chat status); a call through Hermes' Tool Search bridge
  named for the tool it calls;
* the activity clock (the gateway's watchdog) is touched by anything codex does.

The extra surfaces are :mod:`.surfaces`'. Every text that leaves for a terminal, a chat or the
API stream from here — tool previews, arguments and results, live output, diffs, plans, status
and notice lines — goes through the same redaction as an approval prompt
(:func:`..config.protected.prompt_text`: the runtime's own patterns, then Hermes'
``redact_sensitive_text``). The model's own words (streamed text, reasoning, interim messages)
are passed as the model wrote them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, assert_never

from hermes_codex_runtime.events import (
    ApprovalAnswered,
    ApprovalRequested,
    CodexEvent,
    ConfigWarning,
    Diff,
    InterimMessage,
    MessageStarted,
    Notice,
    Plan,
    Quiet,
    Reasoning,
    ReasoningDelta,
    Retrying,
    TextDelta,
    ToolCompleted,
    ToolOutput,
    ToolStarted,
    Working,
)
from hermes_codex_runtime.hermes.config.protected import prompt_text
from hermes_codex_runtime.hermes.notify import warn_user
from hermes_codex_runtime.hermes.symbols.probe import symbol
from hermes_codex_runtime.hermes.tools.bridge import called
from hermes_codex_runtime.hermes.turn.live_output import LiveOutput
from hermes_codex_runtime.hermes.turn.state import TurnState
from hermes_codex_runtime.hermes.turn.surfaces import Surfaces
from hermes_codex_runtime.projector import tool_result
from hermes_codex_runtime.wire.redact import MASK, secret_name


def shown(text: str) -> str:
    """``text`` as Hermes may show it (see the module docstring)."""
    if not text:
        return text
    host_redact = symbol("agent.redact", "redact_sensitive_text", feature="redaction")
    return prompt_text(text, host_redact)


def shown_arguments(value: Any) -> Any:
    """A tool's arguments with every string in them redacted, and the value of every key that
    names a secret (``password``, ``api_key``…) masked; same shape."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, Mapping):
        return {key: MASK if isinstance(key, str) and secret_name(key) and item else
                shown_arguments(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [shown_arguments(item) for item in value]
    return value


ACTIVITY_TOUCH_EVERY = 1.0  # seconds between touches of the agent's activity clock
REASONING_PREVIEW = 500  # characters of a reasoning summary in ``reasoning.available``
DIFF_CHARS = 8000  # characters of proposed diffs in one ``diff.proposed``
DIFF_LINES = 40  # lines of a proposed diff previewed in the CLI
#: codex's plan step states in Hermes' todo words.
TODO_STATUS = {"pending": "pending", "inProgress": "in_progress", "completed": "completed"}
TODO_MARK = {"pending": "○", "in_progress": "▸", "completed": "✓", "cancelled": "✗"}
#: Hermes' own todo tool (its name on 0.19.0 and on the 0.22 line): its list is the plan.
HERMES_TODO = frozenset({"todo", "todo_list"})


def bridge(agent: Any, event: CodexEvent, state: TurnState | None) -> None:
    """Hand ``event`` to the agent's display; ``state`` is the turn in flight (from the hook's
    context) or ``None``."""
    if state is not None:
        _touch(agent, event, state)
    match event:  # the frequent kinds first
        case TextDelta():
            _text(agent, event, state)
        case ReasoningDelta():
            _reasoning_delta(agent, event, state)
        case ToolOutput():
            _tool_output(agent, event, state)
        case Working():
            _working(agent, state)
        case ToolStarted():
            _tool_started(agent, event, state)
        case ToolCompleted():
            _tool_completed(agent, event, state)
        case MessageStarted():
            _segment_break(agent, state)
        case Reasoning():
            _reasoning(agent, event, state)
        case InterimMessage():
            _interim(agent, event)
        case Plan():
            _plan(agent, event, state)
        case Diff():
            _diff(agent, event, state)
        case Retrying() | Quiet():  # Hermes status lines (CLI and gateway)
            _status(agent, event)
        case Notice():
            warn_user(agent, shown(f"⚠ {event.text}"))
        case ConfigWarning():
            _config_warning(agent, event)
        case ApprovalRequested() | ApprovalAnswered():
            pass  # Hermes asks, and hears the answer, in its `codex_approval` hook
        case _:
            assert_never(event)


def _touch(agent: Any, event: CodexEvent, state: TurnState) -> None:
    """Anything codex does — streaming, a tool, a retry, a heartbeat while the model thinks — is
    activity: the gateway's inactivity watchdog and busy-ack see a working turn."""
    now = time.monotonic()
    touch = getattr(agent, "_touch_activity", None)
    output = _last_line(event.text) if event.kind == "tool_output" else ""
    # a command's live output always shows (its latest line); anything else at most 1/s
    if callable(touch) and (output or now - state.last_touch >= ACTIVITY_TOUCH_EVERY):
        state.last_touch = now
        what = f"output: {output}" if output else event.text or event.kind
        touch(shown(f"codex: {what}")[:120])


def _surfaces(agent: Any, state: TurnState | None) -> Surfaces:
    if state is None:
        return Surfaces.of(agent)
    if state.surfaces is None:
        state.surfaces = Surfaces.of(agent)
    return state.surfaces


def _call(agent: Any, name: str, *args: Any, **kwargs: Any) -> None:
    callback = getattr(agent, name, None)
    if callable(callback):
        callback(*args, **kwargs)


# ---------------------------------------------------------------------- text and reasoning


def _status(agent: Any, event: Retrying | Quiet) -> None:
    if event.text:
        _call(agent, "_emit_status", shown(f"codex: {event.text}"))


def _text(agent: Any, event: TextDelta, state: TurnState | None) -> None:
    if event.text:
        if state is not None:
            state.text_streamed = True
        _call(agent, "_fire_stream_delta", event.text)


def _segment_break(agent: Any, state: TurnState | None) -> None:
    """What streamed so far is a segment of its own (see the module docstring)."""
    if state is None or not (state.text_streamed or state.reasoning_open):
        return
    _call(agent, "stream_delta_callback", None)
    if state.text_streamed:
        agent._stream_needs_break = True
    state.text_streamed = state.reasoning_open = False


def _reasoning_delta(agent: Any, event: ReasoningDelta, state: TurnState | None) -> None:
    if not event.text:
        return
    if state is not None:
        state.reasoning_open = True
        state.reasoning_streamed.add(event.item_id)
    _call(agent, "_fire_reasoning_delta", event.text)


def _reasoning(agent: Any, event: Reasoning, state: TurnState | None) -> None:
    if state is None or event.item_id not in state.reasoning_streamed:
        if state is not None:
            state.reasoning_open = True
        _call(agent, "_fire_reasoning_delta", event.text + "\n")  # a whole line: shown now
    _call(agent, "tool_progress_callback", "reasoning.available", "_thinking",
          event.text[:REASONING_PREVIEW], None)


def _interim(agent: Any, event: InterimMessage) -> None:
    # Hermes' own path for mid-turn commentary (CLI, gateway, TUI, the 0.22 API stream's
    # `message.interim`); it knows whether the text was already streamed and never shows the
    # same text twice.
    if event.text:
        _call(agent, "_emit_interim_assistant_message", {"role": "assistant",
                                                          "content": event.text})


def _config_warning(agent: Any, event: ConfigWarning) -> None:
    # Shown where the user is (CLI line, chat message), once per conversation.
    if not getattr(agent, "_codex_config_warned", False):
        agent._codex_config_warned = True
        warn_user(agent, shown(f"⚠ codex ignored its config.toml and runs on its defaults: "
                               f"{event.text} — fix it (`hermes-codex-runtime doctor` checks "
                               "it)."))


# ---------------------------------------------------------------------- tools


def _tool_started(agent: Any, event: ToolStarted, state: TurnState | None) -> None:
    tool = event.tool
    _segment_break(agent, state)  # as Hermes does before it runs tools
    arguments = shown_arguments(tool.arguments)
    name = called(tool.name, tool.arguments)[0]  # a bridge call shows the tool it calls
    if state is not None:
        state.tool_started[tool.item_id] = time.monotonic()
    _call(agent, "tool_progress_callback", "tool.started", name, _preview(name, arguments),
          arguments)
    _call(agent, "tool_start_callback", tool.call_id, name, arguments)
    kind = event.item.get("type")
    if kind == "commandExecution" and state is not None:
        state.live[tool.item_id] = LiveOutput(tool, shown)
    elif kind == "fileChange":
        _proposed(agent, _surfaces(agent, state), tool.name, tool.call_id, event.item)


def _proposed(agent: Any, surfaces: Surfaces, name: str, call_id: str,
              item: Mapping[str, Any]) -> None:
    """A file change as codex proposes it (before it is approved or applied): each change's
    ``diff`` as codex gives it (a unified diff; an added file's content)."""
    changes: list[dict[str, Any]] = []
    budget = DIFF_CHARS
    for change in item.get("changes") or ():
        if not isinstance(change, Mapping):
            continue
        kind = change.get("kind")
        diff = shown(str(change.get("diff") or ""))
        changes.append({"path": shown(str(change.get("path") or "")),
                        "kind": kind.get("type") if isinstance(kind, Mapping) else kind,
                        "diff": diff[:max(budget, 0)]})
        budget -= len(diff)
    if not changes:
        return
    surfaces.event("diff.proposed", tool=name, tool_call_id=call_id, changes=changes)
    lines = [f"  ┊ ✎ proposed: {', '.join(str(c['path']) for c in changes)}"]
    # codex gives an added (deleted) file's content as its diff: shown as added (removed) lines
    diff_lines = [{"add": "+", "delete": "-"}.get(str(c["kind"]), "") + line
                  for c in changes for line in str(c["diff"]).splitlines()]
    lines += [f"  ┊   {line[:200]}" for line in diff_lines[:DIFF_LINES]]
    if len(diff_lines) > DIFF_LINES:
        lines.append(f"  ┊   … {len(diff_lines) - DIFF_LINES} more lines")
    surfaces.print(agent, "\n".join(lines))


def _tool_output(agent: Any, event: ToolOutput, state: TurnState | None) -> None:
    live = state.live.get(event.item_id) if state is not None else None
    if live is not None:
        live.feed(_surfaces(agent, state), agent, event.text)


def _working(agent: Any, state: TurnState | None) -> None:
    if state is not None:
        for live in state.live.values():
            live.beat(_surfaces(agent, state), agent)


def _tool_completed(agent: Any, event: ToolCompleted, state: TurnState | None) -> None:
    tool = event.tool
    item = dict(event.item)
    live = state.live.pop(tool.item_id, None) if state is not None else None
    if live is not None:
        live.finish(_surfaces(agent, state), agent, item)
    started = state.tool_started.pop(tool.item_id, None) if state is not None else None
    duration_ms = item.get("durationMs")
    duration = duration_ms / 1000.0 if isinstance(duration_ms, int | float) else (
        time.monotonic() - started if started is not None else None)
    result = shown(tool_result(item))
    exit_code = item.get("exitCode")
    is_error = (isinstance(exit_code, int) and exit_code != 0) or item.get("status") in (
        "failed", "declined") or item.get("success") is False
    name, arguments = called(tool.name, tool.arguments)
    _call(agent, "tool_progress_callback", "tool.completed", name, None, None,
          duration=duration, is_error=is_error, result=result)
    _call(agent, "tool_complete_callback", tool.call_id, name,
          shown_arguments(tool.arguments), result)
    wrote = isinstance(arguments, Mapping) and arguments.get("todos") is not None
    todos = _hermes_todos(name, tool_result(item)) if wrote and not is_error else None
    if todos is not None:  # a list the call wrote, not one it read
        _show_plan(agent, state, todos, None)


# ---------------------------------------------------------------------- plan and diff


def _plan(agent: Any, event: Plan, state: TurnState | None) -> None:
    """codex's plan as Hermes' todo list (API stream) and a checklist (CLI, chat status)."""
    todos = [{"id": str(index), "content": shown(step.step),
              "status": TODO_STATUS.get(step.status, step.status)}
             for index, step in enumerate(event.steps, 1)]
    _show_plan(agent, state, todos, event.explanation)


def _hermes_todos(name: str, result: str) -> list[dict[str, str]] | None:
    """The list a call of Hermes' own todo tool left (its result), or ``None``."""
    if name not in HERMES_TODO:
        return None
    try:
        parsed = json.loads(result)
    except ValueError:
        return None
    items = parsed.get("todos") if isinstance(parsed, Mapping) else None
    if not isinstance(items, list):
        return None
    return [{"id": str(item.get("id") or index), "content": shown(str(item.get("content") or "")),
             "status": str(item.get("status") or "pending")}
            for index, item in enumerate(items, 1) if isinstance(item, Mapping)]


def _show_plan(agent: Any, state: TurnState | None, todos: list[dict[str, str]],
               explanation: str | None) -> None:
    """The plan — codex's, or Hermes' own todo list on codex — as Hermes' todo list (API
    stream) and a checklist (CLI, chat status), once per change."""
    key = json.dumps([explanation, todos])
    if state is not None:
        if key == state.shown.get("plan"):
            return
        state.shown["plan"] = key
    _segment_break(agent, state)  # the plan is a tool call: printed after what streamed
    surfaces = _surfaces(agent, state)
    why = shown(explanation) if explanation else None
    surfaces.event("todo.updated", todos=todos, explanation=why)
    done = sum(1 for todo in todos if todo["status"] == "completed")
    lines = [f"📋 plan {done}/{len(todos)} done" + (f" — {why}" if why else "")]
    lines += [f"  {TODO_MARK.get(t['status'], '·')} {t['content']}" for t in todos]
    surfaces.print(agent, "\n".join(f"  ┊ {line}" for line in lines))
    surfaces.status(agent, "codex-plan", "\n".join(lines))


def _diff(agent: Any, event: Diff, state: TurnState | None) -> None:
    # One chat status line per real change of the turn's diff: another file touched (not every
    # edit of the same files) — chat platforms show each line as a message.
    text = _diff_summary(event.diff)
    key = text.split(" changed", 1)[0]
    if state is not None and text and key != state.shown.get("diff"):
        state.shown["diff"] = key
        _surfaces(agent, state).status(agent, "codex-diff", shown(f"codex diff: {text}"))


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _diff_summary(diff: str) -> str:
    """``3 files (+12 −4)`` for the turn's unified diff."""
    if not diff.strip():
        return ""
    files = added = removed = 0
    for line in diff.splitlines():
        if line.startswith("+++ "):
            files += 1
        elif line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return f"{files} file{'s' if files != 1 else ''} changed (+{added} −{removed})"


def _preview(name: str, arguments: dict[str, Any]) -> str | None:
    if name == "exec_command":
        return str(arguments.get("command") or "")[:120] or None
    if name == "apply_patch":
        paths = [str(c.get("path")) for c in arguments.get("changes") or () if c.get("path")]
        return (", ".join(paths[:3]) + (f", +{len(paths) - 3} more" if len(paths) > 3 else "")
                ) if paths else None
    try:
        text = json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError):
        return None
    return text[:120] if arguments else None
