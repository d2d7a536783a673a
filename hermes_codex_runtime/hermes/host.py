"""The Hermes implementation of the runtime's hooks: what a codex turn does to an ``AIAgent``.

Owns the mapping between the runtime's plain values and Hermes' agent state:

* settings (binary, ``CODEX_HOME``, cwd from ``session_cwd`` → ``TERMINAL_CWD`` → process cwd,
  the sandbox walls' paths from :mod:`.paths`), the system prompt as developer instructions, and
  the thread binding (the session database's ``model_config`` where the host has it, else a small
  file under ``HERMES_HOME``);
* approvals (:mod:`.approvals`) and progress (:mod:`.events`: codex items reach
  ``tool_progress_callback`` and the tool-card callbacks redacted, streamed text and reasoning
  reach the stream callbacks);
* accounting: session counters, the context compressor (``inputTokens`` includes cached tokens —
  counted once), cost, the session database; native compaction bookkeeping and the
  ``session:compress`` event;
* the epilogue Hermes' own loop would run: the projected messages spliced once (never the user
  message again) and flushed, nudge counters, external memory sync, the background review, and the
  ``post_llm_call`` / ``on_session_end`` plugin hooks;
* the same turn on the fallback provider when codex hits a usage limit.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from hermes_codex_runtime.bindings import ThreadBindings
from hermes_codex_runtime.hermes import approvals, events, paths, review
from hermes_codex_runtime.hermes.probe import symbol
from hermes_codex_runtime.hermes.settings import (
    hermes_home,
    load_config,
    plugin_settings,
    sandbox_for_security_mode,
)
from hermes_codex_runtime.hookspecs import hookimpl
from hermes_codex_runtime.protocol import HostToolCall, HostToolOutput
from hermes_codex_runtime.session import CodexEvent, SessionSettings, TurnResult
from hermes_codex_runtime.usage import UsageReport
from hermes_codex_runtime.wire.codex_config import bounded_retries_args

log = logging.getLogger("hermes_codex_runtime.hermes")
TURN_STATE_ATTR = "_codex_runtime_turn"
THREAD_KEY = "codex_thread_id"
ENDPOINT_KEY = "codex_thread_endpoint"


@dataclass(slots=True)
class TurnState:
    """What the turn function knows that the hooks need (attached to the agent per turn)."""

    messages: list[dict[str, Any]]
    user_message: Any
    original_user_message: Any
    effective_task_id: str
    should_review_memory: bool
    scope: approvals.ApprovalScope
    started: float = field(default_factory=time.monotonic)
    tool_started: dict[str, float] = field(default_factory=dict)
    usage_recorded: bool = False
    epilogue_done: bool = False
    fallback_result: Any = None
    last_touch: float = 0.0
    shown: dict[str, str] = field(default_factory=dict)  # the last plan/diff status shown


def _swallowed(what: str) -> None:
    """A failure the turn survives: logged at WARNING with its reason (traceback at DEBUG)."""
    exc = sys.exc_info()[1]
    log.warning("codex-runtime: %s failed: %s: %s", what, type(exc).__name__, exc)
    log.debug("codex-runtime: %s failed", what, exc_info=True)


def turn_state(agent: Any) -> TurnState | None:
    """The state of the agent's turn in flight."""
    state = getattr(agent, TURN_STATE_ATTR, None)
    return state if isinstance(state, TurnState) else None


def _session_cwd(agent: Any) -> str:
    for candidate in (getattr(agent, "session_cwd", None), os.environ.get("TERMINAL_CWD")):
        if isinstance(candidate, str) and candidate and os.path.isdir(candidate):
            return candidate
    return os.getcwd()


def registry_path() -> Any:
    """Where this host records the codex processes it spawned (for orphan reaping)."""
    return hermes_home() / "codex-runtime" / "processes.json"


def _bindings() -> ThreadBindings:
    return ThreadBindings(hermes_home() / "codex-runtime" / "threads.json")


class HermesHost:
    """The hook implementations for Hermes (registered as the host plugin)."""

    # ------------------------------------------------------------------ settings

    @hookimpl
    def codex_session_settings(self, agent: Any) -> SessionSettings:
        """Binary, home, cwd, timeouts and model from config.yaml and the agent."""
        config = load_config()
        settings = plugin_settings(config)
        review_fork = review.is_review_fork(agent)
        cwd = _session_cwd(agent)
        paths.warn_if_home(cwd)
        return SessionSettings(
            codex_bin=settings.codex_bin,  # None: $CODEX_BIN, the bundled binary, then PATH
            codex_home=settings.codex_home,
            cwd=cwd,
            model=settings.codex_model or hermes_model(agent),
            model_provider=settings.codex_model_provider,
            turn_timeout=settings.turn_timeout,
            sandbox="read-only" if review_fork
            else settings.sandbox or sandbox_for_security_mode(config),
            approval_policy="never" if review_fork else "on-request",
            host_tools=review.host_tools(agent) if review_fork else (),
            effort=codex_effort(getattr(agent, "reasoning_config", None)),
            env_passthrough=settings.env_passthrough,
            command_env_passthrough=settings.command_env_passthrough,
            client_version=_hermes_version(),
            registry_path=str(registry_path()),
            app_server=settings.app_server,
            extra_args=bounded_retries_args(settings.codex_home),
            deny_read=paths.deny_read(settings),
            protect=paths.protect(settings),
            walls_cache=str(paths.walls_cache_path()),
        )

    @hookimpl
    def codex_developer_instructions(self, agent: Any) -> str | None:
        """Hermes' composed system prompt."""
        prompt = getattr(agent, "_cached_system_prompt", None)
        return prompt if isinstance(prompt, str) and prompt.strip() else None

    # ------------------------------------------------------------------ thread binding

    @hookimpl
    def codex_stored_thread(self, agent: Any) -> Any:
        """The codex thread bound to this Hermes session by an earlier process (with the remote
        app-server holding it, if any)."""
        session_id = getattr(agent, "session_id", None)
        thread = self._stored_thread_id(agent)
        if thread is None or not session_id:
            return thread
        endpoint = _stored_endpoint(agent) or _bindings().endpoint(str(session_id))
        return {"thread_id": thread, "endpoint": endpoint} if endpoint else thread

    def _stored_thread_id(self, agent: Any) -> str | None:
        session_id = getattr(agent, "session_id", None)
        if not session_id or getattr(agent, "_persist_disabled", False):
            return None  # e.g. the review fork, which shares its parent's session id
        db = getattr(agent, "_session_db", None)
        if db is not None and hasattr(db, "get_session"):
            try:
                row = db.get_session(session_id)
                raw = row["model_config"] if row else None
                if raw:
                    import json

                    value = json.loads(raw).get(THREAD_KEY)
                    if isinstance(value, str) and value:
                        return value
            except Exception:
                _swallowed("reading the codex thread binding from state.db")
        return _bindings().get(str(session_id))

    @hookimpl
    def codex_thread_bound(self, agent: Any, thread_id: str, endpoint: str | None) -> None:
        """Persist the binding with the session (after the turn's transcript is committed), and
        the remote app-server holding the thread, so a resume goes where its rollout is."""
        session_id = getattr(agent, "session_id", None)
        if not session_id or getattr(agent, "_persist_disabled", False):
            return
        stored = False
        db = getattr(agent, "_session_db", None)
        write = getattr(db, "_execute_write", None)
        if callable(write):
            try:
                write(lambda conn: conn.execute(
                    "UPDATE sessions SET model_config = json_set(COALESCE(model_config, '{}'), "
                    "'$.codex_thread_id', ?, '$.codex_thread_endpoint', ?) WHERE id = ?",
                    (thread_id, endpoint, session_id)))
                stored = True
            except Exception:
                _swallowed("storing the codex thread binding in state.db")
        init_config = getattr(agent, "_session_init_model_config", None)
        if isinstance(init_config, dict):
            init_config[THREAD_KEY] = thread_id  # survives a compression-rotated session id
            init_config[ENDPOINT_KEY] = endpoint
        try:
            _bindings().set(str(session_id), thread_id, platform=getattr(agent, "platform", ""),
                            endpoint=endpoint)
        except OSError:
            if not stored:
                log.warning("codex-runtime: could not store the codex thread binding",
                            exc_info=True)

    # ------------------------------------------------------------------ approvals & progress

    @hookimpl
    def codex_approval(self, agent: Any, request: Any) -> Any:
        """Decide like Hermes' terminal tool would (see :mod:`.approvals`)."""
        state = turn_state(agent)
        scope = state.scope if state is not None else approvals.capture_scope(agent)
        return approvals.decide(request, scope, agent)

    @hookimpl
    def codex_tool_call(self, agent: Any, call: HostToolCall) -> HostToolOutput:
        """A Hermes tool codex called (the review fork's memory and skill tools)."""
        state = turn_state(agent)
        return review.run_tool(agent, call, state.effective_task_id if state else None,
                               state.messages if state else None)

    @hookimpl
    def codex_event(self, agent: Any, event: CodexEvent) -> None:
        """Bridge progress into the agent's display callbacks."""
        try:
            events.bridge(agent, event, turn_state(agent))
        except Exception:
            log.debug("codex-runtime: a display callback raised", exc_info=True)

    # ------------------------------------------------------------------ accounting

    @hookimpl
    def codex_record_usage(self, agent: Any, usage: UsageReport) -> None:
        """Session counters, compressor, cost and the session database."""
        record_usage(agent, usage)
        state = turn_state(agent)
        if state is not None:
            state.usage_recorded = True

    @hookimpl
    def codex_record_compaction(self, agent: Any, turn: TurnResult) -> None:
        """codex compacted the thread: Hermes' compaction bookkeeping and event."""
        record_compaction(agent, turn)

    @hookimpl
    def codex_turn_finished(self, agent: Any, turn: TurnResult,
                            messages: list[dict[str, Any]]) -> None:
        """Splice, persist, nudge, sync memory, review, and fire Hermes' hooks."""
        state = turn_state(agent)
        if state is None or state.epilogue_done or turn.fallback is not None:
            return  # a fallback turn ran Hermes' own epilogue
        state.epilogue_done = True
        epilogue(agent, turn, messages, state)

    @hookimpl
    def codex_fallback(self, agent: Any, turn: TurnResult, failure: Any) -> Any:
        """Complete the same turn on the first configured fallback provider."""
        state = turn_state(agent)
        if state is None:
            return None
        from hermes_codex_runtime.hermes.fallback import run_on_fallback

        result = run_on_fallback(agent, state, failure)
        state.fallback_result = result
        return result


# ---------------------------------------------------------------------- helpers


#: Hermes' reasoning effort → codex's (codex has no "max"/"ultra": its highest is "xhigh").
EFFORT = {"minimal": "minimal", "low": "low", "medium": "medium", "high": "high",
          "xhigh": "xhigh", "max": "xhigh", "ultra": "xhigh"}


def hermes_model(agent: Any) -> str | None:
    """The model Hermes chose for this agent (``model.default``, or a ``/model`` switch), as codex
    names it: an ``openai/`` aggregator prefix is dropped; any other ``vendor/model`` name is not
    a codex model, so codex's own choice (its ``config.toml``) stands."""
    model = getattr(agent, "model", None)
    if not isinstance(model, str) or not model.strip():
        return None
    model = model.strip()
    if model.lower().startswith("openai/"):
        model = model.split("/", 1)[1]
    if "/" in model or not model:
        log.info("codex-runtime: Hermes' model %r is not a codex model name; codex uses its own "
                 "default (set model.codex_model to choose)", agent.model)
        return None
    return model


def codex_effort(reasoning_config: Any) -> str | None:
    """codex's reasoning effort for Hermes' ``reasoning_config`` (``None``: codex's default;
    reasoning switched off → ``minimal``, the least codex models offer)."""
    if not isinstance(reasoning_config, dict):
        return None
    if reasoning_config.get("enabled") is False:
        return "minimal"
    return EFFORT.get(str(reasoning_config.get("effort") or "").lower())


def _hermes_version() -> str:
    from hermes_codex_runtime.hermes.probe import find_host

    host = find_host()
    return host.version if host is not None else "0"


def record_usage(agent: Any, usage: UsageReport) -> None:
    """Add one turn's usage to the agent's counters, compressor, cost and session DB."""
    turn, last = usage.turn, usage.last
    agent.session_api_calls = getattr(agent, "session_api_calls", 0) + max(1, usage.responses)
    prompt = turn.prompt_tokens
    uncached = turn.uncached_input_tokens
    agent.session_prompt_tokens = getattr(agent, "session_prompt_tokens", 0) + prompt
    agent.session_completion_tokens = getattr(agent, "session_completion_tokens", 0) + \
        turn.output_tokens
    agent.session_total_tokens = getattr(agent, "session_total_tokens", 0) + turn.total_tokens
    agent.session_input_tokens = getattr(agent, "session_input_tokens", 0) + uncached
    agent.session_output_tokens = getattr(agent, "session_output_tokens", 0) + turn.output_tokens
    agent.session_cache_read_tokens = getattr(agent, "session_cache_read_tokens", 0) + \
        turn.cached_tokens
    agent.session_cache_write_tokens = getattr(agent, "session_cache_write_tokens", 0) + \
        turn.cache_write_tokens
    agent.session_reasoning_tokens = getattr(agent, "session_reasoning_tokens", 0) + \
        turn.reasoning_tokens
    compressor = getattr(agent, "context_compressor", None)
    if compressor is not None:
        try:
            compressor.update_from_response({
                "prompt_tokens": last.prompt_tokens, "completion_tokens": last.output_tokens,
                "total_tokens": last.total_tokens, "input_tokens": last.uncached_input_tokens,
                "output_tokens": last.output_tokens, "cache_read_tokens": last.cached_tokens,
                "cache_write_tokens": last.cache_write_tokens,
                "reasoning_tokens": last.reasoning_tokens})
            if usage.context_window:
                compressor.context_length = usage.context_window
        except Exception:
            _swallowed("updating the context compressor")
    amount = None
    model = usage.model or getattr(agent, "model", "") or ""  # what codex ran, not the config
    canonical_cls = symbol("agent.usage_pricing", "CanonicalUsage", feature="cost estimates")
    estimate = symbol("agent.usage_pricing", "estimate_usage_cost", feature="cost estimates")
    canonical = None
    if canonical_cls is not None and callable(estimate):
        try:
            canonical = canonical_cls(
                input_tokens=uncached, output_tokens=turn.output_tokens,
                cache_read_tokens=turn.cached_tokens, cache_write_tokens=turn.cache_write_tokens,
                reasoning_tokens=turn.reasoning_tokens, request_count=max(1, usage.responses))
            cost = estimate(model, canonical,
                            provider=getattr(agent, "provider", None),
                            base_url=getattr(agent, "base_url", None),
                            api_key=getattr(agent, "api_key", ""))
            amount = cost.amount_usd
            if amount is not None:
                agent.session_estimated_cost_usd = float(
                    getattr(agent, "session_estimated_cost_usd", 0.0)) + float(amount)
            agent.session_cost_status = cost.status
            agent.session_cost_source = cost.source
        except Exception:
            log.debug("codex-runtime: cost estimate failed", exc_info=True)
    db = getattr(agent, "_session_db", None)
    session_id = getattr(agent, "session_id", None)
    if db is not None and session_id and not getattr(agent, "_persist_disabled", False):
        try:
            if not getattr(agent, "_session_db_created", True):
                agent._ensure_db_session()
            db.update_token_counts(
                session_id, input_tokens=uncached, output_tokens=turn.output_tokens,
                cache_read_tokens=turn.cached_tokens, cache_write_tokens=turn.cache_write_tokens,
                reasoning_tokens=turn.reasoning_tokens,
                estimated_cost_usd=float(amount) if amount is not None else None,
                cost_status=getattr(agent, "session_cost_status", None),
                cost_source=getattr(agent, "session_cost_source", None),
                billing_provider=getattr(agent, "provider", None),
                billing_base_url=getattr(agent, "base_url", None),
                billing_mode="subscription_included"
                if getattr(agent, "session_cost_status", None) == "included" else None,
                model=model or None,
                api_call_count=max(1, usage.responses))
            if usage.model and usage.model != getattr(agent, "model", None):
                _record_session_model(db, session_id, usage.model)
        except Exception:
            _swallowed("saving the token counts to the session database")


def _record_session_model(db: Any, session_id: str, model: str) -> None:
    """The session row names the model codex actually ran (Hermes wrote its configured one)."""
    write = getattr(db, "_execute_write", None)
    if callable(write):
        write(lambda conn: conn.execute("UPDATE sessions SET model = ? WHERE id = ?",
                                        (model, session_id)))


def record_no_usage(agent: Any) -> None:
    """A codex turn without usage still counts as one API call; it cannot settle a pending
    post-compaction check, so that latch is released."""
    agent.session_api_calls = getattr(agent, "session_api_calls", 0) + 1
    compressor = getattr(agent, "context_compressor", None)
    if compressor is not None and getattr(compressor, "awaiting_real_usage_after_compression",
                                          False):
        try:
            compressor.update_from_response({})
        except Exception:
            log.debug("codex-runtime: compressor latch release failed", exc_info=True)


def record_compaction(agent: Any, turn: TurnResult) -> None:
    """Hermes' bookkeeping for a compaction codex performed natively."""
    status = symbol("agent.conversation_compression", "COMPACTION_STATUS",
                    feature="the compaction status line")
    emit_status = getattr(agent, "_emit_status", None)
    if status is not None and callable(emit_status):
        try:
            emit_status(status)
        except Exception:
            log.debug("codex-runtime: status emit failed", exc_info=True)
    compressor = getattr(agent, "context_compressor", None)
    count = 0
    if compressor is not None:
        compressor.compression_count = getattr(compressor, "compression_count", 0) + 1
        count = compressor.compression_count
        compressor.last_compression_rough_tokens = 0
        record = getattr(type(compressor), "record_completed_compaction", None)
        if callable(record):
            record(compressor, used_fallback=False)
        if turn.usage is None:
            # The next real usage reading adjudicates this compaction.
            compressor.last_prompt_tokens = -1
            compressor.last_completion_tokens = 0
            compressor.awaiting_real_usage_after_compression = True
    agent._last_compaction_in_place = False
    callback = getattr(agent, "event_callback", None)
    if callable(callback):
        try:
            callback("session:compress", {
                "platform": getattr(agent, "platform", None) or "",
                "session_id": getattr(agent, "session_id", None) or "",
                "old_session_id": "", "in_place": False, "compression_count": count,
                "runtime": "codex_app_server", "thread_id": turn.thread_id or "",
                "turn_id": turn.turn_id or ""})
        except Exception:
            log.debug("codex-runtime: session:compress callback failed", exc_info=True)


def _invoke_hook(name: str, **kwargs: Any) -> None:
    invoke = symbol("hermes_cli.plugins", "invoke_hook", feature=f"the {name} plugin hook")
    if callable(invoke):
        try:
            invoke(name, **kwargs)
        except Exception:
            log.debug("codex-runtime: hook %s raised", name, exc_info=True)


def epilogue(agent: Any, turn: TurnResult, projected: list[dict[str, Any]],
             state: TurnState) -> None:
    """What Hermes' own loop does after a turn, for a codex turn."""
    messages = state.messages
    # Never re-append the user message: it is already in `messages` (and in the DB).
    new = [dict(m) for m in projected if m.get("role") != "user"]
    if new:
        messages.extend(new)
    agent._session_messages = messages  # as Hermes' own persistence leaves it (the review reads it)
    if getattr(agent, "_session_db", None) is not None and new:
        try:
            agent._flush_messages_to_session_db(messages)
        except Exception:
            _swallowed("saving the turn's messages to the session database")
    refused = turn.failure is not None and turn.failure.failover  # a usage limit: no answer
    if not state.usage_recorded and turn.turn_id is not None and not refused:
        record_no_usage(agent)
    agent._iters_since_skill = getattr(agent, "_iters_since_skill", 0) + turn.tool_iterations
    review_skills = False
    interval = getattr(agent, "_skill_nudge_interval", 0) or 0
    if interval > 0 and agent._iters_since_skill >= interval and \
            "skill_manage" in (getattr(agent, "valid_tool_names", None) or ()):
        review_skills = True
        agent._iters_since_skill = 0
    ok = turn.error is None and not turn.interrupted
    if ok:
        sync = getattr(agent, "_sync_external_memory_for_turn", None)
        if callable(sync):
            try:
                sync(original_user_message=state.original_user_message,
                     final_response=turn.final_text, interrupted=False, messages=messages)
            except Exception:
                _swallowed("the external memory sync")
    if ok and turn.final_text and (state.should_review_memory or review_skills):
        spawn = getattr(agent, "_spawn_background_review", None)
        if callable(spawn):
            try:
                spawn(messages_snapshot=list(messages), review_memory=state.should_review_memory,
                      review_skills=review_skills)
            except Exception:
                _swallowed("starting the background review")
    platform = getattr(agent, "platform", None) or ""
    turn_id = getattr(agent, "_current_turn_id", None)
    if turn.final_text and not turn.interrupted:
        _invoke_hook("post_llm_call", session_id=getattr(agent, "session_id", None),
                     task_id=state.effective_task_id, turn_id=turn_id,
                     user_message=state.original_user_message,
                     assistant_response=turn.final_text, conversation_history=list(messages),
                     model=getattr(agent, "model", None), platform=platform)
    _invoke_hook("on_session_end", session_id=getattr(agent, "session_id", None),
                 task_id=state.effective_task_id, turn_id=turn_id, completed=ok,
                 interrupted=turn.interrupted, model=getattr(agent, "model", None),
                 platform=platform)


def _stored_endpoint(agent: Any) -> str | None:
    """The endpoint stored with the thread in state.db, if any."""
    db = getattr(agent, "_session_db", None)
    session_id = getattr(agent, "session_id", None)
    if db is None or not hasattr(db, "get_session") or not session_id:
        return None
    try:
        row = db.get_session(session_id)
        raw = row["model_config"] if row else None
        if raw:
            import json

            value = json.loads(raw).get(ENDPOINT_KEY)
            return value if isinstance(value, str) and value else None
    except Exception:
        _swallowed("reading the codex thread's endpoint from state.db")
    return None
