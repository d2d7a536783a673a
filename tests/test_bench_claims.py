"""The README's benchmark figures come from a committed run file, and the bench's flood check
fails when streamed text is lost."""

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
