"""codex's progress as Hermes shows it — and nothing shown raw.

Owns :func:`bridge`: each :class:`~hermes_codex_runtime.values.CodexEvent` of a turn reaches the
agent's display callbacks (the activity clock the gateway's watchdog reads, status lines, stream
deltas, interim messages, ``tool_progress_callback`` and the tool-card callbacks). Every text that
leaves for a terminal or a chat platform from here — a tool's start preview and arguments, its
result, live command output, status, plan and notice lines — goes through the same redaction as
an approval prompt (:func:`.protected.prompt_text`: the runtime's own patterns, then Hermes'
``redact_sensitive_text``). The model's own words (streamed text, interim messages) are passed as
the model wrote them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from hermes_codex_runtime.hermes.context import TurnState
from hermes_codex_runtime.hermes.notify import warn_user
from hermes_codex_runtime.hermes.probe import symbol
from hermes_codex_runtime.hermes.protected import prompt_text
from hermes_codex_runtime.projector import tool_result
from hermes_codex_runtime.values import CodexEvent
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
STATUS_KINDS = ("retrying", "quiet")  # shown as Hermes status lines (CLI and gateway)


def bridge(agent: Any, event: CodexEvent, state: TurnState | None) -> None:
    """Hand ``event`` to the agent's display callbacks; ``state`` is the turn in flight (from
    the hook's context) or ``None``."""
    if state is not None:
        # Anything codex does — streaming, a tool, a retry, a heartbeat while the model thinks —
        # is activity: the gateway's inactivity watchdog and busy-ack see a working turn.
        now = time.monotonic()
        touch = getattr(agent, "_touch_activity", None)
        output = _last_line(event.text) if event.kind == "tool_output" else ""
        # a command's live output always shows (its latest line); anything else at most 1/s
        if callable(touch) and (output or now - state.last_touch >= ACTIVITY_TOUCH_EVERY):
            state.last_touch = now
            what = f"output: {output}" if output else event.text or event.kind
            touch(shown(f"codex: {what}")[:120])
    if event.kind in STATUS_KINDS:
        emit_status = getattr(agent, "_emit_status", None)
        if callable(emit_status) and event.text:
            emit_status(shown(f"codex: {event.text}"))
        return
    if event.kind == "text_delta":
        fire = getattr(agent, "_fire_stream_delta", None)
        if callable(fire) and event.text:
            fire(event.text)
        return
    if event.kind == "reasoning_delta":
        fire = getattr(agent, "_fire_reasoning_delta", None)
        if callable(fire) and event.text:
            fire(event.text)
        return
    if event.kind == "notice":
        warn_user(agent, shown(f"⚠ {event.text}"))
        return
    if event.kind == "config_warning":
        # Shown where the user is (CLI line, chat message), once per conversation.
        if not getattr(agent, "_codex_config_warned", False):
            agent._codex_config_warned = True
            warn_user(agent, shown(f"⚠ codex ignored its config.toml and runs on its defaults: "
                                    f"{event.text} — fix it (`hermes-codex-runtime doctor` "
                                    "checks it)."))
        return
    if event.kind == "interim_message":
        # Hermes' own path for mid-turn commentary (CLI, gateway, TUI); it knows whether the
        # text was already streamed and never shows the same text twice.
        emit = getattr(agent, "_emit_interim_assistant_message", None)
        if callable(emit) and event.text:
            emit({"role": "assistant", "content": event.text})
        return
    if event.kind == "tool_output":
        return  # shown above, as the activity Hermes reports for a busy agent
    if event.kind in ("plan", "diff"):
        # One status line per real change: a new plan state, or another file touched (not
        # every edit of the same files) — chat platforms show each line as a message.
        text = event.text if event.kind == "plan" else _diff_summary(event.params)
        key = text if event.kind == "plan" else text.split(" changed", 1)[0]
        if state is not None and text and key != state.shown.get(event.kind):
            state.shown[event.kind] = key
            emit_status = getattr(agent, "_emit_status", None)
            if callable(emit_status):
                emit_status(shown(f"codex {event.kind}: {text}"))
        return
    tool = event.tool
    if tool is None:
        return
    arguments = shown_arguments(tool.arguments)
    progress = getattr(agent, "tool_progress_callback", None)
    if event.kind == "tool_started":
        if state is not None:
            state.tool_started[tool.item_id] = time.monotonic()
        if callable(progress):
            progress("tool.started", tool.name, _preview(tool.name, arguments), arguments)
        start = getattr(agent, "tool_start_callback", None)
        if callable(start):
            start(tool.call_id, tool.name, arguments)
    elif event.kind == "tool_completed":
        item = event.params.get("item") if isinstance(event.params, dict) else None
        item = item if isinstance(item, dict) else {}
        started = state.tool_started.pop(tool.item_id, None) if state is not None else None
        duration_ms = item.get("durationMs")
        duration = duration_ms / 1000.0 if isinstance(duration_ms, int | float) else (
            time.monotonic() - started if started is not None else None)
        result = shown(tool_result(item))
        exit_code = item.get("exitCode")
        status = item.get("status")
        is_error = (isinstance(exit_code, int) and exit_code != 0) or status in (
            "failed", "declined")
        if callable(progress):
            progress("tool.completed", tool.name, None, None, duration=duration,
                     is_error=is_error, result=result)
        complete = getattr(agent, "tool_complete_callback", None)
        if callable(complete):
            complete(tool.call_id, tool.name, arguments, result)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _diff_summary(params: Any) -> str:
    """``3 files (+12 −4)`` for a ``turn/diff/updated`` unified diff."""
    diff = params.get("diff") if isinstance(params, dict) else None
    if not isinstance(diff, str) or not diff.strip():
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
