"""Codex Replay end to end: a session recorded by real ``hermes chat`` processes (three user
turns, the first with a tool call) is replayed by the real ``hermes-codex-runtime replay``
command through the real codex binary on the mock provider."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from hermes_env import base_config, chat_finished, hermes_env, write_hermes_home
from support import APP_SERVER_MODE, alive, descendants

from hermes_codex_runtime.offline.codex_home import prepare_codex_home
from hermes_codex_runtime.offline.replay_script import after_tool, agent, last_user_text

pytestmark = pytest.mark.real_hermes

BIN = Path(sys.executable).parent
HERMES = str(BIN / "hermes")
CLI = str(BIN / "hermes-codex-runtime")
TURNS = ("turn one: please write the notes file", "turn two: summarise what you did",
         "turn three: say goodbye")


class Script:
    """The mock agent, with switches: a delay before answering a given turn, a command to run
    instead of a given turn's answer."""

    def __init__(self) -> None:
        self.slow: dict[str, float] = {}
        self.command: dict[str, str] = {}
        self.failures: dict[str, list[Any]] = {}  # model -> replies to give first
        self.reviews: list[dict[str, Any]] = []
        self.reached = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Any:
        from hermes_codex_runtime.offline import provider as mp

        with self._lock:
            pending = self.failures.get(str(body.get("model")))
            if pending:
                return pending.pop(0)
        text = last_user_text(body)
        if text.startswith("BLIND REVIEW"):
            return self.ballot(body, text)
        for prefix, delay in self.slow.items():
            if text.startswith(prefix) and not after_tool(body):
                self.reached.set()
                return mp.text(f"[{body.get('model')}] slow answer", delay=delay)
        for prefix, command in self.command.items():
            if text.startswith(prefix) and not after_tool(body):
                self.reached.set()
                return mp.exec_command(command)
        return agent(body)

    def ballot(self, body: dict[str, Any], text: str) -> Any:
        """The scripted reviewer: A passes everything, B fails "concise" and the rest is N/A
        for it, A wins; a review involving mock-model-2 gets an answer that is no ballot."""
        from hermes_codex_runtime.offline import provider as mp
        from hermes_codex_runtime.replay.judge import CHECKS

        self.reviews.append(body)
        if "[mock-model-2]" in text:
            return mp.text("I think A is better.")
        checks = {key: {"a": 1, "b": 0 if key == "concise" else None} for key in CHECKS}
        return mp.text(json.dumps({"checks": checks, "verdict": "A",
                                   "summary": "A is more to the point"}))


@pytest.fixture(scope="module")
def recorded(codex_binary, tmp_path_factory):
    """A Hermes home with one recorded session, its project (a git repository), and the mock."""
    from hermes_codex_runtime.offline import provider as mp

    root = tmp_path_factory.mktemp("replay")
    script = Script()
    provider = mp.MockResponsesProvider(default=script).start()
    try:
        # workspace-write: the original session really writes notes.txt into the project (a
        # command the sandbox denies makes codex 0.163 skip the command's item events now and
        # then — see docs/codex-facts.md — and the recording must have its tool call)
        codex_home = prepare_codex_home(root / "codex-home", provider.base_url,
                                        codex_bin=codex_binary.path,
                                        sandbox_mode="workspace-write",
                                        extra_models=["mock-model-2"])
        home = root / "hermes-home"
        write_hermes_home(home, base_config(codex_home=str(codex_home)))
        (home / "codex-runtime").mkdir(parents=True, exist_ok=True)
        (home / "codex-runtime" / "prices.yaml").write_text(
            "mock-model: {input: 2.0, cache_read: 0.5, cache_write: 2.5, output: 8.0}\n")
        project = root / "project"
        project.mkdir()
        for command in (["git", "init", "-q"], ["git", "add", "-A"],
                        ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", "commit",
                         "-qm", "start"]):
            if command[1] == "add":
                (project / "README.md").write_text("the project\n")
            subprocess.run(command, cwd=project, check=True, timeout=30)
        session_id = None
        for text in TURNS:
            args = [HERMES, "chat", "-Q"] + (["--resume", session_id] if session_id else []) \
                + ["-q", text]
            done = subprocess.run(args, env=hermes_env(home), cwd=project, capture_output=True,
                                  text=True, timeout=180, stdin=subprocess.DEVNULL)
            assert chat_finished(done), done.stderr[-2000:]
            found = re.search(r"session_id:\s*(\S+)", done.stderr)
            session_id = session_id or (found.group(1) if found else None)
        assert session_id
        yield {"home": home, "project": project, "session": session_id, "provider": provider,
               "script": script, "root": root}
    finally:
        provider.stop()


def replay(recorded: dict[str, Any], *args: str, timeout: float = 240,
           check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([CLI, "replay", *args], env=hermes_env(recorded["home"]),
                          cwd=recorded["root"], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    if check:
        assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def events(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def run_dir(recorded: dict[str, Any], run_id: str) -> Path:
    return recorded["home"] / "codex-runtime" / "replays" / run_id


def turn_requests(provider: Any, prefix: str, model: str | None = None) -> int:
    """How many times codex sent the user turn starting with ``prefix`` to the model (a tool
    result's follow-up is not a new send)."""
    return sum(1 for body in list(provider.requests)
               if last_user_text(body).startswith(prefix) and not after_tool(body)
               and (model is None or body.get("model") == model))


def turn_context(recorded: dict[str, Any], thread_id: str) -> dict[str, Any]:
    """The settings codex itself recorded for the thread's first turn (its rollout)."""
    [rollout] = (recorded["root"] / "codex-home" / "sessions").rglob(f"*{thread_id}.jsonl")
    for line in rollout.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("type") == "turn_context":
            return dict(entry["payload"])
    raise AssertionError(f"no turn_context in {rollout}")


def turn_records(folder: Path, variant: str = "v1-mock-model") -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in
            sorted((folder / "variants" / variant / "turns").glob("*.json"))]


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_a_recorded_session_replays_with_two_variants_into_a_full_report(recorded):
    project = recorded["project"]
    status_before = subprocess.run(["git", "status", "--porcelain"], cwd=project,
                                   capture_output=True, text=True, check=True).stdout
    assert (project / "notes.txt").read_text() == "notes by mock-model\n"  # the original's
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True,
                          text=True, check=True).stdout.strip()
    listed = json.loads(replay(recorded, "list", "--json").stdout)
    assert [s["ref"] for s in listed["sessions"]] == [recorded["session"]]
    assert listed["sessions"][0]["user_turns"] == 3
    recorded["provider"].clear()

    done = replay(recorded, "run", recorded["session"], "--model", "mock-model", "--model",
                  "mock-model-2", "--yes", "--json")
    lines = events(done)
    assert lines[0]["event"] == "plan" and lines[-1]["event"] == "finished", lines
    assert lines[-1]["status"] == "completed", lines[-1]
    assert any(e["event"] == "progress" for e in lines)
    folder = Path(lines[-1]["run_dir"])
    report = json.loads((folder / "report.json").read_text())

    assert report["schema"] == "hermes-codex-runtime.replay.report/1"
    assert report["status"] == "completed"
    assert report["source"]["kind"] == "hermes" and report["source"]["turns_total"] == 3
    assert report["source"]["cwd"] == str(project)
    assert "exec_command" in report["source"]["tools_used"]
    assert report["baseline"] == {"kind": "commit", "repo": str(project), "commit": head,
                                  "subdir": "", "requested": "HEAD"}
    assert report["original"]["usage"]["total"] > 0
    assert [v["model"] for v in report["variants"]] == ["mock-model", "mock-model-2"]
    for variant in report["variants"]:
        model = variant["model"]
        assert variant["status"] == "completed" and variant["attempts"] == 1
        assert variant["thread_id"]
        assert [t["index"] for t in variant["turns"]] == [1, 2, 3]
        first, second = variant["turns"][0], variant["turns"][1]
        assert first["user_text"] == TURNS[0]
        assert first["original_text"] == "[mock-model] I wrote notes.txt."
        assert first["replay_text"] == f"[{model}] I wrote notes.txt."
        assert [c["name"] for c in first["tool_calls"]] == ["exec_command"]
        assert [c["name"] for c in first["original_tool_calls"]] == ["exec_command"]
        assert second["replay_text"].startswith(f"[{model}] You said: turn two")
        for turn in variant["turns"]:
            assert turn["status"] == "completed" and turn["elapsed"] > 0
            assert set(turn["usage"]) == {"input", "cache_read", "cache_write", "output",
                                          "reasoning", "total"}
            assert 0 <= turn["similarity"] <= 1
        context = turn_context(recorded, variant["thread_id"])  # unattended and sandboxed
        assert context["approval_policy"] == "never"
        assert context["sandbox_policy"]["type"] == "workspace-write"
        assert context["sandbox_policy"]["network_access"] is False
        assert context["cwd"] == str(folder / "workspaces" / variant["name"])
        usage = variant["usage"]
        # the mock reports 1200 input (400 cached), 80 output (16 reasoning) per response;
        # turn one has two responses (the tool call, then the answer): 4 responses in all
        assert usage == {"input": 4 * 800, "cache_read": 4 * 400, "cache_write": 0,
                         "output": 4 * 80, "reasoning": 4 * 16, "total": 4 * 1280}
        changes = variant["changes"]
        assert changes["files"] == [{"status": "added", "path": "notes.txt"}]
        assert f"+notes by {model}" in changes["diff"]
        assert (folder / "workspaces" / variant["name"] / "notes.txt").read_text() \
            == f"notes by {model}\n"
    same = report["variants"][0]["turns"][0]
    other = report["variants"][1]["turns"][0]
    assert same["diff"] == "" and same["similarity"] == 1.0
    assert "-[mock-model] I wrote notes.txt." in other["diff"]
    assert "+[mock-model-2] I wrote notes.txt." in other["diff"]
    costs = [v["cost"] for v in report["variants"]]
    assert costs[0]["usd"] == pytest.approx((3200 * 2.0 + 1600 * 0.5 + 320 * 8.0) / 1e6)
    assert costs[1]["usd"] is None and "no price" in costs[1]["basis"]
    assert any("commit a session started from" in note for note in report["limitations"])
    assert report["plan"]["turns"] == [1, 2, 3] and report["plan"]["network"] is False

    # each variant ran on codex's own model choice, unattended
    models = {body.get("model") for body in recorded["provider"].requests}
    assert models == {"mock-model", "mock-model-2"}
    for prefix in (t[:8] for t in TURNS):
        for model in ("mock-model", "mock-model-2"):
            assert turn_requests(recorded["provider"], prefix, model) == 1
    log = (folder / "run.log").read_text()
    # where the user's sessions run: one shared process, or (make test-per-session) one each
    processes = 1 if APP_SERVER_MODE == "shared" else 2
    assert f"{processes} codex app-server process(es) for 2 variant(s)" in log
    assert "[controller] run approved" in log and "[v1-mock-model:tool] exec_command" in log
    for name in ("state.json", "run.log", "report.json", "report.html", "source.json"):
        assert (folder / name).stat().st_mode & 0o077 == 0, name
    page = (folder / "report.html").read_text()
    assert "Content-Security-Policy" in page and "<script" not in page
    # the user's checkout is untouched: same HEAD, same status, no worktree registered
    assert subprocess.run(["git", "status", "--porcelain"], cwd=project, capture_output=True,
                          text=True, check=True).stdout == status_before
    assert (project / "notes.txt").read_text() == "notes by mock-model\n"
    assert subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=project,
                          capture_output=True, text=True, check=True
                          ).stdout.count("worktree ") == 1

    shown = json.loads(replay(recorded, "show", folder.name, "--json").stdout)
    assert shown["status"] == "completed"
    assert [v["turns_done"] for v in shown["variants"]] == [3, 3]
    html = replay(recorded, "report", folder.name, "--format", "html").stdout
    assert html == (folder / "report.html").read_text()


def killed_during_turn_two(recorded: dict[str, Any]) -> tuple[str, Path, int, list[int]]:
    """A one-variant run whose runner is killed -9 while turn two is with the model: its id,
    folder, the runner's PID and its codex processes."""
    provider, script = recorded["provider"], recorded["script"]
    provider.clear()
    script.reached.clear()
    script.slow = {"turn two": 60.0}
    try:
        started = events(replay(recorded, "run", recorded["session"], "--model", "mock-model",
                                "--yes", "--json", "--detach"))
        run_id = started[-1]["run_id"]
        folder = run_dir(recorded, run_id)
        assert script.reached.wait(90), "turn two never reached the model"
        state = json.loads((folder / "state.json").read_text())
        runner = state["runner"]["pid"]
        assert state["variants"]["v1-mock-model"]["in_flight"] == 2
        codex = descendants(runner, "codex")  # a child may exit while they are listed
        assert codex, "the runner has no codex app-server"
        os.kill(runner, signal.SIGKILL)
        wait_for(lambda: not alive(runner), 10, "the runner to die")
    finally:
        script.slow = {}
    return run_id, folder, runner, codex


def test_a_killed_runner_is_interrupted_and_resume_never_sends_a_turn_twice(recorded):
    provider = recorded["provider"]
    run_id, folder, runner, codex = killed_during_turn_two(recorded)
    shown = json.loads(replay(recorded, "show", run_id, "--json").stdout)
    assert shown["status"] == "interrupted", shown  # never silently "running"…
    [variant] = shown["variants"]  # …nor any variant of it
    assert variant["status"] == "interrupted" and variant["in_flight"] == 2, variant
    assert f"the runner process stopped (pid {runner})" in variant["error"]
    wait_for(lambda: not any(alive(pid) for pid in codex), 15, "the orphaned codex to end")
    text = replay(recorded, "show", run_id).stdout
    assert "v1-mock-model: interrupted, 1/3 turns (turn 2 was in flight)" in text, text
    assert f"replay resume {run_id}" in text

    done = replay(recorded, "resume", run_id, "--json")
    assert events(done)[-1]["status"] == "completed", done.stdout
    records = turn_records(folder)
    assert [r["index"] for r in records] == [1, 2, 3]
    assert records[1]["recovered"] is True and records[1]["status"] == "interrupted"
    assert records[1]["final_text"] == ""  # what codex had of it: nothing
    assert records[0]["recovered"] is False and records[2]["status"] == "completed"
    thread = records[0]["thread_id"]
    assert {r["thread_id"] for r in records} == {thread}  # the same codex thread throughout
    for prefix in ("turn one", "turn two", "turn thre"):
        assert turn_requests(provider, prefix) == 1, prefix
    state = json.loads((folder / "state.json").read_text())
    assert state["status"] == "completed" and state["resumes"] == 1
    report = json.loads((folder / "report.json").read_text())
    assert any("recovered from codex's thread" in n for n in report["limitations"])
    # the report says how to rerun just that turn…
    rerun = f"hermes-codex-runtime replay resume {run_id} --retry-interrupted"
    assert [t["rerun_command"] for t in report["variants"][0]["turns"]] == [None, rerun, None]
    assert f"Rerun just this turn: <code>{rerun}</code>" in (folder / "report.html").read_text()
    assert f"rerun just those turns with `{rerun}`" in replay(recorded, "show", run_id).stdout

    # …and that command does it: turn two alone, on a fork of the thread through turn one
    done = replay(recorded, "resume", run_id, "--retry-interrupted", "--json")
    assert events(done)[-1]["status"] == "completed", done.stdout
    again = turn_records(folder)
    assert [r["status"] for r in again] == ["completed"] * 3
    assert again[0] == records[0] and again[2] == records[2]  # the others are not touched
    assert again[1]["final_text"] == "[mock-model] You said: turn two: summarise what you did"
    assert again[1]["rerun"]["alone"] is True and again[1]["rerun"]["was"]["status"] == \
        "interrupted"
    assert again[1]["thread_id"] not in (None, thread)  # a fork, not the variant's thread
    assert turn_requests(provider, "turn two") == 2  # sent once more, and nothing else was
    assert turn_requests(provider, "turn one") == 1 and turn_requests(provider, "turn thre") == 1
    body = [b for b in list(provider.requests) if last_user_text(b).startswith("turn two")][-1]
    sent = json.dumps(body["input"])
    assert TURNS[0] in sent and TURNS[2] not in sent  # the history turn two saw the first time
    state = json.loads((folder / "state.json").read_text())
    assert state["variants"]["v1-mock-model"]["thread_id"] == thread
    report = json.loads((folder / "report.json").read_text())
    assert [t["rerun_command"] for t in report["variants"][0]["turns"]] == [None] * 3
    assert any("Turn 2 of v1-mock-model was rerun alone" in n for n in report["limitations"])


def test_retry_interrupted_sends_the_turn_in_flight_again_from_the_turn_before_it(recorded):
    provider = recorded["provider"]
    run_id, folder, _runner, codex = killed_during_turn_two(recorded)
    wait_for(lambda: not any(alive(pid) for pid in codex), 15, "the orphaned codex to end")
    done = replay(recorded, "resume", run_id, "--retry-interrupted", "--json")
    assert events(done)[-1]["status"] == "completed", done.stdout
    records = turn_records(folder)
    assert [(r["status"], r["recovered"]) for r in records] == [("completed", False)] * 3
    first, second, third = records
    assert second["final_text"] == "[mock-model] You said: turn two: summarise what you did"
    assert second["rerun"]["alone"] is False  # the run went on from the rerun turn…
    assert second["thread_id"] == third["thread_id"] != first["thread_id"]  # …on the fork
    state = json.loads((folder / "state.json").read_text())
    assert state["variants"]["v1-mock-model"]["thread_id"] == third["thread_id"]
    assert turn_requests(provider, "turn two") == 2 and turn_requests(provider, "turn thre") == 1
    assert turn_requests(provider, "turn one") == 1
    body = [b for b in list(provider.requests) if last_user_text(b).startswith("turn three")][-1]
    sent = json.dumps(body["input"])
    assert sent.count(json.dumps({"type": "input_text", "text": TURNS[1]})) == 1, sent  # once
    assert "You said: turn two" in sent  # with the rerun's answer (not the attempt it replaced)
    report = json.loads((folder / "report.json").read_text())
    assert any("Turn 2 of v1-mock-model was sent again" in n for n in report["limitations"])


def test_cancel_kills_exactly_the_runs_processes_and_is_idempotent(recorded):
    from test_replay import McpClient

    provider, script = recorded["provider"], recorded["script"]
    provider.clear()
    script.reached.clear()
    marker = 3000 + os.getpid() % 1000
    script.command = {"turn one": f"setsid sleep {marker} & sleep {marker + 1}"}
    bystander = subprocess.Popen(["sleep", str(marker)], start_new_session=True)
    try:
        started = events(replay(recorded, "run", recorded["session"], "--model", "mock-model",
                                "--yes", "--json", "--detach"))
        run_id = started[-1]["run_id"]
        folder = run_dir(recorded, run_id)
        assert script.reached.wait(90), "the command never reached codex"

        def sleepers() -> list[int]:
            return [p.pid for p in psutil.process_iter(["cmdline"])
                    if (p.info["cmdline"] or [])[:1] == ["sleep"] and p.pid != bystander.pid
                    and (p.info["cmdline"] or [])[1:] in ([str(marker)], [str(marker + 1)])]

        wait_for(lambda: len(sleepers()) == 2, 30, "the command and its setsid grandchild")
        state = json.loads((folder / "state.json").read_text())
        runner = state["runner"]["pid"]
        tree = [runner, *(p.pid for p in psutil.Process(runner).children(recursive=True)),
                *sleepers()]
        done = json.loads(replay(recorded, "cancel", run_id, "--json").stdout)
        assert done["status"] == "cancelled" and done["idempotent"] is False
        wait_for(lambda: not any(alive(pid) for pid in tree), 10, "the run's processes to end")
        assert bystander.poll() is None, "cancel killed a process that is not the run's"
        again = json.loads(replay(recorded, "cancel", run_id, "--json").stdout)
        assert again == {"run_id": run_id, "status": "cancelled", "idempotent": True}
        state = json.loads((folder / "state.json").read_text())
        assert state["status"] == "cancelled"
        assert state["cancellation_reason"] == "user_requested"
        assert state["error"] == "Cancelled by user."
        # the variant that was running says so too, with the reason, wherever it is shown
        shown = json.loads(replay(recorded, "show", run_id, "--json").stdout)
        assert [(v["status"], v["error"]) for v in shown["variants"]] == [
            ("cancelled", "Cancelled by user.")], shown["variants"]
        assert "v1-mock-model: cancelled, 0/3 turns" in replay(recorded, "show", run_id).stdout
        assert "— Cancelled by user." in replay(recorded, "show", run_id).stdout
        client = McpClient(recorded["home"])
        try:
            view = client.tool("get_run", run_id=run_id)["structuredContent"]
            assert [v["status"] for v in view["variants"]] == ["cancelled"]
        finally:
            assert client.close() == 0
        for flags in ((), ("--retry-interrupted",)):
            resumed = replay(recorded, "resume", run_id, *flags, check=False)
            assert resumed.returncode == 2 and "is cancelled" in resumed.stderr, flags
    finally:
        script.command = {}
        bystander.kill()
        bystander.wait()


def test_an_agent_drives_a_replay_through_the_mcp_server(recorded):
    from test_replay import McpClient

    recorded["provider"].clear()
    client = McpClient(recorded["home"])
    try:
        client.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                      "clientInfo": {"name": "hermes", "version": "0"}})
        [session] = client.tool("list_sessions")["structuredContent"]["sessions"]
        plan = client.tool("plan_replay", source=session["ref"], models=["mock-model-2"],
                           turns="2-3")["structuredContent"]
        started = client.tool("start_replay", source=session["ref"], models=["mock-model-2"],
                              turns="2-3", plan_token=plan["plan_token"])
        assert started["isError"] is False, started
        run_id = started["structuredContent"]["run_id"]
        deadline = time.monotonic() + 120
        while True:
            view = client.tool("get_run", run_id=run_id)["structuredContent"]
            if view["status"] not in ("pending", "running"):
                break
            assert time.monotonic() < deadline, view
            time.sleep(0.3)
        assert view["status"] == "completed", view
        assert view["variants"][0]["turns_done"] == 2
        report = client.tool("get_report", run_id=run_id)["structuredContent"]["report"]
        assert [t["index"] for t in report["variants"][0]["turns"]] == [2, 3]
        page = client.tool("get_report", run_id=run_id, format="html")["structuredContent"]
        assert page["artifact_mime_type"] == "text/html"
        assert "[mock-model-2] You said: turn two" in page["artifact_content"]
        assert turn_requests(recorded["provider"], "turn one") == 0  # only the chosen turns
    finally:
        assert client.close() == 0


def test_the_controller_page_in_a_real_browser_plans_starts_cancels_and_opens_reports(
        recorded):
    from test_replay import ControllerProcess

    from hermes_codex_runtime.testing.browser import Browser

    provider, script = recorded["provider"], recorded["script"]
    provider.clear()
    controller = ControllerProcess(recorded["home"])
    try:
        with Browser() as browser:
            page = browser.page
            page.navigate(controller.origin + "/")
            item = f"#sessions li[data-ref=\"{recorded['session']}\"]"
            page.wait_for(f"!!document.querySelector('{item}')",
                          what="the recorded session in the list")
            page.click(item)
            assert page.evaluate("document.querySelector('#start').disabled") is True
            page.type("#models", "mock-model-2")
            page.type("#turns", "1-2")
            page.click("#plan")
            plan = page.wait_for("!document.querySelector('#plan-text').hidden && "
                                 "document.querySelector('#plan-text').textContent",
                                 what="the plan")
            assert "v1-mock-model-2: model mock-model-2" in plan and "1-2 of 3" in plan
            page.type("#turns", "1")  # a changed configuration must be planned again
            assert page.evaluate("document.querySelector('#start').disabled") is True
            page.click("#plan")
            page.wait_for("!document.querySelector('#start').disabled", what="start enabled")

            script.slow = {"turn one": 60.0}  # a run to cancel from the page
            try:
                page.click("#start")
                page.wait_for("!!document.querySelector('#runs button.cancel')", 60,
                              "the cancel button of the running run")
                page.click("#runs button.cancel")
                page.wait_for("[...document.querySelectorAll('#runs .status')].some("
                              "s => s.textContent === 'cancelled')", 30, "the run cancelled")
                variant = page.evaluate("document.querySelector('#runs .progress').textContent")
                assert variant.startswith("v1-mock-model-2: cancelled, 0/1 turns"), variant
                assert variant.endswith("— Cancelled by user."), variant
            finally:
                script.slow = {}

            page.click("#plan")
            page.wait_for("!document.querySelector('#start').disabled", what="start enabled")
            page.click("#start")
            page.wait_for("[...document.querySelectorAll('#runs .status')].some("
                          "s => s.textContent === 'completed')", 90, "the run completed")
            href = page.wait_for("document.querySelector('#runs a.report-link') && "
                                 "document.querySelector('#runs a.report-link').href",
                                 what="the report link")
            problems = page.problems()
            assert problems == [], problems
            page.navigate(href)
            text = page.evaluate("document.body.innerText")
            assert "Codex Replay" in text and "[mock-model-2] I wrote notes.txt." in text
            assert page.evaluate("document.querySelectorAll('section.turn').length") == 1
            assert page.problems() == [], page.problems()  # its CSP let its own style in
            assert page.evaluate(
                "getComputedStyle(document.querySelector('header')).borderBottomStyle"
            ) == "solid"
    finally:
        assert controller.stop() == 0


def test_retryable_failures_retry_in_fresh_copies_and_others_do_not(recorded):
    from hermes_codex_runtime.offline import provider as mp

    provider, script = recorded["provider"], recorded["script"]
    provider.clear()
    script.failures = {"mock-model": [mp.server_error(), mp.server_error()],
                       "mock-model-2": [mp.unauthorized()]}
    try:
        done = replay(recorded, "run", recorded["session"], "--model", "mock-model", "--model",
                      "mock-model-2", "--turns", "1", "--yes", "--json", check=False)
    finally:
        script.failures = {}
    finished = events(done)[-1]
    assert finished["status"] == "failed", finished  # one variant failed for good
    folder = Path(finished["run_dir"])
    state = json.loads((folder / "state.json").read_text())
    retried, refused = state["variants"]["v1-mock-model"], state["variants"]["v2-mock-model-2"]
    assert retried["status"] == "completed" and retried["attempt"] == 2
    assert sorted(p.name for p in (folder / "workspaces").iterdir()) == [
        "v1-mock-model", "v1-mock-model-attempt-1-failed", "v1-mock-model-attempt-2-failed",
        "v2-mock-model-2"]
    archived = folder / "variants" / "v1-mock-model" / "attempt-1-failed" / "001.json"
    assert json.loads(archived.read_text())["status"] == "failed"
    log = (folder / "run.log").read_text()
    assert "starting retry 1 of 3" in log and "starting retry 2 of 3" in log
    assert refused["status"] == "failed" and refused.get("attempt", 0) == 0
    assert "codex login" in refused["error"] or "401" in refused["error"] or \
        "auth" in refused["error"].lower(), refused["error"]
    report = json.loads((folder / "report.json").read_text())
    assert [v["attempts"] for v in report["variants"]] == [3, 1]

    provider.clear()
    script.failures = {"mock-model": [mp.server_error()] * 4}
    try:
        done = replay(recorded, "run", recorded["session"], "--model", "mock-model", "--turns",
                      "1", "--yes", "--json", check=False)
    finally:
        script.failures = {}
    folder = Path(events(done)[-1]["run_dir"])
    state = json.loads((folder / "state.json").read_text())
    assert state["status"] == "failed"
    assert state["variants"]["v1-mock-model"]["attempt"] == 3  # four attempts, then it stops
    assert "failed after 3 retries" in (folder / "run.log").read_text()
    assert turn_requests(provider, "turn one") == 4  # one request per attempt, each refused


def test_a_token_budget_stops_a_variant_between_turns_and_options_reach_codex(recorded):
    recorded["provider"].clear()
    done = replay(recorded, "run", recorded["session"], "--model", "mock-model",
                  "--budget-tokens", "2000", "--network", "--effort", "high", "--yes", "--json")
    finished = events(done)[-1]
    assert finished["status"] == "completed", finished
    state = json.loads((Path(finished["run_dir"]) / "state.json").read_text())
    variant = state["variants"]["v1-mock-model"]
    assert variant["status"] == "stopped" and variant["turns_done"] == 1
    assert "token budget 2000 reached" in variant["error"]
    assert turn_requests(recorded["provider"], "turn two") == 0
    assert turn_context(recorded, variant["thread_id"])["sandbox_policy"]["network_access"] is True
    assert {(body.get("reasoning") or {}).get("effort")
            for body in recorded["provider"].requests} == {"high"}



def test_variants_run_on_the_remote_app_server_the_sessions_use_with_its_auth(
        recorded, codex_binary, tmp_path):
    from hermes_codex_runtime.testing.remote_server import RemoteAppServer

    provider = recorded["provider"]
    provider.clear()
    east = RemoteAppServer(tmp_path / "east", provider.base_url, codex_bin=codex_binary.path)
    try:  # the same recorded session, in a home whose sessions run on that app-server
        home = tmp_path / "hermes-home"
        shutil.copytree(recorded["home"], home, ignore=shutil.ignore_patterns("replays"))
        config = yaml.safe_load((home / "config.yaml").read_text())
        config["model"].update(codex_app_server=[east.url],
                               codex_app_server_token_file=str(east.token_file))
        (home / "config.yaml").write_text(yaml.safe_dump(config))
        done = subprocess.run([CLI, "replay", "run", recorded["session"], "--model",
                               "mock-model", "--turns", "1", "--yes", "--json"],
                              env=hermes_env(home), cwd=tmp_path, capture_output=True, text=True,
                              timeout=240, stdin=subprocess.DEVNULL)
        lines = events(done)
        assert lines and lines[-1]["status"] == "completed", done.stdout + done.stderr
    finally:
        east.stop()
    folder = Path(lines[-1]["run_dir"])
    variant = json.loads((folder / "state.json").read_text())["variants"]["v1-mock-model"]
    assert variant.get("endpoint") == east.url
    [rollout] = (east.codex_home / "sessions").rglob(f"*{variant['thread_id']}.jsonl")
    assert not list((recorded["root"] / "codex-home" / "sessions").rglob(
        f"*{variant['thread_id']}.jsonl"))  # the rollout stays on that "machine"
    assert json.loads(rollout.read_text().splitlines()[0])["payload"]["cwd"] == str(
        folder / "workspaces" / "v1-mock-model")
    assert (folder / "workspaces" / "v1-mock-model" / "notes.txt").read_text() == \
        "notes by mock-model\n"
    log = (folder / "run.log").read_text()
    assert f"1 remote codex app-server(s) ({east.url}) for 1 variant(s)" in log
    assert "process(es)" not in log  # no local codex was started
    assert lines[0]["plan"]["app_server"]["endpoints"][0]["token_file"] == str(east.token_file)
    for name in ("state.json", "run.log", "report.json", "report.html"):
        assert east.token not in (folder / name).read_text(), name  # the path, never the token
    report = json.loads((folder / "report.json").read_text())
    assert report["variants"][0]["endpoint"] == east.url
    shown = replay({**recorded, "home": home}, "show", folder.name).stdout
    assert f"on {east.url}" in shown


def test_a_real_hermes_export_file_is_a_source_and_nothing_starts_unconfirmed(recorded):
    export = recorded["root"] / "export.jsonl"
    done = subprocess.run([HERMES, "sessions", "export", str(export), "--session-id",
                           recorded["session"]], env=hermes_env(recorded["home"]),
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and export.is_file(), done.stdout + done.stderr
    runs = recorded["home"] / "codex-runtime" / "replays"
    before = sorted(p.name for p in runs.iterdir()) if runs.exists() else []
    plan = replay(recorded, "run", str(export), "--model", "mock-model", check=False)
    assert plan.returncode == 2, plan.stdout + plan.stderr
    assert f"source:    export {export}#{recorded['session']}" in plan.stdout
    assert "turns:     3 prompt(s) from user turns 1-3 of 3" in plan.stdout
    assert "add --yes" in plan.stderr
    assert (sorted(p.name for p in runs.iterdir()) if runs.exists() else []) == before


def test_a_blind_review_sees_only_anonymised_copies_and_fills_the_rubric(recorded):
    script = recorded["script"]
    recorded["provider"].clear()
    script.reviews.clear()
    done = replay(recorded, "run", recorded["session"], "--model", "mock-model", "--model",
                  "mock-model-2", "--turns", "2-3", "--judge", "mock-model", "--yes", "--json")
    finished = events(done)[-1]
    assert finished["status"] == "completed", finished
    folder = Path(finished["run_dir"])
    report = json.loads((folder / "report.json").read_text())
    judged, invalid = report["judge"]["v1-mock-model"], report["judge"]["v2-mock-model-2"]
    assert judged["status"] == "completed" and judged["model"] == "mock-model"
    mapping = judged["candidate_mapping"]
    assert sorted(mapping.values()) == ["original", "v1-mock-model"]
    assert judged["winner"] == mapping["A"]  # the letters are mapped back to the sides
    assert judged["scores"] == {mapping["A"]: 1.0, mapping["B"]: 0.0}
    assert {c["id"]: (c["a"], c["b"]) for c in judged["checks"]}["concise"] == (1, 0)
    assert next(c["id"] for c in judged["checks"]) == "answers_the_request"
    assert invalid["status"] == "invalid" and "no JSON object" in invalid["error"]
    assert len(script.reviews) == 2
    for body in script.reviews:
        texts = json.dumps(body)
        assert "review-workspaces" in texts  # it ran in its own review workspace…
        assert str(folder / "workspaces") not in texts  # not the variants' copies…
        assert str(recorded["project"]) not in texts  # …nor the user's project
        shown = last_user_text(body).split("candidate-a.json:")[1]
        assert "original" not in shown and "mock-model\"" not in shown  # nothing names a side
        assert "turn one" not in shown  # only the replayed turns, on both sides
    assert not (folder / "review-workspaces").exists()  # …removed afterwards
    page = (folder / "report.html").read_text()
    assert "Blind review" in page and "Pass" in page and "N/A" in page
    assert "No validated blind review ballot" not in page and "invalid" in page

