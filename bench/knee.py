"""The knee of one app-server: how many concurrent turns one ``codex app-server`` process carries
before its throughput collapses — measured, on this machine's cores, not assumed.

Owns the ``knee`` scenario. Per level C (``BENCH_KNEE_LEVELS``, default 8,16,32,64,96,128), in a
fresh process with a fresh codex home: C ``CodexSession``s on one ``ServerPool`` whose
``threads_per_process`` is huge (so all C threads live on ONE process) start their threads at
once, then run one turn each at once against the mock provider (a short text after
``BENCH_KNEE_DELAY_MS``, default 50 ms). Each phase waits at most ``BENCH_KNEE_TIMEOUT`` s
(default 60). Recorded: wall times, turns finished, throughput (turns/s), the codex process's peak
RSS and CPU seconds. Escalation stops at the first level that collapses.

The knee is the first level whose turns do not all finish, or whose throughput falls below half
the best so far (:func:`analyse`); it is reported per core (``os.cpu_count()``) against
``hermes_codex_runtime.pool.default_threads_per_process()``, which must stay below it.

``python bench/knee.py [--out FILE]`` runs it alone; ``python bench/knee.py child <config.json>``
is one level (internal).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fleet import env_list, percentile, run_child  # noqa: E402

LEVELS = "8,16,32,64,96,128"
#: A level whose throughput falls below this share of the best so far has collapsed.
COLLAPSE = 0.5


# ------------------------------------------------------------------------------ one level


def child(config: dict[str, Any]) -> dict[str, Any]:
    """One level: C sessions on one shared app-server; the threads start at once, then one turn
    each at once. Every wait is bounded by ``timeout_s``."""
    import psutil

    from hermes_codex_runtime.pool import Placement, PoolLimits, ServerPool
    from hermes_codex_runtime.session import CodexSession, SessionSettings

    c, timeout = int(config["c"]), float(config["timeout_s"])
    pool = ServerPool()
    settings = SessionSettings(
        codex_bin=config["codex_bin"], codex_home=config["codex_home"], cwd=config["cwd"],
        turn_timeout=timeout + 30, startup_timeout=timeout, request_timeout=timeout,
        app_server=Placement("shared", limits=PoolLimits(threads_per_process=1024,
                                                         max_processes=1)))
    sessions = [CodexSession(settings, pool=pool) for _ in range(c)]
    started: list[float] = []
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    go = threading.Event()

    def worker(i: int) -> None:
        t = time.perf_counter()
        try:
            sessions[i].ensure_started()
        except Exception as exc:
            with lock:
                errors.append(f"start: {type(exc).__name__}: {exc}"[:300])
            return
        with lock:
            started.append(time.perf_counter() - t)
        if not go.wait(timeout * 2 + 30):
            return
        t = time.perf_counter()
        result = sessions[i].run_turn(f"knee turn {i}")
        with lock:
            if result.ok:
                latencies.append(time.perf_counter() - t)
            else:
                errors.append(f"turn: {result.error}"[:300])

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(c)]
    t0 = time.perf_counter()
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    while len(started) + len(errors) < c and time.monotonic() < deadline:
        time.sleep(0.01)
    start_s = time.perf_counter() - t0
    started_in_time = len(started)
    codex = [psutil.Process(s["pid"]) for s in pool.snapshot() if s.get("pid")]
    cpu_before = sum(_cpu(p) for p in codex)
    go.set()
    t1 = time.perf_counter()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    with lock:
        finished = len(latencies)
        turn_s = max(latencies) if finished == started_in_time and finished else \
            time.perf_counter() - t1
        out = {"c": c, "threads_started": started_in_time, "start_s": round(start_s, 2),
               "finished": finished, "turn_s": round(turn_s, 2),
               "throughput": round(finished / turn_s, 2) if turn_s > 0 else 0.0,
               "p50_ms": _ms(percentile(latencies, 50)),
               "p95_ms": _ms(percentile(latencies, 95)),
               "codex_processes": len(codex),
               "codex_cpu_s": round(sum(_cpu(p) for p in codex) - cpu_before, 2),
               "errors": sorted(set(errors))[:3], "error_count": len(errors)}
    closer = threading.Thread(target=lambda: ([s.close() for s in sessions], pool.close()),
                              daemon=True)
    closer.start()
    closer.join(timeout=30)
    return out


def _cpu(proc: Any) -> float:
    with contextlib.suppress(Exception):
        times = proc.cpu_times()
        return float(times.user + times.system)
    return 0.0


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(1000 * seconds, 1)


# ------------------------------------------------------------------------------ the knee


def collapsed(level: Mapping[str, Any], best: float) -> bool:
    """Whether ``level`` collapsed: it failed, not every thread started or turn finished, or its
    throughput fell below :data:`COLLAPSE` of ``best`` (the best of the levels before it)."""
    if "error" in level:
        return True
    c = int(level["c"])
    if level.get("threads_started") != c or level.get("finished") != c:
        return True
    return float(level.get("throughput") or 0.0) < COLLAPSE * best


def analyse(levels: Sequence[Mapping[str, Any]], cores: int, default_cap: int) -> dict[str, Any]:
    """The knee of ``levels`` (in the order run) and whether ``default_cap`` (threads per
    process) stays below it."""
    best, knee, last_good = 0.0, None, None
    for level in levels:
        if collapsed(level, best):
            knee = int(level["c"])
            break
        best = max(best, float(level["throughput"]))
        last_good = int(level["c"])
    tested = max((int(level["c"]) for level in levels), default=0)
    if knee is not None:
        below: bool | None = default_cap < knee
    else:  # no collapse: the cap is known safe only as far as it was tested
        below = True if levels and default_cap <= tested else None
    return {"knee": knee, "knee_per_core": None if knee is None else round(knee / cores, 1),
            "last_good": last_good, "best_throughput": round(best, 2), "cores": cores,
            "tested_up_to": tested, "default_threads_per_process": default_cap,
            "cap_below_knee": below}


def render_lines(knee: Mapping[str, Any] | None) -> list[str]:
    """The knee's levels and verdict as Markdown lines (nothing for a run without it)."""
    if not knee:
        return []
    levels = ", ".join(
        f"{level['c']}: failed" if "error" in level else
        f"{level['c']}: {level['finished']}/{level['c']} in {level['turn_s']:.1f} s "
        f"({level['throughput']:.1f}/s, {level.get('codex_rss_peak_mib', 0):.0f} MiB)"
        for level in knee["levels"])
    cap = knee["default_threads_per_process"]
    if knee["knee"] is None:
        where = f"no collapse up to {knee['tested_up_to']} concurrent turns"
    else:
        where = (f"knee at {knee['knee']} concurrent turns = {knee['knee_per_core']} per core "
                 f"(last good {knee['last_good']})")
    verdict = {True: "below it" if knee["knee"] is not None else
               "within the levels that did not collapse", False: "NOT below it",
               None: f"not judged (above the levels tested, up to {knee['tested_up_to']})"}[
        knee["cap_below_knee"]]
    return [f"- one app-server's knee ({knee['cores']} cores, mock model "
            f"{knee['model_delay_ms']:.0f} ms, ≤ {knee['timeout_s']:.0f} s per phase): {where}; "
            f"turns finished per level: {levels}",
            f"- threads per process by default ({cap}): {verdict}"]


# ------------------------------------------------------------------------------ orchestration


def run_knee(codex_bin: str, *, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Escalate the levels the environment asks for until one collapses."""
    from hermes_codex_runtime.offline import provider as mp
    from hermes_codex_runtime.offline.codex_home import prepare_codex_home
    from hermes_codex_runtime.pool import default_threads_per_process

    say = progress or (lambda text: print(text, flush=True))
    levels = [int(c) for c in env_list("BENCH_KNEE_LEVELS", LEVELS)]
    timeout = float(os.environ.get("BENCH_KNEE_TIMEOUT", "60"))
    delay_ms = float(os.environ.get("BENCH_KNEE_DELAY_MS", "50"))
    cores = os.cpu_count() or 1
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hcr-knee-") as tmp, \
            mp.MockResponsesProvider() as provider:
        provider.set_default(mp.text("ok", delay=delay_ms / 1000))
        best = 0.0
        for c in levels:
            where = Path(tmp) / f"level-{c}"
            (where / "work").mkdir(parents=True)
            codex_home = prepare_codex_home(where / "codex-home", provider.base_url,
                                            codex_bin=codex_bin)
            config = {"c": c, "timeout_s": timeout, "codex_bin": codex_bin,
                      "codex_home": str(codex_home), "cwd": str(where / "work")}
            (where / "config.json").write_text(json.dumps(config))
            env = {**os.environ, "CODEX_HOME": str(codex_home), "CODEX_RUNTIME_LOAD_PLUGINS": ""}
            level = run_child([sys.executable, __file__, "child", str(where / "config.json")],
                              env=env, timeout=3 * timeout + 120)
            level["c"] = c
            results.append(level)
            say(f"  knee C={c}: " + (f"failed: {str(level['error'])[:200]}" if "error" in level
                                     else f"{level['finished']}/{c} turns in "
                                     f"{level['turn_s']} s, {level['throughput']}/s, start "
                                     f"{level['start_s']} s, codex RSS "
                                     f"{level.get('codex_rss_peak_mib')} MiB, "
                                     f"CPU {level['codex_cpu_s']} s"))
            if collapsed(level, best):
                break
            best = max(best, float(level["throughput"]))
    summary = analyse(results, cores, default_threads_per_process())
    say(f"  knee: {summary['knee']} (per core {summary['knee_per_core']}), default threads "
        f"per process {summary['default_threads_per_process']}: "
        f"{ {True: 'below', False: 'NOT below', None: 'not judged'}[summary['cap_below_knee']]}")
    return {**summary, "levels": results, "timeout_s": timeout, "model_delay_ms": delay_ms}


def main(argv: list[str]) -> int:
    """``knee.py [--out FILE]``, or ``knee.py child <config.json>`` (one level)."""
    if argv[:1] == ["child"] and len(argv) == 2:
        print(json.dumps(child(json.loads(Path(argv[1]).read_text()))), flush=True)
        return 0
    from hermes_codex_runtime.wire import resolve_codex_binary

    out_path = Path(argv[1]) if argv[:1] == ["--out"] and len(argv) == 2 else None
    if argv and out_path is None:
        print("usage: bench/knee.py [--out FILE]", file=sys.stderr)
        return 2
    report = run_knee(resolve_codex_binary().path)
    print("\n".join(render_lines(report)))
    if out_path is not None:
        out_path.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
