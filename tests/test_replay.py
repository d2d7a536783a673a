"""Codex Replay without codex: reading recorded sessions, the run store, planning, reports and
every kind of bad input."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from hermes_codex_runtime.hermes.replay.sessions import HermesSessions
from hermes_codex_runtime.replay.control import (
    ReplayContext,
    ReplayError,
    RunRequest,
    cancel_run,
    create_run,
    get_report,
    prepare,
    resume_run,
    run_view,
)
from hermes_codex_runtime.replay.plan import parse_turns
from hermes_codex_runtime.replay.report import render_html, write_report
from hermes_codex_runtime.replay.sources import SourceError, load_claude
from hermes_codex_runtime.replay.store import Run, RunClosed, RunStore, StoreError, check_run_id

SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, model TEXT, model_config TEXT,
  parent_session_id TEXT, started_at REAL, ended_at REAL, end_reason TEXT, title TEXT, cwd TEXT,
  input_tokens INTEGER, output_tokens INTEGER, cache_read_tokens INTEGER,
  cache_write_tokens INTEGER, reasoning_tokens INTEGER, estimated_cost_usd REAL);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, role TEXT,
  content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT, timestamp REAL,
  active INTEGER NOT NULL DEFAULT 1, compacted INTEGER NOT NULL DEFAULT 0);
"""


def tool_calls(name: str) -> str:
    return json.dumps([{"id": "c1", "type": "function",
                        "function": {"name": name, "arguments": "{\"cmd\": \"ls\"}"}}])


def open_source(ref: str, home: Path):
    return HermesSessions(home).open(ref)


def list_sessions(home: Path, search: str | None = None, limit: int = 20, offset: int = 0):
    return HermesSessions(home).list(search, limit, offset)


def context_for(home: Path) -> ReplayContext:
    """The replay context the Hermes adapter makes for ``home``."""
    return ReplayContext(sources=HermesSessions(home), runs_dir=home / "codex-runtime" / "replays",
                         controllers_dir=home / "codex-runtime" / "controllers")


class StateDb:
    """A Hermes state.db with the columns replay reads."""

    def __init__(self, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.path = home / "state.db"
        with sqlite3.connect(self.path) as db:
            db.executescript(SCHEMA)
        self.clock = 1_700_000_000.0

    def session(self, sid: str, *, parent: str | None = None, end: str | None = None,
                title: str | None = None, cwd: str | None = None,
                config: dict | None = None, tokens: int = 0) -> None:
        self.clock += 10
        with sqlite3.connect(self.path) as db:
            db.execute("INSERT INTO sessions (id, source, model, model_config, parent_session_id,"
                       " started_at, end_reason, title, cwd, input_tokens, output_tokens, "
                       "cache_read_tokens, cache_write_tokens, reasoning_tokens, "
                       "estimated_cost_usd) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                       (sid, "cli", "gpt-x", json.dumps(config or {}), parent, self.clock, end,
                        title, cwd, tokens, tokens // 10, tokens // 2, 0, tokens // 20, 0.25))

    def message(self, sid: str, role: str, content: str | None, *, calls: str | None = None,
                active: int = 1, compacted: int = 0) -> None:
        self.clock += 1
        with sqlite3.connect(self.path) as db:
            db.execute("INSERT INTO messages (session_id, role, content, tool_calls, timestamp, "
                       "active, compacted) VALUES (?,?,?,?,?,?,?)",
                       (sid, role, content, calls, self.clock, active, compacted))


@pytest.fixture
def home(tmp_path):
    return tmp_path / "hermes-home"


@pytest.fixture
def lineage(home):
    """A session split by compression (root → child), a branch of the root, and undo rows."""
    db = StateDb(home)
    db.session("root", end="compression", title="Fix the parser", cwd="/nowhere", tokens=1000)
    db.message("root", "user", "first: read the parser")
    db.message("root", "assistant", None, calls=tool_calls("terminal"))
    db.message("root", "tool", "parser.py")
    db.message("root", "assistant", "I read parser.py.")
    db.message("root", "user", "taken back", active=0)  # /undo
    db.message("root", "assistant", "never mind", active=0)
    db.message("root", "user", "second: find the bug", active=0, compacted=1)
    db.message("root", "assistant", "The bug is on line 3.", active=0, compacted=1)
    db.session("child", parent="root", tokens=500)
    db.message("child", "user", "[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were …")
    db.message("child", "user", "second: find the bug")  # the tail the compressor kept
    db.message("child", "assistant", "The bug is on line 3.")
    db.message("child", "user", "third: fix it")
    db.message("child", "assistant", None, calls=tool_calls("browser_navigate"))
    db.message("child", "tool", "ok")
    db.message("child", "assistant", "Fixed.")
    db.session("branch", parent="root", config={"_branched_from": "root"})
    db.message("branch", "user", "a branch of its own")
    db.session("other", title="Unrelated chat")
    db.message("other", "user", "hello there")
    db.message("other", "assistant", "hi")
    return db


def test_a_compression_split_session_is_rejoined_from_any_of_its_segments(home, lineage):
    for ref in ("root", "child", "chi"):  # an id, the tip, a unique prefix
        transcript = open_source(ref, home)
        assert transcript.session_id == "root" and transcript.lineage == ["root", "child"]
        assert [t.user_text for t in transcript.turns] == [
            "first: read the parser", "second: find the bug", "third: fix it"]
        assert [t.index for t in transcript.turns] == [1, 2, 3]
        assert [t.original_text for t in transcript.turns] == [
            "I read parser.py.", "The bug is on line 3.", "Fixed."]
        assert [[c["name"] for c in t.tool_calls] for t in transcript.turns] == [
            ["terminal"], [], ["browser_navigate"]]
        assert transcript.tools_used == ["browser_navigate", "terminal"]
        assert transcript.usage["input_tokens"] == 1500
        assert transcript.cost_usd == pytest.approx(0.5)
        assert transcript.title == "Fix the parser"
    branch = open_source("branch", home)
    assert branch.lineage == ["branch"] and [t.user_text for t in branch.turns] == [
        "a branch of its own"]


def test_listing_hides_continuations_searches_and_pages(home, lineage):
    page = list_sessions(home, limit=2)
    assert page["total"] == 3 and page["has_more"] is True and len(page["sessions"]) == 2
    refs = {s["ref"] for s in list_sessions(home, limit=10)["sessions"]}
    assert refs == {"root", "branch", "other"}  # "child" is listed through its root
    assert [s["ref"] for s in list_sessions(home, "  unrelated ")["sessions"]] == ["other"]
    assert [s["ref"] for s in list_sessions(home, "PARSER")["sessions"]] == ["root"]
    with pytest.raises(SourceError, match="limit"):
        list_sessions(home, limit=0)


def test_unknown_and_ambiguous_sessions_are_clear_errors(home, lineage):
    with pytest.raises(SourceError, match="no Hermes session 'nope'"):
        open_source("nope", home)
    lineage.session("other-2")
    with pytest.raises(SourceError, match="ambiguous"):
        open_source("oth", home)
    with pytest.raises(SourceError, match="no Hermes session database"):
        open_source("x", home / "elsewhere")


def test_export_files_one_session_or_many(tmp_path, home, lineage):
    rows = []
    with sqlite3.connect(home / "state.db") as db:
        db.row_factory = sqlite3.Row
        for sid in ("root", "child", "other"):
            session = dict(db.execute("SELECT * FROM sessions WHERE id = ?", (sid,)).fetchone())
            session["messages"] = [dict(r) for r in db.execute(
                "SELECT * FROM messages WHERE session_id = ? ORDER BY id", (sid,))]
            rows.append(session)
    export = tmp_path / "export.jsonl"
    export.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(SourceError, match=re.escape(f"{export}#SESSION_ID")):
        open_source(str(export), home)
    transcript = open_source(f"{export}#root", home)
    assert transcript.kind == "export" and transcript.lineage == ["root", "child"]
    assert [t.user_text for t in transcript.turns] == [
        "first: read the parser", "second: find the bug", "third: fix it"]
    single = tmp_path / "one.json"
    single.write_text(json.dumps(rows[2]))
    assert [t.user_text for t in open_source(str(single), home).turns] == ["hello there"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "messages": []}\nnot json\n')
    with pytest.raises(SourceError, match=r"bad\.jsonl:2 is not JSON"):
        open_source(str(bad), home)
    with pytest.raises(SourceError, match="no such file"):
        open_source(str(tmp_path / "missing.jsonl"), home)


def test_a_claude_code_transcript_is_a_source(tmp_path):
    events = [
        {"type": "user", "sessionId": "s1", "cwd": "/proj", "timestamp": "2026-11-30T10:00:00Z",
         "message": {"role": "user", "content": "add a test"}},
        {"type": "assistant", "message": {"role": "assistant", "model": "claude-x", "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]}},
        {"type": "assistant", "isSidechain": True,
         "message": {"role": "assistant", "content": [{"type": "text", "text": "side"}]}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "Added test_a.py."}]}},
        {"type": "user", "message": {"role": "user", "content": "<command-name>/clear"}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "text", "text": "now run it"}]}},
    ]
    path = tmp_path / "s1.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    transcript = load_claude(path)
    assert transcript.kind == "claude" and transcript.cwd == "/proj"
    assert transcript.model == "claude-x" and transcript.session_id == "s1"
    assert [t.user_text for t in transcript.turns] == ["add a test", "now run it"]
    assert transcript.turns[0].original_text == "Added test_a.py."
    assert [c["name"] for c in transcript.turns[0].tool_calls] == ["Bash"]
    assert open_source(str(path), tmp_path).kind == "claude"


def test_turn_ranges():
    assert parse_turns(None, 3) == [1, 2, 3]
    assert parse_turns("2-", 4) == [2, 3, 4]
    assert parse_turns("1,3-4", 5) == [1, 3, 4]
    for bad in ("0-2", "3-9", "x", "2-1"):
        with pytest.raises(ValueError, match="turns"):
            parse_turns(bad, 3)


# --------------------------------------------------------------------------- store


def test_run_ids_never_name_a_path(tmp_path):
    for bad in ("../outside", "a/b", "..", "", None, 3, "20261201-150102-a1b2c3/..",
                "20261201-150102-A1B2C3"):
        with pytest.raises(StoreError, match="not a replay run id"):
            check_run_id(bad)
    store = RunStore(tmp_path / "replays")
    with pytest.raises(StoreError):
        store.run("../../etc")
    assert not (tmp_path / "replays").exists()


def test_terminal_states_stick_and_files_are_private(tmp_path):
    store = RunStore(tmp_path / "replays")
    run = store.new({"status": "running", "runner": None})
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", run.id)
    run.log("controller", "line one\nline two")
    for path in (run.state_path, run.log_path):
        assert path.stat().st_mode & 0o777 == 0o600
    assert run.finish("completed")
    assert not run.finish("failed")  # the first terminal state wins
    with pytest.raises(RunClosed):
        run.update(lambda s: s.update(status="running"))
    with pytest.raises(RunClosed):
        run.update(lambda s: None, reopen=("failed",))  # a plain resume never reopens it
    assert run.state()["status"] == "completed"
    cancelled = store.new({"status": "running", "runner": None})
    assert cancelled.finish("cancelled", error="Cancelled by user.")
    with pytest.raises(RunClosed):
        cancelled.update(lambda s: None, reopen=("failed", "completed", "cancelled"))
    run.log("x", "y" * 200_000)
    assert len(run.log_tail(1000).encode()) <= 1000


def test_a_run_whose_runner_died_is_reconciled_as_interrupted(tmp_path):
    store = RunStore(tmp_path / "replays")
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = store.new({"status": "running", "runner": {"pid": dead.pid, "start": 1.0}})
    live = store.new({"status": "running", "runner": {
        "pid": os.getpid(), "start": __import__(
            "hermes_codex_runtime.wire.proctree", fromlist=["started"]).started(os.getpid())}})
    done = store.new({"status": "completed", "runner": None})
    orphan.update(lambda s: s.update(variants={"a": {"status": "running", "in_flight": 2},
                                               "b": {"status": "completed"},
                                               "c": {"status": "pending"}}))
    assert store.reconcile() == [orphan.id]
    assert orphan.state()["status"] == "interrupted"
    assert orphan.state()["failure_diagnostic"]["code"] == "runner_stopped"
    variants = orphan.state()["variants"]  # every unfinished variant closed, with the reason
    assert [variants[n]["status"] for n in "abc"] == ["interrupted", "completed", "interrupted"]
    assert variants["a"]["error"] == f"the runner process stopped (pid {dead.pid}) before this " \
        "variant finished" and variants["a"]["in_flight"] == 2 and "error" not in variants["b"]
    crashed = store.new({"status": "running", "runner": None,
                         "variants": {"a": {"status": "running"}, "b": {"status": "stopped"}}})
    assert crashed.finish("failed", error="the runner crashed: OSError: disk full")
    assert [(v["status"], v.get("error")) for v in crashed.state()["variants"].values()] == [
        ("failed", "the runner crashed: OSError: disk full"), ("stopped", None)]
    assert live.state()["status"] == "running" and done.state()["status"] == "completed"
    assert "marked interrupted" in orphan.log_path.read_text()
    assert store.reconcile() == []


# --------------------------------------------------------------------------- planning


def git_repo(path: Path) -> str:
    path.mkdir(parents=True)
    (path / "a.txt").write_text("a\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c",
                                                 "user.email=t@localhost", "commit", "-qm", "a"]):
        subprocess.run(["git", *args], cwd=path, check=True, timeout=30)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.fixture
def repo_session(tmp_path, home):
    db = StateDb(home)
    project = tmp_path / "project"
    head = git_repo(project)
    (project / "sub").mkdir()
    db.session("s1", title="<b>bold</b> title", cwd=str(project / "sub"))
    db.message("s1", "user", "one <script>alert(1)</script>")
    db.message("s1", "assistant", "done one")
    db.message("s1", "user", "two")
    db.message("s1", "assistant", "done two")
    return {"context": context_for(home), "project": project, "head": head}


def test_planning_resolves_the_baseline_and_writes_nothing(repo_session, home):
    context = repo_session["context"]
    transcript, plan = prepare(context, RunRequest("s1", models=["m1", "m2"], turns="2"))
    assert plan.baseline.commit == repo_session["head"] and plan.baseline.subdir == "sub"
    assert [v.name for v in plan.variants] == ["v1-m1", "v2-m2"]
    assert plan.prompts(transcript) == [(2, "two")]
    assert not (home / "codex-runtime").exists()
    single = prepare(context, RunRequest("s1", mode="single-prompt"))[1]
    assert single.prompts(transcript) == [(1, "one <script>alert(1)</script>\n\ntwo")]


@pytest.mark.parametrize("request_changes, message", [
    ({"source": "missing"}, "no Hermes session 'missing'"),
    ({"baseline": "0123456789abcdef0123"}, "does not exist in"),
    ({"turns": "3"}, "outside 1-2"),
    ({"parallel": 0}, "--parallel"),
    ({"mode": "all"}, "--mode"),
    ({"models": ["m", "m"]}, "twice"),
    ({"effort": "extreme"}, "--effort"),
    ({"budget_tokens": 0}, "--budget-tokens"),
    ({"judge": " "}, "--judge names the codex model"),
])
def test_bad_requests_are_clear_errors_and_write_nothing(repo_session, home, request_changes,
                                                         message):
    values = {"source": "s1", **request_changes}
    with pytest.raises(ReplayError, match=re.escape(message)):
        prepare(repo_session["context"], RunRequest(**values))
    assert not (home / "codex-runtime").exists()


def test_a_session_whose_directory_is_gone_or_not_a_repository(tmp_path, home):
    db = StateDb(home)
    db.session("gone", cwd=str(tmp_path / "deleted"))
    db.message("gone", "user", "hi")
    (tmp_path / "plain").mkdir()
    db.session("plain", cwd=str(tmp_path / "plain"))
    db.message("plain", "user", "hi")
    context = context_for(home)
    with pytest.raises(ReplayError, match="deleted is gone: name the repository with --repo"):
        prepare(context, RunRequest("gone"))
    with pytest.raises(ReplayError, match="not in a git repository: use --baseline empty"):
        prepare(context, RunRequest("plain"))
    plan = prepare(context, RunRequest("gone", baseline="empty"))[1]
    assert plan.baseline.kind == "empty"


# --------------------------------------------------------------------------- reports


@pytest.fixture
def finished_run(repo_session):
    context = repo_session["context"]
    transcript, plan = prepare(context, RunRequest("s1", models=["m1"]))
    run = create_run(context, transcript, plan, controller="report-owner")
    run.save_turn("v1-m1", {"index": 1, "user_text": "one <script>alert(1)</script>",
                            "status": "completed",
                            "final_text": "done one, differently", "tool_calls": [],
                            "usage": {"input": 10, "cache_read": 5, "cache_write": 0,
                                      "output": 3, "reasoning": 1, "total": 18},
                            "elapsed": 0.5})
    run.update(lambda s: s["variants"]["v1-m1"].update(status="completed"))
    run.finish("completed")
    write_report(run)
    return context, run


def test_report_formats_and_path_safety(finished_run, tmp_path):
    context, run = finished_run
    parsed = get_report(context, run.id)["report"]
    assert parsed["variants"][0]["turns"][0]["diff"].startswith("--- original\n+++ replay")
    artifact = get_report(context, run.id, "html")
    assert set(artifact) == {"artifact_content", "artifact_format", "artifact_mime_type",
                             "artifact_file_name"}
    assert artifact["artifact_mime_type"] == "text/html"
    assert artifact["artifact_file_name"] == f"codex-replay-{run.id}-report.html"
    assert artifact["artifact_content"] == (run.dir / "report.html").read_text()
    for bad in ("pdf", ["json"], {"f": 1}, True, 3):
        with pytest.raises(ReplayError, match="Report format must be json or html"):
            get_report(context, run.id, bad)
    for bad in ("../x", "a/b"):
        with pytest.raises(ReplayError, match="not a replay run id"):
            get_report(context, bad, "json")
    secret = tmp_path / "secret.html"
    secret.write_text("not yours")
    (run.dir / "report.html").unlink()
    (run.dir / "report.html").symlink_to(secret)
    with pytest.raises(ReplayError, match="outside its run directory"):
        get_report(context, run.id, "html")


def test_a_report_over_16_mib_is_served_whole_but_not_displayed(finished_run):
    context, run = finished_run
    big = json.loads((run.dir / "report.json").read_text())
    big["padding"] = "é" * (9 * 2**20)  # 18 MiB of UTF-8
    (run.dir / "report.json").write_text(json.dumps(big, ensure_ascii=False))
    artifact = get_report(context, run.id, "json")
    assert artifact["artifact_content"] == (run.dir / "report.json").read_text()
    assert len(artifact["artifact_content"].encode()) > 16 * 2**20
    (run.dir / "state.json").write_text(json.dumps({"pad": "x" * (17 * 2**20)}))
    with pytest.raises(ReplayError, match="too large to display"):
        run_view(context, run.id)


def test_the_report_page_is_self_contained_escaped_and_its_csp_allows_only_its_style(
        finished_run):
    _, run = finished_run
    page = (run.dir / "report.html").read_text()
    assert "<script" not in page and "alert(1)</script>" not in page
    assert "one &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;bold&lt;/b&gt; title" in page
    assert not re.search(r"(?:src|href)=\"(?:https?:)?//", page)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in csp and "script-src" not in csp
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert f"style-src 'sha256-{digest}'" in csp
    assert " style=" not in page  # no inline style attributes (the CSP would block them)
    assert render_html(json.loads((run.dir / "report.json").read_text())) .count("<section") == 1


def test_cancel_and_resume_of_finished_runs(finished_run):
    context, run = finished_run
    assert cancel_run(context, run.id) == {"run_id": run.id, "status": "completed",
                                           "idempotent": False}
    with pytest.raises(ReplayError, match="completed; start a new run"):
        resume_run(context, run.id)
    with pytest.raises(ReplayError, match="belongs to another controller"):
        cancel_run(context, run.id, controller="someone-else")
    assert Run(run.dir.parent, run.id).state()["status"] == "completed"
    assert time.time() - run.state()["finished_at"] < 600


def replay_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ``hermes-codex-runtime replay …`` command on ``home``."""
    import sys

    script = Path(sys.executable).with_name("hermes-codex-runtime")
    return subprocess.run([str(script), "replay", *args], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL,
                          env={**os.environ, "HERMES_HOME": str(home)})


def test_gc_removes_finished_runs_and_their_copies_never_a_live_one(repo_session, home):
    from hermes_codex_runtime.replay.cleanup import parse_age
    from hermes_codex_runtime.replay.store import ACTIVE, identity
    from hermes_codex_runtime.wire.files import atomic_write_json

    context, project = repo_session["context"], repo_session["project"]
    transcript, plan = prepare(context, RunRequest("s1", models=["m1"]))
    worker = subprocess.Popen(["sleep", "60"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    made = {}
    for age, name, status in ((9, "cancelled-9d", "cancelled"), (8, "completed-8d", "completed"),
                              (0, "failed-now", "failed"), (0, "live", "running"),
                              (0, "died", "running"), (0, "completed-now", "completed")):
        run = create_run(context, transcript, plan)
        copy = run.dir / "workspaces" / "v1-m1"
        subprocess.run(["git", "clone", "-q", "--shared", str(project), str(copy)], check=True,
                       timeout=30)
        (copy / "big.bin").write_bytes(os.urandom(2**20))
        (copy / "locked").mkdir()
        (copy / "locked" / "f").write_text("x")
        (copy / "locked").chmod(0o500)  # a read-only folder a command left behind
        runner = identity(worker.pid if name == "live" else gone.pid)
        run.update(lambda s, r=runner: s.update(status="running", runner=r))
        if status != "running":
            run.finish(status)
        state = run.state()
        state["created_at"] = time.time() - age * 86400 - 60 + len(made)  # in this order
        if state.get("finished_at"):
            state["finished_at"] -= age * 86400
        atomic_write_json(run.state_path, state)
        made[name] = run
    try:
        preview = replay_cli(home, "gc", "--dry-run", "--json")
        assert preview.returncode == 0, preview.stderr
        planned = json.loads(preview.stdout)
        assert planned["dry_run"] is True
        assert {r["run_id"] for r in planned["removed"]} == {
            made[n].id for n in ("cancelled-9d", "completed-8d", "failed-now", "died",
                                 "completed-now")}  # "died": its runner is gone (interrupted)
        assert [(k["run_id"], k["why"]) for k in planned["kept"]] == [(made["live"].id, "live")]
        assert planned["freed_bytes"] >= 5 * 2**20
        assert all(r.dir.is_dir() for r in made.values())  # a dry run removes nothing
        assert made["died"].state()["status"] == "interrupted"

        unasked = replay_cli(home, "gc", "--older-than", "7d")  # no terminal to ask on
        assert unasked.returncode == 2 and "add --yes" in unasked.stderr, unasked.stderr
        assert made["cancelled-9d"].dir.is_dir()  # nothing removed without a yes
        old = replay_cli(home, "gc", "--older-than", "7d", "--yes")
        assert old.returncode == 0, old.stderr
        assert f"removed {made['cancelled-9d'].id}  cancelled" in old.stdout
        assert f"removed {made['completed-8d'].id}  completed" in old.stdout
        assert re.search(r"freed \d+\.\d MB in 2 run\(s\); kept 4 \(1 live\)", old.stdout), \
            old.stdout
        assert not made["cancelled-9d"].dir.exists() and not made["completed-8d"].dir.exists()

        kept = json.loads(replay_cli(home, "gc", "--keep", "1", "--json", "--yes").stdout)
        assert [r["run_id"] for r in kept["removed"]] == [made["died"].id,
                                                          made["failed-now"].id]
        assert {k["run_id"]: k["why"] for k in kept["kept"]} == {
            made["live"].id: "live", made["completed-now"].id: "among the 1 newest"}
        assert made["live"].dir.is_dir() and made["live"].state()["status"] == "running"
        assert sorted(p.name for p in context.runs_dir.iterdir()) == sorted(
            [made["live"].id, made["completed-now"].id])  # nothing left half-removed
        # the user's repository (whose objects the copies shared) is whole
        assert subprocess.run(["git", "fsck", "--no-progress"], cwd=project,
                              capture_output=True, timeout=60).returncode == 0
        for bad, message in ((["--older-than", "soon"], "--older-than takes an age"),
                             (["--keep", "-1"], "--keep is a number of runs")):
            refused = replay_cli(home, "gc", *bad)
            assert refused.returncode == 2 and message in refused.stderr, refused.stderr
        assert [parse_age(a) for a in ("90s", "30m", "12h", "7d", "2w", "2")] == [
            90, 1800, 43200, 604800, 1209600, 172800]  # a bare number is days
        # the last check, under the run's lock: a run that is live is not moved out
        assert not made["live"].move_out(home / "elsewhere",
                                         lambda state: state["status"] not in ACTIVE)
        assert made["live"].dir.is_dir() and not (home / "elsewhere").exists()
    finally:
        worker.kill()
        worker.wait()


# --------------------------------------------------------------------------- MCP


class McpClient:
    """``hermes-codex-runtime replay mcp`` as a subprocess, spoken to over stdio."""

    def __init__(self, home: Path) -> None:
        import sys

        script = Path(sys.executable).with_name("hermes-codex-runtime")
        self.proc = subprocess.Popen([str(script), "replay", "mcp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "HERMES_HOME": str(home)})
        self.ids = iter(range(1, 10_000))

    def send(self, message: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict | None = None) -> dict:
        message_id = next(self.ids)
        self.send({"jsonrpc": "2.0", "id": message_id, "method": method,
                   **({"params": params} if params is not None else {})})
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        reply = json.loads(line)
        assert reply["id"] == message_id, reply
        return reply

    def tool(self, name: str, **arguments) -> dict:
        return self.request("tools/call", {"name": name, "arguments": arguments})["result"]

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def test_the_mcp_server_speaks_mcp_and_reports_tool_errors_as_results(repo_session, home):
    client = McpClient(home)
    try:
        init = client.request("initialize", {"protocolVersion": "2025-06-18",
                                             "capabilities": {},
                                             "clientInfo": {"name": "t", "version": "1"}})
        assert init["result"]["protocolVersion"] == "2025-06-18"
        assert init["result"]["capabilities"]["tools"] == {"listChanged": False}
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})  # no reply
        assert client.request("ping")["result"] == {}
        names = [t["name"] for t in client.request("tools/list")["result"]["tools"]]
        assert names == ["list_sessions", "plan_replay", "start_replay", "get_run",
                         "cancel_run", "get_report"]
        sessions = client.tool("list_sessions", search="bold")
        assert sessions["isError"] is False
        assert [s["ref"] for s in sessions["structuredContent"]["sessions"]] == ["s1"]
        plan = client.tool("plan_replay", source="s1", models=["m1"], turns="1")
        assert plan["isError"] is False, plan
        assert "baseline:" in plan["structuredContent"]["description"]
        token = plan["structuredContent"]["plan_token"]
        assert len(token) == 64
        refused = client.tool("start_replay", source="s1", models=["m2"], turns="1",
                              plan_token=token)  # other arguments than were planned
        assert refused["isError"] is True and "plan_replay again" in \
            refused["content"][0]["text"]
        for name, arguments, message in (
                ("get_run", {"run_id": "../../etc"}, "not a replay run id"),
                ("get_report", {"run_id": "20261201-150102-a1b2c3", "format": ["json"]},
                 "format must be a string"),
                ("plan_replay", {"source": "nope"}, "no Hermes session 'nope'"),
                ("plan_replay", {"source": "s1", "parallel": 99}, "between 1 and 8"),
                ("list_sessions", {"colour": "red"}, "unknown argument"),
                ("launch_rockets", {}, "unknown tool")):
            result = client.tool(name, **arguments)
            assert result["isError"] is True, (name, result)
            assert message in result["content"][0]["text"], (name, result)
        assert client.request("resources/list")["error"]["code"] == -32601
        assert not (home / "codex-runtime" / "replays").exists()  # nothing was started
    finally:
        assert client.close() == 0


# --------------------------------------------------------------------------- the controller


class ControllerProcess:
    """``hermes-codex-runtime replay serve`` as a subprocess, and plain HTTP to it."""

    def __init__(self, home: Path, *, port: int = 0, idle: float = 600.0,
                 session: str | None = None) -> None:
        import sys

        script = Path(sys.executable).with_name("hermes-codex-runtime")
        self.session = session or f"test{os.getpid()}{time.monotonic_ns() % 100000}"
        env = {**os.environ, "HERMES_HOME": str(home), "HERMES_CODEX_REPLAY_PORT": str(port),
               "HERMES_CODEX_REPLAY_IDLE_TIMEOUT": str(idle),
               "HERMES_CODEX_REPLAY_CONTROLLER_ID": self.session}
        self.proc = subprocess.Popen([str(script), "replay", "serve"], env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.runtime = home / "codex-runtime" / "controllers" / self.session / \
            "controller-server.json"
        deadline = time.monotonic() + 30
        while not self.runtime.exists():
            assert self.proc.poll() is None, self.proc.stderr.read() if self.proc.stderr else ""
            assert time.monotonic() < deadline, "the controller never wrote its runtime file"
            time.sleep(0.05)
        info = json.loads(self.runtime.read_text())
        self.port, self.token = info["port"], info["control_token"]
        self.origin = f"http://127.0.0.1:{self.port}"

    def http(self, method: str, path: str, body: dict | None = None, *,
             headers: dict | None = None, origin: str | None = "own") -> tuple[int, dict, bytes]:
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=20)
        sent = {"Content-Type": "application/json"}
        if origin == "own":
            sent["Origin"] = self.origin
        elif origin is not None:
            sent["Origin"] = origin
        sent.update(headers or {})
        data = json.dumps(body).encode() if body is not None else None
        try:
            conn.request(method, path, body=data, headers=sent)
            reply = conn.getresponse()
            return reply.status, dict(reply.getheaders()), reply.read()
        finally:
            conn.close()

    def call(self, name: str, **arguments) -> tuple[int, dict]:
        status, _, data = self.http("POST", "/api/call", {"name": name, "arguments": arguments})
        return status, json.loads(data)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.http("POST", "/api/shutdown", {}, headers={"X-Replay-Control": self.token})
        try:
            return self.proc.wait(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def test_the_controller_guards_its_api_and_proves_its_token(repo_session, home):
    import hashlib as _hashlib
    import hmac as _hmac
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    busy = taken.getsockname()[1]
    controller = ControllerProcess(home, port=busy)  # the configured port is taken
    try:
        assert controller.port != busy
        assert controller.runtime.stat().st_mode & 0o777 == 0o600
        assert controller.runtime.parent.stat().st_mode & 0o777 == 0o700
        status, _, data = controller.http("GET", "/health?challenge=abc123", origin=None)
        health = json.loads(data)
        assert status == 200 and health["server"] == "hermes-codex-replay"
        assert health["controller_session_id"] == controller.session
        assert health["proof"] == _hmac.new(controller.token.encode(), b"abc123",
                                            _hashlib.sha256).hexdigest()
        assert controller.token not in data.decode()
        # the page and its assets, with a CSP that allows only its own files
        status, headers, page = controller.http("GET", "/", origin=None)
        assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
        assert b"<script src=\"/controller.js\"" in page and b"<script>" not in page
        assert controller.http("GET", "/controller.js", origin=None)[1]["Content-Type"] == \
            "text/javascript; charset=utf-8"
        assert controller.http("GET", "/controller.css", origin=None)[1]["Content-Type"] == \
            "text/css; charset=utf-8"
        # the API answers its own page only
        status, data = controller.call("list_sessions")
        assert status == 200 and [s["ref"] for s in data["result"]["sessions"]] == ["s1"]
        for origin in (None, "http://evil.example", f"http://127.0.0.1:{controller.port + 1}",
                       "null"):
            status, _, _ = controller.http("POST", "/api/call",
                                           {"name": "list_sessions"}, origin=origin)
            assert status == 403, origin
        status, _, _ = controller.http("POST", "/api/state", {},
                                       headers={"Host": f"evil.example:{controller.port}"})
        assert status == 421  # a DNS-rebinding page never reaches the API
        status, _, _ = controller.http("GET", "/health", origin=None,
                                       headers={"Host": "attacker.test"})
        assert status == 421
        status, data = controller.call("get_run", run_id="../../etc/passwd")
        assert status == 400 and data["isError"] and "not a replay run id" in data["error"]
        status, _, data = controller.http("POST", "/api/heartbeat", {})
        assert status == 200 and json.loads(data)["controller_session_id"] == controller.session
        state = json.loads(controller.http("POST", "/api/state", {})[2])
        assert state["run_root"].endswith("codex-runtime/replays")
        assert "control_token" not in json.dumps(state)
        # shutdown needs the token
        for token in (None, "wrong"):
            status, _, _ = controller.http("POST", "/api/shutdown", {},
                                           headers={"X-Replay-Control": token} if token else {})
            assert status == 403
        assert controller.stop() == 0
        assert not controller.runtime.exists()
    finally:
        controller.stop()
        taken.close()


def _running_run(context, controller: str, worker: subprocess.Popen):
    from hermes_codex_runtime.replay.store import identity

    transcript, plan = prepare(context, RunRequest("s1", models=["m1"]))
    run = create_run(context, transcript, plan, controller=controller)
    run.update(lambda s: s.update(status="running", runner=identity(worker.pid)))
    return run


def test_a_controller_shows_reports_and_cancels_only_its_own_runs(repo_session, home):
    worker = subprocess.Popen(["sleep", "60"])
    run = _running_run(repo_session["context"], "first-controller", worker)
    (run.dir / "report.json").write_text("{}")  # a report so far (as a resumed run has)
    (run.dir / "report.html").write_text("<p>the first controller's report</p>")
    first = ControllerProcess(home, session="first-controller")
    second = ControllerProcess(home, session="second-controller")
    try:
        # one rule for every door of a controller: another controller's run is neither listed,
        # shown, reported, downloaded nor cancelled
        for name, arguments in (("get_run", {"run_id": run.id}),
                                ("get_report", {"run_id": run.id, "format": "html"}),
                                ("cancel_run", {"run_id": run.id})):
            status, data = second.call(name, **arguments)
            assert status == 400 and "belongs to another controller" in data.get("error", ""), \
                (name, data)
            assert f"replay show {run.id}" in data["error"]  # where every run can be seen
        status, _, body = second.http("GET", f"/runs/{run.id}/report.html", origin=None)
        assert status == 400 and b"belongs to another controller" in body
        status, _, body = second.http("POST", "/api/download", {"run_id": run.id,
                                                               "format": "html"})
        assert status == 400 and b"belongs to another controller" in body
        assert run.state()["status"] == "running"
        assert json.loads(second.http("POST", "/api/state", {})[2])["recent_runs"] == []
        status, data = first.call("get_run", run_id=run.id)  # its owner sees it
        assert status == 200 and data["result"]["status"] == "running"
        status, _, body = first.http("GET", f"/runs/{run.id}/report.html", origin=None)
        assert status == 200 and b"the first controller's report" in body
    finally:
        worker.kill()
        worker.wait()
        assert first.stop() == 0 and second.stop() == 0


def test_idle_exit_waits_for_its_own_run_and_the_idle_clock_restarts_when_it_ends(
        repo_session, home):
    worker = subprocess.Popen(["sleep", "60"])
    # the run is the controller's and running before it starts: with an idle timeout of 2 s it
    # would otherwise be free to exit at once
    run = _running_run(repo_session["context"], "first-controller", worker)
    first = ControllerProcess(home, idle=2.0, session="first-controller")
    try:
        health = json.loads(first.http("GET", "/health", origin=None)[2])
        assert health["active_runs"] == 1
        time.sleep(3.0)  # well past the idle timeout: its own run is still going
        assert first.proc.poll() is None
        run.finish("completed")
        ended = time.monotonic()
        time.sleep(1.0)  # a page opened right after the run ended still finds it
        assert first.http("GET", "/health", origin=None)[0] == 200
        deadline = ended + 15
        while first.proc.poll() is None:
            assert time.monotonic() < deadline, "the idle controller did not exit"
            time.sleep(0.05)
        assert time.monotonic() - ended >= 1.8, "the idle clock did not restart at the run's end"
        assert first.proc.returncode == 0 and not first.runtime.exists()
    finally:
        worker.kill()
        worker.wait()
        first.stop()


def test_a_heartbeat_keeps_an_idle_controller_alive(repo_session, home):
    controller = ControllerProcess(home, idle=1.5)
    try:
        for _ in range(5):  # 3 s of heartbeats every 0.6 s: twice the idle timeout
            time.sleep(0.6)
            assert controller.http("POST", "/api/heartbeat", {})[0] == 200
        assert controller.proc.poll() is None
        deadline = time.monotonic() + 15
        while controller.proc.poll() is None:
            assert time.monotonic() < deadline, "the controller did not exit when idle"
            time.sleep(0.1)
        assert controller.proc.returncode == 0 and not controller.runtime.exists()
    finally:
        controller.stop()


def test_a_ballot_must_answer_the_whole_rubric_in_its_own_terms():
    from hermes_codex_runtime.replay.judge import CHECKS, parse_ballot, score

    good = {"checks": {k: {"a": 1, "b": None} for k in CHECKS}, "verdict": "tie"}
    assert parse_ballot("Here it is:\n" + json.dumps(good) + "\nthanks")["verdict"] == "tie"
    bad = [
        ("no json here", "no JSON object"),
        ("{not json}", "does not parse"),
        (json.dumps({**good, "checks": {"correct": {"a": 1, "b": 1}}}), "exactly the checks"),
        (json.dumps({**good, "checks": {k: {"a": True, "b": 0} for k in CHECKS}}), "1|0|null"),
        (json.dumps({**good, "checks": {k: {"a": 2, "b": 0} for k in CHECKS}}), "1|0|null"),
        (json.dumps({**good, "verdict": "C"}), "verdict"),
    ]
    for text, message in bad:
        with pytest.raises(ValueError, match=re.escape(message)):
            parse_ballot(text)
    assert score([1, 0, None, 1]) == pytest.approx(0.6667)
    assert score([None, None]) is None


def test_which_failures_a_variant_retries():
    from hermes_codex_runtime.protocol import Failure, FailureKind
    from hermes_codex_runtime.replay.engine import retryable

    again = {FailureKind.RATE_LIMIT, FailureKind.OVERLOADED, FailureKind.SERVICE,
             FailureKind.TRANSPORT}
    for kind in FailureKind:
        assert retryable(Failure(kind, "x")) is (kind in again), kind
    assert retryable(None) is False


def test_controller_port_and_idle_timeout_come_from_config_or_the_environment(monkeypatch):
    from hermes_codex_runtime.hermes.replay.context import controller_settings

    monkeypatch.delenv("HERMES_CODEX_REPLAY_PORT", raising=False)
    monkeypatch.delenv("HERMES_CODEX_REPLAY_IDLE_TIMEOUT", raising=False)
    assert controller_settings({}) == (43118, 3600.0)  # an hour without a page
    assert controller_settings({"codex_replay": {"port": 5000, "idle_timeout": 90}}) == \
        (5000, 90.0)
    monkeypatch.setenv("HERMES_CODEX_REPLAY_PORT", "5001")
    monkeypatch.setenv("HERMES_CODEX_REPLAY_IDLE_TIMEOUT", "2.5")
    assert controller_settings({"codex_replay": {"port": 5000}}) == (5001, 2.5)
    monkeypatch.delenv("HERMES_CODEX_REPLAY_PORT")
    monkeypatch.delenv("HERMES_CODEX_REPLAY_IDLE_TIMEOUT")
    for section, message in (({"port": "http"}, "codex_replay.port"),
                             ({"port": 70000}, "codex_replay.port"),
                             ({"idle_timeout": 0}, "codex_replay.idle_timeout"),
                             ({"idle_timeout": True}, "codex_replay.idle_timeout")):
        with pytest.raises(ReplayError, match=message):
            controller_settings({"codex_replay": section})
    with pytest.raises(ReplayError, match="must be a mapping"):
        controller_settings({"codex_replay": [1]})


def test_the_controller_listens_on_loopback_only_and_serves_report_downloads(finished_run,
                                                                           home):
    import psutil

    _, run = finished_run
    controller = ControllerProcess(home, session="report-owner")
    try:
        listening = [c.laddr for c in psutil.Process(controller.proc.pid).net_connections()
                     if c.status == psutil.CONN_LISTEN]
        assert [(a.ip, a.port) for a in listening] == [("127.0.0.1", controller.port)]
        status, headers, body = controller.http("POST", "/api/download",
                                                {"run_id": run.id, "format": "html"})
        assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
        assert headers["Content-Disposition"] == \
            f'attachment; filename="codex-replay-{run.id}-report.html"'
        assert body == (run.dir / "report.html").read_bytes()
        status, _, _ = controller.http("POST", "/api/download",
                                       {"run_id": run.id, "format": "json"},
                                       origin="http://evil.example")
        assert status == 403
        status, _, body = controller.http("POST", "/api/download",
                                          {"run_id": run.id, "format": "pdf"})
        assert status == 400 and b"format must be one of json, html" in body
    finally:
        assert controller.stop() == 0
