"""End to end: real Hermes processes (``hermes chat``, ``hermes cron``, ``hermes gateway run``)
with the plugin discovered through its entry point and enabled in config.yaml, answering through
the real codex binary on the mock provider."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hermes_env import HERMES, Gateway, base_config, chat_finished, hermes_env, write_hermes_home
from support import alive

from hermes_codex_runtime.offline import provider as mp

pytestmark = pytest.mark.real_hermes


def configure(home: Path, **changes):
    from hermes_env import write_config

    config = base_config(codex_home=str(home.parent / "codex-home"))
    for key, value in changes.items():
        config[key] = value
    write_config(home, config)


def hermes(home: Path, *args: str, timeout: float = 120, **env: str):
    return subprocess.run([HERMES, *args], env=hermes_env(home, **env), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd=str(home))


def codex_thread_of(home: Path, session_id: str) -> str | None:
    with contextlib.closing(sqlite3.connect(home / "state.db")) as db:
        row = db.execute("SELECT model_config FROM sessions WHERE id = ?",
                         (session_id,)).fetchone()
    return json.loads(row[0]).get("codex_thread_id") if row and row[0] else None


def test_hermes_chat_answers_through_codex_and_resume_reuses_the_thread(home, mock_provider):
    mock_provider.enqueue(mp.text("Noted: PEAR-9."))
    first = hermes(home, "chat", "-Q", "-q", "Remember PEAR-9 please")
    assert chat_finished(first), first.stderr
    assert "Noted: PEAR-9." in first.stdout
    session_id = re.search(r"session_id:\s*(\S+)", first.stderr).group(1)
    thread = codex_thread_of(home, session_id)
    assert thread, "the codex thread was not bound to the Hermes session"

    mock_provider.clear()
    mock_provider.enqueue(mp.text("You said PEAR-9."))
    second = hermes(home, "chat", "-Q", "--resume", session_id, "-q", "What did I say?")
    assert chat_finished(second), second.stderr
    assert "You said PEAR-9." in second.stdout
    assert codex_thread_of(home, session_id) == thread
    texts = [t for _, t in mock_provider.request_texts(0)]
    assert any("Remember PEAR-9 please" in t for t in texts)  # codex's own thread history
    assert not any("already happened" in t for t in texts)  # resumed, not re-seeded


def test_hermes_chat_q_declines_an_approval_at_once_and_says_why(home, mock_provider):
    """``hermes chat -q`` never shows a prompt: a request that needs a person is declined at
    once with the reason on stderr, not after a silent wait for the prompt's timeout."""
    configure(home, approvals={"mode": "manual", "timeout": 90})
    mock_provider.enqueue(mp.exec_command("echo ran-outside > outside.txt", escalated=True),
                          mp.text("It was declined."))
    started = time.monotonic()
    proc = hermes(home, "chat", "-Q", "-q", "run it outside the sandbox")
    assert chat_finished(proc), proc.stderr
    assert time.monotonic() - started < 90  # the prompt's timeout never waited out
    assert "cannot show an approval prompt, so it was declined" in proc.stderr
    assert "It was declined." in proc.stdout and not (home / "outside.txt").exists()


def test_a_cron_job_runs_through_codex_with_cron_approvals(home, mock_provider):
    configure(home, approvals={"mode": "manual", "cron_mode": "deny"})
    created = hermes(home, "cron", "create", "every 1h", "Report the disk usage",
                     "--name", "disk", "--deliver", "local")
    assert created.returncode == 0, created.stderr
    listed = hermes(home, "cron", "list")
    job_id = re.search(r"\b([0-9a-f]{12})\b", listed.stdout).group(1)
    mock_provider.enqueue(mp.exec_command("df -h", escalated=True),
                          mp.text("Disk report: df was not allowed."))
    ran = hermes(home, "cron", "run", job_id)
    assert ran.returncode == 0 and "succeeded" in ran.stdout, ran.stdout + ran.stderr
    [output] = list((home / "cron" / "output" / job_id).glob("*.md"))
    assert "Disk report: df was not allowed." in output.read_text()
    follow_up = json.dumps(mock_provider.requests[-1]["input"][-1])
    assert "function_call_output" in follow_up and "Filesystem" not in follow_up  # declined


@pytest.mark.parametrize(("choice", "ran"), [("once", True), ("deny", False)])
def test_gateway_approvals_are_asked_through_hermes_own_channel(home, mock_provider, choice,
                                                                 ran):
    configure(home, approvals={"mode": "manual", "timeout": 30})
    mock_provider.enqueue(mp.exec_command("echo gateway-approved", escalated=True),
                          mp.text("gateway done"))
    hooks_file = home / "hooks.jsonl"
    gateway = Gateway(home, HOOK_RECORD_FILE=str(hooks_file))
    try:
        run_id = gateway.call("POST", "/v1/runs", {"input": "run the command"})["run_id"]
        seen = []
        for event in gateway.events(run_id):
            seen.append(event)
            if event.get("event") == "approval.request":
                assert "echo gateway-approved" in event["command"]
                answer = gateway.call("POST", f"/v1/runs/{run_id}/approval", {"choice": choice})
                assert answer["resolved"] == 1
    finally:
        gateway.stop()
    names = [e.get("event") for e in seen]
    assert "approval.request" in names and names[-1] == "run.completed", names
    follow_up = json.dumps(mock_provider.requests[-1]["input"][-1])
    assert ("gateway-approved" in follow_up) is ran
    # Hermes' approval hooks fired for the codex request, each exactly once, with the answer
    hooks = [json.loads(line) for line in hooks_file.read_text().splitlines()]
    approval_hooks = [h for h in hooks if h["hook"].endswith(("approval_request",
                                                               "approval_response"))]
    assert [h["hook"] for h in approval_hooks] == ["pre_approval_request",
                                                   "post_approval_response"], approval_hooks
    assert approval_hooks[1]["choice"] == choice
    assert "echo gateway-approved" in approval_hooks[0]["command"]


def test_installed_but_not_enabled_leaves_hermes_untouched(tmp_path):
    home = tmp_path / "plain-home"
    config = base_config()
    config["plugins"] = {"enabled": []}
    write_hermes_home(home, config)
    probe = (
        "import run_agent, agent.codex_runtime as cr, hermes_cli.runtime_provider as rp;"
        "print(hasattr(cr.run_codex_app_server_turn, '__hermes_codex_runtime__'));"
        "print(hasattr(rp.resolve_runtime_provider, '__hermes_codex_runtime__'));"
        "print(hasattr(run_agent.AIAgent.interrupt, '__hermes_codex_runtime__'))")
    proc = subprocess.run([sys.executable, "-c", probe], env=hermes_env(home),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False", "False"]
    assert "hermes_codex_runtime" not in proc.stderr


def test_status_shows_the_thread_of_each_session(home, mock_provider):
    mock_provider.enqueue(mp.text("hello", usage=mp.Usage(input=80, cached=20, output=25)))
    chat = hermes(home, "chat", "-Q", "-q", "hello")
    session_id = re.search(r"session_id:\s*(\S+)", chat.stderr).group(1)
    status = hermes(home, "codex-plugin", "status", "--json")
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    [entry] = [s for s in data["sessions"] if s["session_id"] == session_id]
    assert entry["codex_thread_id"] == codex_thread_of(home, session_id)
    assert entry["tokens"] == {"input": 80, "cached": 20, "uncached": 60, "output": 25,
                               "reasoning": 0}
    assert data["codex"]["version"].startswith("0.")


def test_stopping_an_api_run_that_waits_for_approval_leaves_nothing_pending(home, mock_provider):
    configure(home, approvals={"mode": "manual", "timeout": 60})
    mock_provider.enqueue(mp.exec_command("echo never-approved", escalated=True))
    gateway = Gateway(home)
    try:
        run_id = gateway.call("POST", "/v1/runs", {"input": "run the command"})["run_id"]
        names = []
        stopped_at = None
        for event in gateway.events(run_id):
            names.append(event.get("event"))
            if event.get("event") == "approval.request":
                stopped_at = time.monotonic()
                gateway.call("POST", f"/v1/runs/{run_id}/stop")
        ended_in = time.monotonic() - stopped_at
        # the next run's first approval is answered by ONE approval call: nothing stale queued
        mock_provider.clear()
        mock_provider.enqueue(mp.exec_command("echo second-run", escalated=True),
                              mp.text("second done"))
        run_id = gateway.call("POST", "/v1/runs", {"input": "again"})["run_id"]
        for event in gateway.events(run_id):
            if event.get("event") == "approval.request":
                assert "echo second-run" in event["command"]
                answer = gateway.call("POST", f"/v1/runs/{run_id}/approval", {"choice": "once"})
                assert answer["resolved"] == 1
    finally:
        gateway.stop()
    assert "approval.request" in names and names[-1] in ("run.cancelled", "run.failed",
                                                         "run.completed"), names
    assert ended_in < 10, ended_in  # bounded; typically ~0.2 s
    assert "second-run" in json.dumps(mock_provider.requests[-1]["input"][-1])
    print(f"\nrun stopped while waiting for approval: ended in {ended_in:.2f} s")



def test_a_killed_hermes_leaves_no_codex_behind_once_hermes_starts_again(home, fake_codex):
    """The orphan reaper runs on the real start path: the first codex turn of the next Hermes
    process reaps the codex tree a SIGKILLed Hermes left behind."""
    from hermes_env import write_config

    from hermes_codex_runtime.wire.registry import ProcessRegistry

    write_config(home, base_config(codex_home=str(home.parent / "codex-home"),
                                   codex_bin=fake_codex.path))
    fake_codex.set_scenario({"ignore_eof": True,  # a wedged codex that outlives its host
                             "turns": [[{"grandchild": True}, {"hang": True}]]})
    registry = ProcessRegistry(home / "codex-runtime" / "processes.json")
    first = subprocess.Popen([HERMES, "chat", "-Q", "-q", "start the long job"],
                             env=hermes_env(home), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             cwd=str(home), start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not (registry.entries() and fake_codex.live_grandchildren()):
            assert first.poll() is None, "hermes exited before its codex turn started"
            assert time.monotonic() < deadline, "the codex turn never started"
            time.sleep(0.1)
        [codex_pid] = [int(pid) for pid in registry.entries()]
        owner = int(registry.entries()[str(codex_pid)]["owner_pid"])
        assert owner == first.pid, f"codex is owned by {owner}, not by hermes ({first.pid})"
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        time.sleep(0.3)
        assert alive(codex_pid), "the scenario needs a codex that outlives Hermes"
        fake_codex.set_scenario({"turns": [[{"message": "fresh start"}]]})
        second = hermes(home, "chat", "-Q", "-q", "hello again")
        assert chat_finished(second), second.stderr[-2000:]
        assert "fresh start" in second.stdout
        deadline = time.monotonic() + 10
        while alive(codex_pid):
            if time.monotonic() > deadline:
                log = home / "logs" / "agent.log"
                notes = [line for line in (log.read_text().splitlines() if log.exists() else [])
                         if "orphan" in line]
                raise AssertionError(f"the orphaned codex {codex_pid} was not reaped; registry "
                                     f"{registry.entries()}; log {notes[-5:]}; second hermes "
                                     f"stderr {second.stderr[-1500:]}")
            time.sleep(0.05)
        assert fake_codex.live_grandchildren() == []
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=10)
        with contextlib.suppress(Exception):
            registry.reap_orphans()  # whatever a failed run left
        fake_codex.kill_leftovers()


def test_hermes_own_cli_runs_the_doctor_green_and_names_this_host(home):
    """`hermes codex-plugin doctor` — through Hermes' CLI, on whichever host line is installed
    — is green on a correct set-up and names the host it found by what Python imports."""
    from importlib import metadata

    proc = hermes(home, "codex-plugin", "doctor", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert all(c["status"] != "fail" for c in checks.values()), checks
    [distribution] = set(metadata.packages_distributions()["run_agent"])
    assert f"{distribution} {metadata.version(distribution)}" in checks["Hermes"]["detail"]
    assert "approvals: Hermes' public request_tool_approval" in checks["host probes"]["detail"]
