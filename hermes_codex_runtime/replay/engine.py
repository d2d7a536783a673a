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

Reruns (``resume --retry-interrupted``): a turn that came back ``interrupted`` is sent again on
a fork of its thread through the turn before it (``thread/fork``), so it sees exactly the
history it saw the first time. When no later turn was replayed yet the fork becomes the
variant's thread and the run continues on it; otherwise the turn is rerun alone and the variant
keeps its thread.

Variants run where the host's sessions run (the plan's placement: a shared local app-server,
a process each, or the host's remote endpoints with their auth); a thread stored on an endpoint
is resumed there.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hermes_codex_runtime.events import CodexEvent
from hermes_codex_runtime.pool import ServerPool
from hermes_codex_runtime.replay.plan import Plan, Variant
from hermes_codex_runtime.replay.records import (
    DONE,
    recovered_record,
    retryable,
    thread_turns,
    turn_record,
)
from hermes_codex_runtime.replay.sources import Transcript
from hermes_codex_runtime.replay.store import Run, RunClosed, StoreError
from hermes_codex_runtime.replay.workspace import (
    WorkspaceError,
    archive_copy,
    create_copy,
)
from hermes_codex_runtime.session import CodexSession
from hermes_codex_runtime.values import SessionSettings
from hermes_codex_runtime.wire import WireError

__all__ = ["INSTRUCTIONS", "RETRY_LIMIT", "Cancelled", "Runner", "retryable"]

log = logging.getLogger(__name__)

RETRY_LIMIT = 3
INSTRUCTIONS = (
    "You are replaying a recorded session: each user message below is one the user sent in the "
    "original session, in order. Work in the current directory as you would have then. Nobody "
    "is watching: do not ask for approval or clarification; do the task as well as you can.")


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
                "started_at") or time.time()), reopen=("failed",))
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
            self.run.log("controller", self._where())
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

    def _where(self) -> str:
        """Where the variants ran, in one line of the log."""
        variants = list((self.run.state().get("variants") or {}).values())
        pids = {v.get("app_server_pid") for v in variants if v.get("app_server_pid")}
        endpoints = sorted({str(v["endpoint"]) for v in variants if v.get("endpoint")})
        where = ([f"{len(pids)} codex app-server process(es)"] if pids else []) + (
            [f"{len(endpoints)} remote codex app-server(s) ({', '.join(endpoints)})"]
            if endpoints else [])
        return f"{' and '.join(where) or 'no codex app-server'} for " \
               f"{len(self.plan.variants)} variant(s)"

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
            self._set_variant(variant.name, attempt=attempt, thread_id=None, endpoint=None,
                              turns_done=0, in_flight=None, rerun=[], tokens=None, error=None,
                              status="running")

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
            app_server=plan.placement(), client_version="replay")

    def _session(self, variant: Variant, workdir: Path, *, thread_id: str | None = None,
                 endpoint: str | None = None,
                 fork_from: tuple[str, str | None] | None = None) -> CodexSession:
        return CodexSession(self._settings(workdir, variant), developer_instructions=INSTRUCTIONS,
                            stored_thread_id=thread_id, stored_endpoint=endpoint,
                            fork_from=fork_from, pool=self.pool,
                            on_event=lambda event: self._event(variant.name, event))

    def _records(self, name: str) -> dict[int, dict[str, Any]]:
        return {int(r["index"]): r for r in self.run.turns(name)}

    def _seed(self, variant: Variant, index: int) -> Callable[[], str | None]:
        """A fresh thread (its rollout is gone) gets the turns replayed before ``index`` as
        context."""
        order = [i for i, _ in self.prompts]
        before = set(order[:order.index(index)])

        def seed() -> str | None:
            records = [r for r in self.run.turns(variant.name) if int(r["index"]) in before]
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
        session = self._session(variant, workdir, thread_id=state.get("thread_id"),
                                endpoint=state.get("endpoint"))
        with self._lock:
            self._sessions[variant.name] = session
        self._set_variant(variant.name, status="running", attempt=attempt,
                          workspace=str(workdir.relative_to(self.run.dir)), error=None)
        try:
            return self._turns(variant, workdir)
        finally:
            with self._lock:
                current = self._sessions.pop(variant.name, None)
            session.close()
            if current is not None:
                current.close()

    def _turns(self, variant: Variant, workdir: Path) -> tuple[str, str | None]:
        rerun = {int(i) for i in self._vstate(variant.name).get("rerun") or []}
        done = {i for i, r in self._records(variant.name).items()
                if r.get("status") in DONE and i not in rerun}
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
            alone = False
            if index in rerun:
                session, alone = self._rerun_session(variant, workdir, index, done)
            else:
                with self._lock:
                    session = self._sessions[variant.name]
            try:
                record, outcome = self._turn(variant, session, index, prompt,
                                             rerun=index in rerun, alone=alone)
            finally:
                if alone:
                    with self._lock:
                        self._sessions.pop(f"{variant.name}/rerun", None)
                    session.close()
            if outcome is not None:
                return outcome
            done.add(index)
            self.run.save_turn(variant.name, record)
            tokens = {k: int(tokens.get(k, 0)) + int(v) for k, v in record["usage"].items()}
            records = self.run.turns(variant.name)
            rerun.discard(index)
            self._set_variant(variant.name, in_flight=None, tokens=tokens, rerun=sorted(rerun),
                              turns_done=sum(r.get("status") in DONE for r in records),
                              elapsed=round(sum(float(r.get("elapsed") or 0)
                                                for r in records), 3))
            self.run.log(variant.name, f"turn {index}: {record['status']} in "
                                       f"{record['elapsed']:.1f} s, {tokens.get('total', 0)} "
                                       f"tokens so far")
        self._set_variant(variant.name, status="completed")
        return "completed", None

    def _turn(self, variant: Variant, session: CodexSession, index: int, prompt: str, *,
              rerun: bool, alone: bool) -> tuple[dict[str, Any], tuple[str, str | None] | None]:
        """Send (or recover) one turn: its record, and the variant's outcome when the turn
        ends the attempt (``("failed"|"retry", text)``)."""
        state = self._vstate(variant.name)
        if not rerun and state.get("in_flight") == index and state.get("thread_id"):
            recovered = self._recover(variant, session, index, prompt)
            if recovered is not None:
                return recovered, None
        self._set_variant(variant.name, in_flight=index)
        self.run.log(variant.name, f"turn {index}: " + ("sending it again" if rerun else
                                                         "sending"))
        started_at = time.time()
        result = session.run_turn(prompt, history_seed=self._seed(variant, index))
        finished_at = time.time()
        if result.thread_id and not alone:
            conn = session.connection
            self._set_variant(variant.name, thread_id=result.thread_id,
                              model=result.model or session.model, endpoint=result.endpoint,
                              app_server_pid=conn.pid if conn is not None else None)
        record = turn_record(index, prompt, result, started_at, finished_at)
        if rerun:
            earlier = self._records(variant.name).get(index) or {}
            record["rerun"] = {"alone": alone, "thread_origin": result.thread_origin,
                               "was": {k: earlier.get(k) for k in (
                                   "status", "error", "final_text", "thread_id", "turn_id")}
                               if earlier else {"status": "interrupted", "error": "in flight "
                                                "when the runner stopped"}}
        if result.ok:
            return record, None
        if self._stop.is_set():
            raise Cancelled
        text = result.error or "the turn failed"
        self.run.save_turn(variant.name, record)
        if retryable(result.failure):
            self.run.log(variant.name, f"turn {index}: {text}")
            return record, ("retry", text)
        self._set_variant(variant.name, status="failed", error=text, in_flight=None)
        self.run.log(variant.name, f"turn {index} failed: {text}")
        return record, ("failed", text)

    def _rerun_session(self, variant: Variant, workdir: Path, index: int,
                       done: set[int]) -> tuple[CodexSession, bool]:
        """The session a turn is rerun on — a fork of its thread through the turn before it —
        and whether it runs alone (later turns were replayed already: the variant keeps its
        thread) or becomes the variant's session."""
        order = [i for i, _ in self.prompts]
        position = order.index(index)
        previous = self._records(variant.name).get(order[position - 1]) if position else None
        alone = any(i in done for i in order[position + 1:])
        fork = (str(previous["thread_id"]), str(previous["turn_id"])) if previous and \
            previous.get("thread_id") and previous.get("turn_id") else None
        session = self._session(variant, workdir, fork_from=fork,
                                endpoint=self._vstate(variant.name).get("endpoint"))
        with self._lock:
            replaced = None if alone else self._sessions.get(variant.name)
            self._sessions[f"{variant.name}/rerun" if alone else variant.name] = session
        if replaced is not None:
            replaced.close()
        self.run.log(variant.name, f"turn {index}: rerun " + ("alone" if alone else "and the "
                     "turns after it") + (f" on a fork of thread {fork[0]} through turn "
                                          f"{order[position - 1]}" if fork else
                                          " on a fresh thread"))
        return session, alone

    def _recover(self, variant: Variant, session: CodexSession, index: int,
                 prompt: str) -> dict[str, Any] | None:
        """The record of a turn that was in flight when the runner died, from codex's own
        history of the thread — or ``None`` when codex never got it (then it is sent)."""
        try:
            session.ensure_started(self._seed(variant, index))
            if session.thread_origin != "resumed":
                return None
            history = thread_turns(session.read_thread())
        except (WireError, ValueError) as exc:
            self.run.log(variant.name, f"turn {index}: cannot read the thread back ({exc}); "
                                       "sending it")
            return None
        saved = sum(r.get("status") in DONE for r in self.run.turns(variant.name))
        if len(history) <= saved or history[saved]["user"].strip() != prompt.strip():
            return None
        found = history[saved]
        self.run.log(variant.name, f"turn {index}: codex already had it ({found['status']}); "
                                   "recovered from the thread instead of sending it again")
        return recovered_record(index, prompt, found, thread_id=session.thread_id,
                                model=session.model)

    def _event(self, variant: str, event: CodexEvent) -> None:
        if event.kind == "tool_started":
            self.run.log(f"{variant}:tool", f"{event.tool.name} "
                                            f"{str(event.tool.arguments)[:300]}")
        elif event.kind == "tool_output" and event.text.strip():
            self.run.log(f"{variant}:stdout", event.text.rstrip()[-2000:])
        elif event.kind in ("retrying", "notice", "config_warning"):
            self.run.log(variant, event.text)
