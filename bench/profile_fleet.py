"""Where the CPU of N concurrent turns goes, and what the p95 targets at N=8 would take.

``python bench/profile_fleet.py [--n 1,8] [--out FILE]`` runs the fleet's ``agents`` and
``gateway`` measurements (shared app-server layout, the same mock model delay as ``make
bench``) with :mod:`cpu_sampler` inside the measured process — the process of N agents, the
real ``hermes gateway run`` — and reports, per measured turn: the client process's CPU split
into this project's code, Hermes' own and the rest (web server, event loop, standard
library), codex's CPU, and the latency figures.

From those it derives the floor of the N=8 p95 on this machine, whatever this project does:
the client's Python runs under one GIL, so a batch of N turns needs at least N × its CPU per
turn of one core, and N × (client + codex) CPU of all cores, on top of the model's own delay.
It prints the floor — as measured, and with this project's own CPU taken out — next to the
target, and the CPU per turn that would meet the target on this machine.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import cpu_sampler  # noqa: E402
import fleet  # noqa: E402

TARGETS = {"agents": 1.5, "gateway": 2.0}  # p95 at N=8 over N=1 (issue 23)


class ProfiledEnvironment:
    """``fleet.hermes_environment`` with the sampler loaded into the process it starts; each
    process gets a file of its own (``last``: the latest)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.numbers = itertools.count(1)
        self.original = fleet.hermes_environment
        self.last = root / "none.jsonl"

    def __call__(self, *args: Any, **kwargs: Any) -> dict[str, str]:
        env = self.original(*args, **kwargs)
        self.last = self.root / f"cpu-{next(self.numbers)}.jsonl"
        env["HCR_CPU_PROFILE"] = str(self.last)
        env["PYTHONPATH"] = os.pathsep.join(
            part for part in (str(ROOT / "bench" / "sampler_site"), env.get("PYTHONPATH"))
            if part)
        return env


def per_turn(entry: dict[str, Any], profile: Path, turns: int) -> dict[str, Any]:
    window = entry.get("measured_window")
    split = cpu_sampler.window(profile, *window) if window else None
    out = {key: entry.get(key) for key in ("n", "p50_ms", "p95_ms", "client_cpu_ms_per_turn",
                                           "codex_cpu_ms_per_turn", "cpu_busy_fraction")}
    if split:
        out["client_split_ms_per_turn"] = {key: round(split[key] / turns, 1) for key in (
            "plugin", "hermes", "other", "under_plugin", "process", "sampler")}
    return out


def floor(one: dict[str, Any], many: dict[str, Any], delay_ms: float, cores: int,
          target: float) -> dict[str, Any]:
    """The least p95 a batch of N turns can have here — as measured, and without this
    project's own CPU — and the CPU per turn that would meet ``target``."""
    n = int(many["n"])
    client, codex = float(many["client_cpu_ms_per_turn"]), float(many["codex_cpu_ms_per_turn"])
    plugin = float(many.get("client_split_ms_per_turn", {}).get("plugin", 0.0))
    p95_one = float(one["p95_ms"])

    def bound(client_ms: float) -> float:
        return delay_ms + max(n * client_ms, n * (client_ms + codex) / cores)

    budget = target * p95_one - delay_ms  # what the batch's CPU may take of the wall time
    return {"floor_ms": round(bound(client)), "floor_ratio": round(bound(client) / p95_one, 2),
            "floor_without_plugin_ms": round(bound(client - plugin)),
            "floor_without_plugin_ratio": round(bound(client - plugin) / p95_one, 2),
            "target_ratio": target,
            "cpu_ms_per_turn_for_target": round(budget * cores / n, 1),
            "client_cpu_ms_per_turn_for_target": round(budget / n, 1),
            "client_cpu_ms_per_turn": client, "plugin_cpu_ms_per_turn": plugin,
            "codex_cpu_ms_per_turn": codex, "cores": cores}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="1,8")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    ns = [int(n) for n in args.n.split(",")]
    from hermes_codex_runtime.offline import provider as mp
    from hermes_codex_runtime.wire import resolve_codex_binary

    codex_bin = resolve_codex_binary().path
    delay_ms, warmup, turns = 250.0, 1, 2
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                              "cores": os.cpu_count(), "model_delay_ms": delay_ms}
    with tempfile.TemporaryDirectory(prefix="hcr-profile-fleet-") as tmp, \
            mp.MockResponsesProvider() as provider:
        root = Path(tmp)
        environment = ProfiledEnvironment(root)
        fleet.hermes_environment = environment
        bench = fleet.Bench(codex_bin, provider.base_url, root / "fleet")
        for scenario, measure in (("agents", fleet.measure_agents),
                                  ("gateway", fleet.measure_gateway)):
            provider.clear()
            provider.set_default(mp.text("ok", delay=delay_ms / 1000))
            for n in ns:
                entry = measure(bench, "shared", n, warmup, turns)
                if "error" in entry or entry.get("error_count"):
                    print(f"{scenario} N={n}: failed: {entry.get('error') or entry['errors']}")
                    return 1
                figures = per_turn(entry, environment.last, n * turns)
                report.setdefault(scenario, {})[str(n)] = figures
                print(f"{scenario} N={n}: {json.dumps(figures)}", flush=True)
            byn = report[scenario]
            if "1" in byn and "8" in byn:
                byn["floor_at_8"] = floor(byn["1"], byn["8"], delay_ms, os.cpu_count() or 1,
                                          TARGETS[scenario])
                print(f"{scenario} floor at N=8: {json.dumps(byn['floor_at_8'])}", flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
