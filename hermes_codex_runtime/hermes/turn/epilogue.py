"""What Hermes' own loop does after a turn, done for a codex turn: the projected messages spliced
once (never the user message again) and flushed, the usage anchored on them, the API call
counted when codex reported no usage, nudge counters, external memory sync, the background
review, and the ``post_llm_call`` / ``on_session_end`` plugin hooks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from hermes_codex_runtime.hermes.symbols.probe import swallowed, symbol
from hermes_codex_runtime.hermes.tools.bridge import called
from hermes_codex_runtime.hermes.turn.accounting import anchor_usage, record_no_usage
from hermes_codex_runtime.hermes.turn.state import TurnState
from hermes_codex_runtime.values import TurnResult

log = logging.getLogger("hermes_codex_runtime.hermes")


def _invoke_hook(name: str, **kwargs: Any) -> None:
    invoke = symbol("hermes_cli.plugins", "invoke_hook", feature=f"the {name} plugin hook")
    if callable(invoke):
        try:
            invoke(name, **kwargs)
        except Exception:
            log.debug("codex-runtime: hook %s raised", name, exc_info=True)


def _as_hermes_stores(projected: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The projected messages as Hermes keeps its own: a tool result names its tool in
    ``tool_name`` too (the session database's column) — for a call through Hermes' Tool Search
    bridge, the tool it called, while the call keeps the name the model used."""
    arguments = {call.get("id"): (call.get("function") or {}).get("arguments")
                 for message in projected for call in message.get("tool_calls") or ()
                 if isinstance(call, Mapping)}
    out = []
    for message in projected:
        if message.get("role") == "user":
            continue
        kept = dict(message)
        if kept.get("role") == "tool" and kept.get("name") and not kept.get("tool_name"):
            kept["tool_name"] = called(str(kept["name"]),
                                       arguments.get(kept.get("tool_call_id")))[0]
        out.append(kept)
    return out


def epilogue(agent: Any, turn: TurnResult, projected: Sequence[Mapping[str, Any]],
             state: TurnState) -> None:
    """What Hermes' own loop does after a turn, for a codex turn."""
    messages = state.messages
    # Never re-append the user message: it is already in `messages` (and in the DB).
    new = _as_hermes_stores(projected)
    if new:
        messages.extend(new)
    agent._session_messages = messages  # as Hermes' own persistence leaves it (the review reads it)
    if getattr(agent, "_session_db", None) is not None and new:
        try:
            agent._flush_messages_to_session_db(messages)
        except Exception:
            swallowed("saving the turn's messages to the session database")
    anchor_usage(agent, turn.usage, messages)
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
                swallowed("the external memory sync")
    wanted = not getattr(agent, "skip_background_review", False)  # cron's agents say no
    if ok and wanted and turn.final_text and (state.should_review_memory or review_skills):
        spawn = getattr(agent, "_spawn_background_review", None)
        if callable(spawn):
            try:
                spawn(messages_snapshot=list(messages), review_memory=state.should_review_memory,
                      review_skills=review_skills)
            except Exception:
                swallowed("starting the background review")
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
