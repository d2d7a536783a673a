"""What Hermes' /retry and /undo cost on codex: the runtime mends the SAME codex thread
(``thread/revert`` drops the turns Hermes cut) instead of starting a fresh thread seeded with the
whole conversation in ``developerInstructions`` (the old behaviour, still the fallback when codex
cannot mend). Real Hermes ``AIAgent``s in a child process with its own home, the real codex binary
on the loopback mock provider.

An agent holds a conversation of ``BENCH_COMMANDS_TURNS`` (6) turns — user messages and answers
of a few hundred characters, ``history`` kept as Hermes' CLI keeps it (the turn's
``result["messages"]``) — then, ``BENCH_COMMANDS_REPS`` (default 8) times:

* ``plain`` — the next turn;
* ``retry`` — /retry: the history cut before the last user message, that message sent again;
* ``undo`` — /undo 2 then a new message (one prior turn fewer than the others);
* ``seeded`` — for reference, the old behaviour: a fresh thread seeded with the conversation, on
  a second warm agent whose conversation alternates between two sharing no turn (the first user
  message upper-cased or not), so its thread is replaced, seeded, on every turn.

Per turn: the wall time of ``run_conversation``; what the model received — ``input`` items and
bytes (the mock scripts token usage: these stand in for prompt tokens), and how many of those
bytes lead as the conversation's previous request did (ids aside: what a prompt cache could
reuse); whether the developer message carried the seed ("already happened"); what the runtime
did to codex threads (``revert``, ``start``) and in how long. Medians, and ratios to ``plain``.

Alone: ``.venv/bin/python bench/session_commands.py [--out FILE]``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import host_tools  # noqa: E402

CASES = ("plain", "retry", "undo", "seeded")
SEED_MARK = "already happened"
FILLER = ("Please look again at the garden plan we discussed: the ferns by the north wall, the "
          "tomatoes in the raised beds and the watering schedule for the dry weeks of summer. ")
ANSWER = ("Here is the plan again, adjusted: water the ferns every second morning, mulch the "
          "raised beds before the heat arrives, and move the tomato stakes closer to the wall so "
          "the afternoon sun reaches the lower leaves. ") * 2


def run_session_command_bench(codex_bin: str) -> dict[str, Any]:
    """The measurements, in a child process (Hermes reads its home at import)."""
    return host_tools.in_child(__file__, codex_bin, timeout=1800)


def _message(n: int) -> str:
    return f"Turn {n}: " + FILLER * 2


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


def _bare(item: Any) -> Any:
    """An input item without its id (what the model reads)."""
    return {k: v for k, v in item.items() if k != "id"} if isinstance(item, dict) else item


def child(codex_bin: str, out: Path, tmp: str) -> None:
    """Measure, in this process (Hermes imported here), and write the figures to ``out``."""
    _hermes_home = host_tools._hermes_home
    from hermes_codex_runtime.offline import provider as mp
    from hermes_codex_runtime.offline.codex_home import prepare_codex_home
    from hermes_codex_runtime.wire import probe_version, resolve_codex_binary

    reps = int(os.environ.get("BENCH_COMMANDS_REPS", "8"))
    turns = int(os.environ.get("BENCH_COMMANDS_TURNS", "6"))
    root = Path(tmp)
    work = root / "work"
    work.mkdir()
    provider = mp.MockResponsesProvider(default=lambda _body: mp.text(ANSWER)).start()
    codex_home = prepare_codex_home(root / "codex-home", provider.base_url, codex_bin=codex_bin)
    os.environ.update(HERMES_HOME=str(_hermes_home(root, codex_home)), CODEX_BIN=codex_bin,
                      HERMES_DISABLE_LAZY_INSTALLS="1", TIRITH_ENABLED="0")
    import run_agent

    from hermes_codex_runtime.session import thread

    ops: list[tuple[str, float]] = []  # what the runtime did to codex threads in the turn
    mend, start = thread.mend, thread.start

    def noted(name: str, call: Any, *args: Any) -> Any:
        began = time.perf_counter()
        try:
            return call(*args)
        finally:
            ops.append((name, (time.perf_counter() - began) * 1000))

    def noted_mend(conn: Any, settings: Any, wanted: Any, restart: Any) -> Any:
        return noted("revert" if wanted.cut else "inject", mend, conn, settings, wanted, restart)

    def noted_start(*args: Any) -> Any:
        return noted("start", start, *args)

    thread.mend, thread.start = noted_mend, noted_start  # type: ignore[assignment]

    def agent() -> Any:
        made = run_agent.AIAgent(model="mock-model", quiet_mode=True, skip_memory=True,
                                 skip_context_files=True, provider="openai",
                                 api_mode="codex_app_server", api_key="sk-bench",
                                 base_url="http://127.0.0.1:9/v1")
        made.session_cwd = str(work)
        return made

    def turn(on: Any, text: str, history: list[Any]) -> tuple[list[Any], dict[str, Any]]:
        """One turn as Hermes' CLI runs it: the new history and what the turn cost."""
        first = len(provider.requests)
        ops.clear()
        began = time.perf_counter()
        result = on.run_conversation(text, conversation_history=list(history))
        wall = (time.perf_counter() - began) * 1000
        if not result.get("completed"):
            raise RuntimeError(f"a benchmark turn failed: {result.get('error')}")
        bodies = provider.requests[first:]
        inputs = [body.get("input") or [] for body in bodies]
        seeded = any(SEED_MARK in said for index in range(first, len(provider.requests))
                     for role, said in provider.request_texts(index) if role == "developer")
        shared = 0  # leading items the conversation's previous request had too: cacheable
        for mine, theirs in zip(inputs[0] if inputs else [], last_input, strict=False):
            if _bare(mine) != _bare(theirs):
                break
            shared += 1
        if on is main and inputs:
            last_input[:] = inputs[-1]
        return list(result.get("messages") or []), {
            "ms": wall, "requests": len(bodies), "items": sum(len(i) for i in inputs),
            "bytes": sum(_size(i) for i in inputs),
            "prefix_bytes": _size(inputs[0][:shared]) if shared else 0,
            "seeded": seeded, "ops": [name for name, _ in ops],
            "thread_ms": sum(ms for _, ms in ops)}

    def users(history: list[Any]) -> list[int]:
        return [i for i, m in enumerate(history) if m.get("role") == "user"]

    def cut(history: list[Any], n: int) -> tuple[list[Any], str]:
        """Hermes' /undo n (n = 1: /retry): the history before the n-th last user message."""
        at = users(history)[-n]
        return history[:at], str(history[at]["content"])

    def variant(history: list[Any], odd: bool) -> list[Any]:
        """``history`` whose first user message differs (same length) when ``odd``."""
        if not odd or not users(history):
            return history
        changed = [dict(m) for m in history]
        first = users(history)[0]
        changed[first]["content"] = str(changed[first]["content"]).upper()
        return changed

    main, reference = agent(), agent()
    last_input: list[Any] = []  # the input of the main conversation's last request
    figures: dict[str, list[dict[str, Any]]] = {case: [] for case in CASES}
    try:
        history: list[Any] = []
        for n in range(turns):
            history = turn(main, _message(n), history)[0]
        n = turns
        warm_history, warm_text = cut(history, 1)
        turn(reference, warm_text, variant(warm_history, True))  # its first turn: untimed
        for rep in range(reps):
            slot = rep % 4  # where the reference turn runs among the main agent's three
            for step in range(4):
                if step == slot:  # the main conversation's `turns` turns, and a message
                    before, text = cut(history, 1) if len(users(history)) > turns \
                        else (history, _message(n))
                    figures["seeded"].append(turn(reference, text, variant(before,
                                                                            rep % 2 == 1))[1])
                    continue
                if len(figures["plain"]) <= rep:
                    history, cost = turn(main, _message(n), history)
                    figures["plain"].append(cost)
                    n += 1
                elif len(figures["retry"]) <= rep:
                    before, text = cut(history, 1)
                    history, cost = turn(main, text, before)
                    figures["retry"].append(cost)
                else:
                    before, _ = cut(history, 2)
                    history, cost = turn(main, _message(n), before)
                    figures["undo"].append(cost)
                    n += 1
    finally:
        for done in (main, reference):
            done.close()
        provider.stop()
    summary: dict[str, Any] = {}
    for case, costs in figures.items():
        summary[case] = {
            "ms_p50": round(statistics.median(c["ms"] for c in costs), 1),
            "items_p50": statistics.median(c["items"] for c in costs),
            "bytes_p50": statistics.median(c["bytes"] for c in costs),
            "requests_p50": statistics.median(c["requests"] for c in costs),
            "prefix_bytes_p50": statistics.median(c["prefix_bytes"] for c in costs),
            "thread_ms_p50": round(statistics.median(c["thread_ms"] for c in costs), 1),
            "seeded": sum(c["seeded"] for c in costs),
            "ops": sorted({"+".join(c["ops"]) or "none" for c in costs}),
            "ms": [round(c["ms"], 1) for c in costs]}
    plain = summary["plain"]
    for case in CASES:
        for key in ("ms", "items", "bytes"):
            base = plain[f"{key}_p50"]
            summary[case][f"{key}_ratio"] = round(summary[case][f"{key}_p50"] / base, 3) \
                if base else None
    version = ".".join(map(str, probe_version(resolve_codex_binary())))
    out.write_text(json.dumps({"reps": reps, "turns": turns, "codex": version,
                               "cases": summary}))


LABELS = {"plain": "a plain next turn", "retry": "/retry (thread/revert, same thread)",
          "undo": "/undo 2 + a new message (thread/revert)",
          "seeded": "the old way: a fresh thread seeded with the history"}


def render_lines(result: dict[str, Any] | None) -> list[str]:
    """The /retry and /undo figures as Markdown lines (none without them)."""
    if not result:
        return []
    if "error" in result:
        return [f"- /retry and /undo on codex: not measured ({result['error'][-200:]})"]
    lines = [f"- /retry and /undo on codex ({result['turns']}-turn conversation, median of "
             f"{result['reps']}; input items and bytes of the request's `input` stand in for "
             "prompt tokens, which the mock scripts):"]
    for case in CASES:
        c = result["cases"][case]
        lines.append(
            f"  - {LABELS[case]}: {c['ms_p50']:.1f} ms ({c['ms_ratio']:.2f}×), "
            f"{c['items_p50']:g} input items ({c['items_ratio']:.2f}×), "
            f"{c['bytes_p50']:,.0f} B ({c['bytes_ratio']:.2f}×), of which "
            f"{c['prefix_bytes_p50']:,.0f} B a prefix of the previous request; seeded "
            f"{c['seeded']}/{result['reps']}; thread ops {', '.join(c['ops'])} "
            f"({c['thread_ms_p50']:.1f} ms)")
    return lines


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "--child":
        child(sys.argv[2], Path(sys.argv[3]), sys.argv[4])
        sys.exit(0)
    import standalone

    sys.exit(standalone.main("session_commands", run_session_command_bench, render_lines))
