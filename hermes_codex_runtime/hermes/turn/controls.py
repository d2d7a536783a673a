"""The one place a Hermes user's controls reach a codex turn: interrupt, steer, close.

* **Interrupt** has one route. While a codex turn runs, :func:`abort_hook` is the agent's
  ``_active_request_abort``, which ``AIAgent.interrupt`` calls on both host lines (and the 0.22
  line's abandoned-worker drain): it interrupts the turn through the runtime. An interrupt that
  arrives between turns stays what it is in Hermes — the agent's own flag — so the next turn
  does not start while it is set, and a host that clears a stale one (the CLI does) has cleared
  it for codex too: nothing of ours keeps a copy.
* **Steer** has one route, :func:`steer` (``turn/steer`` to the running turn). ``/steer``
  (``AIAgent.steer``) keeps Hermes' pending steer, which :func:`deliver_pending_steer` drains
  into it — restored when codex refuses, so the next turn carries it (:func:`take_pending_steer`);
  a steer is never lost and never delivered twice. The 0.22 line's ``redirect`` asks the session
  handle (:meth:`CodexSessionHandle.request_steer`), which is the same route.
* **Close**: ``AIAgent.close``/``release_clients`` and the handle close the agent's session
  (its process tree, or its channel on a shared app-server).
* **Compaction** before the first turn of a process: :func:`attach_handle` gives the agent its
  handle when its session has a stored thread to compact.

:class:`CodexSessionHandle` is what Hermes finds in ``agent._codex_session``: the handle its
``/compress`` path compacts through, and where the 0.22 line looks for ``request_steer``.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from hermes_codex_runtime.hermes.symbols.probe import present
from hermes_codex_runtime.hermes.turn import binding
from hermes_codex_runtime.hermes.turn.accounting import record_usage
from hermes_codex_runtime.hermes.turn.runtime import shared_runtime

log = logging.getLogger("hermes_codex_runtime.hermes")


def abort_hook(agent: Any) -> Callable[..., None]:
    """The ``_active_request_abort`` of a codex turn: Hermes' interrupt, reaching codex."""
    ref = weakref.ref(agent)

    def abort(_reason: Any = None) -> None:
        target = ref()
        if target is not None:
            shared_runtime().interrupt(target)

    return abort


def steer(agent: Any, text: str) -> bool:
    """Steer the agent's running codex turn (``turn/steer``); True when codex took it."""
    return shared_runtime().steer(agent, text)


def take_pending_steer(agent: Any) -> str | None:
    """Hermes' pending steer, drained (``None`` when there is none)."""
    drain = getattr(agent, "_drain_pending_steer", None)
    if not callable(drain):
        return None
    text = drain()
    return text if isinstance(text, str) and text.strip() else None


def restore_pending_steer(agent: Any, text: str) -> None:
    """Put ``text`` back in front of Hermes' pending steer (what arrived meanwhile stays)."""
    lock = getattr(agent, "_pending_steer_lock", None)
    with lock if lock is not None else contextlib.nullcontext():
        existing = getattr(agent, "_pending_steer", None)
        agent._pending_steer = f"{text}\n{existing}" if existing else text


def deliver_pending_steer(agent: Any) -> bool:
    """Hand Hermes' pending steer to the agent's running codex turn. When no turn runs, or codex
    refuses (e.g. right after the turn ended), it stays pending and the next codex turn carries
    it. True when codex took it."""
    session = shared_runtime().session_for(agent)
    if session is None or session.active_turn_id is None:
        return False
    text = take_pending_steer(agent)
    if text is None:
        return False
    if steer(agent, text):
        log.info("codex-runtime: /steer delivered to the running codex turn")
        return True
    restore_pending_steer(agent, text)
    return False


def close(agent: Any) -> None:
    """Close the agent's codex session."""
    shared_runtime().close(agent)


def attach_handle(agent: Any) -> None:
    """Before Hermes compacts: an agent on codex without a session handle yet (a resumed process
    before its first turn) gets one when its session has a stored codex thread and the agent's
    system prompt is already built — the compaction then resumes that thread with the prompt
    its first turn sends, and the turn carries on there. Without a stored thread there is
    nothing on codex to compact (the first turn seeds a fresh thread); without the prompt, a
    thread resumed now would look changed to that turn and be replaced, so Hermes' own skip
    stands."""
    if getattr(agent, "_codex_session", None) is not None or \
            getattr(agent, "api_mode", None) != "codex_app_server":
        return
    prompt = getattr(agent, "_cached_system_prompt", None)
    if isinstance(prompt, str) and prompt.strip() and binding.stored_thread(agent) is not None:
        agent._codex_session = CodexSessionHandle(agent)


class CodexSessionHandle:
    """What Hermes finds in ``agent._codex_session``: its ``/compress`` path
    (``_compress_context_via_codex_app_server``) calls ``compact_thread()`` and does the
    compaction bookkeeping itself; ``request_steer()`` and ``close()`` are the controls above.
    It has no ``request_interrupt``: an interrupt reaches codex through ``_active_request_abort``
    only (the 0.22 line would otherwise send it twice)."""

    def __init__(self, agent: Any) -> None:
        self._agent_ref = weakref.ref(agent)

    def compact_thread(self, **_: Any) -> Any:
        """codex's own compaction of the thread, as Hermes' compression path expects it.

        Hermes books the ``token_usage_last`` of a compaction that succeeded (one API call),
        sets its compressor from it and anchors its next estimate on it: that is how it sees
        the compaction shrink the session — without it, it re-estimates its own transcript,
        which a codex compaction leaves as it was, and refuses an over-window turn. So the
        compacted context goes there (codex reports its size as ``totalTokens`` alone), and
        the rest of what the compaction cost is booked here: cached tokens counted once."""
        agent = self._agent_ref()
        if agent is None:
            return SimpleNamespace(should_retire=False, interrupted=False, compacted=False,
                                   error="the agent is gone", thread_id=None, turn_id=None,
                                   token_usage_last=None, model_context_window=None)
        turn = shared_runtime().compact(agent, report=False)
        usage = turn.usage
        handed = usage.context if usage is not None and usage.last.is_compacted_context and \
            turn.error is None and not turn.interrupted and \
            present("agent.codex_runtime", "_record_codex_app_server_usage") else None
        if usage is not None:
            record_usage(agent, usage, booked_by_host=handed)
        compressor = getattr(agent, "context_compressor", None)
        window = getattr(compressor, "context_length", None)  # the user's, else codex's
        return SimpleNamespace(
            should_retire=turn.should_retire, interrupted=turn.interrupted,
            compacted=turn.compacted, error=turn.error, thread_id=turn.thread_id,
            turn_id=turn.turn_id,
            token_usage_last=None if handed is None else {
                "inputTokens": handed.input_tokens, "cachedInputTokens": handed.cached_tokens,
                "outputTokens": handed.output_tokens,
                "reasoningOutputTokens": handed.reasoning_tokens,
                "totalTokens": handed.total_tokens},
            model_context_window=window if isinstance(window, int) and window > 0
            else turn.model_context_window)

    def request_steer(self, text: str) -> bool:
        """Steer the agent's codex turn; True when codex took it."""
        agent = self._agent_ref()
        return agent is not None and steer(agent, text)

    def close(self) -> None:
        """Close the agent's codex session (its process tree)."""
        agent = self._agent_ref()
        if agent is not None:
            close(agent)
