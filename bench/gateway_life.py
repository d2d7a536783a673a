"""A gateway's life: its first turns right after it starts, and a thousand sessions later.

Two scenarios, each on a real ``hermes gateway run`` API server (the Hermes of the Python that
runs this file: run it with ``.venv-hermes022/bin/python`` for the 0.22 line), the real codex
binary and the loopback mock model, a fresh codex home and Hermes home each:

* ``first-turns`` — a gateway process is started and, as soon as it answers ``/health``, N
  clients post the FIRST run of a new session each at once (N ∈ ``BENCH_FIRST_N``, default
  ``1,8``), per layout (``shared``: the plugin; ``builtin``: Hermes' own codex runtime),
  ``BENCH_FIRST_REPS`` (3) times, interleaved. Each layout has one Hermes home and codex home
  for all its gateways, first used by an untimed gateway (a fresh install's very first turn —
  the sandbox walls probed, codex's state created — is reported on its own): what is measured is
  a gateway (re)started on a machine that has run it before. Then, ``BENCH_FRESH_REPS`` (6)
  times per layout, the first turn of a gateway on a NEW Hermes home and codex home (a new
  profile, a fresh container) on that machine — the user's cache kept, as a user's is.
  Targets: every one of 8
  concurrent first turns finishes within 2× one first turn's time; the plugin's first turn
  against Hermes' own. Then, per layout on ONE gateway each, ``BENCH_SEQUENTIAL_RUNS`` (20)
  runs of new sessions one after another, as an API client makes them (after one untimed run),
  ``BENCH_SEQUENTIAL_REPS`` (2) times, interleaved: each run's time and the codex app-server
  processes the gateway went through. Target: the plugin's sequential run ≤ Hermes' own.
* ``soak`` — ONE gateway, the plugin on one shared app-server: ``--sessions`` (1,000) sessions
  of 2 turns each (the second with the first's history), in sequential batches of ``--batch``
  (8) sessions at once. Sampled after 50, 100, 250, 500 and every 1,000 sessions: codex's RSS
  and process count, the gateway's RSS. Targets: codex RSS after the last session ≤ 1.5× after
  50; one codex process throughout; no turn lost; the gateway's RSS ≤ 1.25× after 50.

``python bench/gateway_life.py first-turns|soak [--out FILE] [--sessions N] [--batch B]``;
``make soak-gateway`` runs the soak, ``make bench`` the first turns on both host lines. Figures
are printed and written with ``--out``; targets are reported, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import fleet  # noqa: E402

CHECKPOINTS = (50, 100, 250, 500)


def app_servers(pid: int) -> int:
    """How many ``codex app-server`` processes run under ``pid`` (not codex's helpers, nor a
    short-lived sandbox probe)."""
    return len(app_server_pids(pid))


def app_server_pids(pid: int) -> set[int]:
    """The ``codex app-server`` processes running under ``pid``."""
    pids: set[int] = set()
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if fleet.is_codex(child) and "app-server" in child.cmdline():
                    pids.add(child.pid)
    return pids


def _host() -> str:
    from hermes_codex_runtime.hermes.symbols.probe import find_host

    host = find_host()
    return f"{host.distribution} {host.version}" if host else "no Hermes"


class Install:
    """A Hermes home and a codex home for one layout, kept across the gateways started on them."""

    def __init__(self, bench: fleet.Bench, name: str, layout: str) -> None:
        where = bench.scratch(name)
        self.codex_home = bench.codex_home(where)
        self.cwd = where / "work"
        self.cwd.mkdir()
        self.home = fleet.fleet_home(where / "hermes", self.codex_home, layout, gateway=True)
        self.codex_bin = bench.codex_bin

    def gateway(self) -> fleet.Gateway:
        """A fresh ``hermes gateway run`` process on this install."""
        return fleet.Gateway(self.home, fleet.hermes_environment(
            self.home, self.codex_bin, self.codex_home, self.cwd))


# ------------------------------------------------------------------------------ first turns


def measure_first_turns(install: Install, n: int, tag: str) -> dict[str, Any]:
    """N first runs (of new sessions) posted at once to a gateway that has just started."""
    try:
        gateway = install.gateway()
    except RuntimeError as exc:
        return {"error": str(exc)}
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(n)

    def client(i: int) -> None:
        barrier.wait(timeout=30)
        started = time.perf_counter()
        try:
            gateway.run(f"first turn of client {i}", f"{tag}-{i}", [])
        except Exception as exc:
            with lock:
                errors.append(f"{type(exc).__name__}: {exc}"[:300])
            return
        with lock:
            latencies.append(1000 * (time.perf_counter() - started))

    try:
        workers = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(n)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(fleet.TURN_WAIT)
        gateway.sampler.sample()
        out: dict[str, Any] = {"n": n, "latencies_ms": [round(v, 1) for v in sorted(latencies)],
                               "max_ms": round(max(latencies), 1) if latencies else None,
                               "median_ms": round(statistics.median(latencies), 1)
                               if latencies else None,
                               "errors": errors, **gateway.sampler.peak.as_dict("_peak")}
        if errors:
            out["log_tail"] = gateway.log_tail(300)
    finally:
        gateway.stop()
    return out


def run_first_turns(codex_bin: str, provider_url: str) -> dict[str, Any]:
    ns = [int(n) for n in fleet.env_list("BENCH_FIRST_N", "1,8")]
    layouts = fleet.env_list("BENCH_FIRST_LAYOUTS", "shared,builtin")
    reps = int(os.environ.get("BENCH_FIRST_REPS", "3"))
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    installed: dict[str, Any] = {}
    fresh: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="hcr-first-") as tmp, \
            _user_cache(Path(tmp) / "user-cache"):
        bench = fleet.Bench(codex_bin, provider_url, Path(tmp))
        installs = {layout: Install(bench, f"first-{layout}", layout) for layout in layouts}
        for layout, install in installs.items():  # a fresh install's very first turn
            entry = measure_first_turns(install, 1, "install")
            installed[layout] = entry.get("max_ms", entry.get("error"))
            print(f"  a fresh install's first turn, {layout}: {installed[layout]} ms",
                  flush=True)
        # a new Hermes home (a profile, a container) on this machine: its spread (±10% a run)
        # needs more runs than the rest to tell a ratio near 1 from noise
        for rep in range(int(os.environ.get("BENCH_FRESH_REPS", "6"))):
            for layout in layouts if rep % 2 == 0 else list(reversed(layouts)):
                entry = measure_first_turns(Install(bench, f"fresh-{layout}-{rep}", layout), 1,
                                            f"fresh{rep}")
                fresh.setdefault(layout, []).append(entry)
                print(f"  a fresh home's first turn, {layout}: "
                      f"{entry.get('max_ms', entry.get('error'))} ms", flush=True)
        for rep in range(reps):
            for n in ns:
                for layout in layouts if rep % 2 == 0 else list(reversed(layouts)):
                    entry = measure_first_turns(installs[layout], n, f"r{rep}n{n}")
                    runs.setdefault(layout, {}).setdefault(str(n), []).append(entry)
                    print(f"  first turns {layout} N={n}: "
                          f"{entry.get('latencies_ms', entry.get('error'))}", flush=True)
        sequential = run_sequential(installs)
    return {"host": _host(), "reps": reps, "install_first_turn_ms": installed, "runs": runs,
            "fresh_home": fresh, "sequential": sequential,
            "targets": first_turn_targets(runs) + fresh_home_targets(fresh)
            + sequential_targets(sequential)}


@contextlib.contextmanager
def _user_cache(path: Path) -> Iterator[None]:
    """The user's cache directory of every process started inside: empty at first, as on a
    machine that never ran codex, then shared, as by every Hermes home of one user."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(path)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = previous


def fresh_home_targets(fresh: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The first turn of a fresh gateway on a fresh Hermes home and codex home, on a machine
    that has run this codex before: the plugin's ≤ Hermes' own runtime's (medians)."""
    def median(layout: str) -> float | None:
        values = [e["median_ms"] for e in fresh.get(layout, []) if e.get("median_ms")
                  and not e.get("errors")]
        return statistics.median(values) if values else None

    ours, builtin = median("shared"), median("builtin")
    if not (ours and builtin):
        return []
    return [{"name": "a fresh Hermes home's first turn ≤ Hermes' own runtime's",
             "figure": round(ours / builtin, 2), "limit": 1.0, "met": ours <= builtin,
             "detail": f"{ours:.1f} ms vs {builtin:.1f} ms"}]


def measure_sequential(install: Install, runs: int, tag: str) -> dict[str, Any]:
    """``runs`` runs of new sessions one after another on one gateway (after an untimed one):
    each run's time, and how many codex app-servers the gateway went through."""
    try:
        gateway = install.gateway()
    except RuntimeError as exc:
        return {"error": str(exc)}
    latencies: list[float] = []
    seen: set[int] = set()
    try:
        gateway.run("warm up", f"{tag}-warm", [])
        seen |= app_server_pids(gateway.proc.pid)
        for i in range(runs):
            started = time.perf_counter()
            gateway.run(f"sequential run {i}", f"{tag}-{i}", [])
            latencies.append(1000 * (time.perf_counter() - started))
            seen |= app_server_pids(gateway.proc.pid)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300], "log_tail": gateway.log_tail(300)}
    finally:
        gateway.stop()
    return {"latencies_ms": [round(v, 1) for v in latencies],
            "median_ms": round(statistics.median(latencies), 1), "app_servers": len(seen)}


def run_sequential(installs: dict[str, Install]) -> dict[str, list[dict[str, Any]]]:
    runs = int(os.environ.get("BENCH_SEQUENTIAL_RUNS", "20"))
    reps = int(os.environ.get("BENCH_SEQUENTIAL_REPS", "2"))
    out: dict[str, list[dict[str, Any]]] = {}
    for rep in range(reps):
        for layout in installs if rep % 2 == 0 else list(reversed(installs)):
            entry = measure_sequential(installs[layout], runs, f"seq{rep}")
            out.setdefault(layout, []).append(entry)
            print(f"  sequential runs {layout}: median {entry.get('median_ms')} ms, "
                  f"{entry.get('app_servers')} app-server(s)"
                  + (f" — {entry['error']}" if "error" in entry else ""), flush=True)
    return out


def sequential_targets(sequential: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """A long-lived gateway's sequential run against Hermes' own runtime's (medians of the
    repetitions' medians), with the app-servers each went through."""
    def median(layout: str) -> tuple[float | None, int | None]:
        entries = [e for e in sequential.get(layout, []) if "median_ms" in e]
        if not entries:
            return None, None
        return (statistics.median(e["median_ms"] for e in entries),
                max(e["app_servers"] for e in entries))
    (ours, ours_servers), (builtin, builtin_servers) = median("shared"), median("builtin")
    if not ours or not builtin:
        return []
    return [{"name": "a long-lived gateway's sequential run ≤ Hermes' own runtime's",
             "figure": round(ours / builtin, 2), "limit": 1.0, "met": ours <= builtin,
             "detail": f"{ours:.1f} ms vs {builtin:.1f} ms; codex app-servers {ours_servers} vs "
                       f"{builtin_servers}"}]


def first_turn_targets(runs: dict[str, dict[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """8 concurrent first turns of a fresh gateway all within 2× one first turn (per layout,
    medians over the repetitions); the plugin's first turn against Hermes' own."""
    def worst(layout: str, n: str, key: str) -> float | None:
        values = [e[key] for e in runs.get(layout, {}).get(n, []) if e.get(key) is not None
                  and not e.get("errors")]
        return statistics.median(values) if values else None

    checks = []
    for layout in runs:
        one, eight = worst(layout, "1", "median_ms"), worst(layout, "8", "max_ms")
        figure = eight / one if one and eight else None
        checks.append({"name": f"{layout}: 8 concurrent first turns of a fresh gateway within "
                               "2× one first turn", "figure": figure and round(figure, 2),
                       "limit": 2.0, "met": None if figure is None else figure <= 2.0,
                       "detail": f"slowest of 8 {eight} ms vs one {one} ms"})
    ours, builtin = worst("shared", "1", "median_ms"), worst("builtin", "1", "median_ms")
    if ours and builtin:
        checks.append({"name": "a fresh gateway's first turn ≤ Hermes' own runtime's",
                       "figure": round(ours / builtin, 2), "limit": 1.0,
                       "met": ours <= builtin, "detail": f"{ours} ms vs {builtin} ms"})
    return checks


# ------------------------------------------------------------------------------ soak


def run_soak(codex_bin: str, provider_url: str, sessions: int, batch: int) -> dict[str, Any]:
    """``sessions`` sessions × 2 turns through one gateway, ``batch`` sessions at once."""
    with tempfile.TemporaryDirectory(prefix="hcr-soak-") as tmp:
        bench = fleet.Bench(codex_bin, provider_url, Path(tmp))
        gateway = Install(bench, "soak", "shared").gateway()
        lost: list[str] = []
        turns_ok = 0
        lock = threading.Lock()
        samples: list[dict[str, Any]] = []
        started = time.monotonic()

        def session(i: int) -> None:
            nonlocal turns_ok
            history: list[dict[str, str]] = []
            for k in range(2):
                text = f"turn {k} of session {i}"
                try:
                    answer = gateway.run(text, f"soak-{i}", list(history))
                except Exception as exc:
                    with lock:
                        lost.append(f"session {i} turn {k}: {type(exc).__name__}: {exc}"[:300])
                    return
                history += [{"role": "user", "content": text},
                            {"role": "assistant", "content": answer}]
                with lock:
                    turns_ok += 1

        try:
            done = 0
            marks = [c for c in CHECKPOINTS if c < sessions] + \
                list(range(1000, sessions + 1, 1000))
            if sessions not in marks:
                marks.append(sessions)
            while done < sessions:
                size = min(batch, sessions - done)
                workers = [threading.Thread(target=session, args=(done + j,), daemon=True)
                           for j in range(size)]
                for worker in workers:
                    worker.start()
                for worker in workers:
                    worker.join(fleet.TURN_WAIT)
                done += size
                if marks and done >= marks[0]:
                    marks.pop(0)
                    now = fleet.snapshot(gateway.proc.pid)
                    servers = app_servers(gateway.proc.pid)
                    samples.append({"sessions": done, "elapsed_s": round(
                        time.monotonic() - started, 1), "app_servers": servers,
                        **now.as_dict()})
                    print(f"  soak: {done} sessions, codex {now.codex_rss_mib:.0f} MiB, "
                          f"{servers} app-server(s), gateway {now.client_rss_mib:.0f} MiB, "
                          f"{len(lost)} lost", flush=True)
            gateway.sampler.sample()
            peak = gateway.sampler.peak.as_dict("_peak")
        finally:
            tail = gateway.log_tail(300) if lost else ""
            gateway.stop()
    out = {"host": _host(), "sessions": sessions, "batch": batch, "turns": 2 * sessions,
           "turns_ok": turns_ok, "lost": len(lost), "lost_examples": lost[:3],
           "wall_s": round(time.monotonic() - started, 1), "samples": samples, **peak}
    if tail:
        out["log_tail"] = tail
    out["targets"] = soak_targets(out)
    return out


def soak_targets(out: dict[str, Any]) -> list[dict[str, Any]]:
    samples = out["samples"]
    first = next((s for s in samples if s["sessions"] >= 50), None)
    last = samples[-1] if samples else None

    def ratio(key: str) -> float | None:
        if not first or not last or not first.get(key):
            return None
        return round(last[key] / first[key], 2)

    codex, client = ratio("codex_rss_mib"), ratio("client_rss_mib")
    return [
        {"name": f"codex RSS after {out['sessions']} sessions ≤ 1.5× after 50", "figure": codex,
         "limit": 1.5, "met": None if codex is None else codex <= 1.5},
        {"name": "one codex app-server at every checkpoint", "figure": max(
            (s["app_servers"] for s in samples), default=None), "limit": 1,
         "met": bool(samples) and all(s["app_servers"] == 1 for s in samples)},
        {"name": "no turn lost", "figure": out["lost"], "limit": 0, "met": out["lost"] == 0},
        # flat: every agent a run leaves behind is collected, with its conversation
        {"name": f"gateway RSS after {out['sessions']} sessions ≤ 1.25× after 50",
         "figure": client, "limit": 1.25, "met": None if client is None else client <= 1.25},
    ]


# ------------------------------------------------------------------------------ main


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", choices=("first-turns", "soak"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--codex-bin")
    parser.add_argument("--sessions", type=int, default=int(os.environ.get(
        "SOAK_SESSIONS", "1000")))
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args(argv)
    from hermes_codex_runtime.offline import provider as mp
    from hermes_codex_runtime.wire import resolve_codex_binary

    codex_bin = args.codex_bin or resolve_codex_binary().path
    delay = float(os.environ.get("BENCH_FLEET_DELAY_MS", "250")) / 1000
    with mp.MockResponsesProvider() as provider:
        provider.set_default(mp.text("ok", delay=delay if args.scenario == "first-turns"
                                     else 0.0))
        if args.scenario == "first-turns":
            report = run_first_turns(codex_bin, provider.base_url)
        else:
            report = run_soak(codex_bin, provider.base_url, args.sessions, args.batch)
    for check in report["targets"]:
        verdict = {True: "met", False: "MISSED", None: "reported"}[check["met"]]
        print(f"- target {check['name']}: {verdict} — {check['figure']}"
              + (f" ({check['detail']})" if check.get("detail") else ""), flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
