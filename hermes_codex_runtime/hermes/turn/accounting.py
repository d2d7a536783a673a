"""A codex turn's cost in Hermes' books: the session counters, the context compressor
(``inputTokens`` includes cached tokens — counted once; the window the user configured wins
over codex's), the usage anchor a resumed session's compression rests on, the cost estimate,
the session database, and the bookkeeping and ``session:compress`` event of a compaction codex
did natively; and, for ``/codex-status``, what Hermes' own books say its side tasks used
(:func:`side_task_usage`).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from typing import Any

from hermes_codex_runtime.hermes.symbols.probe import present, swallowed, symbol
from hermes_codex_runtime.usage import TokenUsage, UsageReport
from hermes_codex_runtime.values import TurnResult

log = logging.getLogger("hermes_codex_runtime.hermes")


def record_usage(agent: Any, usage: UsageReport, *, booked_by_host: TokenUsage | None = None) \
        -> None:
    """Add one turn's usage to the agent's counters, compressor, cost and session DB — less
    ``booked_by_host``, a share of it (one API call) that Hermes books itself."""
    turn, context = usage.turn, usage.context
    calls = max(1, usage.responses)
    if booked_by_host is not None:
        turn, calls = turn.less(booked_by_host), calls - 1
    agent.session_api_calls = getattr(agent, "session_api_calls", 0) + calls
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
            if usage.context_window and configured_window(agent) is None:
                adopt_window(compressor, usage.context_window)
            compressor.update_from_response({
                "prompt_tokens": context.prompt_tokens, "completion_tokens": context.output_tokens,
                "total_tokens": context.total_tokens,
                "input_tokens": context.uncached_input_tokens,
                "output_tokens": context.output_tokens, "cache_read_tokens": context.cached_tokens,
                "cache_write_tokens": context.cache_write_tokens,
                "reasoning_tokens": context.reasoning_tokens})
        except Exception:
            swallowed("updating the context compressor")
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
                reasoning_tokens=turn.reasoning_tokens, request_count=calls)
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
                api_call_count=calls)
            if usage.model and usage.model != getattr(agent, "model", None):
                _record_session_model(db, session_id, usage.model)
        except Exception:
            swallowed("saving the token counts to the session database")


def configured_window(agent: Any) -> int | None:
    """The context window the user set — ``model.context_length``, or a custom provider's
    ``context_length`` for the model — which wins over the one codex reports."""
    for owner in (agent, getattr(agent, "context_compressor", None)):
        value = getattr(owner, "_config_context_length", None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def adopt_window(compressor: Any, window: int) -> None:
    """codex's reported window becomes the compressor's, its threshold with it: the 0.22 line
    derives the threshold from ``context_length`` on assignment; 0.19.0 only in
    ``update_model`` (same model and route — nothing else changes; called before this turn's
    usage is recorded, which it would clear)."""
    if getattr(compressor, "context_length", None) == window:
        return
    if isinstance(getattr(type(compressor), "context_length", None), property):
        compressor.context_length = window
        return
    update = getattr(compressor, "update_model", None)
    if callable(update):
        update(compressor.model, window, base_url=getattr(compressor, "base_url", ""),
               api_key=getattr(compressor, "api_key", ""),
               provider=getattr(compressor, "provider", ""),
               api_mode=getattr(compressor, "api_mode", ""))
    else:
        compressor.context_length = window


def anchor_usage(agent: Any, usage: UsageReport | None, messages: list[Any]) -> None:
    """The turn's last prompt usage anchored on the transcript it priced (the 0.22 line's
    ``agent.usage_anchor``): Hermes estimates the next request as that plus what was appended
    since, and keeps the anchor with the session, so a resumed session's compression decisions
    rest on real usage (without it, the 0.22 line defers compression a whole turn)."""
    if usage is None or usage.context.prompt_tokens <= 0 or \
            not present("agent.usage_anchor", "set_usage_anchor"):
        return  # 0.19.0 has no anchor: it estimates from the transcript, nothing to keep
    capture = symbol("agent.usage_anchor", "capture_usage_anchor",
                     feature="compression decisions on real usage after a codex turn")
    install = symbol("agent.usage_anchor", "set_usage_anchor",
                     feature="compression decisions on real usage after a codex turn")
    if not callable(capture) or not callable(install):
        return
    try:
        anchor = capture(usage.context.prompt_tokens, usage.context.output_tokens, messages)
        if anchor is not None:
            install(agent, anchor)
    except Exception:
        swallowed("anchoring the turn's usage on the transcript")


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


_AUX_SQL = ("SELECT task, COALESCE(SUM(api_call_count), 0), COALESCE(SUM(input_tokens), 0), "
            "COALESCE(SUM(cache_read_tokens), 0), COALESCE(SUM(output_tokens), 0), "
            "COALESCE(SUM(reasoning_tokens), 0) FROM session_model_usage "
            "WHERE session_id = ? AND task != '' GROUP BY task ORDER BY task")


def side_task_usage(agent: Any) -> dict[str, dict[str, int]]:
    """Hermes' auxiliary usage of the agent's session, by task (its side tasks: titles,
    summaries, the approval judge, the background review): ``calls``, ``input`` (uncached),
    ``cached``, ``output``, ``reasoning``. From Hermes' own reader where it has one (the 0.22
    line), else from its ``session_model_usage`` table (read-only)."""
    db = getattr(agent, "_session_db", None)
    session_id = getattr(agent, "session_id", None)
    if db is None or not session_id:
        return {}
    reader = getattr(db, "auxiliary_usage_by_task", None)
    try:
        if callable(reader):
            return {str(task): {"calls": int(row.get("api_calls") or 0),
                                "input": int(row.get("input_tokens") or 0),
                                "cached": int(row.get("cache_read_tokens") or 0),
                                "output": int(row.get("output_tokens") or 0),
                                "reasoning": int(row.get("reasoning_tokens") or 0)}
                    for task, row in reader(session_id).items()}
        path = getattr(db, "db_path", None)
        if path is None:
            return {}
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            rows = conn.execute(_AUX_SQL, (session_id,)).fetchall()
    except Exception:
        swallowed("reading Hermes' auxiliary usage")
        return {}
    return {str(task): {"calls": int(calls), "input": int(uncached), "cached": int(cached),
                        "output": int(output), "reasoning": int(reasoning)}
            for task, calls, uncached, cached, output, reasoning in rows}
