"""The replacement for ``agent.codex_runtime.run_codex_app_server_turn``.

Hermes' ``run_conversation`` has already built the turn (the user message appended once and
saved, counters bumped, the system prompt composed, ``pre_llm_call`` fired) when it hands a
``codex_app_server`` turn to this function. It runs the turn on the shared
:class:`~hermes_codex_runtime.runtime.CodexRuntime` — whose hooks (:mod:`.host`) do the
accounting, the epilogue and the fallback — and returns the chat-completions result shape, plus
``codex_thread_id``/``codex_turn_id`` and ``agent_persisted``. It never raises: a failure is a
partial result that says how to get going again.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from types import SimpleNamespace
from typing import Any

from hermes_codex_runtime.hermes import approvals, fixes
from hermes_codex_runtime.hermes.config_file import config_path
from hermes_codex_runtime.hermes.fallback import has_fallback
from hermes_codex_runtime.hermes.host import TURN_STATE_ATTR, HermesHost, TurnState
from hermes_codex_runtime.hermes.notify import take_undelivered
from hermes_codex_runtime.plugins import make_plugin_manager
from hermes_codex_runtime.protocol import FailureKind
from hermes_codex_runtime.runtime import CodexRuntime
from hermes_codex_runtime.session import TurnResult
from hermes_codex_runtime.wire.binary import INSTALL_HINT, SETTING_LABEL

log = logging.getLogger("hermes_codex_runtime.hermes")
AUTO_HINT = "Switch back to Hermes' own runtime with `/codex-runtime auto` if this persists."

_runtime: CodexRuntime | None = None
_runtime_lock = threading.Lock()
_orphans_checked = False


def reap_orphans_once() -> list[int]:
    """Once per process: reap app-server trees left behind by a Hermes process that died."""
    global _orphans_checked
    with _runtime_lock:
        if _orphans_checked:
            return []
        _orphans_checked = True
    from hermes_codex_runtime.hermes.host import registry_path
    from hermes_codex_runtime.wire.registry import ProcessRegistry

    try:
        return ProcessRegistry(registry_path()).reap_orphans()
    except Exception:
        log.warning("codex-runtime: checking for orphaned codex processes failed",
                    exc_info=True)
        return []


def shared_runtime() -> CodexRuntime:
    """The process-wide runtime (one codex session per agent), built on first use."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            from hermes_codex_runtime.hermes.settings import hermes_home
            from hermes_codex_runtime.pool import ServerPool

            _runtime = CodexRuntime(make_plugin_manager([HermesHost()]), pool=ServerPool(
                status_dir=hermes_home() / "codex-runtime" / "app-servers"))
        return _runtime


class CodexSessionHandle:
    """What Hermes finds in ``agent._codex_session``: its ``/compress`` path
    (``_compress_context_via_codex_app_server``) calls ``compact_thread()`` on it and does the
    compaction bookkeeping itself; ``close()``/``request_interrupt()`` reach the runtime."""

    def __init__(self, agent: Any) -> None:
        self._agent_ref = weakref.ref(agent)

    def compact_thread(self, **_: Any) -> Any:
        """codex's own compaction of the thread, as Hermes' compression path expects it."""
        agent = self._agent_ref()
        if agent is None:
            return SimpleNamespace(should_retire=False, interrupted=False, compacted=False,
                                   error="the agent is gone", thread_id=None, turn_id=None,
                                   token_usage_last=None, model_context_window=None)
        runtime = shared_runtime()
        turn = runtime.compact(agent, report=False)
        if turn.usage is not None:
            from hermes_codex_runtime.hermes.host import record_usage

            record_usage(agent, turn.usage)
        return SimpleNamespace(
            should_retire=turn.should_retire, interrupted=turn.interrupted,
            compacted=turn.compacted, error=turn.error, thread_id=turn.thread_id,
            turn_id=turn.turn_id,
            token_usage_last=None,  # recorded above, cached tokens counted once
            model_context_window=turn.model_context_window)

    def request_steer(self, text: str) -> bool:
        """Steer the agent's codex turn (``turn/steer``); True when codex took it."""
        agent = self._agent_ref()
        return bool(agent is not None and shared_runtime().steer(agent, text))

    def request_interrupt(self) -> None:
        """Interrupt the agent's codex turn."""
        agent = self._agent_ref()
        if agent is not None:
            shared_runtime().interrupt(agent)

    def close(self) -> None:
        """Close the agent's codex session (its process tree)."""
        agent = self._agent_ref()
        if agent is not None:
            shared_runtime().close(agent)


def _take_pending_steer(agent: Any) -> str | None:
    drain = getattr(agent, "_drain_pending_steer", None)
    if not callable(drain):
        return None
    text = drain()
    return text if isinstance(text, str) and text.strip() else None


def _restore_pending_steer(agent: Any, text: str) -> None:
    """Put ``text`` back in front of Hermes' pending steer (what arrived meanwhile stays)."""
    lock = getattr(agent, "_pending_steer_lock", None)
    with lock if lock is not None else contextlib.nullcontext():
        existing = getattr(agent, "_pending_steer", None)
        agent._pending_steer = f"{text}\n{existing}" if existing else text


def deliver_pending_steer(agent: Any) -> bool:
    """Hand Hermes' pending steer to the agent's running codex turn (``turn/steer``). When no
    turn runs, or codex refuses (e.g. right after the turn ended), it stays pending and the next
    codex turn carries it: a steer is never lost. True when codex took it."""
    runtime = shared_runtime()
    session = runtime.session_for(agent)
    if session is None or session.active_turn_id is None:
        return False
    text = _take_pending_steer(agent)
    if text is None:
        return False
    if runtime.steer(agent, text):
        log.info("codex-runtime: /steer delivered to the running codex turn")
        return True
    _restore_pending_steer(agent, text)
    return False


def _hermes_hint(kind: FailureKind) -> str:
    """Hermes' words for a failure's fix: its config keys, file and commands live here, not in
    the host-neutral layers below (``protocol.failures`` gives the codex-level hint)."""
    if kind is FailureKind.CONTEXT_WINDOW:
        return "Compact it with /compress, or start over with /new."
    if kind is FailureKind.BAD_REQUEST:
        return (f"Check {fixes.config_ref('model.default')} / `model.codex_model` and run "
                f"`{fixes.own_command()} doctor`.")
    if kind is FailureKind.TRANSPORT:
        return f"If it keeps happening, run `{fixes.own_command()} doctor`."
    return ""


def _setup_hint(source: str) -> str:
    """The Hermes key or command that fixes a set-up failure of ``source``."""
    if source == "codex_binary":
        return (f"Set {fixes.config_ref('model.codex_bin')} (or $CODEX_BIN) to the codex "
                f"executable, or install the tested codex: `{fixes.install_codex_command()}`.")
    if source == "codex_home":
        return (f"The codex home is {fixes.config_ref('model.codex_home')}; "
                f"`{fixes.login_command()}` creates it and logs in.")
    if source == "codex_config":
        return f"`{fixes.own_command()} doctor` checks it."
    if source == "app_server":
        return (f"The app-servers are set by {fixes.config_ref('model.codex_app_server')} (and "
                f"its token by `model.codex_app_server_token_file`); `{fixes.own_command()} "
                "doctor` checks them.")
    return ""


def _user_facing_error(turn: TurnResult) -> str:
    failure = turn.failure
    if failure is None:
        return turn.error or "the codex turn did not complete"
    if failure.kind is FailureKind.AUTH:
        if failure.source == "codex_login":
            return (f"{failure.message}. Run `{fixes.login_command()}` (it logs in the codex "
                    "home the plugin uses), then send your message again.")
        return (f"codex could not authenticate: {failure.message.rstrip('. ')}. Run "
                f"`{fixes.login_command()}` and try again.")
    if failure.kind is FailureKind.USAGE_LIMIT:
        return (f"codex usage limit reached: {failure.message.strip()} Configure "
                f"`fallback_providers` in {config_path()} to continue on another provider, or "
                "switch runtimes with `/codex-runtime auto`.")
    if failure.kind is FailureKind.SETUP:
        # The message names the problem (never "install codex" for a bad timeout); Hermes'
        # key or command for THAT setting is added, once.
        problem = failure.message.replace(INSTALL_HINT, "").strip()  # Hermes' own fix follows
        problem = problem.replace(SETTING_LABEL, "model.codex_bin")
        return " ".join(p for p in (f"codex could not start: {problem}",
                                    _setup_hint(failure.source or "")) if p)
    return " ".join(p for p in (f"Codex app-server turn failed: {failure.describe()}",
                                _hermes_hint(failure.kind), AUTO_HINT) if p)


def _result(agent: Any, turn: TurnResult, messages: list[dict[str, Any]]) -> dict[str, Any]:
    completed = turn.error is None and not turn.interrupted
    final = turn.final_text if completed or turn.final_text else ""
    if turn.error is not None and not turn.interrupted:
        final = _user_facing_error(turn)
    final = take_undelivered(agent) + final
    compressor = getattr(agent, "context_compressor", None)
    last_prompt = getattr(compressor, "last_prompt_tokens", 0) if compressor else 0
    result: dict[str, Any] = {
        "final_response": final,
        "last_reasoning": None,
        "messages": messages,
        # a usage limit refused the request: nothing was answered or billed (the host may count
        # this result's calls when it completes the turn on its fallback)
        "api_calls": max(1, turn.usage.responses) if turn.usage else
        (1 if turn.turn_id and not (turn.failure and turn.failure.failover) else 0),
        "completed": completed,
        "turn_exit_reason": "codex_" + (turn.status or ("failed" if turn.error else "completed")),
        "failed": turn.error is not None and not turn.interrupted,
        "partial": not completed,
        "interrupted": turn.interrupted,
        "error": turn.error,
        "response_transformed": False,
        "response_previewed": False,
        "model": turn.model or getattr(agent, "model", None),  # what codex actually ran
        "provider": getattr(agent, "provider", None),
        "base_url": getattr(agent, "base_url", None),
        "agent_persisted": True,
        "codex_thread_id": turn.thread_id,
        "codex_turn_id": turn.turn_id,
        "session_id": getattr(agent, "session_id", None),
        "service_tier": getattr(agent, "service_tier", None),
        "last_prompt_tokens": last_prompt if isinstance(last_prompt, int) and last_prompt > 0
        else 0,
    }
    usage = turn.usage
    if usage is not None:
        t = usage.turn
        result.update(prompt_tokens=t.prompt_tokens, completion_tokens=t.output_tokens,
                      total_tokens=t.total_tokens, input_tokens=t.uncached_input_tokens,
                      output_tokens=t.output_tokens, cache_read_tokens=t.cached_tokens,
                      cache_write_tokens=t.cache_write_tokens,
                      reasoning_tokens=t.reasoning_tokens)
    result.update(
        estimated_cost_usd=getattr(agent, "session_estimated_cost_usd", None),
        cost_status=getattr(agent, "session_cost_status", None),
        cost_source=getattr(agent, "session_cost_source", None))
    if turn.failure is not None:
        result["codex_failure_kind"] = turn.failure.kind.value
    return result


def run_codex_app_server_turn(agent: Any, *, user_message: Any, original_user_message: Any,
                              messages: list[dict[str, Any]], effective_task_id: str,
                              should_review_memory: bool = False, **_: Any) -> dict[str, Any]:
    """Run one Hermes turn on codex (the ``api_mode == "codex_app_server"`` path). Never raises
    into Hermes: whatever fails — set-up included (wiring, building the plugin manager) — ends
    as a failed turn that says how to get going again."""
    try:
        return _run_turn(agent, user_message=user_message,
                         original_user_message=original_user_message, messages=messages,
                         effective_task_id=effective_task_id,
                         should_review_memory=should_review_memory)
    except Exception as exc:
        log.exception("codex-runtime: the codex turn could not be set up")
        return _failed(messages, exc)


def _failed(messages: list[dict[str, Any]], exc: BaseException) -> dict[str, Any]:
    error = f"{type(exc).__name__}: {exc}"
    return {"final_response": f"Codex app-server turn failed: {error}. {AUTO_HINT}",
            "messages": messages, "api_calls": 0, "completed": False, "partial": True,
            "failed": True, "interrupted": False, "error": error, "agent_persisted": True}


def _run_turn(agent: Any, *, user_message: Any, original_user_message: Any,
              messages: list[dict[str, Any]], effective_task_id: str,
              should_review_memory: bool) -> dict[str, Any]:
    from hermes_codex_runtime.hermes.seams import wire_agent_class

    wire_agent_class(type(agent))
    reap_orphans_once()
    runtime = shared_runtime()
    state = TurnState(messages=messages, user_message=user_message,
                      original_user_message=original_user_message,
                      effective_task_id=effective_task_id,
                      should_review_memory=should_review_memory,
                      scope=approvals.capture_scope(agent))
    setattr(agent, TURN_STATE_ATTR, state)
    touch = getattr(agent, "_touch_activity", None)
    if callable(touch):
        touch("codex: starting the turn")  # then every codex event and heartbeat (host.py)
    from hermes_codex_runtime.hermes.commands import remember_agent

    remember_agent(agent, state.scope.session_key)
    previous_abort = getattr(agent, "_active_request_abort", None)

    def abort(_reason: Any = None) -> None:
        runtime.interrupt(agent)

    agent._active_request_abort = abort
    reset = getattr(agent, "_reset_stream_delivery_tracking", None)
    if callable(reset):
        try:
            reset()
        except Exception:
            log.debug("codex-runtime: stream tracking reset failed", exc_info=True)
    index = getattr(agent, "_persist_user_message_idx", None)
    history = messages[:index] if isinstance(index, int) else messages[:-1]
    try:
        if getattr(agent, "_interrupt_requested", False):
            session = runtime.session_for(agent)
            if session is not None:
                session.interrupt()
            else:
                turn = TurnResult(interrupted=True, status="interrupted",
                                  submitted_user_text=str(user_message))
                return _result(agent, turn, messages)
        steer = _take_pending_steer(agent)  # a /steer no earlier codex turn could take
        if steer is not None and isinstance(user_message, str):
            user_message = f"{user_message}\n\n{steer}"
        elif steer is not None:
            _restore_pending_steer(agent, steer)  # not a text turn: keep it for later
        turn = runtime.run_turn(agent, user_message, history)
        agent._codex_session = CodexSessionHandle(agent) \
            if runtime.session_for(agent) is not None and not turn.should_retire else None
        if isinstance(state.fallback_result, dict):
            return state.fallback_result
        if turn.failure is not None and turn.failure.failover and not has_fallback(agent):
            log.warning("codex-runtime: codex hit a usage limit and no fallback provider is "
                        "configured")
        return _result(agent, turn, messages)
    except Exception as exc:  # defence in depth: the runtime itself does not raise
        log.exception("codex-runtime: the codex turn failed unexpectedly")
        runtime.close(agent)
        return _failed(messages, exc)
    finally:
        if getattr(agent, "_active_request_abort", None) is abort:
            agent._active_request_abort = previous_abort
        if getattr(agent, TURN_STATE_ATTR, None) is state:
            setattr(agent, TURN_STATE_ATTR, None)
        clear = getattr(agent, "clear_interrupt", None)
        if callable(clear):
            try:
                clear()
            except Exception:
                log.debug("codex-runtime: clear_interrupt failed", exc_info=True)
        agent._stream_callback = None
