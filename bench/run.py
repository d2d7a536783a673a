"""Side-by-side benchmarks: every client, every scenario, interleaved, on the same real codex
binary and the same mock provider; medians with min–max, and ratios to the raw client.

``make bench`` (or ``.venv/bin/python bench/run.py``). Writes ``bench/results/latest.json`` and
``latest.md`` and prints the table. ``BENCH_REPS`` (default 3) sets the repetitions; ``BENCH_ONLY``
(comma-separated client names) restricts the clients, ``BENCH_SCENARIOS`` the scenarios. The
flood scenario checks the streamed text each client's consumer received against what codex sent,
and the run fails when this project's clients lost any. The official SDK and Hermes 0.19.0 cannot
share a venv (``packaging`` pins), so the SDK client runs from ``bench/.venv-sdk``, built on
first use.

After the per-client scenarios come the fleet scenarios (``bench/fleet.py``: N concurrent
sessions in one Hermes process and through a gateway, per app-server layout; a remote ws endpoint
against local stdio) and the knee of one app-server (``bench/knee.py``), stored under ``fleet``,
``remote``, ``targets`` and ``knee`` in the run file and rendered as a second table, and the
replay runner's figures (``bench/replay.py``, under ``replay``) and the side tasks'
(``bench/side_tasks.py``, under ``side_tasks``) and Hermes' tools on codex's
(``bench/host_tools.py``, under ``host_tools``) and /retry and /undo on codex's
(``bench/session_commands.py``, under ``session_commands``).
``BENCH_FLEET=0`` / ``BENCH_KNEE=0`` / ``BENCH_REPLAY=0`` / ``BENCH_SIDE=0`` / ``BENCH_TOOLS=0`` /
``BENCH_COMMANDS=0`` skip them; so does a ``BENCH_SCENARIOS`` that does not name them
(``agents``, ``gateway``, ``remote``, ``knee``, ``replay``, ``side_tasks``, ``host_tools``,
``session_commands``).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # fleet, knee: also when this file is loaded by a test

import fleet  # noqa: E402
import host_tools as tools_bench  # noqa: E402
import knee  # noqa: E402
import replay as replay_bench  # noqa: E402
import session_commands as commands_bench  # noqa: E402
import side_tasks as side_bench  # noqa: E402

from hermes_codex_runtime.generated import replace_block  # noqa: E402
from hermes_codex_runtime.hermes.commands.offline import write_offline_caches  # noqa: E402
from hermes_codex_runtime.history_seed import render_history_seed  # noqa: E402
from hermes_codex_runtime.offline import provider as mp  # noqa: E402
from hermes_codex_runtime.offline.codex_home import prepare_codex_home  # noqa: E402
from hermes_codex_runtime.testing.fake import FakeCodex  # noqa: E402
from hermes_codex_runtime.testing.schema import ProtocolSchema  # noqa: E402
from hermes_codex_runtime.wire import probe_version, resolve_codex_binary  # noqa: E402

CLIENTS = ["raw", "ours", "ours-agent", "hermes", "hermes-agent", "sdk"]
SCENARIOS = ["cold", "warm", "stream", "approval", "command", "output", "flood", "close"]
#: a command that prints 5 MB (50,000 lines) after codex has announced it: all of it streams
OUTPUT_COMMAND = "sleep 0.5; head -c 5000000 /dev/zero | tr '\\0' x | fold -w 99"
#: Scenarios of bench/fleet.py, and the knee (bench/knee.py).
FLEET_SCENARIOS = list(fleet.SCENARIOS)
SDK_VENV = ROOT / "bench" / ".venv-sdk"
#: Turns per process of the ``stream`` and ``approval`` scenarios (the median is the figure: one
#: turn of ~0.2 s swung the ratio by ±15% between runs on this small machine).
REPEATS = 5
FLOOD = 50_000
FLOOD_DELTA = "tok "
IMPORTS = {
    "ours": "import hermes_codex_runtime.session",
    "ours (plugin module)": "import hermes_codex_runtime, hermes_codex_runtime.hermes",
    "hermes": "import agent.transports.codex_app_server_session",
    "sdk": "import openai_codex",
}


def sdk_python() -> str | None:
    python = SDK_VENV / "bin" / "python"
    if not python.exists():
        print("building bench/.venv-sdk (openai-codex==0.163.0)…", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(SDK_VENV)], check=True)
        proc = subprocess.run([str(python), "-m", "pip", "install", "-q",
                               "--disable-pip-version-check", "openai-codex==0.163.0"],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print("the SDK could not be installed; skipping it:", proc.stderr[-500:])
            return None
    return str(python)


def hermes_home(root: Path, codex_home: Path, plugin: bool) -> Path:
    import yaml

    home = root / ("hermes-plugin" if plugin else "hermes-plain")
    home.mkdir()
    config = {"plugins": {"enabled": ["codex-runtime"] if plugin else []},
              "security": {"allow_lazy_installs": False, "tirith_enabled": False},
              "model": {"provider": "openai-codex", "default": "mock-model",
                        "openai_runtime": "codex_app_server", "codex_home": str(codex_home),
                        "context_length": 200000},
              "approvals": {"mode": "off"}}
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    write_offline_caches(home)
    return home


def script(provider: mp.MockResponsesProvider, fake: FakeCodex, scenario: str) -> None:
    provider.clear()
    provider.set_default(mp.text("ok"))
    if scenario == "stream":
        provider.enqueue(mp.text("ok"), *[mp.text("tok " * 2000, deltas=2000)] * REPEATS)
    elif scenario == "approval":
        provider.enqueue(mp.text("ok"), *[step for _ in range(REPEATS) for step in (
            mp.exec_command("echo approved", escalated=True), mp.text("done"))])
    elif scenario == "command":  # run in the sandbox, nothing to approve
        provider.enqueue(mp.text("ok"), *[step for _ in range(REPEATS) for step in (
            mp.exec_command("true"), mp.text("done"))])
    elif scenario == "output":
        provider.enqueue(mp.text("ok"), mp.exec_command(OUTPUT_COMMAND), mp.text("done"))
    elif scenario == "flood":
        fake.set_scenario({"turns": [[{"message": "warm"}],
                                     [{"flood": FLOOD, "flood_delta": FLOOD_DELTA}]]})
    elif scenario == "close":
        fake.set_scenario({"turns": [[{"grandchild": True}, {"message": "spawned"}]]})


def run_client(python: str, client: str, scenario: str, config_path: Path,
               env: dict[str, str]) -> dict[str, Any] | None:
    try:
        proc = subprocess.run([python, str(ROOT / "bench" / "clients.py"), client, scenario,
                               str(config_path)], capture_output=True, text=True, timeout=300,
                              env=env, stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr or proc.stdout)[-400:]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def median_range(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def measure_imports(pythons: dict[str, str]) -> dict[str, dict[str, float]]:
    out = {}
    for label, statement in IMPORTS.items():
        family = label.split()[0]
        python = pythons.get(family)
        if python is None:
            continue
        code = (f"import time; t = time.perf_counter(); {statement}; "
                "print(time.perf_counter() - t)")
        samples = []
        for _ in range(5):
            proc = subprocess.run([python, "-c", code], capture_output=True, text=True,
                                  timeout=120, cwd=str(ROOT), check=False,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)}
                                  if family == "ours" else dict(os.environ))
            if proc.returncode == 0:
                samples.append(1000 * float(proc.stdout.strip().splitlines()[-1]))
        if samples:
            out[label] = median_range(samples)
    return out


def measure_seed() -> dict[str, float]:
    messages: list[dict[str, Any]] = []
    for i in range(5_000):
        messages.append({"role": "user", "content": f"question {i} " * 8})
        messages.append({"role": "assistant", "content": f"answer {i} " * 20})
    samples = []
    for _ in range(20):
        t = time.perf_counter()
        render_history_seed(messages)
        samples.append(1000 * (time.perf_counter() - t))
    return median_range(samples)


def byte_compile(python: str) -> None:
    """Byte-compile this package for ``python``, as ``pip install`` does for a user: a
    checkout's missing or stale ``.pyc`` files (an edited module, ``PYTHONDONTWRITEBYTECODE``)
    would otherwise add compiling our modules to every fresh process's start-up figures."""
    subprocess.run([python, "-m", "compileall", "-q", str(ROOT / "hermes_codex_runtime")],
                   check=False, stdout=subprocess.DEVNULL, timeout=300)


def main() -> int:
    reps = int(os.environ.get("BENCH_REPS", "3"))
    only = {c for c in os.environ.get("BENCH_ONLY", "").split(",") if c}
    clients = [c for c in CLIENTS if not only or c in only]
    binary = resolve_codex_binary()
    version = ".".join(map(str, probe_version(binary)))
    pythons: dict[str, str] = {"raw": sys.executable, "ours": sys.executable,
                               "ours-agent": sys.executable, "hermes": sys.executable,
                               "hermes-agent": sys.executable}
    if "sdk" in clients:
        sdk = sdk_python()
        if sdk:
            pythons["sdk"] = sdk
        else:
            clients.remove("sdk")
    for python in dict.fromkeys(pythons.values()):
        byte_compile(python)
    started = time.monotonic()
    results: dict[str, dict[str, list[dict[str, Any]]]] = {c: {} for c in clients}
    with tempfile.TemporaryDirectory(prefix="hcr-bench-") as tmp, \
            mp.MockResponsesProvider() as provider:
        root = Path(tmp)
        codex_home = prepare_codex_home(root / "codex-home", provider.base_url,
                                        codex_bin=binary.path)
        schema = ProtocolSchema.generate(binary.path, root / "schema")
        fake = FakeCodex(root / "fake", None)  # no per-message validation: this is a benchmark
        assert schema is not None
        cwd = root / "work"
        cwd.mkdir()
        config = {"codex_bin": binary.path, "codex_home": str(codex_home), "cwd": str(cwd),
                  "fake_codex": fake.path, "flood": FLOOD, "flood_delta": FLOOD_DELTA,
                  "warm_turns": 20, "repeats": REPEATS,
                  "hermes_home_plugin": str(hermes_home(root, codex_home, True)),
                  "hermes_home_plain": str(hermes_home(root, codex_home, False))}
        config_path = root / "config.json"
        config_path.write_text(json.dumps(config))
        env = {k: v for k, v in os.environ.items() if k not in ("HERMES_HOME", "CODEX_BIN")}
        env["CODEX_RUNTIME_LOAD_PLUGINS"] = ""
        wanted = {s for s in os.environ.get("BENCH_SCENARIOS", "").split(",") if s}
        for scenario in [s for s in SCENARIOS if not wanted or s in wanted]:
            for rep in range(reps):
                for client in (clients if rep % 2 == 0 else list(reversed(clients))):
                    script(provider, fake, scenario)
                    outcome = run_client(pythons[client], client, scenario, config_path, env)
                    if scenario == "close":
                        outcome = outcome or {}
                        outcome["orphans"] = len(fake.live_grandchildren())
                        fake.kill_leftovers()
                        (fake.state / "grandchildren.txt").unlink(missing_ok=True)
                    results[client].setdefault(scenario, []).append(outcome or {})
                    mark = "x" if outcome and "error" in outcome else "."
                    print(mark, end="", flush=True)
            print(f" {scenario}", flush=True)
    report = summarise(results, clients, version)
    report["imports_ms"] = measure_imports(pythons)
    report["history_seed_10k_ms"] = measure_seed()
    report["flood_delivery"] = delivery = flood_delivery(results, clients)
    report.update(run_fleet(binary.path, wanted))
    report["wall_s"] = time.monotonic() - started
    write(report)
    lost = [c for c in OURS if c in delivery and not delivery[c]["whole"]]
    if lost:
        print(f"FAIL: streamed text was lost in the flood by {', '.join(lost)}")
        return 1
    return 0


def run_fleet(codex_bin: str, wanted: set[str]) -> dict[str, Any]:
    """The fleet scenarios and the knee, unless skipped (``BENCH_FLEET=0``, ``BENCH_KNEE=0``,
    or a ``BENCH_SCENARIOS`` that names none of them): ``fleet``/``remote``/``targets``/``knee``
    keys for the report. Targets are reported, never asserted."""
    out: dict[str, Any] = {}
    chosen = [s for s in FLEET_SCENARIOS if not wanted or s in wanted]
    if os.environ.get("BENCH_FLEET", "1") != "0" and chosen:
        print("fleet:", ", ".join(chosen), flush=True)
        out.update(fleet.run_all(codex_bin, scenarios=chosen if wanted else None))
    if os.environ.get("BENCH_KNEE", "1") != "0" and (not wanted or "knee" in wanted):
        print("knee:", flush=True)
        out["knee"] = knee.run_knee(codex_bin)
    if os.environ.get("BENCH_REPLAY", "1") != "0" and (not wanted or "replay" in wanted):
        print("replay:", flush=True)
        out["replay"] = replay_bench.run_replay_bench(codex_bin)
    if os.environ.get("BENCH_FIRST", "1") != "0" and (not wanted or "first-turns" in wanted):
        out["first_turns"] = first_turns(codex_bin)
    if os.environ.get("BENCH_SIDE", "1") != "0" and (not wanted or "side_tasks" in wanted):
        print("side tasks:", flush=True)
        out["side_tasks"] = side_bench.run_side_task_bench(codex_bin)
    if os.environ.get("BENCH_TOOLS", "1") != "0" and (not wanted or "host_tools" in wanted):
        print("Hermes' tools on codex:", flush=True)
        out["host_tools"] = tools_bench.run_host_tool_bench(codex_bin)
    if os.environ.get("BENCH_COMMANDS", "1") != "0" and (not wanted
                                                       or "session_commands" in wanted):
        print("/retry and /undo on codex:", flush=True)
        out["session_commands"] = commands_bench.run_session_command_bench(codex_bin)
    return out


#: The host lines whose fresh gateways' first turns are measured: this venv's, and the 0.22's.
HOST_PYTHONS = (sys.executable, str(ROOT / ".venv-hermes022" / "bin" / "python"))


def first_turns(codex_bin: str) -> list[dict[str, Any]]:
    """``bench/gateway_life.py first-turns`` under each host line's Python that exists."""
    out = []
    for python in dict.fromkeys(HOST_PYTHONS):
        if not Path(python).exists():
            continue
        print(f"first turns of a fresh gateway ({python}):", flush=True)
        byte_compile(python)
        with tempfile.NamedTemporaryFile(suffix=".json") as result:
            proc = subprocess.run([python, str(ROOT / "bench" / "gateway_life.py"),
                                   "first-turns", "--codex-bin", codex_bin, "--out",
                                   result.name], timeout=3600, check=False,
                                  stdin=subprocess.DEVNULL)
            text = Path(result.name).read_text()
        out.append(json.loads(text) if proc.returncode == 0 and text else
                   {"host": python, "error": f"exit {proc.returncode}", "targets": []})
    return out


#: The clients whose streamed text must arrive whole (the bench fails otherwise).
OURS = ("ours", "ours-agent")


def flood_delivery(results: dict[str, dict[str, list[dict[str, Any]]]],
                   clients: list[str]) -> dict[str, dict[str, Any]]:
    """Per client, the streamed text its consumer got in the flood runs, against what was sent
    (``whole`` only when every run delivered every character)."""
    out: dict[str, dict[str, Any]] = {}
    for client in clients:
        runs = [o for o in results[client].get("flood", []) if "delivered_chars" in o]
        if not runs:
            continue
        delivered = [int(o["delivered_chars"]) for o in runs]
        expected = int(runs[0]["expected_chars"])
        out[client] = {"expected": expected, "delivered": delivered,
                       "whole": all(d == expected for d in delivered)
                       and len(runs) == len(results[client].get("flood", []))}
    return out


def summarise(results: dict[str, dict[str, list[dict[str, Any]]]], clients: list[str],
              version: str) -> dict[str, Any]:
    metrics = {
        "cold": [("cold_s", "cold start s"), ("process_s", "process → first turn s"),
                 ("cpu_ms", "client CPU, process start → first turn ms")],
        "warm": [("turn_ms", "warm turn ms"), ("cpu_ms", "client CPU per warm turn ms"),
                 ("rss_mib", "RSS after 20 turns MiB")],
        "stream": [("turn_ms", "2,000-delta turn ms"), ("cpu_ms", "client CPU, stream turn ms")],
        "approval": [("turn_ms", "approval turn ms"), ("cpu_ms", "client CPU, approval turn ms"),
                     ("approval_delay_ms", "approval delay ms")],
        "command": [("turn_ms", "sandboxed command turn ms")],
        "output": [("turn_ms", "5 MB command output turn ms")],
        "flood": [("deltas_per_s", "flood deltas/s"), ("peak_rss_mib", "flood peak RSS MiB")],
        "close": [("close_ms", "close() with a grandchild ms"), ("orphans", "orphans left")],
    }
    table: dict[str, dict[str, Any]] = {}
    errors: dict[str, list[str]] = {}
    for scenario, pairs in metrics.items():
        for key, label in pairs:
            row: dict[str, Any] = {}
            for client in clients:
                values: list[float] = []
                for outcome in results[client].get(scenario, []):
                    if "error" in outcome:
                        errors.setdefault(f"{client}/{scenario}", []).append(outcome["error"])
                        continue
                    value = outcome.get(key)
                    if isinstance(value, list):
                        values.extend(value)
                    elif isinstance(value, int | float):
                        values.append(float(value))
                if values:
                    row[client] = median_range(values)
                    if key == "approval_delay_ms":
                        ordered = sorted(values)
                        row[client]["p95"] = ordered[min(len(ordered) - 1,
                                                         int(0.95 * len(ordered)))]
            table[label] = row
    return {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "codex": version,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores", "clients": clients,
            "table": table, "errors": errors, "turn_targets": turn_targets(table)}


def turn_targets(table: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """A turn whose model runs one command in the sandbox, through a Hermes agent: the plugin's
    (its walls on) ≤ 1.1× Hermes' own runtime's (no walls), medians."""
    row = table.get("sandboxed command turn ms", {})
    ours, builtin = row.get("ours-agent"), row.get("hermes-agent")
    if not (ours and builtin):
        return []
    figure = ours["median"] / builtin["median"]
    return [{"name": "a sandboxed-command turn through an agent ≤ 1.1× Hermes' own runtime's",
             "figure": round(figure, 2), "limit": 1.1, "met": figure <= 1.1,
             "detail": f"{_fmt(ours['median'])} ms vs {_fmt(builtin['median'])} ms"}]


def write(report: dict[str, Any]) -> None:
    """``latest.json``/``latest.md``, plus the dated run file ``<YYYY-MM-DD>.json`` that the
    README's table is generated from (``python bench/run.py --readme FILE``)."""
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    data = json.dumps(report, indent=2)
    (out / "latest.json").write_text(data)
    (out / f"{report['date'][:10]}.json").write_text(data)
    text = render(report)
    (out / "latest.md").write_text(text)
    print(text)


README_BEGIN = "<!-- BEGIN generated from {name} (python bench/run.py --readme {name}) -->\n"
README_END = "<!-- END generated benchmarks -->\n"


def readme_with(readme: str, run_file: Path) -> str:
    """``readme`` with its benchmark block regenerated from the committed ``run_file``."""
    name = run_file.relative_to(ROOT).as_posix()
    report = json.loads(run_file.read_text())
    return replace_block(readme, README_BEGIN.format(name=name), README_END, render(report),
                         opening="<!-- BEGIN generated from ", what="README.md")


def render(report: dict[str, Any]) -> str:
    """The Markdown table and notes of one run."""
    clients = report["clients"]
    lines = [f"Benchmarks {report['date']} — codex {report['codex']}, {report['machine']}; "
             "median (min–max); ×raw in brackets.", "",
             "| metric | " + " | ".join(clients) + " |",
             "|---|" + "---|" * len(clients)]
    for label, row in report["table"].items():
        raw = row.get("raw", {}).get("median")
        cells = []
        for client in clients:
            stats = row.get(client)
            if not stats:
                cells.append("—")
                continue
            cell = f"{_fmt(stats['median'])} ({_fmt(stats['min'])}–{_fmt(stats['max'])})"
            if "p95" in stats:
                cell += f" p95 {_fmt(stats['p95'])}"
            if raw and client != "raw" and raw > 0:
                cell += f" [{stats['median'] / raw:.2f}×]"
            cells.append(cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    for label, stats in report["imports_ms"].items():
        lines.append(f"- import {label}: {_fmt(stats['median'])} ms "
                     f"({_fmt(stats['min'])}–{_fmt(stats['max'])})")
    seed = report["history_seed_10k_ms"]
    lines.append(f"- history seed of 10,000 messages: {_fmt(seed['median'])} ms "
                 f"({_fmt(seed['min'])}–{_fmt(seed['max'])})")
    lines.append(f"- wall time of the run: {report['wall_s']:.0f} s")
    for check in report.get("turn_targets", []):
        verdict = {True: "met", False: "MISSED"}[check["met"]]
        lines.append(f"- target {check['name']}: {verdict} — {check['figure']}× "
                     f"({check['detail']})")
    for client, check in report.get("flood_delivery", {}).items():
        got = ", ".join(f"{d:,}" for d in check["delivered"])
        verdict = "whole" if check["whole"] else "TEXT LOST"
        lines.append(f"- flood delivered text, {client}: {got} of {check['expected']:,} chars "
                     f"per run — {verdict}")
    for where, messages in report["errors"].items():
        lines.append(f"- errors in {where}: {len(messages)} (e.g. {messages[0][-200:]!r})")
    # the second table (fleet, remote, target checks) and the knee: only in runs that have them
    lines += fleet.render_lines(report.get("fleet"), report.get("remote"),
                                report.get("targets", []))
    lines += knee.render_lines(report.get("knee"))
    lines += replay_bench.render_lines(report.get("replay"))
    for host in report.get("first_turns", []):
        for check in host.get("targets", []):
            verdict = {True: "met", False: "MISSED", None: "NOT MEASURED"}[check["met"]]
            lines.append(f"- target ({host['host']}) {check['name']}: {verdict} — "
                         f"{check['figure']}× ({check['detail']})")
    lines += side_bench.render_lines(report.get("side_tasks"))
    lines += tools_bench.render_lines(report.get("host_tools"))
    lines += commands_bench.render_lines(report.get("session_commands"))
    return "\n".join(lines) + "\n"


def _fmt(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.0f}"
    if value >= 1:
        return f"{value:.1f}"
    return f"{value:.3f}"


def cli(argv: list[str]) -> int:
    """``run.py`` runs the benchmarks; ``run.py --readme FILE`` regenerates README.md's table
    from a committed run file."""
    if argv[:1] == ["--readme"] and len(argv) == 2:
        readme = ROOT / "README.md"
        readme.write_text(readme_with(readme.read_text(), (ROOT / argv[1]).resolve()))
        return 0
    if argv:
        print("usage: bench/run.py [--readme bench/results/<date>.json]", file=sys.stderr)
        return 2
    return main()


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
