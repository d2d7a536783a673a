"""The replay report: ``report.json`` (versioned schema) and a self-contained ``report.html``.

``report.json`` (schema ``hermes-codex-runtime.replay.report/1``) holds the source, the
baseline, the plan, and per variant: status, thread, attempts, elapsed, the five token buckets
(ordinary input, cache read, cache write, output, reasoning — input is split once, never counted
twice), a cost estimate where a price is known, what the working copy changed, and per turn the
original and the replayed text with a unified diff and a similarity ratio, the tool calls on
both sides, status and time. ``limitations`` lists what may make the comparison unfair (tools of
the recorder codex does not have, a baseline the recorder did not record, network off, …).

``report.html`` is one file with no external assets and a strict Content-Security-Policy (no
script at all; the one style block is allowed by its hash): side-by-side turns, diffs, and token
bars drawn as SVG.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import html
import time
from collections.abc import Mapping, Sequence
from typing import Any

from hermes_codex_runtime.replay.plan import Plan, variant_changes
from hermes_codex_runtime.replay.records import rerun_hint
from hermes_codex_runtime.replay.sources import Transcript
from hermes_codex_runtime.replay.store import Run
from hermes_codex_runtime.wire.files import atomic_write_text

REPORT_SCHEMA = "hermes-codex-runtime.replay.report/1"
BUCKETS = ("input", "cache_read", "cache_write", "output", "reasoning")
BUCKET_LABELS = {"input": "Ordinary input tokens", "cache_read": "Cache-read tokens",
                 "cache_write": "Cache-write tokens", "output": "Output tokens",
                 "reasoning": "Reasoning tokens"}
MAX_COMPARE = 20_000  # characters compared for the similarity ratio

#: Tools codex itself has (as the runtime names them in a transcript it recorded).
CODEX_TOOLS = frozenset({"exec_command", "shell", "apply_patch", "update_plan", "view_image",
                         "web_search", "write_stdin"})


def _price_of(prices: Mapping[str, Any] | None, model: str | None) -> Mapping[str, Any] | None:
    if not prices or not model:
        return None
    entry = prices.get(model)
    return entry if isinstance(entry, Mapping) else None


def estimate_cost(usage: Mapping[str, int], prices: Mapping[str, Any] | None,
                  model: str | None) -> dict[str, Any]:
    """``{usd, basis}``: the cost of ``usage`` at ``prices[model]`` (USD per million tokens:
    ``input``, ``cache_read``, ``cache_write``, ``output``; reasoning is billed as output and is
    already inside ``output``), or ``usd: None`` with the reason."""
    price = _price_of(prices, model)
    if price is None:
        return {"usd": None, "basis": f"no price known for {model or 'the default model'}"}
    try:
        usd = sum(float(price.get(bucket, price.get("input", 0.0) if bucket != "output"
                                  else 0.0)) * int(usage.get(bucket, 0))
                  for bucket in ("input", "cache_read", "cache_write", "output")) / 1e6
    except (TypeError, ValueError):
        return {"usd": None, "basis": f"the price of {model} is malformed"}
    return {"usd": round(usd, 6), "basis": f"price table entry for {model} (USD per 1M tokens)"}


def text_diff(original: str, replay: str) -> str:
    """A unified diff of two answers, line by line."""
    return "\n".join(difflib.unified_diff(
        original.splitlines(), replay.splitlines(), fromfile="original", tofile="replay", n=2,
        lineterm=""))


def similarity(original: str, replay: str) -> float:
    """0..1, difflib's ratio over the first :data:`MAX_COMPARE` characters."""
    if not original and not replay:
        return 1.0
    return round(difflib.SequenceMatcher(None, original[:MAX_COMPARE],
                                         replay[:MAX_COMPARE]).ratio(), 4)


def original_usage(transcript: Transcript) -> dict[str, int]:
    """The original session's buckets from the recorder's session columns (its
    ``input_tokens`` are the uncached share; cache reads and writes have their own columns)."""
    raw = transcript.usage
    if not raw:
        return {}
    usage = {"input": raw.get("input_tokens", 0), "cache_read": raw.get("cache_read_tokens", 0),
             "cache_write": raw.get("cache_write_tokens", 0),
             "output": raw.get("output_tokens", 0), "reasoning": raw.get("reasoning_tokens", 0)}
    usage["total"] = usage["input"] + usage["cache_read"] + usage["cache_write"] \
        + usage["output"]
    return usage


def limitations(transcript: Transcript, plan: Mapping[str, Any],
                variants: Sequence[Mapping[str, Any]]) -> list[str]:
    """What may make the comparison unfair, in words."""
    notes = []
    recorder = transcript.recorder
    lacking = [tool for tool in transcript.tools_used
               if tool not in transcript.comparable_tools and tool not in CODEX_TOOLS
               and not tool.startswith("mcp.") and transcript.kind != "claude"]
    if lacking:
        notes.append(f"The original used {recorder} tools codex does not have: "
                     f"{', '.join(lacking)} — this may affect comparison fairness.")
    if transcript.kind == "claude":
        notes.append("The original ran in Claude Code, whose tools differ from codex's.")
    web = [t for t in transcript.tools_used if t.startswith(("web_", "browser"))]
    if web and not plan.get("network"):
        notes.append(f"The original used the network ({', '.join(web)}); the replay ran with "
                     "network access off (--network turns it on).")
    baseline = plan.get("baseline") or {}
    if baseline.get("kind") == "commit":
        notes.append(f"{recorder} does not record the commit a session started from: the replay "
                     f"started from {str(baseline.get('commit'))[:12]} "
                     f"({baseline.get('requested')}), which may differ from what the original "
                     "saw.")
    elif transcript.cwd:
        notes.append("The replay started from an empty directory, not the original's files.")
    if plan.get("mode") == "single-prompt":
        notes.append("Single-prompt mode: the chosen user turns were sent as one message, so "
                     "per-turn answers are not comparable one to one.")
    if len(plan.get("turns") or []) < len(transcript.turns):
        notes.append(f"Only turns {_ranges(plan.get('turns') or [])} of "
                     f"{len(transcript.turns)} were replayed.")
    notes.append("The replay ran unattended: codex was never asked for approval, and questions "
                 "it would have asked the user went unanswered.")
    if any(t.get("recovered") for v in variants for t in v.get("turns") or []):
        notes.append("Some turns were recovered from codex's thread after the runner stopped "
                     "mid-turn; their token counts are not known.")
    for v in variants:
        for t in v.get("turns") or []:
            rerun = t.get("rerun")
            if isinstance(rerun, Mapping) and rerun.get("alone"):
                notes.append(f"Turn {t['index']} of {v['name']} was rerun alone after it came "
                             "back interrupted: on a fork of its thread at the turn before it "
                             "(the history it saw first), but in the working copy as the turns "
                             "after it had left it; those turns had seen the interrupted "
                             "attempt.")
            elif isinstance(rerun, Mapping):
                notes.append(f"Turn {t['index']} of {v['name']} was sent again after it came "
                             "back interrupted, on a fork of its thread at the turn before it; "
                             "the turns after it continued on that fork.")
    if transcript.usage:
        notes.append(f"The original's tokens are the whole session's as {recorder} recorded "
                     "them, counted by another runtime; compare totals, not turns.")
    return notes


def _ranges(indices: Sequence[int]) -> str:
    out, start, prev = [], None, None
    for i in sorted(indices):
        if start is None:
            start = prev = i
        elif i == (prev or 0) + 1:
            prev = i
        else:
            out.append(f"{start}-{prev}" if start != prev else str(start))
            start = prev = i
    if start is not None:
        out.append(f"{start}-{prev}" if start != prev else str(start))
    return ", ".join(out)


def build_report(run: Run, status: str | None = None) -> dict[str, Any]:
    """The report as data, from the run's state, source and turn records (``status``: the
    run's final status when the runner writes it just before recording it)."""
    state = run.state()
    plan_data = state["plan"]
    plan = Plan.from_json(plan_data)
    transcript = Transcript.from_json(run.load_json("source.json"))
    originals = {t.index: t for t in transcript.turns}
    prices = plan_data.get("prices") if isinstance(plan_data.get("prices"), Mapping) else None
    changed = variant_changes(run, plan.variants)
    variants = []
    for variant in plan.variants:
        vstate = (state.get("variants") or {}).get(variant.name) or {}
        usage = {bucket: 0 for bucket in (*BUCKETS, "total")}
        turns = []
        for record in run.turns(variant.name):
            index = int(record["index"])
            if plan.mode == "single-prompt":
                original_text = "\n\n".join(t.original_text for t in transcript.turns
                                            if t.index in plan.turns)
                original_tools = [c for t in transcript.turns if t.index in plan.turns
                                  for c in t.tool_calls]
            else:
                original = originals.get(index)
                original_text = original.original_text if original else ""
                original_tools = list(original.tool_calls) if original else []
            replay_text = str(record.get("final_text") or "")
            for bucket in usage:
                usage[bucket] += int((record.get("usage") or {}).get(bucket, 0))
            turns.append({
                "index": index, "user_text": record.get("user_text", ""),
                "original_text": original_text, "original_tool_calls": original_tools,
                "replay_text": replay_text, "tool_calls": record.get("tool_calls") or [],
                "status": record.get("status"), "error": record.get("error"),
                "elapsed": record.get("elapsed"), "usage": record.get("usage") or {},
                "recovered": bool(record.get("recovered")), "rerun": record.get("rerun"),
                "rerun_command": rerun_hint(run.id) if record.get("status") == "interrupted"
                and state.get("status") != "cancelled" else None,
                "diff": text_diff(original_text, replay_text),
                "similarity": similarity(original_text, replay_text)})
        model = vstate.get("model") or variant.model
        variants.append({
            "name": variant.name, "model": model, "requested_model": variant.model,
            "effort": variant.effort, "status": vstate.get("status", "pending"),
            "error": vstate.get("error"), "thread_id": vstate.get("thread_id"),
            "endpoint": vstate.get("endpoint"),
            "attempts": int(vstate.get("attempt") or 0) + 1,
            "elapsed": round(sum(float(t.get("elapsed") or 0) for t in turns), 3),
            "usage": usage, "cost": estimate_cost(usage, prices, model),
            "changes": changed.get(variant.name, {}), "turns": turns})
    original_buckets = original_usage(transcript)
    return {
        "schema": REPORT_SCHEMA, "run_id": run.id, "generated_at": time.time(),
        "status": status or state.get("status"),
        "source": {k: v for k, v in transcript.to_json().items() if k != "turns"}
        | {"turns_total": len(transcript.turns)},
        "baseline": plan.baseline.to_json(),
        "plan": {k: plan_data.get(k) for k in ("mode", "turns", "parallel", "budget_tokens",
                                               "network", "judge")},
        "original": {"model": transcript.model, "usage": original_buckets,
                     "cost": {"usd": transcript.cost_usd,
                              "basis": f"as {transcript.recorder} recorded it"
                              if transcript.cost_usd is not None else "not recorded"}},
        "variants": variants,
        "limitations": limitations(transcript, plan_data, variants),
        "judge": state.get("judge"),
    }


def write_report(run: Run, status: str | None = None) -> dict[str, Any]:
    """Build and write ``report.json`` and ``report.html``; returns the report."""
    report = build_report(run, status)
    run.save_json("report.json", report)
    atomic_write_text(run.dir / "report.html", render_html(report))
    return report


# --------------------------------------------------------------------------- HTML

_CSS = """
:root{--fg:#1d2330;--muted:#5d6678;--line:#d9dde5;--bg:#f7f8fa;--card:#fff;--add:#e6f6ea;
--del:#fbeaea;--accent:#3b5bdb}
*{box-sizing:border-box}body{margin:0;font:14px/1.5 system-ui,-apple-system,"Segoe UI",
sans-serif;color:var(--fg);background:var(--bg)}
header{padding:20px 28px;background:var(--card);border-bottom:1px solid var(--line)}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 10px}
h3{font-size:14px;margin:0 0 6px}.muted{color:var(--muted)}main{padding:0 28px 40px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:12px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 14px}
.status{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;
background:#eef1f6}.status.completed{background:#e3f5e8}.status.failed,
.status.cancelled{background:#fbe4e4}.status.interrupted,.status.stopped{background:#fff3d6}
table{border-collapse:collapse;width:100%}td,th{padding:4px 8px;border-bottom:1px solid
var(--line);text-align:left;vertical-align:top}th{font-weight:600;color:var(--muted)}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.turn{background:var(--card);border:1px solid var(--line);border-radius:8px;margin:14px 0;
padding:12px 14px}.user{background:#eef2ff;border-radius:6px;padding:8px 10px;
white-space:pre-wrap}.side{display:grid;gap:12px;margin-top:10px}
.side>div{min-width:0}.answer{white-space:pre-wrap;border:1px solid var(--line);
border-radius:6px;padding:8px 10px;background:#fcfcfd;max-height:420px;overflow:auto}
.tools{font-size:12px;color:var(--muted);margin:4px 0}
pre.diff{margin:6px 0 0;padding:8px;background:#fbfbfc;border:1px solid var(--line);
border-radius:6px;overflow:auto;max-height:480px;font:12px/1.45 ui-monospace,Menlo,monospace}
pre.diff span{display:block;white-space:pre}.a{background:var(--add)}.d{background:var(--del)}
.h{color:var(--accent)}details summary{cursor:pointer;color:var(--accent)}
ul.limits li{margin:3px 0}svg text{font:11px system-ui,sans-serif;fill:var(--fg)}
"""
_COLORS = ("#3b5bdb", "#0ca678", "#f08c00", "#ae3ec9", "#e03131", "#1098ad")


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: Any) -> str:
    return f"{int(value or 0):,}"


def _diff_html(diff: str) -> str:
    lines = []
    for line in diff.splitlines():
        cls = "a" if line.startswith("+") and not line.startswith("+++") else \
            "d" if line.startswith("-") and not line.startswith("---") else \
            "h" if line.startswith("@@") else ""
        lines.append(f'<span class="{cls}">{_e(line)}</span>' if cls else
                     f"<span>{_e(line)}</span>")
    return '<pre class="diff">' + "".join(lines) + "</pre>" if lines else \
        '<p class="muted">no difference</p>'


def _token_bars(rows: Sequence[tuple[str, Mapping[str, int]]]) -> str:
    """Stacked horizontal bars (SVG; no script, no inline style attributes)."""
    width, label_w, bar_h, gap = 760, 150, 18, 8
    biggest = max([sum(int(u.get(b, 0)) for b in BUCKETS[:4]) for _, u in rows] + [1])
    height = (bar_h + gap) * len(rows) + 34
    parts = [f'<svg role="img" aria-label="token breakdown" viewBox="0 0 {width} {height}" '
             f'width="100%" xmlns="http://www.w3.org/2000/svg">']
    for row, (name, usage) in enumerate(rows):
        y = row * (bar_h + gap)
        parts.append(f'<text x="0" y="{y + 13}">{_e(name[:22])}</text>')
        x = float(label_w)
        for i, bucket in enumerate(BUCKETS[:4]):
            value = int(usage.get(bucket, 0))
            w = (width - label_w - 80) * value / biggest
            if w > 0:
                parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" '
                             f'fill="{_COLORS[i]}"><title>{_e(BUCKET_LABELS[bucket])}: '
                             f'{_num(value)}</title></rect>')
                x += w
        total = sum(int(usage.get(b, 0)) for b in BUCKETS[:4])
        parts.append(f'<text x="{x + 6:.1f}" y="{y + 13}">{_num(total)}</text>')
    y = len(rows) * (bar_h + gap) + 8
    x = float(label_w)
    for i, bucket in enumerate(BUCKETS[:4]):
        parts.append(f'<rect x="{x}" y="{y}" width="10" height="10" fill="{_COLORS[i]}"/>'
                     f'<text x="{x + 14}" y="{y + 9}">{_e(BUCKET_LABELS[bucket])}</text>')
        x += 150
    parts.append("</svg>")
    return "".join(parts)


def render_html(report: Mapping[str, Any]) -> str:
    """The report page: one self-contained HTML file."""
    source = report.get("source") or {}
    variants = list(report.get("variants") or [])
    original = report.get("original") or {}
    out: list[str] = []
    title = source.get("title") or source.get("session_id") or "session"
    out.append(f"<header><h1>Codex Replay — {_e(title)}</h1><div class=\"muted\">run "
               f"{_e(report.get('run_id'))} · <span class=\"status {_e(report.get('status'))}\">"
               f"{_e(report.get('status'))}</span> · source {_e(source.get('kind'))} "
               f"{_e(source.get('ref'))} · baseline {_e(_baseline_text(report))}</div></header>")
    out.append("<main><h2>Variants</h2><div class=\"cards\">")
    out.append(f"<div class=\"card\"><h3>Original</h3><div>model {_e(original.get('model'))}"
               f"</div><div class=\"muted\">{len(source.get('tools_used') or [])} tool kinds · "
               f"cost {_cost(original.get('cost'))}</div></div>")
    for v in variants:
        done = sum(1 for t in v.get("turns") or [] if t.get("status") == "completed")
        out.append(f"<div class=\"card\"><h3>{_e(v['name'])} <span class=\"status "
                   f"{_e(v.get('status'))}\">{_e(v.get('status'))}</span></h3>"
                   f"<div>model {_e(v.get('model') or '(codex default)')}"
                   f"{' · effort ' + _e(v['effort']) if v.get('effort') else ''}"
                   f"{' · on ' + _e(v['endpoint']) if v.get('endpoint') else ''}</div>"
                   f"<div class=\"muted\">{done} of {len(v.get('turns') or [])} turns · "
                   f"{float(v.get('elapsed') or 0):.1f} s · "
                   f"{_num((v.get('usage') or {}).get('total'))} tokens · cost "
                   f"{_cost(v.get('cost'))} · {v.get('attempts', 1)} attempt(s)"
                   f"</div>{'<div>' + _e(v['error']) + '</div>' if v.get('error') else ''}</div>")
    out.append("</div><h2>Tokens</h2>")
    rows = [(v["name"], v.get("usage") or {}) for v in variants]
    if original.get("usage"):
        rows.insert(0, ("original", original["usage"]))
    out.append(_token_bars(rows))
    out.append("<table><tr><th></th>" + "".join(f"<th>{_e(name)}</th>" for name, _ in rows)
               + "</tr>")
    out.append("<tr><td>Total input processed</td>" + "".join(
        f"<td class=\"num\">{_num(sum(int(u.get(b, 0)) for b in BUCKETS[:3]))}</td>"
        for _, u in rows) + "</tr>")
    for bucket in BUCKETS:
        out.append(f"<tr><td>{_e(BUCKET_LABELS[bucket])}</td>" + "".join(
            f"<td class=\"num\">{_num(u.get(bucket))}</td>" for _, u in rows) + "</tr>")
    out.append("</table>")
    out.append("<h2>Turns</h2>")
    indices = sorted({t["index"] for v in variants for t in v.get("turns") or []})
    columns = len(variants) + 1
    for index in indices:
        per = {v["name"]: next((t for t in v.get("turns") or [] if t["index"] == index), None)
               for v in variants}
        first = next((t for t in per.values() if t), None) or {}
        out.append(f"<section class=\"turn\" id=\"turn-{index}\"><h3>Turn {index}</h3>"
                   f"<div class=\"user\">{_e(first.get('user_text'))}</div>")
        out.append(f"<div class=\"side cols-{columns}\"><div><h3>Original</h3>"
                   f"{_tools(first.get('original_tool_calls'))}<div class=\"answer\">"
                   f"{_e(first.get('original_text'))}</div></div>")
        for v in variants:
            turn = per.get(v["name"])
            if turn is None:
                out.append(f"<div><h3>{_e(v['name'])}</h3><p class=\"muted\">not run</p></div>")
                continue
            out.append(f"<div><h3>{_e(v['name'])} <span class=\"status "
                       f"{_e(turn.get('status'))}\">{_e(turn.get('status'))}</span></h3>"
                       f"{_tools(turn.get('tool_calls'))}<div class=\"answer\">"
                       f"{_e(turn.get('replay_text'))}</div><div class=\"muted\">"
                       f"{float(turn.get('elapsed') or 0):.1f} s · "
                       f"{_num((turn.get('usage') or {}).get('total'))} tokens · similarity "
                       f"{float(turn.get('similarity') or 0):.0%}"
                       f"{' · recovered' if turn.get('recovered') else ''}"
                       f"{' · sent again' if turn.get('rerun') else ''}</div>"
                       f"{'<div>' + _e(turn['error']) + '</div>' if turn.get('error') else ''}"
                       + (f"<div class=\"rerun\">Rerun just this turn: <code>"
                          f"{_e(turn['rerun_command'])}</code></div>"
                          if turn.get("rerun_command") else "") +
                       f"<details><summary>diff against the original</summary>"
                       f"{_diff_html(str(turn.get('diff') or ''))}</details></div>")
        out.append("</div></section>")
    out.append("<h2>Changes on disk</h2>")
    for v in variants:
        changes = v.get("changes") or {}
        files = changes.get("files") or []
        out.append(f"<details{' open' if files else ''}><summary>{_e(v['name'])}: "
                   f"{len(files)} file(s) changed</summary><ul>"
                   + "".join(f"<li>{_e(f['status'])} <code>{_e(f['path'])}</code></li>"
                             for f in files) + "</ul>"
                   + (_diff_html(str(changes.get("diff") or "")) if files else "")
                   + ("<p class=\"muted\">diff truncated</p>" if changes.get("truncated")
                      else "") + "</details>")
    out.append("<h2>Limitations</h2><ul class=\"limits\">" + "".join(
        f"<li>{_e(note)}</li>" for note in report.get("limitations") or []) + "</ul>")
    judge = report.get("judge")
    if judge:
        out.append("<h2>Blind review</h2>" + _judge_html(judge))
    out.append("</main>")
    css = _CSS + "".join(
        f".side.cols-{n}{{grid-template-columns:repeat({n},minmax(0,1fr))}}" for n in range(
            2, 9))
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    csp = (f"default-src 'none'; style-src 'sha256-{digest}'; img-src data:; "
           "base-uri 'none'; form-action 'none'")
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">"
            f"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<link rel=\"icon\" href=\"data:,\">"
            f"<title>Codex Replay — {_e(title)}</title><style>{css}</style></head><body>"
            + "".join(out) + "</body></html>")


def _baseline_text(report: Mapping[str, Any]) -> str:
    base = report.get("baseline") or {}
    if base.get("kind") == "empty":
        return "empty directory"
    return f"{str(base.get('commit') or '')[:12]} ({base.get('requested')})"


def _cost(cost: Any) -> str:
    if isinstance(cost, Mapping) and isinstance(cost.get("usd"), int | float):
        return f"${cost['usd']:.4f}"
    return "unknown"


def _tools(calls: Any) -> str:
    names = [str(c.get("name")) for c in calls or [] if isinstance(c, Mapping)]
    if not names:
        return '<div class="tools">no tools</div>'
    return f'<div class="tools">tools: {_e(", ".join(names))}</div>'


def _judge_html(judge: Mapping[str, Any]) -> str:
    parts = []
    for variant, outcome in judge.items():
        if not isinstance(outcome, Mapping):
            continue
        parts.append(f"<h3>{_e(variant)}</h3>")
        if outcome.get("status") != "completed":
            error = outcome.get("error") or "No validated blind review ballot is available."
            parts.append(f"<p>{_e(outcome.get('status'))}: {_e(error)}</p>")
            continue
        mapping = outcome.get("candidate_mapping") or {}
        rows = []
        for check in outcome.get("checks") or []:
            cells = "".join(f"<td>{_e({1: 'Pass', 0: 'Fail'}.get(check.get(k), 'N/A'))}</td>"
                            for k in ("a", "b"))
            rows.append(f"<tr><td>{_e(check.get('label'))}</td>{cells}</tr>")
        scores = outcome.get("scores") or {}
        winner = "Tie" if outcome.get("winner") == "tie" else outcome.get("winner")
        parts.append(
            f"<p class=\"muted\">reviewer {_e(outcome.get('model'))}, blind: A was "
            f"{_e(mapping.get('A'))}, B was {_e(mapping.get('B'))}</p><table><tr><th>check</th>"
            f"<th>A ({_e(mapping.get('A'))})</th><th>B ({_e(mapping.get('B'))})</th></tr>"
            + "".join(rows) + "<tr><td>score</td>" + "".join(
                f"<td>{_pct(scores.get(mapping.get(k)))}</td>" for k in ("A", "B"))
            + "</tr></table>"
            + f"<p>verdict: {_e(winner)}"
            + (f" — {_e(outcome.get('summary'))}" if outcome.get("summary") else "") + "</p>")
    return "".join(parts) or "<p>No validated blind review ballot is available.</p>"


def _pct(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, int | float) else "N/A"
