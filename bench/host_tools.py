"""What Hermes' own tools cost on codex, side by side in one run: real Hermes ``AIAgent``s in one
process (a child of the bench, so Hermes is imported with its home set), the real codex binary on
the loopback mock provider, and Hermes' own loop (``chat_completions``) on a loopback mock chat
model that plays the same script.

* ``offered`` — warm text turns of an agent whose Hermes tools are offered to codex (Hermes'
  default toolsets: ~30 tools on every request) and of the same kind of agent with none,
  interleaved, ``BENCH_TOOLS_REPS`` (default 20) each: wall time and the process's CPU per turn.
  Target: ≤ 1.1× without.
* ``round_trip`` — what one tool call adds to a turn: a turn in which the model calls Hermes'
  ``todo`` once, against a text turn, on our runtime (codex → ``item/tool/call`` → the plugin →
  Hermes' dispatcher → codex) and on Hermes' own loop (the same tool dispatched by Hermes'
  executor), interleaved. Also inside ours: the time from codex's request read to the answer
  written, against the time in Hermes' dispatcher (``AIAgent._invoke_tool``) — the plugin's
  own share. Target: the added time ≤ 1.2× Hermes' own loop's.
* ``builds`` — how often the tool list was built into host tools over those turns (target: once
  per thread, not per turn).

Alone: ``.venv/bin/python bench/host_tools.py [--out FILE]``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TODO = {"todos": [{"id": "1", "content": "water the ferns", "status": "pending"}]}


def run_host_tool_bench(codex_bin: str) -> dict[str, Any]:
    """The three measurements, in a child process (Hermes reads its home at import)."""
    return in_child(__file__, codex_bin, timeout=900)


def in_child(script: str, codex_bin: str, *, timeout: float) -> dict[str, Any]:
    """``script --child CODEX_BIN OUT TMP`` in a child process with no Hermes home of the
    caller's (Hermes reads its home at import): the JSON it wrote to OUT, or ``{"error"}``."""
    with tempfile.TemporaryDirectory(prefix="hcr-bench-") as tmp:
        out = Path(tmp) / "result.json"
        env = {k: v for k, v in os.environ.items() if k not in ("HERMES_HOME",)}
        env["CODEX_RUNTIME_LOAD_PLUGINS"] = ""
        proc = subprocess.run([sys.executable, script, "--child", codex_bin, str(out), tmp],
                              env=env, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0 or not out.exists():
            return {"error": f"exit {proc.returncode}: {proc.stderr[-2000:]}"}
        result: dict[str, Any] = json.loads(out.read_text())
        return result


def _hermes_home(root: Path, codex_home: Path) -> Path:
    import yaml

    from hermes_codex_runtime.hermes.commands.offline import write_offline_caches

    home = root / "hermes-home"
    home.mkdir()
    config = {"plugins": {"enabled": ["codex-runtime"]},
              "security": {"allow_lazy_installs": False, "tirith_enabled": False},
              "model": {"provider": "openai-codex", "default": "mock-model",
                        "openai_runtime": "codex_app_server", "codex_home": str(codex_home),
                        "context_length": 200000},
              "approvals": {"mode": "off"},
              "auxiliary": {"title_generation": {"enabled": False}}}
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    write_offline_caches(home)
    return home


def _timed(agent: Any, text: str) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = agent.run_conversation(text)
    if not result.get("completed"):
        raise RuntimeError(f"a benchmark turn failed: {result.get('error')}")
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def _codex_cpu_ms() -> float:
    """The CPU time of every process this one started (codex and what it runs), in ms."""
    import psutil

    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total * 1000


def _timing(call: Any, into: list[float]) -> Any:
    """``call``, noting how long each call of it took (ms) in ``into``."""
    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            into.append((time.perf_counter() - began) * 1000)
    return timed


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def child(codex_bin: str, out: Path, tmp: str) -> None:
    """Measure, in this process (Hermes imported here), and write the figures to ``out``."""
    from hermes_codex_runtime.offline import provider as mp
    from hermes_codex_runtime.offline.chat import ChatCompletionsServer, ToolCall
    from hermes_codex_runtime.offline.codex_home import prepare_codex_home

    reps = int(os.environ.get("BENCH_TOOLS_REPS", "20"))
    root = Path(tmp)
    work = root / "work"
    work.mkdir()
    provider = mp.MockResponsesProvider(default=lambda _body: mp.text("ok")).start()
    chat = ChatCompletionsServer(answer="ok")
    codex_home = prepare_codex_home(root / "codex-home", provider.base_url, codex_bin=codex_bin)
    os.environ.update(HERMES_HOME=str(_hermes_home(root, codex_home)), CODEX_BIN=codex_bin,
                      HERMES_DISABLE_LAZY_INSTALLS="1", TIRITH_ENABLED="0")
    import run_agent

    from hermes_codex_runtime.hermes.tools import offer
    from hermes_codex_runtime.session import broker

    def agent(**kwargs: Any) -> Any:
        made = run_agent.AIAgent(model="mock-model", quiet_mode=True, skip_memory=True,
                                 skip_context_files=True, **kwargs)
        made.session_cwd = str(work)
        return made

    def on_codex(**kwargs: Any) -> Any:
        return agent(provider="openai", api_mode="codex_app_server", api_key="sk-bench",
                     base_url="http://127.0.0.1:9/v1", **kwargs)

    with_tools, without = on_codex(), on_codex()
    without.tools, without.valid_tool_names = [], set()
    own_loop = agent(provider="custom", api_mode="chat_completions", api_key="sk-bench",
                     base_url=chat.base_url)

    # the plugin's own share of a call: codex's request read → answer written, and Hermes'
    # dispatcher inside it
    handled: list[float] = []
    dispatched: list[float] = []
    run_host_tool = broker.RequestBroker._run_host_tool

    def timed_run(self: Any, conn: Any, message: Any) -> None:
        began = time.perf_counter()
        run_host_tool(self, conn, message)
        handled.append((time.perf_counter() - began) * 1000)

    broker.RequestBroker._run_host_tool = timed_run  # type: ignore[method-assign]
    with_tools._invoke_tool = _timing(with_tools._invoke_tool, dispatched)
    # the same call dispatched by Hermes' own loop: its executor, from the model's tool call to
    # the result message (hooks, guardrails, display, the session flush, the result budget)
    executed: list[float] = []
    own_loop._execute_tool_calls = _timing(own_loop._execute_tool_calls, executed)
    builds = {"count": 0}
    build = offer.build

    def counted_build(definitions: Any, **kwargs: Any) -> Any:
        builds["count"] += 1
        return build(definitions, **kwargs)

    offer.build = counted_build  # type: ignore[assignment]
    try:
        for warm in (with_tools, without):
            _timed(warm, "warm up")
        chat.script.append("ok")
        _timed(own_loop, "warm up")
        figures: dict[str, list[float]] = {k: [] for k in (
            "tools_ms", "tools_cpu_ms", "tools_codex_cpu_ms", "bare_ms", "bare_cpu_ms",
            "bare_codex_cpu_ms", "ours_text_ms",
            "ours_tool_ms", "own_text_ms", "own_tool_ms")}
        for rep in range(reps):
            order = [(with_tools, "tools"), (without, "bare")]
            for warm, key in order if rep % 2 == 0 else reversed(order):
                codex_before = _codex_cpu_ms()
                wall, cpu = _timed(warm, "hi")
                figures[f"{key}_ms"].append(wall)
                figures[f"{key}_cpu_ms"].append(cpu)
                figures[f"{key}_codex_cpu_ms"].append(_codex_cpu_ms() - codex_before)
            provider.enqueue(mp.text("ok"))
            figures["ours_text_ms"].append(_timed(with_tools, "say ok")[0])
            provider.enqueue(mp.tool_call("todo", TODO), mp.text("ok"))
            figures["ours_tool_ms"].append(_timed(with_tools, "plan it")[0])
            chat.script.append("ok")
            figures["own_text_ms"].append(_timed(own_loop, "say ok")[0])
            chat.script.extend([ToolCall("todo", TODO), "ok"])
            figures["own_tool_ms"].append(_timed(own_loop, "plan it")[0])
        offered_count = len([t for t in provider.requests[-1].get("tools", [])
                             if t.get("name")])
        # the same comparison where the model takes a fast model's first byte to answer
        delay = int(os.environ.get("BENCH_TOOLS_DELAY_MS", "250")) / 1000
        provider.set_default(lambda _body: mp.text("ok", delay=delay))
        slow: dict[str, list[float]] = {"tools": [], "bare": []}
        for rep in range(max(4, reps // 2)):
            order = [(with_tools, "tools"), (without, "bare")]
            for warm, key in order if rep % 2 == 0 else reversed(order):
                slow[key].append(_timed(warm, "hi")[0])
        threads = {with_tools.session_id}
    finally:
        for done in (with_tools, without, own_loop):
            done.close()
        provider.stop()
        chat.close()
    med = {key: _median(values) for key, values in figures.items()}
    ours_added = med["ours_tool_ms"] - med["ours_text_ms"]
    own_added = med["own_tool_ms"] - med["own_text_ms"]
    result = {
        "reps": reps,
        "offered": {"tools_offered": offered_count, "with_ms_p50": med["tools_ms"],
                    "without_ms_p50": med["bare_ms"], "with_cpu_ms_p50": med["tools_cpu_ms"],
                    "without_cpu_ms_p50": med["bare_cpu_ms"],
                    "with_codex_cpu_ms_p50": med["tools_codex_cpu_ms"],
                    "without_codex_cpu_ms_p50": med["bare_codex_cpu_ms"],
                    "ratio": round(med["tools_ms"] / med["bare_ms"], 3),
                    "model_delay_ms": delay * 1000,
                    "delayed_with_ms_p50": _median(slow["tools"]),
                    "delayed_without_ms_p50": _median(slow["bare"]),
                    "delayed_ratio": round(statistics.median(slow["tools"])
                                           / statistics.median(slow["bare"]), 3)},
        "round_trip": {"ours_text_ms_p50": med["ours_text_ms"],
                       "ours_tool_ms_p50": med["ours_tool_ms"],
                       "own_text_ms_p50": med["own_text_ms"],
                       "own_tool_ms_p50": med["own_tool_ms"],
                       "ours_added_ms": round(ours_added, 2),
                       "own_added_ms": round(own_added, 2),
                       "ratio": round(ours_added / own_added, 3) if own_added > 0 else None,
                       "handled_ms_p50": _median(handled) if handled else None,
                       "dispatcher_ms_p50": _median(dispatched) if dispatched else None,
                       "own_executor_ms_p50": _median(executed) if executed else None},
        "builds": {"count": builds["count"], "threads": len(threads),
                   "turns": 1 + 3 * reps},
    }
    out.write_text(json.dumps(result))


def render_lines(result: dict[str, Any] | None) -> list[str]:
    """The host-tool figures and their targets as Markdown lines (none without them)."""
    if not result:
        return []
    if "error" in result:
        return [f"- Hermes' tools on codex: not measured ({result['error'][-200:]})"]
    offered, trip, builds = result["offered"], result["round_trip"], result["builds"]
    ratio = trip["ratio"]
    handled, executor = trip["handled_ms_p50"], trip["own_executor_ms_p50"]
    dispatch = round(handled / executor, 3) if handled and executor else None
    return [
        f"- warm text turn through an agent with Hermes' tools offered to codex "
        f"({offered['tools_offered']} function tools on the request; median of "
        f"{result['reps']}, the mock answering at once): {offered['with_ms_p50']:.1f} ms, client "
        f"CPU {offered['with_cpu_ms_p50']:.1f} ms, codex CPU "
        f"{offered['with_codex_cpu_ms_p50']:.1f} ms vs none offered "
        f"{offered['without_ms_p50']:.1f} ms, CPU {offered['without_cpu_ms_p50']:.1f} ms, codex "
        f"CPU {offered['without_codex_cpu_ms_p50']:.1f} ms ({offered['ratio']:.2f}×); the mock "
        f"answering after {offered['model_delay_ms']:.0f} ms: "
        f"{offered['delayed_with_ms_p50']:.1f} vs {offered['delayed_without_ms_p50']:.1f} ms "
        f"({offered['delayed_ratio']:.2f}×)",
        f"- one Hermes tool call (`todo`) adds {trip['ours_added_ms']:.1f} ms to a turn on codex "
        f"({trip['ours_text_ms_p50']:.1f} → {trip['ours_tool_ms_p50']:.1f} ms) vs "
        f"{trip['own_added_ms']:.1f} ms on Hermes' own loop ({trip['own_text_ms_p50']:.1f} → "
        f"{trip['own_tool_ms_p50']:.1f} ms); the call itself: codex's request read to our answer "
        f"written {handled} ms (Hermes' dispatcher inside it {trip['dispatcher_ms_p50']} ms) vs "
        f"Hermes' own executor {executor} ms ({dispatch}×)",
        f"- tool list built into host tools {builds['count']} time(s) over {builds['turns']} "
        f"turns of {builds['threads']} thread(s)",
        f"- target tools offered: a warm turn ≤ 1.1× without: "
        f"{'met' if offered['ratio'] <= 1.1 else 'MISSED'} — {offered['ratio']:.2f}×",
        f"- target one host-tool round trip ≤ 1.2× Hermes' own loop's: "
        f"{'NOT MEASURED' if ratio is None else 'met' if ratio <= 1.2 else 'MISSED'} — "
        f"{ratio if ratio is not None else '-'}×",
        f"- target the tool list built once per thread: "
        f"{'met' if builds['count'] <= builds['threads'] else 'MISSED'} — {builds['count']}",
        *([f"- (Hermes' tools on codex: {result['note']})"] if result.get("note") else [])]


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "--child":
        child(sys.argv[2], Path(sys.argv[3]), sys.argv[4])
        sys.exit(0)
    import standalone

    sys.exit(standalone.main("host_tools", run_host_tool_bench, render_lines))
