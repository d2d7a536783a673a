"""The replay engine: a run's variants × turns over codex sessions, in the runner process.

Each variant (a model and an effort) gets its own working copy (:mod:`.workspace`) and its own
codex thread; all variants are threads of one shared app-server (the pool). Codex runs
unattended: approval policy ``never`` (nobody is there to answer), the ``workspace-write``
sandbox confined to the copy, network off unless the plan allows it. User turns go in order; each
turn's record is saved the moment it completes, and the state says which turn is in flight, so
``resume`` after a crash continues on the same codex thread and never sends a turn twice: a turn
that reached codex before the crash is recovered from codex's own record of the thread
(``thread/read``) instead of being sent again.

Retries: a variant whose turn fails for a retryable reason (rate limit, overload, service, the
app-server gone) starts over in a fresh working copy on a fresh thread, at most
:data:`RETRY_LIMIT` times; the failed attempt's copy and records are archived beside it.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hermes_codex_runtime.pool import ServerPool
from hermes_codex_runtime.protocol import Failure, FailureKind
from hermes_codex_runtime.replay.plan import Plan, Variant
from hermes_codex_runtime.replay.sources import Transcript
from hermes_codex_runtime.replay.store import Run, RunClosed, StoreError
from hermes_codex_runtime.replay.workspace import (
    WorkspaceError,
    archive_copy,
    create_copy,
)
from hermes_codex_runtime.session import CodexSession
from hermes_codex_runtime.values import CodexEvent, SessionSettings, TurnResult
from hermes_codex_runtime.wire import WireError

log = logging.getLogger(__name__)

RETRY_LIMIT = 3
DONE = ("completed", "interrupted")  # a saved turn with this status is never sent again
INSTRUCTIONS = (
    "You are replaying a recorded session: each user message below is one the user sent in the "
    "original session, in order. Work in the current directory as you would have then. Nobody "
    "is watching: do not ask for approval or clarification; do the task as well as you can.")


def retryable(failure: Failure | None) -> bool:
    """Whether a failed turn is worth a fresh attempt: what may pass without any change (rate
    limit, overload, the provider's service) and a lost app-server. A bad request, a login, a
    policy refusal or a timeout would only fail again."""
    return failure is not None and (failure.retryable or failure.kind is FailureKind.TRANSPORT)


def tool_calls_of(result: TurnResult) -> list[dict[str, str]]:
    """``[{name, arguments}]`` of the tools codex ran in a turn."""
    calls = []
    for message in result.messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            if function.get("name"):
                arguments = function.get("arguments")
                calls.append({"name": str(function["name"]),
                              "arguments": str(arguments)[:2000] if arguments else ""})
    return calls


def usage_of(result: TurnResult) -> dict[str, int]:
    """The five token buckets of a turn (input split once: ordinary + cache read + cache
    write), plus ``total``."""
    turn = result.usage.turn if result.usage else None
    if turn is None:
        return {"input": 0, "cache_read": 0, "cache_write": 0, "output": 0, "reasoning": 0,
                "total": 0}
    return {"input": turn.uncached_input_tokens, "cache_read": turn.cached_tokens,
            "cache_write": turn.cache_write_tokens, "output": turn.output_tokens,
            "reasoning": turn.reasoning_tokens, "total": turn.total_tokens}


def _thread_turns(thread: Mapping[str, Any]) -> list[dict[str, Any]]:
    """codex's turns of a thread that carry a user message: ``[{user, text, status, id}]``."""
    out = []
    for turn in thread.get("turns") or []:
        if not isinstance(turn, Mapping):
            continue
        user, answer = None, ""
        for item in turn.get("items") or []:
            if not isinstance(item, Mapping):
                continue
            if item.get("type") == "userMessage":
                parts = [str(c.get("text") or "") for c in item.get("content") or []
                         if isinstance(c, Mapping) and c.get("type") == "text"]
                user = "\n".join(parts)
            elif item.get("type") == "agentMessage" and item.get("text"):
                answer = str(item["text"])
        if user is not None:
            out.append({"user": user, "text": answer, "status": turn.get("status"),
                        "id": turn.get("id")})
    return out


class Cancelled(Exception):
    """The run was cancelled (or closed) while a variant was running."""


class Runner:
    """Runs (or continues) one run. ``settings`` makes a variant's session settings (tests and
    the CLI pass the codex binary/home in through the plan; this is the seam for a fake)."""

    def __init__(self, run: Run, *, pool: ServerPool | None = None) -> None:
        self.run = run
        state = run.state()
        self.plan = Plan.from_json(state["plan"])
        self.transcript = Transcript.from_json(run.load_json("source.json"))
        self.prompts = self.plan.prompts(self.transcript)
        self.pool = pool or ServerPool()
        self._own_pool = pool is None
        self._stop = threading.Event()
        self._sessions: dict[str, CodexSession] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the whole run

    def execute(self) -> str:
        """Run every unfinished variant; returns the run's final status."""
        try:
            self.run.update(lambda s: s.update(status="running", started_at=s.get(
                "started_at") or time.time()), reopen=True)
        except RunClosed:
            return str(self.run.state().get("status"))
        self.run.log("controller", f"running {len(self.plan.variants)} variant(s) × "
                                   f"{len(self.prompts)} turn(s), {self.plan.parallel} at a time")
        try:
            with ThreadPoolExecutor(max_workers=max(1, self.plan.parallel),
                                    thread_name_prefix="replay-variant") as pool:
                outcomes = list(pool.map(self._variant_guarded, self.plan.variants))
            if self.plan.judge and not self._stop.is_set():
                self._judge([name for name, status in outcomes if status == "completed"])
            pids = {v.get("app_server_pid") for v in (self.run.state().get("variants") or {})
                    .values() if v.get("app_server_pid")}
            self.run.log("controller", f"{len(pids)} codex app-server process(es) for "
                                       f"{len(self.plan.variants)} variant(s)")
        finally:
            self.close()
        if self._stop.is_set():
            return str(self.run.state().get("status"))
        failed = [name for name, status in outcomes if status == "failed"]
        status = "failed" if failed else "completed"
        error = f"variant(s) failed: {', '.join(failed)}" if failed else None
        # the report first, so a run is never seen finished without one
        self._write_report(status)
        if self.run.finish(status, error=error):
            self.run.log("controller", f"run {status}" + (f": {error}" if error else ""))
        else:  # a cancel landed first: the report says so
            self._write_report(None)
        return str(self.run.state().get("status"))

    def _write_report(self, status: str | None) -> None:
        from hermes_codex_runtime.replay.report import write_report

        try:
            write_report(self.run, status=status)
        except Exception as exc:  # the results are saved; `replay report` rebuilds it
            log.exception("writing the replay report failed")
            self.run.log("controller", f"writing the report failed: {exc}")

    def _judge(self, names: list[str]) -> None:
        """The blind review of each completed variant (its outcome never fails the run)."""
        from hermes_codex_runtime.replay.judge import review

        assert self.plan.judge is not None
        for variant in self.plan.variants:
            if variant.name not in names or self._stop.is_set():
                continue
            self.run.log(f"review:{variant.name}", f"blind review by {self.plan.judge}")
            try:
                outcome = review(self.run, variant=variant.name, model=self.plan.judge,
                                 transcript=self.transcript,
                                 records=self.run.turns(variant.name),
                                 turns=[i for i, _ in self.prompts]
                                 if self.plan.mode == "turns" else list(self.plan.turns),
                                 settings=self._settings(self.run.dir, variant), pool=self.pool)
            except Exception as exc:  # the replay's results stand without a review
                log.exception("the blind review of %s failed", variant.name)
                outcome = {"status": "failed", "model": self.plan.judge,
                           "error": f"{type(exc).__name__}: {exc}"}
            self.run.log(f"review:{variant.name}", f"{outcome['status']}"
                         + (f": {outcome.get('error')}" if outcome.get("error") else
                            f", verdict {outcome.get('verdict')} ({outcome.get('winner')})"))

            def store(state: dict[str, Any], name: str = variant.name,
                      result: dict[str, Any] = outcome) -> None:
                state.setdefault("judge", {})[name] = result
            try:
                self.run.update(store)
            except RunClosed:
                raise Cancelled from None

    def stop(self) -> None:
        """Stop at the next turn boundary and interrupt running turns (cancel/shutdown)."""
        self._stop.set()
        with self._lock:
            sessions = list(self._sessions.values())
        for session in sessions:
            with contextlib.suppress(Exception):
                session.interrupt()

    def close(self) -> None:
        """Close every session (and the pool when it is ours)."""
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            with contextlib.suppress(Exception):
                session.close()
        if self._own_pool:
            with contextlib.suppress(Exception):
                self.pool.close()

    # ------------------------------------------------------------------ one variant

    def _vstate(self, name: str) -> dict[str, Any]:
        return dict((self.run.state().get("variants") or {}).get(name) or {})

    def _set_variant(self, name: str, **fields: Any) -> None:
        def change(state: dict[str, Any]) -> None:
            variants = state.setdefault("variants", {})
            variants.setdefault(name, {}).update(fields)
        try:
            self.run.update(change)
        except RunClosed:
            self._stop.set()
            raise Cancelled from None

    def _variant_guarded(self, variant: Variant) -> tuple[str, str]:
        try:
            return variant.name, self._variant(variant)
        except Cancelled:
            return variant.name, "cancelled"
        except Exception as exc:
            log.exception("replay variant %s crashed", variant.name)
            self.run.log(variant.name, f"failed: {type(exc).__name__}: {exc}")
            with contextlib.suppress(Cancelled, StoreError):
                self._set_variant(variant.name, status="failed",
                                  error=f"{type(exc).__name__}: {exc}")
            return variant.name, "failed"

    def _variant(self, variant: Variant) -> str:
        state = self._vstate(variant.name)
        if state.get("status") in ("completed", "stopped"):
            return str(state["status"])
        attempt = int(state.get("attempt") or 0)
        while True:
            outcome, failure = self._attempt(variant, attempt)
            if outcome != "retry":
                return outcome
            if attempt >= RETRY_LIMIT:
                self._set_variant(variant.name, status="failed", error=failure)
                self.run.log(variant.name, f"failed after {RETRY_LIMIT} retries: {failure}")
                return "failed"
            self._archive(variant, attempt)
            attempt += 1
            self.run.log(variant.name, f"starting retry {attempt} of {RETRY_LIMIT} in a fresh "
                                       f"working copy ({failure})")
            self._set_variant(variant.name, attempt=attempt, thread_id=None, turns_done=0,
                              in_flight=None, tokens=None, error=None, status="running")

    def _archive(self, variant: Variant, attempt: int) -> None:
        label = f"{variant.name}-attempt-{attempt + 1}-failed"
        archive_copy(self.run.dir / "workspaces" / variant.name,
                     self.run.dir / "workspaces" / label)
        turns = self.run.variant_dir(variant.name) / "turns"
        if turns.exists():
            target = self.run.variant_dir(variant.name) / f"attempt-{attempt + 1}-failed"
            shutil.rmtree(target, ignore_errors=True)
            turns.rename(target)

    def _workdir(self, variant: Variant) -> Path:
        copy = self.run.dir / "workspaces" / variant.name
        base = self.plan.baseline
        if copy.exists():  # resuming: the copy holds what the earlier turns did
            return copy / base.subdir if base.subdir else copy
        return create_copy(base, copy)

    def _settings(self, workdir: Path, variant: Variant) -> SessionSettings:
        plan = self.plan
        return SessionSettings(
            codex_bin=plan.codex_bin, codex_home=plan.codex_home, cwd=str(workdir),
            model=variant.model, model_provider=plan.model_provider, effort=variant.effort,
            approval_policy="never", approvals_reviewer="user", sandbox="workspace-write",
            config_overrides={"sandbox_workspace_write": {"network_access": plan.network}},
            turn_timeout=plan.turn_timeout, registry_path=plan.registry_path,
            client_version="replay")

    def _seed(self, variant: Variant) -> Callable[[], str | None]:
        """A fresh thread (its rollout is gone) gets the turns replayed so far as context."""
        def seed() -> str | None:
            records = self.run.turns(variant.name)
            if not records:
                return None
            lines = ["Earlier in this replay (the thread had to start again):"]
            for record in records:
                lines += [f"User: {record.get('user_text', '')}",
                          f"You: {record.get('final_text', '')}"]
            return "\n".join(lines)
        return seed

    def _attempt(self, variant: Variant, attempt: int) -> tuple[str, str | None]:
        """One attempt; ``("completed"|"failed"|"stopped"|"retry", failure text)``."""
        try:
            workdir = self._workdir(variant)
        except WorkspaceError as exc:
            self._set_variant(variant.name, status="failed", error=str(exc))
            self.run.log(variant.name, f"failed: {exc}")
            return "failed", str(exc)
        state = self._vstate(variant.name)
        session = CodexSession(self._settings(workdir, variant),
                               developer_instructions=INSTRUCTIONS,
                               stored_thread_id=state.get("thread_id"), pool=self.pool,
                               on_event=lambda event: self._event(variant.name, event))
        with self._lock:
            self._sessions[variant.name] = session
        self._set_variant(variant.name, status="running", attempt=attempt,
                          workspace=str(workdir.relative_to(self.run.dir)), error=None)
        try:
            return self._turns(variant, session)
        finally:
            with self._lock:
                self._sessions.pop(variant.name, None)
            session.close()

    def _turns(self, variant: Variant, session: CodexSession) -> tuple[str, str | None]:
        done = {int(r["index"]) for r in self.run.turns(variant.name) if r.get("status") in DONE}
        tokens = self._vstate(variant.name).get("tokens") or {}
        for index, prompt in self.prompts:
            if index in done:
                continue
            if self._stop.is_set():
                raise Cancelled
            budget = self.plan.budget_tokens
            if budget is not None and int(tokens.get("total", 0)) >= budget:
                self._set_variant(variant.name, status="stopped",
                                  error=f"token budget {budget} reached")
                self.run.log(variant.name, f"stopped: token budget {budget} reached")
                return "stopped", None
            state = self._vstate(variant.name)
            record = None
            if state.get("in_flight") == index and state.get("thread_id"):
                record = self._recover(variant, session, index, prompt)
            if record is None:
                self._set_variant(variant.name, in_flight=index)
                self.run.log(variant.name, f"turn {index}: sending")
                started_at = time.time()
                result = session.run_turn(prompt, history_seed=self._seed(variant))
                finished_at = time.time()
                if result.thread_id:
                    conn = session.connection
                    self._set_variant(variant.name, thread_id=result.thread_id,
                                      model=result.model or session.model,
                                      app_server_pid=conn.pid if conn is not None else None)
                record = self._record(index, prompt, result, started_at, finished_at)
                if not result.ok:
                    if self._stop.is_set():
                        raise Cancelled
                    failure = result.failure
                    text = result.error or "the turn failed"
                    if retryable(failure):
                        self.run.save_turn(variant.name, record)
                        self.run.log(variant.name, f"turn {index}: {text}")
                        return "retry", text
                    self.run.save_turn(variant.name, record)
                    self._set_variant(variant.name, status="failed", error=text, in_flight=None)
                    self.run.log(variant.name, f"turn {index} failed: {text}")
                    return "failed", text
            self.run.save_turn(variant.name, record)
            tokens = {k: int(tokens.get(k, 0)) + int(v) for k, v in record["usage"].items()}
            self._set_variant(variant.name, in_flight=None, tokens=tokens,
                              turns_done=sum(r.get("status") in DONE
                                             for r in self.run.turns(variant.name)),
                              elapsed=round(sum(float(r.get("elapsed") or 0)
                                                for r in self.run.turns(variant.name)), 3))
            self.run.log(variant.name, f"turn {index}: {record['status']} in "
                                       f"{record['elapsed']:.1f} s, {tokens.get('total', 0)} "
                                       f"tokens so far")
        self._set_variant(variant.name, status="completed")
        return "completed", None

    def _recover(self, variant: Variant, session: CodexSession, index: int,
                 prompt: str) -> dict[str, Any] | None:
        """The record of a turn that was in flight when the runner died, from codex's own
        history of the thread — or ``None`` when codex never got it (then it is sent)."""
        try:
            session.ensure_started(self._seed(variant))
            if session.thread_origin != "resumed":
                return None
            history = _thread_turns(session.read_thread())
        except (WireError, ValueError) as exc:
            self.run.log(variant.name, f"turn {index}: cannot read the thread back ({exc}); "
                                       "sending it")
            return None
        saved = sum(r.get("status") in DONE for r in self.run.turns(variant.name))
        if len(history) <= saved or history[saved]["user"].strip() != prompt.strip():
            return None
        found = history[saved]
        status = {"completed": "completed"}.get(str(found["status"]), "interrupted")
        self.run.log(variant.name, f"turn {index}: codex already had it ({found['status']}); "
                                   "recovered from the thread instead of sending it again")
        return {"index": index, "user_text": prompt, "status": status,
                "final_text": found["text"], "tool_calls": [], "usage": usage_of(TurnResult()),
                "elapsed": 0.0, "turn_id": found["id"], "thread_id": session.thread_id,
                "model": session.model, "error": None if status == "completed" else
                "the runner stopped during this turn; recovered from codex's thread history",
                "recovered": True, "started_at": None, "finished_at": time.time()}

    def _record(self, index: int, prompt: str, result: TurnResult, started_at: float,
                finished_at: float) -> dict[str, Any]:
        status = "completed" if result.ok else ("interrupted" if result.interrupted else
                                                "timed_out" if result.timed_out else "failed")
        return {"index": index, "user_text": prompt, "status": status,
                "final_text": result.final_text, "tool_calls": tool_calls_of(result),
                "usage": usage_of(result), "elapsed": round(finished_at - started_at, 3),
                "turn_id": result.turn_id, "thread_id": result.thread_id,
                "model": result.model, "error": result.error,
                "failure": result.failure.kind.value if result.failure else None,
                "recovered": False, "started_at": started_at, "finished_at": finished_at}

    def _event(self, variant: str, event: CodexEvent) -> None:
        if event.kind == "tool_started" and event.tool is not None:
            self.run.log(f"{variant}:tool", f"{event.tool.name} "
                                            f"{str(event.tool.arguments)[:300]}")
        elif event.kind == "tool_output" and event.text.strip():
            self.run.log(f"{variant}:stdout", event.text.rstrip()[-2000:])
        elif event.kind in ("retrying", "notice", "config_warning"):
            self.run.log(variant, event.text)
