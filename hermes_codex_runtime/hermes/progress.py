"""codex's progress shown the way Hermes shows its own: streamed text and reasoning through the
stream callbacks, tools through ``tool_progress_callback`` and the tool-card callbacks, retries,
plans and diffs as status lines, notices as warnings — and every event as activity, so the
gateway's inactivity watchdog and busy-ack see a working turn.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from hermes_codex_runtime.hermes.context import TurnState
from hermes_codex_runtime.projector import tool_result
from hermes_codex_runtime.values import CodexEvent

ACTIVITY_TOUCH_EVERY = 1.0  # seconds between touches of the agent's activity clock
STATUS_KINDS = ("retrying", "quiet")  # shown as Hermes status lines (CLI and gateway)


def bridge_event(agent: Any, event: CodexEvent, state: TurnState | None) -> None:
    if state is not None:
        # Anything codex does — streaming, a tool, a retry, a heartbeat while the model thinks —
        # is activity: the gateway's inactivity watchdog and busy-ack see a working turn.
        now = time.monotonic()
        touch = getattr(agent, "_touch_activity", None)
        output = _last_line(event.text) if event.kind == "tool_output" else ""
        # a command's live output always shows (its latest line); anything else at most 1/s
        if callable(touch) and (output or now - state.last_touch >= ACTIVITY_TOUCH_EVERY):
            state.last_touch = now
            touch(f"codex: {f'output: {output}' if output else event.text or event.kind}"[:120])
    if event.kind in STATUS_KINDS:
        emit_status = getattr(agent, "_emit_status", None)
        if callable(emit_status) and event.text:
            emit_status(f"codex: {event.text}")
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
        _warn_user(agent, f"⚠ {event.text}")
        return
    if event.kind == "config_warning":
        # Shown where the user is (CLI line, chat message), once per conversation.
        if not getattr(agent, "_codex_config_warned", False):
            agent._codex_config_warned = True
            _warn_user(agent, f"⚠ codex ignored its config.toml and runs on its defaults: "
                              f"{event.text} — fix it (`hermes-codex-runtime doctor` checks it).")
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
                emit_status(f"codex {event.kind}: {text}")
        return
    tool = event.tool
    if tool is None:
        return
    progress = getattr(agent, "tool_progress_callback", None)
    if event.kind == "tool_started":
        if state is not None:
            state.tool_started[tool.item_id] = time.monotonic()
        if callable(progress):
            progress("tool.started", tool.name, _preview(tool.name, tool.arguments),
                     tool.arguments)
        start = getattr(agent, "tool_start_callback", None)
        if callable(start):
            start(tool.call_id, tool.name, tool.arguments)
    elif event.kind == "tool_completed":
        item = event.params.get("item") if isinstance(event.params, dict) else None
        item = item if isinstance(item, dict) else {}
        started = state.tool_started.pop(tool.item_id, None) if state is not None else None
        duration_ms = item.get("durationMs")
        duration = duration_ms / 1000.0 if isinstance(duration_ms, int | float) else (
            time.monotonic() - started if started is not None else None)
        result = tool_result(item)
        exit_code = item.get("exitCode")
        status = item.get("status")
        is_error = (isinstance(exit_code, int) and exit_code != 0) or status in (
            "failed", "declined")
        if callable(progress):
            progress("tool.completed", tool.name, None, None, duration=duration,
                     is_error=is_error, result=result)
        complete = getattr(agent, "tool_complete_callback", None)
        if callable(complete):
            complete(tool.call_id, tool.name, tool.arguments, result)


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


def _warn_user(agent: Any, text: str) -> None:
    """A warning where the user is: Hermes' warning path (CLI line, chat status). ``hermes chat
    -q`` keeps stdout machine-readable and drops status lines, so there it goes to stderr."""
    warn = getattr(agent, "_emit_warning", None) or getattr(agent, "_emit_status", None)
    if callable(warn):
        warn(text)
    if getattr(agent, "suppress_status_output", False):
        print(text, file=sys.stderr, flush=True)
