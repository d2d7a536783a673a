"""Hermes' side tasks on a codex-only login, end to end: real ``hermes chat`` (interactive, and a
resumed ``-q``) and the gateway's API server, with the plugin enabled, no Hermes auth.json and no
``OPENAI_*`` — a title, the approval judge, the background review, and compression before a
process's first codex turn, each request on the model the task's settings name."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hermes_env import HERMES, Gateway, base_config, hermes_env, write_config, write_hermes_home
from test_hermes_side_tasks import (
    INERT,
    TITLE,
    hosts_title_every_turn,
    is_judge,
    is_title,
    side_task_router,
    tools_of,
    wait_until,
)
from tmux import Tmux

from hermes_codex_runtime.offline import provider as mp

pytestmark = [pytest.mark.real_hermes, pytest.mark.real_codex]


@pytest.fixture
def home(tmp_path, codex_binary, mock_provider, monkeypatch):
    from hermes_codex_runtime.offline.codex_home import prepare_codex_home

    for name in [n for n in os.environ if n.startswith("OPENAI")]:
        monkeypatch.delenv(name)  # only a codex login
    monkeypatch.setenv("CODEX_BIN", str(codex_binary.path))
    codex_home = prepare_codex_home(tmp_path / "codex-home", mock_provider.base_url,
                                    codex_bin=codex_binary.path)
    hermes_home = tmp_path / "hermes-home"
    write_hermes_home(hermes_home, base_config(codex_home=str(codex_home)))
    assert not (hermes_home / "auth.json").exists()
    (tmp_path / "work").mkdir()
    return hermes_home


def configure(home: Path, **sections: Any) -> None:
    config = base_config(codex_home=str(home.parent / "codex-home"))
    model = sections.pop("model", {})
    config["model"].update(model)
    config.update(sections)
    write_config(home, config)


def session_row(home: Path, session_id: str | None = None) -> tuple[str, str | None]:
    with contextlib.closing(sqlite3.connect(home / "state.db")) as db:
        rows = db.execute("SELECT id, title FROM sessions ORDER BY started_at").fetchall()
    return next(r for r in rows if session_id in (None, r[0]))


def aux_tasks(home: Path) -> dict[str, str]:
    with contextlib.closing(sqlite3.connect(home / "state.db")) as db:
        rows = db.execute("SELECT task, model FROM session_model_usage WHERE task != ''")
        return dict(rows.fetchall())


def last_user_text(body: dict[str, Any]) -> str:
    last = body["input"][-1]
    parts = last.get("content") if last.get("role") == "user" else None
    return " ".join(p.get("text", "") for p in parts or () if isinstance(p, dict))


#: The prompts of a chat that outgrows an 80,000-token window and their answers: ~68k tokens of
#: lorem ipsum, then a plain answer.
OUTGROWN_CHAT = {"write a lot": ("lorem ipsum dolor sit amet " * 10100).strip(),
                 "and now?": "Carrying on."}


def outgrown_chat_turn(body: dict[str, Any]) -> mp.Reply:
    """The session's own turns of :data:`OUTGROWN_CHAT` (the long answer's usage as a provider
    reports it); any other prompt is codex's compaction prompt: ``SUMMARY-OF-THE-LOREM``."""
    said = last_user_text(body)
    usage = mp.Usage(input=11000, output=68200) if said == "write a lot" else None
    return mp.text(OUTGROWN_CHAT.get(said, "SUMMARY-OF-THE-LOREM"), usage=usage)


def command_turn(command: str, answer: str):
    """The session's own turns: one escalated command, then ``answer``."""
    def turn(body: dict[str, Any]) -> mp.Reply:
        outputs = [i for i in body["input"] if i.get("type") == "function_call_output"]
        return mp.text(answer) if outputs else mp.exec_command(command, escalated=True)
    return turn


def is_review(body: dict[str, Any]) -> bool:
    """The background review fork's request: offered Hermes' memory tool, and not the rest of
    the agent's Hermes tools (``delegate_task``, on both host lines) that the user's own turns
    are offered."""
    return "memory" in tools_of(body) and "delegate_task" not in tools_of(body)


def review_or(turn):
    """The background review fork saves a memory; everything else goes to ``turn``."""
    def reply(body: dict[str, Any]) -> mp.Reply:
        if is_review(body):
            if any(i.get("type") == "function_call_output" for i in body["input"]):
                return mp.text("Saved the preference.")
            return mp.tool_call("memory", {"action": "add", "target": "memory",
                                           "content": "User always drinks green tea."})
        return turn(body)
    return reply


def test_the_api_server_runs_the_judge_the_title_and_the_review_on_codex(home, mock_provider,
                                                                        tmp_path):
    configure(home, approvals={"mode": "smart", "timeout": 30},
              auxiliary={"title_generation": {"model": "title-model"},
                         "approval": {"model": "judge-model"}},
              memory={"memory_enabled": True, "nudge_interval": 1})
    mock_provider.set_default(side_task_router(turn=review_or(command_turn(
        "echo judged-by-hermes", "Done; I always note green tea."))))
    gateway = Gateway(home, TERMINAL_CWD=str(tmp_path / "work"))
    try:
        run_id = gateway.call("POST", "/v1/runs", {"input": "I always drink green tea; run "
                                                            "the command"})["run_id"]
        names = [event.get("event") for event in gateway.events(run_id)]
        memory = home / "memories" / "MEMORY.md"
        wait_until("the background review", lambda: memory.exists()
                   and "green tea" in memory.read_text())
        if hosts_title_every_turn():
            wait_until("the title", lambda: session_row(home)[1])
    finally:
        gateway.stop()
    assert "approval.request" not in names and names[-1] == "run.completed", names
    requests = mock_provider.requests
    follow_up = [b for b in requests if not is_judge(b) and not is_title(b)
                 and not is_review(b)][-1]
    assert "judged-by-hermes" in json.dumps(follow_up["input"][-1])  # the judge approved it
    [judge] = [b for b in requests if is_judge(b)]
    side_tasks = {"approval": judge}
    if hosts_title_every_turn():
        assert session_row(home)[1] == TITLE
        [side_tasks["title_generation"]] = [b for b in requests if is_title(b)]
    for task, request in side_tasks.items():
        assert request["model"] == {"approval": "judge-model",
                                    "title_generation": "title-model"}[task]
        assert tools_of(request) <= INERT, (task, tools_of(request))
    assert {"memory", "skill_manage"} <= tools_of(
        next(b for b in requests if is_review(b)))  # the review ran on codex
    assert {task: model for task, model in aux_tasks(home).items() if task in side_tasks} == \
        {"approval": "judge-model", **({"title_generation": "title-model"}
                                       if "title_generation" in side_tasks else {})}
    log = (home / "logs" / "agent.log").read_text()
    assert "No LLM provider configured" not in log and "no Codex OAuth token found" not in log


def test_an_interactive_chat_gets_its_title_from_codex(home, mock_provider, tmp_path):
    configure(home, auxiliary={"title_generation": {"model": "title-model"}})
    mock_provider.set_default(side_task_router())
    chat = Tmux([HERMES, "chat"], hermes_env(home), tmp_path / "work")
    try:
        chat.wait_for("Type your message")
        chat.say("I always drink green tea.")
        chat.wait_for("an answer")
        wait_until("the title", lambda: session_row(home)[1])
        screen = chat.screen()
        chat.keys("/exit", "Enter")
    finally:
        chat.close()
    assert session_row(home)[1] == TITLE
    assert "Auxiliary title generation failed" not in screen
    [request] = [b for b in mock_provider.requests if is_title(b)]
    assert request["model"] == "title-model" and tools_of(request) <= INERT
    assert aux_tasks(home)["title_generation"] == "title-model"


def hermes(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    for _ in range(3):  # the 0.22 line's plugin-discovery race (the lead's; rerun it)
        proc = subprocess.run([HERMES, *args], env=hermes_env(home), capture_output=True,
                              text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=str(home))
        if "No Codex credentials stored" not in proc.stderr + proc.stdout:
            return proc
    return proc


def test_a_resumed_chat_over_its_threshold_compacts_the_stored_thread_first(home,
                                                                            mock_provider):
    configure(home, model={"context_length": 80000},
              compression={"enabled": True, "codex_app_server_auto": "hermes"})
    # ~68k tokens: over the 68,000 threshold, within the window with the instructions and tools
    mock_provider.set_default(side_task_router(turn=outgrown_chat_turn))
    first = hermes(home, "chat", "-Q", "-q", "write a lot")
    assert first.returncode == 0, first.stderr[-2000:]
    session_id = re.search(r"session_id:\s*(\S+)", first.stderr).group(1)
    before = len(mock_provider.requests)
    second = hermes(home, "chat", "-Q", "--resume", session_id, "-q", "and now?")
    assert second.returncode == 0, second.stderr[-2000:]
    assert "Carrying on." in second.stdout
    log = (home / "logs" / "agent.log").read_text()
    assert "no active codex thread" not in log  # Hermes found the thread to compact
    assert "falling back to 256,000 tokens" not in log  # model.context_length was honoured
    resumed = [b for b in mock_provider.requests[before:] if not is_title(b)]
    [after] = [b for b in resumed if last_user_text(b) == "and now?"]
    # the session's last real prompt usage was stored with it (the 0.22 line anchors its
    # pre-turn estimate on it; 0.19.0 estimates from the transcript)
    assert "not anchored on real usage" not in log
    [compact] = [b for b in resumed if last_user_text(b) not in OUTGROWN_CHAT]
    assert "lorem ipsum" in json.dumps(compact["input"])  # codex summarised the stored thread
    assert resumed.index(compact) < resumed.index(after)  # before the first turn
    sent = json.dumps(after["input"])
    assert "SUMMARY-OF-THE-LOREM" in sent and "lorem ipsum dolor" not in sent  # ...and went on
    assert "compaction done" in log
