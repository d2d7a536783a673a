"""Replay benchmarks: what the replay runner costs per turn, and what one shared app-server buys
when variants run in parallel.

On the real codex binary and the loopback mock provider (its time to first byte
``BENCH_REPLAY_DELAY_MS``, default 250 ms, like a model would take), with a recorded session of
``BENCH_REPLAY_TURNS`` (default 6) text turns in a ``state.db`` written here:

* ``overhead`` — the same prompts as bare warm turns through ``CodexSession`` (the floor: one
  thread, turns back to back), then as a one-variant replay through the real runner process.
  Reported: the bare turn p50, the replayed turn p50 (the runner's own clock around
  ``run_turn``), the gap between one turn's end and the next turn's start (state writes,
  records, logging), and the whole run's wall time from ``create_run`` to ``completed``
  (runner start-up, app-server start, report included).
* ``parallel`` — ``BENCH_REPLAY_VARIANTS`` (default 4) variants of the same session, all at once
  (``--parallel`` = variants: threads of one app-server) against one at a time; wall times,
  their ratio, and the codex processes each used.
* ``remote`` — the one-variant replay again, placed (as the host's sessions would be) on a real
  ``codex app-server --listen ws://127.0.0.1:PORT`` with codex's capability-token auth: the
  replayed turn p50, its ratio to the local replayed turn, and the whole run's wall time.

Each figure is the median of ``BENCH_REPLAY_REPS`` (default 3) repetitions. Alone:
``.venv/bin/python bench/replay.py [--out FILE]``.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hermes_codex_runtime.hermes.replay.sessions import HermesSessions  # noqa: E402
from hermes_codex_runtime.offline import provider as mp  # noqa: E402
from hermes_codex_runtime.offline.codex_home import prepare_codex_home  # noqa: E402
from hermes_codex_runtime.pool import EndpointSpec, Placement  # noqa: E402
from hermes_codex_runtime.replay.control import (  # noqa: E402
    ReplayContext,
    RunRequest,
    create_run,
    prepare,
    run_view,
    spawn_runner,
)
from hermes_codex_runtime.session import CodexSession  # noqa: E402
from hermes_codex_runtime.testing.remote_server import RemoteAppServer  # noqa: E402
from hermes_codex_runtime.values import SessionSettings  # noqa: E402

RUN_TIMEOUT = 600.0


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def write_session(home: Path, turns: int) -> str:
    """A recorded session of ``turns`` text turns in a fresh ``state.db``."""
    home.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(home / "state.db") as db:
        db.executescript(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY, model TEXT, parent_session_id TEXT, "
            "started_at REAL, end_reason TEXT, title TEXT, cwd TEXT, model_config TEXT);"
            "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, "
            "role TEXT, content TEXT, tool_calls TEXT, timestamp REAL, "
            "active INTEGER NOT NULL DEFAULT 1, compacted INTEGER NOT NULL DEFAULT 0);")
        db.execute("INSERT INTO sessions VALUES ('bench', 'mock-model', NULL, ?, NULL, "
                   "'bench session', NULL, '{}')", (time.time(),))
        for index in range(1, turns + 1):
            db.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES "
                       "('bench', 'user', ?, ?)", (f"question {index}: how are you?", index))
            db.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES "
                       "('bench', 'assistant', ?, ?)", (f"answer {index}", index + 0.5))
    return "bench"


def reply(delay: float) -> Any:
    def answer(body: dict[str, Any]) -> mp.Reply:
        return mp.text(f"[{body.get('model')}] fine, thanks", deltas=4, delay=delay)
    return answer


def wait_done(context: ReplayContext, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + RUN_TIMEOUT
    while True:
        view = run_view(context, run_id)
        if view["status"] not in ("pending", "running"):
            return view
        if time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} did not finish in {RUN_TIMEOUT:g} s")
        time.sleep(0.05)


def replay_once(context: ReplayContext, models: list[str], parallel: int) -> dict[str, Any]:
    transcript, plan = prepare(context, RunRequest("bench", models=models, baseline="empty",
                                                   parallel=parallel))
    started = time.monotonic()
    run = create_run(context, transcript, plan)
    spawn_runner(run)
    view = wait_done(context, run.id)
    wall = time.monotonic() - started
    if view["status"] != "completed":
        raise RuntimeError(f"the bench replay ended {view['status']}: {view.get('error')}")
    state = run.state()
    pids = {v.get("app_server_pid") for v in state["variants"].values()
            if v.get("app_server_pid")}
    records = {v.name: run.turns(v.name) for v in plan.variants}
    return {"wall_s": wall, "records": records, "codex_processes": len(pids)}


def bare_turns(settings: SessionSettings, prompts: list[str]) -> list[float]:
    session = CodexSession(settings)
    try:
        session.run_turn("warm up")
        out = []
        for text in prompts:
            began = time.perf_counter()
            result = session.run_turn(text)
            out.append((time.perf_counter() - began) * 1000)
            if not result.ok:
                raise RuntimeError(f"bare turn failed: {result.error}")
        return out
    finally:
        session.close()


def run_replay_bench(codex_bin: str) -> dict[str, Any]:
    """Both scenarios; the figures as data."""
    turns = _env_int("BENCH_REPLAY_TURNS", 6)
    variants = _env_int("BENCH_REPLAY_VARIANTS", 4)
    reps = _env_int("BENCH_REPLAY_REPS", 3)
    delay = _env_int("BENCH_REPLAY_DELAY_MS", 250) / 1000
    work = Path(tempfile.mkdtemp(prefix="hcr-bench-replay-"))
    provider = mp.MockResponsesProvider(default=reply(delay)).start()
    remote: RemoteAppServer | None = None
    try:
        extra = [f"mock-model-{i}" for i in range(2, variants + 1)]
        codex_home = prepare_codex_home(work / "codex-home", provider.base_url,
                                        codex_bin=codex_bin, extra_models=extra)
        home = work / "hermes-home"
        write_session(home, turns)
        context = ReplayContext(sources=HermesSessions(home),
                                runs_dir=home / "codex-runtime" / "replays",
                                controllers_dir=home / "codex-runtime" / "controllers",
                                codex_bin=codex_bin, codex_home=str(codex_home),
                                turn_timeout=120.0)
        remote = RemoteAppServer(work / "remote", provider.base_url, codex_bin=codex_bin)
        on_remote = dataclasses.replace(context, app_server=Placement("endpoints", endpoints=(
            EndpointSpec(remote.url, token_file=str(remote.token_file)),)))
        prompts = [f"question {i}: how are you?" for i in range(1, turns + 1)]
        bare: list[float] = []
        replayed: list[float] = []
        gaps: list[float] = []
        walls: list[float] = []
        par: list[float] = []
        seq: list[float] = []
        processes: dict[str, list[int]] = {"parallel": [], "sequential": []}
        remote_turns: list[float] = []
        remote_walls: list[float] = []
        models = ["mock-model", *extra]
        for _ in range(reps):
            bare += bare_turns(SessionSettings(codex_bin=codex_bin, codex_home=str(codex_home),
                                               cwd=str(work), model="mock-model",
                                               approval_policy="never"), prompts)
            one = replay_once(context, ["mock-model"], 1)
            walls.append(one["wall_s"])
            records = one["records"]["v1-mock-model"]
            replayed += [float(r["elapsed"]) * 1000 for r in records]
            gaps += [(b["started_at"] - a["finished_at"]) * 1000
                     for a, b in itertools.pairwise(records)]
            wide = replay_once(context, models, variants)
            narrow = replay_once(context, models, 1)
            par.append(wide["wall_s"])
            seq.append(narrow["wall_s"])
            processes["parallel"].append(wide["codex_processes"])
            processes["sequential"].append(narrow["codex_processes"])
            far = replay_once(on_remote, ["mock-model"], 1)
            remote_walls.append(far["wall_s"])
            remote_turns += [float(r["elapsed"]) * 1000 for r in far["records"]["v1-mock-model"]]
            print(f"  replay rep: bare {statistics.median(bare):.0f} ms/turn, replayed "
                  f"{statistics.median(replayed):.0f} ms/turn, {variants} variants "
                  f"{wide['wall_s']:.1f} s parallel vs {narrow['wall_s']:.1f} s sequential",
                  flush=True)
        bare_p50, replay_p50 = statistics.median(bare), statistics.median(replayed)
        return {
            "turns": turns, "variants": variants, "reps": reps, "model_delay_ms": delay * 1000,
            "overhead": {"bare_turn_ms_p50": round(bare_p50, 1),
                         "replayed_turn_ms_p50": round(replay_p50, 1),
                         "turn_ratio": round(replay_p50 / bare_p50, 3),
                         "between_turns_ms_p50": round(statistics.median(gaps), 1),
                         "run_wall_s_p50": round(statistics.median(walls), 2)},
            "parallel": {"parallel_wall_s_p50": round(statistics.median(par), 2),
                         "sequential_wall_s_p50": round(statistics.median(seq), 2),
                         "speedup": round(statistics.median(seq) / statistics.median(par), 2),
                         "codex_processes": {k: max(v) for k, v in processes.items()}},
            "remote": {"replayed_turn_ms_p50": round(statistics.median(remote_turns), 1),
                       "turn_ratio_vs_local": round(statistics.median(remote_turns)
                                                    / replay_p50, 3),
                       "run_wall_s_p50": round(statistics.median(remote_walls), 2)},
        }
    finally:
        if remote is not None:
            remote.stop()
        provider.stop()
        import shutil

        shutil.rmtree(work, ignore_errors=True)


def render_lines(result: dict[str, Any] | None) -> list[str]:
    """The replay figures as Markdown lines (nothing for a run without them)."""
    if not result:
        return []
    over, par = result["overhead"], result["parallel"]
    return [
        f"- replay runner ({result['turns']} turns, mock model {result['model_delay_ms']:.0f} ms"
        f", median of {result['reps']}): a replayed turn {over['replayed_turn_ms_p50']:.0f} ms "
        f"vs a bare warm turn {over['bare_turn_ms_p50']:.0f} ms "
        f"({over['turn_ratio']:.2f}×), {over['between_turns_ms_p50']:.0f} ms between turns; "
        f"a whole one-variant run {over['run_wall_s_p50']:.1f} s",
        f"- {result['variants']} variants on one app-server: {par['parallel_wall_s_p50']:.1f} s "
        f"in parallel vs {par['sequential_wall_s_p50']:.1f} s one at a time "
        f"({par['speedup']:.2f}× faster; codex processes {par['codex_processes']['parallel']} "
        f"at once)"] + ([
        f"- the one-variant replay on a remote app-server (ws://127.0.0.1, token auth): "
        f"{far['replayed_turn_ms_p50']:.0f} ms a turn ({far['turn_ratio_vs_local']:.2f}× the "
        f"local replayed turn), {far['run_wall_s_p50']:.1f} s the whole run"]
        if (far := result.get("remote")) else [])


if __name__ == "__main__":
    import standalone

    sys.exit(standalone.main("replay", run_replay_bench, render_lines))
