"""Side-task benchmarks: what a host's side task (a title, an approval verdict) costs on the
sessions' warm shared app-server, and whether side tasks slow the user's own turns.

On the real codex binary and the loopback mock provider, one shared app-server (a
``ServerPool``) carrying the user's session (a warm ``CodexSession`` thread):

* ``side_task`` — the same prompt as a bare warm turn of that session and as a side task
  (``hermes_codex_runtime.session.side_task.run_side_task``: a fresh ephemeral read-only thread
  on the same app-server, unsubscribed after), interleaved, ``BENCH_SIDE_REPS`` (default 20) of
  each, the mock answering at once (``BENCH_SIDE_DELAY_MS``, default 0: codex's own cost).
  Target: a side task ≤ 1.5× the bare turn (reported, never asserted).
* ``turn_load`` — the user's turns alone, and each started together with ``BENCH_SIDE_LOAD``
  (default 1) side tasks on the same app-server (as the 0.22 line starts a session's title at
  its first turn; a title and a judge together would be 2), alternating, ``BENCH_SIDE_REPS``
  turns each, the mock answering after ``BENCH_SIDE_LOAD_DELAY_MS`` (default 250, a fast
  model's first byte). Target: the user's turn p50 unchanged within noise (≤ 1.2×; reported,
  never asserted).

Alone: ``.venv/bin/python bench/side_tasks.py [--out FILE]``.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hermes_codex_runtime.offline import provider as mp  # noqa: E402
from hermes_codex_runtime.offline.codex_home import prepare_codex_home  # noqa: E402
from hermes_codex_runtime.pool import Placement, ServerPool  # noqa: E402
from hermes_codex_runtime.session import CodexSession  # noqa: E402
from hermes_codex_runtime.session.side_task import SideTask, run_side_task  # noqa: E402
from hermes_codex_runtime.values import SessionSettings  # noqa: E402

PROMPT = "Give this conversation a short title: we talked about green tea and oolong."
INSTRUCTIONS = "You name conversations. Answer with the title only."


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _timed_turn(session: CodexSession, text: str) -> float:
    began = time.perf_counter()
    result = session.run_turn(text)
    if not result.ok:
        raise RuntimeError(f"the user's turn failed: {result.error}")
    return (time.perf_counter() - began) * 1000


def _timed_side_task(pool: ServerPool, settings: SessionSettings) -> float:
    began = time.perf_counter()
    run_side_task(pool, settings, SideTask(PROMPT, instructions=INSTRUCTIONS, timeout=60))
    return (time.perf_counter() - began) * 1000


def _with_side_tasks(session: CodexSession, pool: ServerPool, settings: SessionSettings,
                     load: int, done: list[float]) -> float:
    """One user turn, started together with ``load`` side tasks (waited for after it)."""
    workers = [threading.Thread(target=lambda: done.append(_timed_side_task(pool, settings)),
                                daemon=True) for _ in range(load)]
    for worker in workers:
        worker.start()
    elapsed = _timed_turn(session, PROMPT)
    for worker in workers:
        worker.join(120)
    return elapsed


def run_side_task_bench(codex_bin: str) -> dict[str, Any]:
    """Both scenarios; the figures as data."""
    reps = _env_int("BENCH_SIDE_REPS", 20)
    load = _env_int("BENCH_SIDE_LOAD", 1)
    delay = {"now": _env_int("BENCH_SIDE_DELAY_MS", 0) / 1000}
    load_delay = _env_int("BENCH_SIDE_LOAD_DELAY_MS", 250) / 1000
    work = Path(tempfile.mkdtemp(prefix="hcr-bench-side-"))
    provider = mp.MockResponsesProvider(default=lambda _body: mp.text(
        "Green Tea and Oolong", deltas=4, delay=delay["now"])).start()
    pool = ServerPool()
    try:
        codex_home = prepare_codex_home(work / "codex-home", provider.base_url,
                                        codex_bin=codex_bin)
        settings = SessionSettings(codex_bin=codex_bin, codex_home=str(codex_home),
                                   cwd=str(work), model="mock-model", approval_policy="never",
                                   app_server=Placement("shared"))
        session = CodexSession(settings, pool=pool)
        try:
            _timed_turn(session, "warm up")
            _timed_side_task(pool, settings)
            bare: list[float] = []
            side: list[float] = []
            for _ in range(reps):
                bare.append(_timed_turn(session, PROMPT))
                side.append(_timed_side_task(pool, settings))
            side_delay, delay["now"] = delay["now"], load_delay
            quiet: list[float] = []
            busy: list[float] = []
            background: list[float] = []
            for _ in range(reps):
                quiet.append(_timed_turn(session, PROMPT))
                busy.append(_with_side_tasks(session, pool, settings, load, background))
            processes = len(pool.servers())
        finally:
            session.close()
        bare_p50, side_p50 = statistics.median(bare), statistics.median(side)
        quiet_p50, busy_p50 = statistics.median(quiet), statistics.median(busy)
        return {
            "reps": reps, "load": load, "model_delay_ms": side_delay * 1000,
            "load_model_delay_ms": load_delay * 1000,
            "side_task": {"bare_turn_ms_p50": round(bare_p50, 1),
                          "side_task_ms_p50": round(side_p50, 1),
                          "side_task_ms_p95": round(_p(side, 0.95), 1),
                          "ratio": round(side_p50 / bare_p50, 3),
                          "app_servers": processes},
            "turn_load": {"off_ms_p50": round(quiet_p50, 1), "on_ms_p50": round(busy_p50, 1),
                          "off_ms_p95": round(_p(quiet, 0.95), 1),
                          "on_ms_p95": round(_p(busy, 0.95), 1),
                          "ratio": round(busy_p50 / quiet_p50, 3),
                          "side_task_ms_p50_meanwhile": round(statistics.median(background), 1)},
        }
    finally:
        pool.close()
        provider.stop()
        import shutil

        shutil.rmtree(work, ignore_errors=True)


def render_lines(result: dict[str, Any] | None) -> list[str]:
    """The side-task figures and their targets as Markdown lines (none without them)."""
    if not result:
        return []
    side, load = result["side_task"], result["turn_load"]
    met = "met" if side["ratio"] <= 1.5 else "MISSED"
    steady = "met" if load["ratio"] <= 1.2 else "MISSED"
    return [
        f"- side task on a warm shared app-server (median of {result['reps']}, mock model "
        f"{result['model_delay_ms']:.0f} ms): {side['side_task_ms_p50']:.0f} ms (p95 "
        f"{side['side_task_ms_p95']:.0f}) vs a bare warm turn with the same prompt "
        f"{side['bare_turn_ms_p50']:.0f} ms ({side['ratio']:.2f}×; "
        f"{side['app_servers']} app-server)",
        f"- the user's turn (mock model {result['load_model_delay_ms']:.0f} ms) started with "
        f"{result['load']} side task(s): p50 "
        f"{load['on_ms_p50']:.0f} ms (p95 {load['on_ms_p95']:.0f}) vs none: p50 "
        f"{load['off_ms_p50']:.0f} ms (p95 {load['off_ms_p95']:.0f}) ({load['ratio']:.2f}×; "
        f"the side tasks took {load['side_task_ms_p50_meanwhile']:.0f} ms)",
        f"- target side task: ≤ 1.5× a bare warm turn: {met} — {side['ratio']:.2f}×",
        f"- target side tasks: the user's turn p50 unchanged within noise (≤ 1.2×): {steady} — "
        f"{load['ratio']:.2f}×"]


if __name__ == "__main__":
    import standalone

    sys.exit(standalone.main("side_tasks", run_side_task_bench, render_lines))
