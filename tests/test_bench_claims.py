"""The README's benchmark figures come from a committed run file, the bench's flood check fails
when streamed text is lost, and the fleet's target checks and the knee are judged right (a miss
is reported as a miss)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bench_run():
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_table_is_generated_from_a_committed_run_file():
    run = bench_run()
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- BEGIN generated from (bench/results/[\d-]+\.json) ", readme)
    assert match, "README.md's benchmark figures must be generated from a run file"
    run_file = ROOT / match.group(1)
    assert run_file.is_file()
    assert run.readme_with(readme, run_file) == readme, \
        f"README.md's table differs from {match.group(1)}: python bench/run.py --readme ..."
    report = json.loads(run_file.read_text())
    for client in run.OURS:
        assert report["flood_delivery"][client]["whole"], client


#: A measured figure in prose: a ratio, a time in ms, a memory size, a rate.
FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:×| ?(?:ms|MiB|GiB|deltas/s)\b)")


def test_every_figure_in_the_readme_prose_is_one_of_the_committed_runs():
    """Hand-copied figures drift from the run they came from: outside the generated block (and
    the compatibility table, a dated record of `make test`), a measured figure in the README
    must be one the generated block shows."""
    readme = (ROOT / "README.md").read_text()
    begin = readme.index("<!-- BEGIN generated from")
    end = readme.index("<!-- END generated benchmarks -->")
    generated, prose = readme[begin:end], readme[:begin] + readme[end:]
    table = re.search(r"<!-- compatibility table.*?\n\n", prose, re.S)
    if table:
        prose = prose.replace(table.group(0), "")
    shown = {m.replace(" ", "") for m in FIGURE.findall(generated)}
    stray = sorted({m for m in FIGURE.findall(prose) if m.replace(" ", "") not in shown})
    assert not stray, f"README figures not in the committed run's block: {stray}"


def test_the_flood_check_catches_lost_text():
    run = bench_run()
    whole = {"delivered_chars": 200_000, "expected_chars": 200_000}
    short = {"delivered_chars": 199_996, "expected_chars": 200_000}
    results = {"ours": {"flood": [whole, whole]}, "ours-agent": {"flood": [whole, short]},
               "hermes": {"flood": [{"deltas_per_s": 1.0}]},  # no stream consumer: not judged
               "raw": {"flood": [whole, {"error": "codex exited"}]}}
    check = run.flood_delivery(results, list(results))
    assert check["ours"]["whole"] is True
    assert check["ours-agent"]["whole"] is False
    assert "hermes" not in check
    assert check["raw"]["whole"] is False  # a failed run is not a whole delivery


def _entry(rss: float, p95: float, processes: int = 1) -> dict:
    return {"codex_processes_peak": processes, "codex_rss_peak_mib": rss,
            "client_rss_peak_mib": 120.0, "p50_ms": p95 * 0.8, "p95_ms": p95,
            "turns_ok": 2, "turns": 2, "error_count": 0, "errors": []}


def test_the_fleet_target_checks_report_a_miss_as_a_miss():
    run = bench_run()
    fleet = {"config": {"n": [1, 8, 32], "warmup": 1, "turns": 2, "model_delay_ms": 250},
             "agents": {
                 "shared": {"1": _entry(140, 300), "8": _entry(180, 420),  # 1.4×: met
                            "32": _entry(300, 900)},  # 300/140 = 2.14×: missed
                 "per-session": {"1": _entry(140, 300), "8": _entry(1100, 330, 8),
                                 "32": _entry(4500, 800, 32)}},  # 4500/300 = 15×: met
             "gateway": {
                 "shared": {"1": _entry(140, 1000), "8": _entry(170, 2100),  # 2.1×: missed
                            "32": {"error": "timeout after 780 s"}},
                 "per-session": {"32": _entry(4400, 2000, 32)}}}
    remote = {"turns": 20, "local_ms": 70.0, "remote_ms": 77.0, "ratio": 1.1}
    checks = {c["name"]: c for c in run.fleet.targets(fleet, remote)}
    rss = checks["agents: shared codex RSS at N=32 ≤ 2× one session's"]
    assert rss["met"] is False and rss["figure"] == 2.14
    assert checks["agents: per-session codex RSS at N=32 ≥ 10× shared's"]["met"] is True
    assert checks["agents: per-session codex RSS at N=32 ≥ 10× shared's"]["figure"] == 15.0
    latency = checks["agents: shared p95 turn latency at N=8 ≤ 1.5× N=1's"]
    assert latency["met"] is True and latency["figure"] == 1.4
    assert checks["gateway: shared p95 turn latency at N=8 ≤ 2× N=1's"]["met"] is False
    # a failed measurement is not a figure: neither met nor missed
    assert checks["gateway: shared codex RSS at N=32 ≤ 2× one session's"]["met"] is None
    assert checks["gateway: per-session codex RSS at N=32 ≥ 10× shared's"]["met"] is None
    assert checks["remote: a warm turn on a loopback ws endpoint ≤ 1.2× local stdio"]["met"] \
        is True
    slow = run.fleet.targets(fleet, {**remote, "remote_ms": 91.0, "ratio": 1.3})[-1]
    assert slow["met"] is False and slow["figure"] == 1.3
    # printed plainly, with the figure
    text = run.render({**json.loads((ROOT / "bench/results/2026-12-01.json").read_text()),
                       "fleet": fleet, "remote": remote,
                       "targets": run.fleet.targets(fleet, remote)})
    assert ("- target agents: shared codex RSS at N=32 ≤ 2× one session's: MISSED — 2.14× "
            "(300 MiB vs 140 MiB at N=1)") in text
    assert "gateway: shared codex RSS at N=32 ≤ 2× one session's: NOT MEASURED" in text
    assert "| agents | per-session | 32 | 32 | 4,500 | 120 | 640 | 800 | 0 |" in text
    assert "| gateway | shared | 32 | — | — | — | — | — | failed: timeout after 780 s |" in text


def test_the_knee_is_the_first_level_that_collapses():
    run = bench_run()

    def level(c, finished, seconds):
        return {"c": c, "threads_started": c, "finished": finished, "turn_s": seconds,
                "throughput": finished / seconds}

    levels = [level(8, 8, 1.0), level(16, 16, 1.5), level(32, 32, 3.0), level(64, 64, 5.5),
              level(96, 96, 20.0), level(128, 18, 60.0)]
    knee = run.knee.analyse(levels, cores=2, default_cap=32)
    assert knee["knee"] == 96 and knee["last_good"] == 64  # 4.8/s < half of 11.6/s
    assert knee["knee_per_core"] == 48.0 and knee["cap_below_knee"] is True
    assert run.knee.analyse(levels, cores=2, default_cap=128)["cap_below_knee"] is False
    unfinished = run.knee.analyse([level(8, 8, 1.0), level(16, 15, 1.0)], 2, 32)
    assert unfinished["knee"] == 16  # not every turn finished
    # no collapse: safe only as far as it was tested
    assert run.knee.analyse(levels[:2], 2, 16)["cap_below_knee"] is True
    assert run.knee.analyse(levels[:2], 2, 32)["cap_below_knee"] is None


def _bench_module(name: str):
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "bench"))


def test_the_fleet_profile_floor_is_the_model_delay_plus_the_busier_of_one_gil_and_all_cores():
    profile = _bench_module("profile_fleet")
    one = {"n": 1, "p95_ms": 400.0}
    # codex-bound: 8 x (10 + 90) ms over 2 cores = 400 ms > 8 x 10 ms under one GIL
    many = {"n": 8, "client_cpu_ms_per_turn": 10.0, "codex_cpu_ms_per_turn": 90.0,
            "client_split_ms_per_turn": {"plugin": 4.0}}
    verdict = profile.floor(one, many, 250.0, 2, 1.5)
    assert verdict["floor_ms"] == 650 and verdict["floor_ratio"] == 1.62
    assert verdict["floor_without_plugin_ms"] == 634  # 250 + 8 x 96 / 2
    assert verdict["cpu_ms_per_turn_for_target"] == 87.5  # (1.5 x 400 - 250) x 2 / 8
    # GIL-bound: 8 x 300 ms of the client's Python on one core
    many = {"n": 8, "client_cpu_ms_per_turn": 300.0, "codex_cpu_ms_per_turn": 80.0}
    assert profile.floor(one, many, 250.0, 2, 2.0)["floor_ms"] == 2650


def test_the_cpu_sampler_reports_what_each_owner_spent_within_a_window(tmp_path):
    sampler = _bench_module("cpu_sampler")
    path = tmp_path / "cpu.jsonl"
    rows = [{"t": 10.0, "process": 100.0, "plugin": 1.0, "hermes": 50.0},
            {"t": 11.0, "process": 300.0, "plugin": 5.0, "hermes": 210.0},
            {"t": 12.0, "process": 400.0, "plugin": 6.0, "hermes": 300.0}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    window = sampler.window(path, 10.5, 11.0)
    assert window == {"process": 200.0, "plugin": 4.0, "hermes": 160.0, "seconds": 1.0}
    assert sampler.window(path, 9.0, 11.0) is None  # the file does not cover the window
