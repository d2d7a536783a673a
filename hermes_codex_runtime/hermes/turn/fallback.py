"""Completing a codex turn that hit a usage limit on Hermes' configured fallback provider —
in the same call, so the user gets an answer instead of an error.

Hermes' chat-completions loop lives inline in ``run_conversation``, so the turn is run again
through it after ``_try_activate_fallback`` swapped the agent onto the fallback provider. The user
message the turn already appended (and saved) is handed back through the CLI's pending-message slot,
so it is reused rather than appended or written a second time, and the per-turn counters that the
re-entry bumps again are rewound first. The hand-over names the reason Hermes arms its cooldown for,
so turns inside the cooldown stay on the fallback; after it, Hermes' own
``_restore_primary_runtime`` returns the agent to codex.
"""

from __future__ import annotations

import logging
from typing import Any

from hermes_codex_runtime.hermes.symbols.probe import present, symbol

log = logging.getLogger("hermes_codex_runtime.hermes")


def host_falls_back() -> bool:
    """Whether Hermes itself completes a codex turn on its fallback provider when the turn's
    result carries a usage-limit ``error`` (the 0.22 line: ``agent.turn_recovery.
    activate_codex_app_server_fallback``, run by ``run_conversation`` in the same call). Then the
    plugin leaves the hand-over to Hermes, so a turn is never fallen back twice — and never
    re-enters ``run_conversation``, whose per-session turn lease it would wait on."""
    return present("agent.turn_recovery", "activate_codex_app_server_fallback")


def has_fallback(agent: Any) -> bool:
    """True when the agent has a fallback chain left to try."""
    chain = getattr(agent, "_fallback_chain", None)
    return bool(chain) and callable(getattr(agent, "_try_activate_fallback", None))


def failover_reason() -> Any:
    """The ``FailoverReason`` a codex usage limit hands over with: ``rate_limit``.

    Hermes arms its primary-provider cooldown (``_rate_limited_until``, 60 s) only for
    ``rate_limit``/``billing``/``upstream_rate_limit``; its own classifier files a usage limit
    that resets (codex's does: ``resets_in_seconds``) under ``rate_limit``. With that reason the
    next turn inside the cooldown stays on the fallback instead of asking codex again first.
    """
    reason_enum = symbol("agent.error_classifier", "FailoverReason", feature="usage-limit fallback")
    if reason_enum is None:
        return None
    for name in ("rate_limit", "billing"):
        reason = getattr(reason_enum, name, None)
        if reason is not None:
            return reason
    return None


def run_on_fallback(agent: Any, state: Any, failure: Any) -> dict[str, Any] | None:
    """The fallback provider's result for this same turn, or ``None`` when there is none (or
    when Hermes runs the fallback itself on the returned result)."""
    if not has_fallback(agent) or host_falls_back():
        return None
    reason = failover_reason()
    try:
        activated = agent._try_activate_fallback(reason) if reason is not None \
            else agent._try_activate_fallback()
    except Exception:
        log.exception("codex-runtime: activating the fallback provider failed")
        return None
    if not activated:
        return None
    messages = state.messages
    index = getattr(agent, "_persist_user_message_idx", None)
    if not isinstance(index, int) or not 0 <= index < len(messages):
        index = len(messages) - 1
    user_msg = messages[index]
    history = messages[:index]
    original = state.original_user_message
    if isinstance(original, str):
        user_msg["content"] = original  # the turn set-up matches the pending message on this
    agent._pending_cli_user_message = user_msg
    agent._user_turn_count = max(0, getattr(agent, "_user_turn_count", 1) - 1)
    if getattr(agent, "_turns_since_memory", 0) > 0:
        agent._turns_since_memory -= 1
    log.warning("codex-runtime: codex hit a usage limit (%s); answering this turn on the "
                "fallback provider %s", getattr(failure, "message", failure),
                getattr(agent, "provider", "?"))
    # The nested set-up would restore the primary (codex) runtime: keep the fallback this turn.
    agent._restore_primary_runtime = lambda: False
    try:
        result = agent.run_conversation(
            state.user_message, conversation_history=history, task_id=state.effective_task_id,
            persist_user_message=original if original != state.user_message else None)
    except Exception:
        log.exception("codex-runtime: the fallback provider failed too")
        return None
    finally:
        agent.__dict__.pop("_restore_primary_runtime", None)
    return result if isinstance(result, dict) else None
