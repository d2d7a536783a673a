"""The replacement for ``agent.codex_runtime.run_codex_app_server_turn``: it runs a turn.

Hermes' ``run_conversation`` has already built the turn (the user message appended once and
saved, counters bumped, the system prompt composed, ``pre_llm_call`` fired) when it hands a
``codex_app_server`` turn to this function. It runs the turn on the process-wide
:class:`~hermes_codex_runtime.runtime.CodexRuntime` (:mod:`.runtime`) with the turn's
:class:`~.state.TurnState` as its context — the hooks (:mod:`.hooks`) do the accounting, the
epilogue and the fallback — and returns the chat-completions result shape, plus
``codex_thread_id``/``codex_turn_id`` and ``agent_persisted``. Before codex starts, the
workspace is checkpointed for ``/rollback`` (:mod:`.checkpoints`). For the turn's length, Hermes'
interrupt reaches codex through ``_active_request_abort`` (:mod:`.controls`); an agent that runs
once (:mod:`.lifetime`) has its codex session closed when the turn ends. It never raises: a
failure is a partial result that says how to get going again.
"""

from __future__ import annotations

import logging
from typing import Any

from hermes_codex_runtime.hermes.approvals import decide
from hermes_codex_runtime.hermes.notify import take_undelivered
from hermes_codex_runtime.hermes.turn import checkpoints, controls
from hermes_codex_runtime.hermes.turn.fallback import has_fallback
from hermes_codex_runtime.hermes.turn.lifetime import ends_with_run
from hermes_codex_runtime.hermes.turn.runtime import (
    reap_orphans_once,
    remember_agent,
    shared_runtime,
)
from hermes_codex_runtime.hermes.turn.state import TurnState
from hermes_codex_runtime.hermes.wording import setup_failed, user_facing_error
from hermes_codex_runtime.values import TurnContext, TurnResult

log = logging.getLogger("hermes_codex_runtime.hermes")


def _result(agent: Any, turn: TurnResult, messages: list[dict[str, Any]]) -> dict[str, Any]:
    completed = turn.error is None and not turn.interrupted
    final = turn.final_text if completed or turn.final_text else ""
    if turn.error is not None and not turn.interrupted:
        final = user_facing_error(turn)
    final = take_undelivered(agent) + final
    compressor = getattr(agent, "context_compressor", None)
    last_prompt = getattr(compressor, "last_prompt_tokens", 0) if compressor else 0
    result: dict[str, Any] = {
        "final_response": final,
        "last_reasoning": turn.reasoning or None,  # the gateway's `show_reasoning`
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
    into Hermes: whatever fails — set-up included (building the plugin manager) — ends as a
    failed turn that says how to get going again."""
    try:
        state = TurnState(messages=messages, user_message=user_message,
                          original_user_message=original_user_message,
                          effective_task_id=effective_task_id,
                          should_review_memory=should_review_memory,
                          scope=decide.capture_scope(agent))
        return _run_turn(agent, state)
    except Exception as exc:
        log.exception("codex-runtime: the codex turn could not be set up")
        return _failed(messages, exc)


def prepare_first_turn(agent: Any) -> None:
    """An ``AIAgent`` was built for codex (:func:`..installing.seams.follow_agent_construction`):
    start what its first turn would wait for in the background, while Hermes composes that turn,
    and decide whether its workspace's instruction files reach codex (:mod:`.instructions`)
    before Hermes builds the system prompt."""
    from hermes_codex_runtime.hermes.turn.instructions import mark_agent

    mark_agent(agent)
    shared_runtime().prewarm(agent)


def keep_as_sent(agent: Any, composed: Any) -> None:
    """This turn's user message with its memory recall and plugin context, as Hermes composed
    it (``None``: nothing to add) — for :func:`_as_sent`, overwritten by every turn."""
    agent._codex_user_message_as_sent = composed if isinstance(composed, str) else None


def _as_sent(agent: Any, user_message: Any) -> Any:
    composed = getattr(agent, "_codex_user_message_as_sent", None)
    agent._codex_user_message_as_sent = None
    return composed if isinstance(composed, str) and composed and \
        isinstance(user_message, str) else user_message


def _failed(messages: list[dict[str, Any]], exc: BaseException) -> dict[str, Any]:
    error = f"{type(exc).__name__}: {exc}"
    return {"final_response": setup_failed(error),
            "messages": messages, "api_calls": 0, "completed": False, "partial": True,
            "failed": True, "interrupted": False, "error": error, "agent_persisted": True}


def _run_turn(agent: Any, state: TurnState) -> dict[str, Any]:
    reap_orphans_once()
    runtime = shared_runtime()
    messages = state.messages
    touch = getattr(agent, "_touch_activity", None)
    if callable(touch):
        touch("codex: starting the turn")  # then every codex event and heartbeat (progress.py)
    remember_agent(agent, state.scope.session_key)
    previous_abort = getattr(agent, "_active_request_abort", None)
    abort = controls.abort_hook(agent)
    agent._active_request_abort = abort
    agent._stream_needs_break = False  # this turn's first text starts no paragraph
    reset = getattr(agent, "_reset_stream_delivery_tracking", None)
    if callable(reset):
        try:
            reset()
        except Exception:
            log.debug("codex-runtime: stream tracking reset failed", exc_info=True)
    index = getattr(agent, "_persist_user_message_idx", None)
    history = messages[:index] if isinstance(index, int) else messages[:-1]
    user_message = _as_sent(agent, state.user_message)
    try:
        if getattr(agent, "_interrupt_requested", False):
            abort()  # interrupted before the turn started: it does not start
        steer = controls.take_pending_steer(agent)  # a /steer no earlier codex turn could take
        if steer is not None and isinstance(user_message, str):
            user_message = f"{user_message}\n\n{steer}"
        elif steer is not None:
            controls.restore_pending_steer(agent, steer)  # not a text turn: keep it for later
        checkpoints.before_turn(agent, state.effective_task_id)  # what /rollback restores
        turn = runtime.run_turn(agent, user_message, history, context=TurnContext(host=state))
        if ends_with_run(agent):
            runtime.close(agent)  # the run is over: its session with it, the process kept warm
        agent._codex_session = controls.CodexSessionHandle(agent) \
            if runtime.session_for(agent) is not None and not turn.should_retire else None
        if turn.fallback is not None:
            return turn.fallback
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
        clear = getattr(agent, "clear_interrupt", None)
        if callable(clear):
            try:
                clear()
            except Exception:
                log.debug("codex-runtime: clear_interrupt failed", exc_info=True)
        agent._stream_callback = None
