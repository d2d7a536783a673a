"""The turn across a host agent's life, talking to the host only through pluggy hooks.

For each host agent the runtime keeps one :class:`~hermes_codex_runtime.session.CodexSession`,
created lazily on the first turn. A turn arrives with the host's
:class:`~hermes_codex_runtime.values.TurnContext`, which every hook of that turn receives (the
host's per-turn data travels there, never on its agent object). Per turn it:

1. asks the host for settings and its system prompt (a changed prompt retires the thread: the next
   thread starts fresh and seeded; changed host tools take a new session on the same thread,
   which :mod:`.session.thread` keeps only while it offers every tool the host has now);
2. on a new session, asks for the stored thread id to resume (or reuses the thread of a session it
   just retired, in a new process) — unless the conversation no longer matches the thread (other
   developer instructions, fewer turns than it has seen: :mod:`.continuity`): then a fresh thread
   starts, seeded; a live session whose conversation stops matching is replaced the same way;
3. runs the turn — approvals and progress go to the host's hooks as they happen;
4. reports usage and compaction, and on a failover-class failure (usage limit) asks the host to run
   the same turn on its fallback provider;
5. tells the host the turn finished (memory, nudges, hooks), then binds the thread id — only now,
   once the turn's transcript is committed;
6. retires the session (closing its process tree) when the turn says so, or when anything raised.

No exception escapes :meth:`CodexRuntime.run_turn` for anything codex, the process or a hook does.
The controls (:meth:`~CodexRuntime.interrupt`, :meth:`~CodexRuntime.steer`,
:meth:`~CodexRuntime.close`) may be called from any thread.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pluggy

from hermes_codex_runtime.continuity import (
    Binding,
    Ledger,
    Plan,
    Verdict,
    instructions_changed,
    instructions_digest,
    plan,
)
from hermes_codex_runtime.events import CodexEvent
from hermes_codex_runtime.plugins import make_plugin_manager
from hermes_codex_runtime.pool import ServerPool
from hermes_codex_runtime.protocol import (
    Decision,
    Failure,
    FailureKind,
    HostToolCall,
    HostToolOutput,
)
from hermes_codex_runtime.session import CodexSession, Mend, prepare
from hermes_codex_runtime.values import (
    ApprovalRequest,
    SessionSettings,
    TurnContext,
    TurnResult,
)
from hermes_codex_runtime.wire import redact

log = logging.getLogger(__name__)
T = TypeVar("T")


def _wrong_answer(hook: str, answer: object, expected: type[Any]) -> str:
    """What is said of a host's hook that answered with the wrong type (its author's bug)."""
    return (f"the host's {hook} hook returned a {type(answer).__name__}; it must return a "
            f"{expected.__name__} or None")


class ThreadBusy(Exception):
    """Another request's turn held the conversation's codex thread past the wait."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(f"another request on this conversation is still running on codex "
                         f"thread {thread_id}; send this one again once it has answered")


def _log_turn(turn: TurnResult, seconds: float) -> None:
    """One INFO line per turn: where it ran, how it ended, what it cost."""
    status = turn.status or ("failed" if turn.error else "completed")
    if turn.interrupted:
        status = "interrupted"
    usage = turn.usage.turn if turn.usage else None
    log.info("codex turn %s on thread %s: %s in %.2fs, model %s, tokens in %s (cached %s) "
             "out %s%s", turn.turn_id or "-", turn.thread_id or "-", status, seconds,
             turn.model or "-", usage.prompt_tokens if usage else "-",
             usage.cached_tokens if usage else "-", usage.output_tokens if usage else "-",
             f" — {turn.failure.kind.value}" if turn.failure else "")


def _same_process(old: SessionSettings, new: SessionSettings) -> bool:
    """True when ``new`` differs from ``old`` at most in the settings codex takes per turn
    (``turn/start``'s model, effort and service tier): then the process and the thread carry
    on."""
    return dataclasses.replace(old, model=None, effort=None, service_tier=None) == \
        dataclasses.replace(new, model=None, effort=None, service_tier=None)


class _Agent:
    """Everything the runtime keeps for one host agent, forgotten together (:meth:`_forget`)."""

    __slots__ = ("context", "instructions", "interrupted", "last_thread", "ledger",
                 "ledger_thread", "session", "settings", "turn_lock")

    def __init__(self) -> None:
        #: One agent's turns and compactions run one at a time: two concurrent first turns
        #: never create two codex processes, and a compaction never races a turn.
        self.turn_lock = threading.RLock()
        #: Its live session, with the instructions and settings it was made for.
        self.session: CodexSession | None = None
        self.instructions: str | None = None
        self.settings = SessionSettings()
        #: The conversation its session's thread holds (continuity.py; None: not known).
        self.ledger: Ledger | None = None
        self.ledger_thread: str | None = None  # the thread that ledger describes
        #: The context of its turn in flight (what its session's callbacks pass on).
        self.context: TurnContext[Any] | None = None
        #: Interrupted before its turn had a session: the session is stopped at birth.
        self.interrupted = False
        #: The thread its last turn ran on, as ``codex_stored_thread`` answers.
        self.last_thread: Binding | None = None

    def drop_session(self) -> CodexSession | None:
        """Let go of the session (the caller closes it)."""
        session, self.session = self.session, None
        return session


class CodexRuntime:
    """Runs host turns on codex. One instance serves many agents (e.g. a gateway's sessions)."""

    def __init__(self, plugin_manager: pluggy.PluginManager | None = None, *,
                 pool: ServerPool | None = None) -> None:
        self.pm = plugin_manager or make_plugin_manager()
        #: The app-servers this runtime's sessions run on (shared, per-session or remote).
        self.pool = pool or ServerPool()
        self._agents: dict[int, _Agent] = {}
        self._keys: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ hooks, safely

    def _ask(self, name: str, expected: type[T], **kwargs: Any) -> T | None:
        """The ``firstresult`` hook's answer, or ``None`` when there is none, an implementation
        raised or answered with another type than ``expected`` (logged, naming the hook)."""
        try:
            answer = getattr(self.pm.hook, name)(**kwargs)
        except Exception:
            log.exception("codex-runtime hook %s raised; using no answer", name)
            return None
        if answer is None or isinstance(answer, expected):
            return answer
        log.error("%s; using no answer", _wrong_answer(name, answer, expected))
        return None

    def _tell(self, name: str, **kwargs: Any) -> None:
        try:
            getattr(self.pm.hook, name)(**kwargs)
        except Exception:
            log.exception("codex-runtime hook %s raised; continuing", name)

    def _settings(self, agent: Any, context: TurnContext[Any]) -> SessionSettings | TurnResult:
        """The host's settings, or a failed result. Not `_ask`: running codex on default
        settings because the host's answer failed could reach a provider the user never chose."""
        try:
            answer = self.pm.hook.codex_session_settings(agent=agent, context=context)
            if answer is not None and not isinstance(answer, SessionSettings):
                raise TypeError(_wrong_answer("codex_session_settings", answer, SessionSettings))
            return answer if answer is not None else SessionSettings()
        except Exception as exc:
            if not isinstance(exc, TypeError | ValueError):  # a value refused, a wrong answer
                log.exception("the host's codex_session_settings hook raised")
            result = TurnResult()
            result.fail(Failure(FailureKind.SETUP, redact(str(exc)), source="settings"),
                        retire=False)
            return result

    # ------------------------------------------------------------------ sessions

    def _key(self, agent: Any) -> int:
        """The agent's key in this runtime's tables: a number never given twice (an ``id()``
        is reused by the next object at that address — a collected agent's successor would
        inherit its session, then lose it to the collected one's clean-up). When the agent is
        collected, its session is closed."""
        try:
            with self._lock:
                key = self._keys.get(agent)
                if key is None:
                    key = self._keys[agent] = next(self._numbers)
                    # at exit the pool ends every process anyway; no thread starts then
                    weakref.finalize(agent, self._forget_later, key).atexit = False
        except TypeError:  # not weak-referenceable: the host closes the session explicitly
            return id(agent)
        return key

    def _known_key(self, agent: Any) -> int | None:
        """The agent's key if it has one (see :meth:`_key`)."""
        try:
            return self._keys.get(agent)
        except TypeError:
            return id(agent)

    def _record(self, key: int) -> _Agent:
        """The agent's record, made on first use."""
        with self._lock:
            record = self._agents.get(key)
            if record is None:
                record = self._agents[key] = _Agent()
            return record

    def _forget_later(self, key: int) -> None:
        """The agent was collected: forget it, off the collecting thread (closing a session
        talks to codex, and a collection can run anywhere, e.g. inside another turn)."""
        threading.Thread(target=self._forget, args=(key,), name="codex-forget",
                         daemon=True).start()

    def _forget(self, key: int) -> None:
        with self._lock:
            record = self._agents.pop(key, None)
        session = record.drop_session() if record is not None else None
        if session is not None:
            session.close()

    def prewarm(self, agent: Any) -> threading.Thread | None:
        """Start, in the background, what the agent's first turn would wait for — the
        app-server its session will join, the walls' verdict (:func:`~.session.prepare`) — while
        the host is still composing that turn. Only before this runtime has any session (later
        agents find theirs up). Returns the thread, or ``None`` when there is nothing to do; a
        failure is left to the turn, which meets it again and reports it."""
        with self._lock:
            if any(record.session is not None for record in self._agents.values()):
                return None
        settings = self._settings(agent, TurnContext())
        if isinstance(settings, TurnResult):
            return None

        def run() -> None:
            try:
                prepare(self.pool, settings)
            except Exception as exc:
                log.debug("preparing a first codex session failed (the turn reports it): %s",
                          redact(str(exc)))

        thread = threading.Thread(target=run, name="codex-prewarm", daemon=True)
        thread.start()
        return thread

    def session_for(self, agent: Any) -> CodexSession | None:
        """The live session of ``agent``, if any."""
        key = self._known_key(agent)
        record = self._agents.get(key) if key is not None else None
        return record.session if record is not None else None

    def _context(self, key: int) -> TurnContext[Any]:
        """The context of the agent's turn in flight (an empty one outside a turn)."""
        record = self._agents.get(key)
        return (record.context if record is not None else None) or TurnContext()

    def _session(self, agent: Any, key: int, settings: SessionSettings,
                 instructions: str | None, context: TurnContext[Any],
                 history: Sequence[Any] | None = None) -> tuple[CodexSession, Verdict]:
        """The agent's session for a turn whose conversation before it is ``history``
        (``None``: not told, e.g. a compaction), and what its thread needs first
        (:func:`~.continuity.plan`)."""
        record = self._record(key)
        live = record.session
        moved = settings.conversation != record.settings.conversation
        verdict = Verdict(Plan.KEEP)
        if live is not None and not moved:
            verdict = _verdict(instructions_digest(record.instructions), record.ledger,
                               instructions, history)
            if verdict.plan is not Plan.FRESH and not live.retired and \
                    _same_process(record.settings, settings):
                # model, effort and tier are turn-level in codex: a change rides on turn/start
                record.settings = live.settings = settings
                return live, verdict
        binding: Binding | None = None
        predecessor: CodexSession | None = None
        branch: Binding | None = None  # a thread a new conversation may fork (see below)
        if live is not None and not moved and verdict.plan is not Plan.FRESH:
            # the same conversation continues: the new session takes the thread over on the
            # process that holds it, then ends this one (see CodexSession._spawn)
            predecessor = live
            if live.thread_id:
                binding = Binding(live.thread_id, live.endpoint,
                                  instructions_digest(record.instructions), record.ledger)
        elif live is not None:
            if moved and live.thread_id:
                branch = Binding(live.thread_id, live.endpoint,
                                 instructions_digest(record.instructions), record.ledger)
            else:
                log.info("%s: the next codex thread starts fresh%s",
                         verdict.why or "a new thread", ", seeded" if history else "")
            live.close()
            record.last_thread = None
        fresh_here = live is not None and not moved and verdict.plan is Plan.FRESH
        if binding is None and not fresh_here:
            binding = (None if moved else record.last_thread) or self._ask(
                "codex_stored_thread", Binding, agent=agent, context=context)
            if binding is not None and self._release_thread(binding.thread_id, key,
                                                            settings.turn_timeout):
                # another agent's turn ran on it meanwhile: its ledger changed
                binding = self._ask("codex_stored_thread", Binding, agent=agent,
                                    context=context) or binding
        fork: str | None = None
        if binding is None and branch is not None:
            # another conversation of this agent with none of its own (a branch): a fork of the
            # thread it came from, when they share their start
            verdict = _verdict(branch.instructions, branch.ledger, instructions, history)
            if verdict.plan is not Plan.FRESH:
                fork, binding = branch.thread_id, branch
        elif binding is not None:
            verdict = _verdict(binding.instructions, binding.ledger, instructions, history)
            if verdict.plan is Plan.FRESH:
                # thread/resume keeps the thread's own instructions and turns: never resume
                # into a conversation the host no longer has
                log.info("%s: thread %s is not resumed, a fresh thread starts", verdict.why,
                         binding.thread_id)
                binding = None

        # The session's callbacks hold the agent weakly: the session lives in this runtime
        # (shared by a whole gateway), and a host that drops its agent without closing it (an
        # API server run) must see the agent collected — and its session closed — not kept.
        host = _weak(agent)

        def approve(request: ApprovalRequest) -> Decision | None:
            owner = host()
            if owner is None:
                return None  # nobody left to ask: the broker declines
            return self._ask("codex_approval", Decision, agent=owner, request=request,
                             context=self._context(key))

        def on_event(event: CodexEvent) -> None:
            owner = host()
            if owner is not None:
                self._tell("codex_event", agent=owner, event=event,
                           context=self._context(key))

        def call_tool(call: HostToolCall) -> HostToolOutput | None:
            owner = host()
            if owner is None:
                raise RuntimeError("the host's agent is gone")
            # not `_ask`: the session turns an exception into a failed call the model can read
            answer = self.pm.hook.codex_tool_call(agent=owner, call=call,
                                                  context=self._context(key))
            if answer is None or isinstance(answer, HostToolOutput):
                return answer
            raise TypeError(_wrong_answer("codex_tool_call", answer, HostToolOutput))

        session = CodexSession(settings, developer_instructions=instructions,
                               stored_thread_id=binding.thread_id if binding and not fork
                               else None, fork_from=(fork, None) if fork else None,
                               stored_endpoint=binding.endpoint if binding else None,
                               approve=approve, on_event=on_event, pool=self.pool,
                               predecessor=predecessor,
                               call_tool=call_tool if settings.host_tools else None)
        with self._lock:
            record.session, record.instructions, record.settings = session, instructions, settings
            record.ledger = binding.ledger if binding is not None else Ledger()
            record.ledger_thread = binding.thread_id if binding is not None else None
            interrupted = record.interrupted
        if interrupted:
            session.interrupt()
        return session, verdict

    def _release_thread(self, thread_id: str, key: int, wait: float) -> bool:
        """codex allows one writer per thread: a session of ANOTHER agent that still holds
        ``thread_id`` (a host that replaced its agent object for the same conversation without
        closing the old one, e.g. a gateway after ``/stop``; a second request on the same
        conversation) is closed, so this agent resumes the thread instead of starting a fresh
        one — once that agent's turn in flight, if any, has ended (waiting up to ``wait``
        seconds: two turns never share a thread). True when a turn was waited for."""
        with self._lock:
            holders = [(k, record) for k, record in self._agents.items()
                       if k != key and (session := record.session) is not None
                       and session.thread_id == thread_id]
        waited = False
        for _, record in holders:
            busy = not record.turn_lock.acquire(blocking=False)
            if busy:
                log.info("codex thread %s is running another request's turn; waiting for it",
                         thread_id)
                if not record.turn_lock.acquire(timeout=wait):
                    raise ThreadBusy(thread_id)
                waited = True
            try:
                session = record.drop_session()
            finally:
                record.turn_lock.release()
            if session is not None:
                log.info("closing an idle codex session that still held thread %s", thread_id)
                session.close()
        return waited

    # ------------------------------------------------------------------ turns

    def run_turn(self, agent: Any, user_input: Any, history: Sequence[Any] | None = None, *,
                 context: TurnContext[Any] | None = None,
                 images: Sequence[str] = ()) -> TurnResult:
        """Run one host turn on codex and report it through the hooks, each of which gets
        ``context`` (an empty one when the host passes none). ``history``: the conversation
        before this turn — a fresh thread's seed, and what tells whether the bound thread still
        matches it (``None``: the host does not say)."""
        key = self._key(agent)
        context = context if context is not None else TurnContext()
        record = self._record(key)
        with record.turn_lock:
            record.context = context
            try:
                return self._run_turn(agent, key, user_input, history, images, context)
            finally:
                with self._lock:
                    if record.context is context:
                        record.context = None
                    record.interrupted = False

    def _run_turn(self, agent: Any, key: int, user_input: Any, history: Sequence[Any] | None,
                  images: Sequence[str], context: TurnContext[Any]) -> TurnResult:
        settings = self._settings(agent, context)
        if isinstance(settings, TurnResult):
            self._tell("codex_turn_finished", agent=agent, turn=settings, messages=[],
                       context=context)
            return settings
        instructions = self._instructions(agent, context)

        def seed() -> str | None:
            text = self._ask("codex_history_seed", str, agent=agent,
                             messages=list(history or ()), context=context)
            return text if text is not None and text.strip() else None

        session: CodexSession | None = None
        started = time.monotonic()
        verdict = Verdict(Plan.KEEP)
        try:
            session, verdict = self._session(agent, key, settings, instructions, context, history)
            planned = session.thread_id or self._record(key).ledger_thread
            mend = None
            if verdict.plan is Plan.MEND:
                log.info("codex thread %s: %s; mending it", planned, verdict.why)
                mend = Mend(planned, verdict.cut, verdict.add) if planned else None
            result = session.run_turn(user_input, images=images, history_seed=seed, mend=mend)
        except ThreadBusy as exc:
            result = TurnResult()
            result.fail(Failure(FailureKind.OTHER, str(exc)), retire=False)
        except Exception as exc:  # a bug must not take the host down
            log.exception("codex turn failed unexpectedly")
            result = TurnResult()
            result.fail(Failure(FailureKind.OTHER, redact(f"{type(exc).__name__}: {exc}")),
                        retire=True)
        _log_turn(result, time.monotonic() - started)
        return self._after_turn(agent, key, session, result, context, history, verdict)

    def _instructions(self, agent: Any, context: TurnContext[Any]) -> str | None:
        return self._ask("codex_developer_instructions", str, agent=agent, context=context)

    def compact(self, agent: Any, *, report: bool = True) -> TurnResult:
        """Native compaction of the agent's thread. ``report=False`` leaves the bookkeeping
        (``codex_record_compaction``/usage) to a caller that does its own."""
        key = self._key(agent)
        with self._record(key).turn_lock:
            return self._compact(agent, key, report=report)

    def _compact(self, agent: Any, key: int, *, report: bool) -> TurnResult:
        live = self._record(key).session
        context = self._context(key)
        if live is None:
            settings = self._settings(agent, context)
            if isinstance(settings, TurnResult):
                return settings
            session, _ = self._session(agent, key, settings,
                                       self._instructions(agent, context), context)
        else:
            session = live
        try:
            result = session.compact()
        except Exception as exc:
            log.exception("codex compaction failed unexpectedly")
            result = TurnResult()
            result.fail(Failure(FailureKind.OTHER, redact(str(exc))), retire=True)
        if report and result.usage is not None:
            self._tell("codex_record_usage", agent=agent, usage=result.usage, context=context)
        if result.compacted:
            self._compacted(key)
        if report and result.compacted:
            self._tell("codex_record_compaction", agent=agent, turn=result, context=context)
        if result.should_retire:
            self._retire(key, session)
        return result

    def _after_turn(self, agent: Any, key: int, session: CodexSession | None,
                    result: TurnResult, context: TurnContext[Any],
                    history: Sequence[Any] | None, verdict: Verdict) -> TurnResult:
        """Report the turn, then bind its thread with the conversation it now holds (the
        conversation before the turn, ``history`` — ``None``: not told —, and the turn)."""
        if result.usage is not None:
            self._tell("codex_record_usage", agent=agent, usage=result.usage, context=context)
        if result.compacted:
            self._tell("codex_record_compaction", agent=agent, turn=result, context=context)
        if result.failure is not None and result.failure.failover:
            result.fallback = self._ask("codex_fallback", dict, agent=agent, turn=result,
                                        failure=result.failure, context=context)
        self._tell("codex_turn_finished", agent=agent, turn=result, messages=result.messages,
                   context=context)
        if result.thread_id and result.turn_id:
            record = self._record(key)
            ledger = None
            if result.compacted:
                ledger = Ledger(compacted=True)  # a summary now: the next conversation is learnt
            elif history is not None:
                # a thread other than the one planned on holds the history as its seed
                same = record.ledger is not None and record.ledger_thread is not None and (
                    result.thread_id == record.ledger_thread or (session is not None
                    and session.forked_from == record.ledger_thread))
                base = record.ledger if same and record.ledger is not None else Ledger()
                ledger = base.after_turn(
                    # a turn failed over: the host's fallback answers it, codex has it unanswered
                    history, result.turn_id,
                    answered=not (result.failure is not None and result.failure.failover),
                    kept=verdict.kept if same and verdict.plan is Plan.MEND else None)
            with self._lock:
                if record.session is not None:
                    record.ledger, record.ledger_thread = ledger, result.thread_id
            binding = Binding(result.thread_id, result.endpoint,
                              instructions_digest(record.instructions
                                                  if record.session is not None else None),
                              ledger)
            record.last_thread = binding
            self._tell("codex_thread_bound", agent=agent, thread_id=binding.thread_id,
                       endpoint=binding.endpoint, instructions=binding.instructions,
                       conversation=ledger.encode() if ledger is not None else None,
                       context=context)
        if result.should_retire and session is not None:
            self._retire(key, session)
        return result

    def _compacted(self, key: int) -> None:
        """codex compacted the agent's thread outside a turn: what it holds is a summary."""
        record = self._record(key)
        with self._lock:
            if record.session is not None and record.ledger is not None:
                record.ledger = Ledger(compacted=True)
            if record.last_thread is not None:
                record.last_thread = dataclasses.replace(record.last_thread,
                                                         ledger=Ledger(compacted=True))

    def _retire(self, key: int, session: CodexSession) -> None:
        log.info("retiring the codex session (thread %s)", session.thread_id)
        session.retire()

    # ------------------------------------------------------------------ controls

    def interrupt(self, agent: Any) -> None:
        """Interrupt the agent's turn (from any thread): the one in flight — or, for an agent
        without a session, its next one, which then does not start."""
        key = self._key(agent)
        record = self._record(key)
        with self._lock:
            live = record.session
            if live is None or record.context is not None:
                record.interrupted = True  # a session made for this turn starts stopped
        if live is not None:
            live.interrupt()

    def steer(self, agent: Any, text: str) -> bool:
        """Steer the agent's active turn; True when codex accepted it."""
        session = self.session_for(agent)
        return session.steer(text) if session is not None else False

    def close(self, agent: Any) -> None:
        """Close the agent's session and its process tree."""
        key = self._known_key(agent)
        if key is not None:
            self._forget(key)


def _verdict(bound: str | None, ledger: Ledger | None, instructions: str | None,
             history: Sequence[Any] | None) -> Verdict:
    """What a thread started with instructions of digest ``bound`` and holding ``ledger``
    needs to carry the conversation ``history`` under the host's ``instructions``."""
    why = instructions_changed(bound, instructions)
    return Verdict(Plan.FRESH, why) if why else plan(ledger, history)


def _weak(agent: Any) -> Callable[[], Any]:
    """A reference to ``agent`` that does not keep it alive (a strong one when it cannot be
    weakly referenced: that host closes its sessions explicitly)."""
    try:
        return weakref.ref(agent)
    except TypeError:
        return lambda: agent
