"""Starting, watching, cancelling and resuming runs — the operations the CLI, the web controller
and the MCP server share.

A run is executed by a **runner process** (``python -m hermes_codex_runtime.replay.runner``)
in a session of its own, so it outlives the command that started it, and cancelling it can kill
exactly its process group — plus the descendants that left it (codex starts MCP servers and
commands that may ``setsid``), found by walking its process tree before anything is signalled.
The runner's identity (PID + kernel start time) is in the state; a run whose runner is gone is
marked ``interrupted`` by :meth:`~.store.RunStore.reconcile`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from hermes_codex_runtime.pool import Placement
from hermes_codex_runtime.replay.plan import Plan, Variant, parse_turns, placement_json
from hermes_codex_runtime.replay.records import DONE, rerun_hint
from hermes_codex_runtime.replay.sources import SessionSource, SourceError, Transcript
from hermes_codex_runtime.replay.store import (
    ACTIVE,
    TERMINAL,
    Run,
    RunStore,
    StoreError,
    alive,
    identity,
)
from hermes_codex_runtime.replay.workspace import WorkspaceError, resolve_baseline
from hermes_codex_runtime.wire.proctree import reap, snapshot_descendants

MAX_PARALLEL = 8
FORMATS = ("json", "html")
MIME = {"json": "application/json", "html": "text/html"}
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


class ReplayError(ValueError):
    """Bad input for a replay operation, with what to do about it."""


@dataclass(slots=True)
class ReplayContext:
    """What the host knows that a replay needs: its recorded sessions, where runs and web
    controllers live, and how codex is configured. The CLI fills it in from the host adapter
    (:mod:`hermes_codex_runtime.hermes.replay.context`); nothing here reads a host."""

    sources: SessionSource
    runs_dir: Path
    controllers_dir: Path
    codex_bin: str | None = None
    codex_home: str | None = None
    model_provider: str | None = None
    default_model: str | None = None
    turn_timeout: float = 600.0
    registry_path: str | None = None
    #: Where the host's sessions run (its app-server placement, with the endpoints' auth);
    #: ``None``: a shared local app-server.
    app_server: Placement | None = None
    prices: dict[str, Any] = field(default_factory=dict)
    controller_port: int = 43118
    controller_idle_timeout: float = 3600.0
    #: The web controller's session id, when the host names one (else a fresh one).
    controller_id: str | None = None

    @property
    def store(self) -> RunStore:
        """The runs."""
        return RunStore(self.runs_dir)


@dataclass(slots=True)
class RunRequest:
    """What ``replay run`` was asked (validated by :func:`prepare`)."""

    source: str
    models: list[str] = field(default_factory=list)
    effort: str | None = None
    turns: str | None = None
    mode: str = "turns"
    baseline: str = "HEAD"
    repo: str | None = None
    parallel: int = 2
    budget_tokens: int | None = None
    network: bool = False
    judge: str | None = None


def reconcile(context: ReplayContext) -> list[str]:
    """Mark runs whose runner died ``interrupted`` and reap the codex app-servers those runners
    left (the process registry); returns the interrupted run ids."""
    marked = context.store.reconcile()
    if context.registry_path:
        from hermes_codex_runtime.wire.registry import ProcessRegistry

        with contextlib.suppress(Exception):
            ProcessRegistry(context.registry_path).reap_orphans()
    return marked


def _slug(text: str) -> str:
    out = "".join(c if c.isalnum() or c in "._-" else "-" for c in text)
    return out.strip("-.")[:40] or "model"


def prepare(context: ReplayContext, request: RunRequest) -> tuple[Transcript, Plan]:
    """Validate a request and make its plan; nothing is written. Raises :class:`ReplayError`."""
    if request.mode not in ("turns", "single-prompt"):
        raise ReplayError("--mode is turns or single-prompt")
    if request.effort is not None and request.effort not in EFFORTS:
        raise ReplayError(f"--effort is one of {', '.join(EFFORTS)}")
    if not isinstance(request.parallel, int) or not 1 <= request.parallel <= MAX_PARALLEL:
        raise ReplayError(f"--parallel is 1-{MAX_PARALLEL}")
    if request.budget_tokens is not None and request.budget_tokens < 1:
        raise ReplayError("--budget-tokens must be a positive number of tokens")
    if request.judge is not None and (not isinstance(request.judge, str)
                                      or not request.judge.strip()):
        raise ReplayError("--judge names the codex model of the blind review")
    models = [m.strip() for m in request.models if m and m.strip()]
    if len(set(models)) != len(models):
        raise ReplayError("the same --model is named twice")
    if len(models) > 8:
        raise ReplayError("at most 8 variants per run")
    try:
        transcript = context.sources.open(request.source)
        turns = parse_turns(request.turns, len(transcript.turns))
        baseline = resolve_baseline(request.baseline, transcript.cwd, request.repo)
    except (SourceError, WorkspaceError, ValueError) as exc:
        raise ReplayError(str(exc)) from exc
    variants = [Variant(f"v{i}-{_slug(m)}", m, request.effort)
                for i, m in enumerate(models, 1)] or [
        Variant(f"v1-{_slug(context.default_model or 'default')}", context.default_model,
                request.effort)]
    plan = Plan(turns=turns, mode=request.mode, baseline=baseline, variants=variants,
                parallel=request.parallel, budget_tokens=request.budget_tokens,
                network=request.network, judge=request.judge, codex_bin=context.codex_bin,
                codex_home=context.codex_home, model_provider=context.model_provider,
                turn_timeout=context.turn_timeout, registry_path=context.registry_path,
                app_server=placement_json(context.app_server))
    return transcript, plan


def describe_plan(transcript: Transcript, plan: Plan, run_dir: Path | None = None,
                  runs_dir: Path | None = None) -> str:
    """The plan as a person reads it before saying yes."""
    lines = [f"source:    {transcript.kind} {transcript.ref}"
             + (f" — {transcript.title}" if transcript.title else ""),
             f"turns:     {len(plan.prompts(transcript))} prompt(s) from user turns "
             f"{_span(plan.turns)} of {len(transcript.turns)} ({plan.mode})",
             f"baseline:  {plan.baseline.describe()}",
             "variants:"]
    lines += [f"  {v.describe()}" for v in plan.variants]
    lines.append(f"parallel:  {plan.parallel}; network {'on' if plan.network else 'off'}; "
                 f"approvals never asked; sandbox workspace-write"
                 + (f"; budget {plan.budget_tokens} tokens per variant"
                    if plan.budget_tokens else ""))
    lines.append(f"codex:     {plan.describe_placement()} (where your sessions run)")
    where = run_dir or (runs_dir or Path("<runs directory>")) / "<run-id>"
    if plan.judge:
        lines.append(f"review:    a blind review of each variant against the original by "
                     f"{plan.judge}")
    lines.append(f"working copies: {where}/workspaces/<variant> (your checkout is not touched)")
    return "\n".join(lines)


def _span(turns: list[int]) -> str:
    return f"{turns[0]}-{turns[-1]}" if len(turns) > 1 and turns == list(
        range(turns[0], turns[-1] + 1)) else ", ".join(map(str, turns))


def create_run(context: ReplayContext, transcript: Transcript, plan: Plan, *,
               controller: str | None = None) -> Run:
    """Write the run directory (state ``pending``, the source snapshot)."""
    plan_data = plan.to_json()
    if context.prices:
        plan_data["prices"] = context.prices
    run = context.store.new({"status": "pending", "plan": plan_data, "controller": controller,
                             "source": {"kind": transcript.kind, "ref": transcript.ref,
                                        "title": transcript.title,
                                        "session_id": transcript.session_id},
                             "variants": {v.name: {"status": "pending", "model": v.model}
                                          for v in plan.variants},
                             "runner": None})
    run.save_json("source.json", transcript.to_json())
    run.log("controller", "run approved:\n" + describe_plan(transcript, plan, run.dir))
    return run


def spawn_runner(run: Run) -> int:
    """Start the runner process for ``run`` (its own session); returns its PID."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"}
    with open(run.log_path, "ab") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hermes_codex_runtime.replay.runner", str(run.dir)],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file, env=env,
            start_new_session=True, close_fds=True)
    run.update(lambda s: s.update(runner=identity(proc.pid), runner_started_at=time.time()))
    run.log("controller", f"runner started (pid {proc.pid})")
    _collect_exit(proc)
    return proc.pid


def _collect_exit(proc: subprocess.Popen[bytes]) -> None:
    """The runner outlives this command; a thread collects its exit status if it ends first,
    so it never lingers as a zombie of a long-lived controller."""
    import threading

    threading.Thread(target=proc.wait, name=f"replay-runner-{proc.pid}", daemon=True).start()


def _open(context: ReplayContext, run_id: Any) -> tuple[Run, dict[str, Any]]:
    """A run and its state, or a :class:`ReplayError` saying why not."""
    try:
        run = context.store.run(run_id)
        return run, run.state()
    except StoreError as exc:
        raise ReplayError(str(exc)) from exc


def cancel_run(context: ReplayContext, run_id: Any, *, controller: str | None = None,
               reason: str = "user_requested") -> dict[str, Any]:
    """Cancel a run: record ``cancelled`` (terminal), then kill its runner's process group and
    every descendant. Idempotent; a run owned by another controller is refused."""
    run, state = _open(context, run_id)
    if controller is not None and state.get("controller") != controller:
        raise ReplayError(f"run {run.id} belongs to another controller")
    if state.get("status") in TERMINAL:
        return {"run_id": run.id, "status": state["status"],
                "idempotent": state["status"] == "cancelled"}
    if not run.finish("cancelled", cancellation_reason=reason, error="Cancelled by user."):
        return {"run_id": run.id, "status": run.state().get("status"), "idempotent": True}
    killed = stop_runner(state.get("runner"))
    run.log("controller", f"cancelled ({reason}); stopped {len(killed)} process(es)")
    return {"run_id": run.id, "status": "cancelled", "idempotent": False, "killed": killed}


def stop_runner(runner: Any) -> list[int]:
    """Kill a runner (named by its :func:`~.store.identity`), its process group and all its
    descendants; returns the PIDs signalled. A recycled PID is never signalled."""
    if not alive(runner):
        return []
    pid = int(runner["pid"])
    try:
        root = psutil.Process(pid)
    except psutil.Error:
        return []
    tree = [root, *snapshot_descendants(pid)]
    with contextlib.suppress(OSError):
        if os.getpgid(pid) == pid:
            group = [p for p in psutil.process_iter() if _in_group(p, pid)]
            tree += [p for p in group if p.pid not in {q.pid for q in tree}]
    pids = [p.pid for p in tree]
    reap(tree, timeout=3.0)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    return pids


def _in_group(proc: psutil.Process, pgid: int) -> bool:
    try:
        return os.getpgid(proc.pid) == pgid
    except OSError:
        return False


def interrupted_turns(run: Run, state: dict[str, Any]) -> dict[str, list[int]]:
    """Per variant, the turns that came back ``interrupted`` (saved so, or in flight when the
    runner stopped and never saved)."""
    found: dict[str, list[int]] = {}
    for name, vstate in (state.get("variants") or {}).items():
        try:
            records = {int(r["index"]): r for r in run.turns(name)}
        except (StoreError, KeyError, TypeError, ValueError):
            continue
        turns = {i for i, r in records.items() if r.get("status") == "interrupted"}
        flying = vstate.get("in_flight")
        if isinstance(flying, int) and (records.get(flying) or {}).get("status") not in DONE:
            turns.add(flying)
        if turns:
            found[name] = sorted(turns)
    return found


def resume_run(context: ReplayContext, run_id: Any, *,
               retry_interrupted: bool = False) -> Run:
    """Continue an ``interrupted`` (or ``failed``) run from its last saved turns. With
    ``retry_interrupted`` every turn that came back interrupted is sent again (on a fork of its
    thread at the turn before it) — in a ``completed`` run too."""
    reconcile(context)
    run, state = _open(context, run_id)
    status = state.get("status")
    reruns = interrupted_turns(run, state) if retry_interrupted else {}
    if status == "cancelled":
        raise ReplayError(f"run {run.id} is cancelled; start a new run instead")
    if status == "completed" and not reruns:
        interrupted = interrupted_turns(run, state)
        raise ReplayError(f"run {run.id} is completed; start a new run instead" + (
            f" (its interrupted turns rerun with `{rerun_hint(run.id)}`)" if interrupted
            and not retry_interrupted else ""))
    if status in ACTIVE and alive(state.get("runner")):
        raise ReplayError(f"run {run.id} is still running (pid {state['runner']['pid']})")

    def reopen(s: dict[str, Any]) -> None:
        s.update(status="pending", resumed_at=time.time(), runner=None, error=None,
                 resumes=int(s.get("resumes") or 0) + 1)
        for name, variant in (s.get("variants") or {}).items():
            if variant.get("status") in ("failed", "interrupted"):
                variant.update(status="pending", error=None)
            if name in reruns:
                variant.update(status="pending", error=None, in_flight=None,
                               rerun=sorted({*(variant.get("rerun") or []), *reruns[name]}))
    run.update(reopen, reopen=("failed", "completed") if reruns else ("failed",))
    run.log("controller", f"resuming (was {status})" + (
        "; rerunning " + "; ".join(f"{name} turn(s) {', '.join(map(str, turns))}"
                                   for name, turns in reruns.items()) if reruns else ""))
    return run


def run_view(context: ReplayContext, run_id: Any) -> dict[str, Any]:
    """A run's state for display: status, per-variant progress and a bounded log tail."""
    reconcile(context)
    run, state = _open(context, run_id)
    plan = state.get("plan") or {}
    prompts = 1 if plan.get("mode") == "single-prompt" else len(plan.get("turns") or [])
    variants = []
    interrupted = interrupted_turns(run, state) if state.get("status") not in ACTIVE else {}
    for name, vstate in (state.get("variants") or {}).items():
        variants.append({"name": name, "status": vstate.get("status"),
                         "model": vstate.get("model"), "turns_done": vstate.get("turns_done", 0),
                         "turns_total": prompts, "tokens": (vstate.get("tokens") or {}).get(
                             "total", 0), "elapsed": vstate.get("elapsed", 0.0),
                         "attempt": vstate.get("attempt", 0), "error": vstate.get("error"),
                         "in_flight": vstate.get("in_flight"),
                         "endpoint": vstate.get("endpoint"),
                         "interrupted_turns": interrupted.get(name, [])})
    report = run.dir / "report.html"
    rerun = rerun_hint(run.id) if interrupted and state.get("status") != "cancelled" else None
    return {"run_id": run.id, "status": state.get("status"), "source": state.get("source"),
            "created_at": state.get("created_at"), "error": state.get("error"),
            "controller": state.get("controller"), "variants": variants,
            "rerun_interrupted": rerun,
            "report_html": str(report) if report.is_file() else None,
            "run_dir": str(run.dir), "log_tail": run.log_tail()}


def get_report(context: ReplayContext, run_id: Any, fmt: Any = None) -> dict[str, Any]:
    """The report: parsed (no ``fmt``), or exactly one artifact's content (``json``/``html``).
    A report that is missing is rebuilt from the saved records; a file that leads outside the
    run directory is refused."""
    if fmt is not None and (not isinstance(fmt, str) or fmt not in FORMATS):
        raise ReplayError("Report format must be json or html")
    try:
        run = context.store.run(run_id)
        if not (run.dir / "report.json").exists() and not (run.dir / "report.json").is_symlink():
            from hermes_codex_runtime.replay.report import write_report

            if run.state().get("status") in ACTIVE:
                raise ReplayError(f"run {run.id} has no report yet (it is still running)")
            write_report(run)
        if fmt is None:
            return {"run_id": run.id, "report": run.load_json("report.json")}
        path = run.artifact(f"report.{fmt}")
        content = path.read_bytes().decode("utf-8")
    except StoreError as exc:
        raise ReplayError(str(exc)) from exc
    return {"artifact_content": content, "artifact_format": fmt,
            "artifact_mime_type": MIME[fmt],
            "artifact_file_name": f"codex-replay-{run.id}-report.{fmt}"}
