"""``hermes-codex-runtime replay …``: list sessions, run, watch, cancel, resume, report, gc.

``run`` prints the plan and asks before anything is written (``--yes`` skips the question; with
no terminal to ask on, it refuses without ``--yes``). The run executes in its own runner process;
the command then shows live progress (turns done per variant, tokens, elapsed) until the run
ends — Ctrl-C cancels it — or returns at once with ``--detach``. ``--json`` prints one JSON
object per line (``plan``, ``progress``…, ``finished``) for machines.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import webbrowser
from collections.abc import Callable
from typing import Any, TextIO

from hermes_codex_runtime.replay.control import (
    EFFORTS,
    MAX_PARALLEL,
    ReplayContext,
    ReplayError,
    RunRequest,
    cancel_run,
    create_run,
    describe_plan,
    get_report,
    prepare,
    reconcile,
    resume_run,
    run_view,
    spawn_runner,
)
from hermes_codex_runtime.replay.sources import SourceError
from hermes_codex_runtime.replay.store import TERMINAL, StoreError

POLL = 0.5


def add_parser(sub: Any) -> None:
    """Register ``replay`` and its sub-commands on the top-level parser."""
    replay = sub.add_parser("replay", help="replay a recorded session through codex and compare")
    rsub = replay.add_subparsers(dest="replay_command", required=True)
    ls = rsub.add_parser("list", help="recorded sessions you can replay")
    ls.add_argument("--search", help="text in the id, title or first message")
    ls.add_argument("--limit", type=int, default=20)
    ls.add_argument("--offset", type=int, default=0)
    ls.add_argument("--json", action="store_true")
    run = rsub.add_parser("run", help="replay a session (a recorded session's id, an export, a "
                                      "Claude Code .jsonl)")
    run.add_argument("source")
    run.add_argument("--model", action="append", default=[],
                     help="a codex model to replay with (repeat for several variants)")
    run.add_argument("--effort", choices=EFFORTS)
    run.add_argument("--turns", help="which user turns: A-B, A-, N or A,B")
    run.add_argument("--mode", choices=("turns", "single-prompt"), default="turns")
    run.add_argument("--baseline", default="HEAD", help="HEAD, a commit, or empty")
    run.add_argument("--repo", help="the repository to take the baseline from (default: the "
                                    "session's working directory)")
    run.add_argument("--parallel", type=int, default=2, help=f"variants at once (1-{MAX_PARALLEL})")
    run.add_argument("--budget-tokens", type=int, help="stop a variant past this many tokens")
    run.add_argument("--network", action="store_true", help="let codex's commands use the network")
    run.add_argument("--judge", metavar="MODEL", help="a blind review by this codex model")
    run.add_argument("--prices", help="a price table (YAML: model → USD per 1M tokens)")
    run.add_argument("--json", action="store_true")
    run.add_argument("--yes", "-y", action="store_true", help="do not ask before running")
    run.add_argument("--detach", action="store_true", help="start it and return")
    show = rsub.add_parser("show", help="a run's progress and log (or the list of runs)")
    show.add_argument("run_id", nargs="?")
    show.add_argument("--json", action="store_true")
    report = rsub.add_parser("report", help="a run's report")
    report.add_argument("run_id")
    report.add_argument("--format", choices=("json", "html"))
    report.add_argument("--open", action="store_true", help="open the HTML report")
    cancel = rsub.add_parser("cancel", help="cancel a run (kills its processes)")
    cancel.add_argument("run_id")
    cancel.add_argument("--json", action="store_true")
    resume = rsub.add_parser("resume", help="continue an interrupted run")
    resume.add_argument("run_id")
    resume.add_argument("--retry-interrupted", action="store_true",
                        help="send every turn that came back interrupted again, each from the "
                             "point before it (also in a completed run)")
    resume.add_argument("--json", action="store_true")
    resume.add_argument("--detach", action="store_true")
    gc = rsub.add_parser("gc", help="remove finished runs and their working copies (never a "
                                    "live one)")
    gc.add_argument("--older-than", metavar="AGE",
                    help="only runs that ended more than AGE ago (7d, 12h, 30m, 90s, 2w)")
    gc.add_argument("--keep", type=int, metavar="N", help="keep the N newest finished runs")
    gc.add_argument("--dry-run", action="store_true", help="say what would go; remove nothing")
    gc.add_argument("--yes", "-y", action="store_true", help="do not ask before removing")
    gc.add_argument("--json", action="store_true")
    rsub.add_parser("mcp", help="an MCP server on stdio (register it as your agent's MCP "
                    "server)")
    serve = rsub.add_parser("serve", help="a web controller on 127.0.0.1")
    serve.add_argument("--port", type=int, help="default: codex_replay.port or 43118")
    serve.add_argument("--idle-timeout", type=float, help="seconds without a page (default 3600)")
    serve.add_argument("--open", action="store_true", help="open it in your browser")


def main(args: argparse.Namespace, make_context: Callable[[str | None], ReplayContext],
         out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Run one ``replay`` sub-command; returns the exit status (2: bad input)."""
    try:
        context = make_context(getattr(args, "prices", None))
        reconcile(context)
        command = args.replay_command
        if command == "list":
            page = context.sources.list(args.search, args.limit, args.offset)
            out.write(json.dumps(page, indent=2) + "\n" if args.json else _sessions_text(page))
            return 0
        if command == "run":
            return _run(args, context, out, err)
        if command == "serve":
            return _serve(args, context, out)
        if command == "mcp":
            from hermes_codex_runtime.replay.mcp import serve
            from hermes_codex_runtime.replay.tools import ReplayTools

            return serve(ReplayTools(context, controller="mcp"))
        if command == "show":
            return _show(args, context, out)
        if command == "report":
            return _report(args, context, out)
        if command == "cancel":
            result = cancel_run(context, args.run_id)
            out.write(json.dumps(result) + "\n" if args.json else
                      f"run {result['run_id']}: {result['status']}"
                      + (" (already)" if result.get("idempotent") else "") + "\n")
            return 0
        if command == "gc":
            return _gc(args, context, out)
        if command == "resume":
            run = resume_run(context, args.run_id, retry_interrupted=args.retry_interrupted)
            spawn_runner(run)
            if args.detach:
                out.write((json.dumps({"run_id": run.id, "status": "pending"}) if args.json
                           else f"resumed run {run.id}") + "\n")
                return 0
            return _watch(context, run.id, out, as_json=args.json)
    except (ReplayError, SourceError, StoreError) as exc:
        err.write(f"replay: {exc}\n")
        return 2
    raise AssertionError(f"unknown replay command {args.replay_command}")  # pragma: no cover


def _sessions_text(page: dict[str, Any]) -> str:
    if not page["sessions"]:
        return "no recorded sessions with user turns\n"
    lines = []
    for s in page["sessions"]:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(s["started_at"])) \
            if s.get("started_at") else "?"
        lines.append(f"{s['ref']}  {when}  {s['user_turns']:>3} turns  "
                     f"{(s.get('title') or s['preview'])[:60]}")
    lines.append(f"{page['offset'] + 1}-{page['offset'] + len(page['sessions'])} of "
                 f"{page['total']}" + ("; more with --offset" if page["has_more"] else ""))
    return "\n".join(lines) + "\n"


def _run(args: argparse.Namespace, context: ReplayContext, out: TextIO, err: TextIO) -> int:
    request = RunRequest(source=args.source, models=args.model, effort=args.effort,
                         turns=args.turns, mode=args.mode, baseline=args.baseline,
                         repo=args.repo, parallel=args.parallel,
                         budget_tokens=args.budget_tokens, network=args.network,
                         judge=args.judge)
    transcript, plan = prepare(context, request)
    text = describe_plan(transcript, plan, runs_dir=context.runs_dir)
    if args.json:
        out.write(json.dumps({"event": "plan", "plan": plan.to_json(),
                              "source": transcript.ref}) + "\n")
    else:
        out.write(text + "\n")
    out.flush()
    if not args.yes:
        if not sys.stdin.isatty():
            err.write("replay: not starting without confirmation: add --yes\n")
            return 2
        answer = input("Start this replay? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            out.write("not started\n")
            return 1
    run = create_run(context, transcript, plan)
    spawn_runner(run)
    if args.detach:
        out.write((json.dumps({"event": "started", "run_id": run.id}) if args.json else
                   f"started run {run.id}; watch it with `hermes-codex-runtime replay show "
                   f"{run.id}`") + "\n")
        return 0
    if not args.json:
        out.write(f"run {run.id} started (Ctrl-C cancels it)\n")
    return _watch(context, run.id, out, as_json=args.json)


def _progress_line(view: dict[str, Any]) -> str:
    return " | ".join(_variant_line(v) for v in view["variants"])


def _watch(context: ReplayContext, run_id: str, out: TextIO, *, as_json: bool) -> int:
    """Follow a run until it ends; Ctrl-C cancels it."""
    last = None
    started = time.monotonic()
    try:
        while True:
            view = run_view(context, run_id)
            line = _progress_line(view)
            if line != last:
                last = line
                if as_json:
                    out.write(json.dumps({"event": "progress", "status": view["status"],
                                          "elapsed": round(time.monotonic() - started, 1),
                                          "variants": view["variants"]}) + "\n")
                else:
                    out.write(f"[{time.monotonic() - started:6.1f} s] {line}\n")
                out.flush()
            if view["status"] in TERMINAL or view["status"] == "interrupted":
                break
            time.sleep(POLL)
    except KeyboardInterrupt:
        cancel_run(context, run_id)
        out.write(f"\ncancelled run {run_id}\n")
        return 130
    if as_json:
        out.write(json.dumps({"event": "finished", "run_id": run_id, "status": view["status"],
                              "error": view.get("error"), "report": view["report_html"],
                              "rerun_interrupted": view["rerun_interrupted"],
                              "run_dir": view["run_dir"]}) + "\n")
    else:
        out.write(f"run {run_id} {view['status']}"
                  + (f": {view['error']}" if view.get("error") else "") + "\n")
        if view["report_html"]:
            out.write(f"report: {view['report_html']}\n")
        out.write(_rerun_text(view))
    return 0 if view["status"] == "completed" else 1


def _variant_line(v: dict[str, Any]) -> str:
    flying = f" (turn {v['in_flight']} was in flight)" if v.get("in_flight") and v[
        "status"] not in ("pending", "running") else ""
    return (f"{v['name']}: {v['status']}, {v['turns_done']}/{v['turns_total']} turns{flying}, "
            f"{int(v['tokens'] or 0):,} tokens, {float(v['elapsed'] or 0):.1f} s"
            + (f", on {v['endpoint']}" if v.get("endpoint") else "")
            + (f" — {v['error']}" if v.get("error") else ""))


def _rerun_text(view: dict[str, Any]) -> str:
    if not view.get("rerun_interrupted"):
        return ""
    turns = "; ".join(f"{v['name']} turn(s) {', '.join(map(str, v['interrupted_turns']))}"
                      for v in view["variants"] if v["interrupted_turns"])
    return (f"interrupted: {turns}; rerun just those turns with "
            f"`{view['rerun_interrupted']}`\n")


def _show(args: argparse.Namespace, context: ReplayContext, out: TextIO) -> int:
    if not args.run_id:
        runs = []
        for run in context.store.runs()[:50]:
            try:
                state = run.state()
            except StoreError:
                continue
            runs.append({"run_id": run.id, "status": str(state.get("status")),
                         "source": str((state.get("source") or {}).get("ref")),
                         "variants": [str(v) for v in state.get("variants") or {}]})
        if args.json:
            out.write(json.dumps({"runs": runs}, indent=2) + "\n")
        else:
            out.write("".join(f"{r['run_id']}  {r['status']:<11} {r['source']}  "
                              f"{', '.join(r['variants'])}\n" for r in runs) or "no runs\n")
        return 0
    view = run_view(context, args.run_id)
    if args.json:
        out.write(json.dumps(view, indent=2) + "\n")
        return 0
    out.write(f"run {view['run_id']}: {view['status']}"
              + (f" — {view['error']}" if view.get("error") else "") + "\n")
    out.write(f"source: {(view.get('source') or {}).get('ref')}\n")
    for v in view["variants"]:
        out.write(f"  {_variant_line(v)}\n")
    if view["report_html"]:
        out.write(f"report: {view['report_html']}\n")
    if view["status"] == "interrupted":
        out.write(f"continue it with `hermes-codex-runtime replay resume {view['run_id']}`\n")
    out.write(_rerun_text(view))
    tail = view["log_tail"].splitlines()[-15:]
    if tail:
        out.write("log:\n" + "".join(f"  {line}\n" for line in tail))
    return 0


def _gc(args: argparse.Namespace, context: ReplayContext, out: TextIO) -> int:
    from hermes_codex_runtime.replay.cleanup import collect, describe, parse_age

    try:
        older = parse_age(args.older_than) if args.older_than is not None else None
        if not args.dry_run and not args.yes:
            # removing is for good (an interrupted run can no longer be resumed): as `run`
            # asks before it writes, gc asks before it removes
            preview = collect(context.store, older_than=older, keep=args.keep, dry_run=True)
            if not preview.to_json().get("removed"):
                out.write(describe(preview) + "\n")
                return 0
            if not sys.stdin.isatty():
                sys.stderr.write("replay: not removing without confirmation: add --yes (or "
                                 "--dry-run to see what would go)\n")
                return 2
            out.write(describe(preview) + "\n")
            if input("Remove these runs? [y/N] ").strip().lower() not in ("y", "yes"):
                out.write("nothing removed\n")
                return 1
        done = collect(context.store, older_than=older, keep=args.keep, dry_run=args.dry_run)
    except StoreError:
        raise
    except ValueError as exc:  # a bad age or count
        raise ReplayError(str(exc)) from exc
    out.write(json.dumps(done.to_json(), indent=2) + "\n" if args.json else
              describe(done) + "\n")
    return 0


def _report(args: argparse.Namespace, context: ReplayContext, out: TextIO) -> int:
    if args.format:
        artifact = get_report(context, args.run_id, args.format)
        out.write(artifact["artifact_content"])
        return 0
    get_report(context, args.run_id)  # builds it when missing; raises for bad ids
    run = context.store.run(args.run_id)
    html_path = run.dir / "report.html"
    out.write(f"report.json: {run.dir / 'report.json'}\nreport.html: {html_path}\n")
    if args.open:
        webbrowser.open(html_path.as_uri())
    return 0


def _serve(args: argparse.Namespace, context: ReplayContext, out: TextIO) -> int:
    from hermes_codex_runtime.replay.controller import Controller

    port, idle = context.controller_port, context.controller_idle_timeout
    controller = Controller(context, port=args.port if args.port is not None else port,
                            idle_timeout=args.idle_timeout or idle,
                            session_id=context.controller_id)
    out.write(f"Codex Replay controller: {controller.url}\n"
              f"(runtime file with the control token: {controller.runtime_file}; stops after "
              f"{controller.idle_timeout:g} s without a page)\n")
    out.flush()
    if args.open:
        webbrowser.open(controller.url)
    try:
        return controller.serve()
    except KeyboardInterrupt:
        return 0

