"""Hermes' tools on codex from outside: real ``hermes chat -q`` processes and a real gateway's API
server, the plugin discovered through its entry point, the real codex binary on the mock model —
an MCP server from config.yaml offered on the first turn and its call arriving, memory that a new
session's first request carries, and a cron job created from a gateway run."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
from pathlib import Path

import pytest
import yaml
from hermes_env import (
    HERMES,
    Gateway,
    calls_hermes_tool,
    chat_finished,
    hermes_env,
    hermes_tool,
    write_config,
)

from hermes_codex_runtime.offline import provider as mp

pytestmark = pytest.mark.real_hermes

MCP_SERVER = Path(__file__).with_name("mcp_notes_server.py")


def configure(home: Path, **changes) -> None:
    config = yaml.safe_load((home / "config.yaml").read_text())
    config.update(changes)
    write_config(home, config)


def chat(home: Path, *args: str, **env: str):
    import subprocess

    return subprocess.run([HERMES, "chat", "-Q", *args], env=hermes_env(home, **env),
                          capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, cwd=str(home))


def offered(provider, index: int = 0) -> set[str]:
    return {t.get("name") for t in provider.requests[index].get("tools", []) if t.get("name")}


def outputs(provider, index: int) -> list[str]:
    return [str(item.get("output")) for item in provider.requests[index].get("input", [])
            if item.get("type") == "function_call_output"]


def test_an_mcp_server_from_config_is_offered_on_the_first_turn_and_its_call_arrives(
        home, mock_provider, tmp_path):
    calls = tmp_path / "mcp-calls.jsonl"
    configure(home, mcp_servers={"notes": {
        "command": sys.executable, "args": [str(MCP_SERVER)],
        "env": {"MCP_CALLS_FILE": str(calls)}}})
    # Hermes names the tool mcp__notes__lookup; codex reserves that prefix, so the plugin
    # offers it as mcp_notes__lookup (the 0.22 line lists it behind its Tool Search bridge)
    mock_provider.enqueue(calls_hermes_tool("mcp__notes__lookup", {"key": "kettle"}),
                          mp.text("The kettle is blue."))
    done = chat(home, "-q", "What colour is the kettle? Look it up in my notes.")
    assert chat_finished(done), done.stderr[-3000:]
    assert "The kettle is blue." in done.stdout
    first = offered(mock_provider, 0)  # the session's first request
    assert "mcp_notes__lookup" in first or "tool_call" in first
    assert [json.loads(line) for line in calls.read_text().splitlines()] == [
        {"tool": "lookup", "arguments": {"key": "kettle"}}]
    assert any("the kettle is blue" in out for out in outputs(mock_provider, 1))
    # stored as Hermes stores its own MCP calls: under Hermes' name for the tool
    with contextlib.closing(sqlite3.connect(home / "state.db")) as db:
        rows = db.execute("SELECT role, tool_calls, tool_name FROM messages ORDER BY id").fetchall()
    assert [row[0] for row in rows] == ["user", "assistant", "tool", "assistant"]
    called = json.loads(rows[1][1])[0]["function"]["name"]
    assert called == ("mcp__notes__lookup" if "mcp_notes__lookup" in first else "tool_call")
    assert rows[2][2] == "mcp__notes__lookup"


def test_memory_saved_in_one_chat_is_in_the_next_sessions_first_request(home, mock_provider):
    configure(home, memory={"memory_enabled": True, "user_profile_enabled": False,
                            "nudge_interval": 0})
    fact = "User prefers tabs over spaces (chat memory test)."
    mock_provider.enqueue(
        mp.tool_call("memory", {"action": "add", "target": "memory", "content": fact}),
        mp.text("I'll remember that."))
    first = chat(home, "-q", "Remember that I prefer tabs.")
    assert chat_finished(first), first.stderr[-3000:]
    assert fact in (home / "memories" / "MEMORY.md").read_text()
    mock_provider.clear()
    mock_provider.enqueue(mp.text("You prefer tabs."))
    second = chat(home, "-q", "What do I prefer?")  # a new session, a new process
    assert chat_finished(second), second.stderr[-3000:]
    assert any(fact in text for _, text in mock_provider.request_texts(0))


def test_a_gateway_run_creates_a_cron_job_and_shows_the_call_as_hermes_does(home,
                                                                             mock_provider):
    mock_provider.enqueue(
        calls_hermes_tool("cronjob", {"action": "create", "schedule": "every 1h",
                                      "prompt": "Remind me to water the ferns.", "name": "ferns"}),
        mp.text("Scheduled: every hour."))
    gateway = Gateway(home)
    try:
        run_id = gateway.call("POST", "/v1/runs", {"input": "Remind me hourly to water the ferns"})[
            "run_id"]
        events = list(gateway.events(run_id))
    finally:
        gateway.stop()
    names = [e["event"] for e in events]
    assert names[-1] == "run.completed", names
    cron = hermes_tool("cronjob")
    started = [e for e in events if e["event"] == "tool.started"]
    assert [e.get("tool") for e in started] == [cron]  # Hermes' name, through the bridge too
    assert any(e["event"] == "tool.completed" and e.get("tool") == cron for e in events)
    jobs = json.loads((home / "cron" / "jobs.json").read_text())
    jobs = jobs.get("jobs", jobs) if isinstance(jobs, dict) else jobs
    assert [job.get("name") for job in jobs] == ["ferns"], jobs
    assert "created" in outputs(mock_provider, 1)[0].lower() or "ferns" in \
        outputs(mock_provider, 1)[0]
