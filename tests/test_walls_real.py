"""The sandbox walls on the real codex binary and real Hermes, where they matter most: the
workspace is the home directory (a gateway's default) and the sandbox is workspace-write
(``tools.terminal.security_mode: auto``).

A temporary HOME holds planted secrets — an SSH private key, Hermes' ``.env``, codex's
``auth.json``, an app-server token file — and the places a prompt injection would use for
persistence. The model (the mock provider) runs plain sandboxed commands and patches, never
escalated: the secrets must not reach it, the protected places must not change, an ordinary
edit must work, and nothing Hermes shows may carry a secret. Before any of that, the probe must
prove the walls hold on this binary — and a codex that ignores them must get the fallback.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess

import pytest
from hermes_env import HERMES, Gateway, chat_finished
from walled_home import (
    PATCHES,
    PERSIST,
    READ_SECRETS,
    SCRIPT,
    PlantedHome,
    assert_walls_held,
    leaky_command,
    readable_by_others,
)

from hermes_codex_runtime.offline import provider as mp


@pytest.fixture
def planted(tmp_path, codex_binary, mock_provider):
    return PlantedHome(tmp_path, codex_binary, mock_provider)


def test_a_gateway_run_in_the_home_directory_reads_no_secret_changes_no_protected_place_and_shows_none(  # noqa: E501
        planted, mock_provider):
    passwords = ["sk-proj-" + os.urandom(12).hex(), *(os.urandom(6).hex() for _ in range(3))]
    mock_provider.enqueue(mp.exec_command(READ_SECRETS), mp.exec_command(PERSIST),
                          *(mp.apply_patch(patch) for patch in PATCHES),
                          mp.exec_command(leaky_command(passwords)), mp.text("all done"))
    gateway = Gateway(planted.hermes_home, **{k: v for k, v in planted.env().items() if k in (
        "HOME", "TERMINAL_CWD", "HERMES_STATE_DB_GUARD_BYPASS")})
    events = []
    try:
        run_id = gateway.call("POST", "/v1/runs", {"input": "tidy up my home"})["run_id"]
        for event in gateway.events(run_id):
            events.append(event)
            if event.get("event") == "approval.request":  # nobody would be there to answer
                gateway.call("POST", f"/v1/runs/{run_id}/approval", {"choice": "deny"})
    finally:
        gateway.stop()
    assert events[-1].get("event") == "run.completed", events[-3:]
    outputs = assert_walls_held(planted, mock_provider)
    assert len(outputs) == 2 + len(PATCHES) + 1, outputs  # every call reached the model
    shown = json.dumps(events)
    assert [p for p in passwords if p in shown] == [], shown
    previews = [e.get("preview") or "" for e in events if e.get("event") == "tool.started"]
    assert any("mysql -uroot -p[REDACTED]" in p for p in previews), previews
    assert not [e for e in events if e.get("event") == "approval.request"]  # nobody was asked
    print(f"\ngateway, workspace = HOME: 0 of {len(planted.secrets)} planted secrets reached the "
          f"model, 0 of {len(planted.protected)} protected places changed, 0 of "
          f"{len(passwords)} inline credentials in {len(events)} events")


def test_hermes_chat_in_the_home_directory_reads_no_secret_and_doctor_reports_the_walls(
        planted, mock_provider):
    mock_provider.enqueue(mp.exec_command(READ_SECRETS), mp.exec_command(PERSIST),
                          mp.apply_patch(PATCHES[0]), mp.apply_patch(PATCHES[-1]),
                          mp.text("chat done"))
    chat = subprocess.run([HERMES, "chat", "-Q", "-q", "tidy up my home"], env=planted.env(),
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
                          cwd=str(planted.home))
    assert chat_finished(chat), chat.stderr[-3000:]
    assert "chat done" in chat.stdout
    assert_walls_held(planted, mock_provider)
    assert not [s for s in planted.secrets.values() if s in chat.stdout + chat.stderr]
    log = (planted.hermes_home / "logs" / "agent.log").read_text()
    assert log.count("the codex workspace is the home directory") == 1  # said once

    doctor = subprocess.run([SCRIPT, "doctor", "--json"], env=planted.env(), capture_output=True,
                            text=True, timeout=180, stdin=subprocess.DEVNULL)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["token file"]["status"] == "fail", checks.get("token file")
    assert "0644" in checks["token file"]["detail"] and "chmod 600" in checks["token file"]["fix"]
    assert checks["sandbox walls"]["status"] == "ok", checks["sandbox walls"]
    assert checks["sandbox walls"]["detail"].startswith("up (workspace-write)")
    assert checks["workspace"]["status"] == "warn" and "terminal.cwd" in checks["workspace"]["fix"]
    # one line per wall, each up or down
    assert checks["walls: secrets"]["status"] == "ok" and "~/.hermes/.env" in \
        checks["walls: secrets"]["detail"]
    assert checks["walls: conversations"]["status"] == "ok" and "~/.hermes/state.db" in \
        checks["walls: conversations"]["detail"]
    assert checks["walls: links"]["status"] == "ok"
    startup = checks["walls: start-up files"]  # the planted home has a .bashrc, no .zshrc
    assert startup["status"] == "warn" and "~/.zshrc" in startup["detail"], startup
    assert "~/.bashrc" not in startup["detail"] and "terminal.cwd" in startup["fix"]
    assert checks["walls: instruction files"]["status"] == "ok"
    assert planted.secrets["token"] not in doctor.stdout


def test_what_codex_writes_in_the_hermes_home_is_private_and_a_commands_workspace_file_keeps_the_umask(  # noqa: E501
        planted, mock_provider):
    """codex writes into the temp directory it inherits — on the 0.22 line Hermes' scratch
    directory in its home, where it is pointed here on both lines — 0644 under umask 022
    (``codex-bwrap-synthetic-mount-targets-<uid>/lock``, 0.163 and 0.171). That must be private;
    a file the model's command writes in the workspace keeps the user's umask."""
    scratch = planted.hermes_home / "cache" / "scratch"
    scratch.mkdir(parents=True, mode=0o700)
    mock_provider.enqueue(mp.exec_command("echo made > made-by-a-command.txt"), mp.text("made"))
    chat = subprocess.run(["sh", "-c", 'umask 022 && exec "$0" "$@"', HERMES, "chat", "-Q", "-q",
                           "make a file"], env=planted.env(TMPDIR=str(scratch)),
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
                          cwd=str(planted.home))
    assert chat_finished(chat), chat.stderr[-3000:]
    made = planted.home / "made-by-a-command.txt"
    assert made.read_text() == "made\n"
    assert made.stat().st_mode & 0o777 == 0o644  # the user's umask, not the runtime's
    codex_wrote = [p for p in scratch.rglob("*") if p.is_file() and p.name != ".last_prune"]
    assert codex_wrote, "codex wrote nothing in its temp directory: the check below checks nothing"
    loose = readable_by_others(planted.hermes_home)
    assert loose == [], f"readable by others: {loose}"


# ------------------------------------------------------------------- the probe and fallback


def test_the_probe_proves_the_walls_hold_and_a_sandbox_that_ignores_them_gets_the_fallback(
        codex_binary, make_runtime, mock_provider, tmp_path, monkeypatch, caplog):
    """The probe on the real binary: the walls hold. Then a ``bwrap`` that enforces no file
    wall appears on PATH (codex prefers it to its own): the probe says so, and a session gets
    the fallback — read-only, commands asked — with a notice per session and one log line."""
    from support import Agent, leaky_bwrap

    from hermes_codex_runtime.protocol import Decision
    from hermes_codex_runtime.session import SessionSettings
    from hermes_codex_runtime.walls import probe, verify

    held = verify(codex_binary.path)
    assert held.held is True, held.detail
    print(f"\nthe probe on {codex_binary.path}: {held.detail}")
    shim = leaky_bwrap(codex_binary.path)
    try:
        monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")
        ignored = probe(codex_binary.path)
        assert ignored.held is False, ignored.detail
        assert "a denied file was read" in ignored.detail
        assert "a file in a protected directory was changed" in ignored.detail

        workspace = tmp_path / "workspace"
        (workspace / "guarded").mkdir(parents=True)
        (workspace / "guarded" / "kept").write_text("unchanged\n")
        settings = SessionSettings(
            codex_bin=codex_binary.path, codex_home=make_runtime.settings_defaults["codex_home"],
            cwd=str(workspace), sandbox="workspace-write", turn_timeout=60.0,
            deny_read=(str(workspace / "guarded" / "kept"),),
            protect=(str(workspace / "guarded"),))
        runtime, host = make_runtime(settings, decide=lambda request: Decision.DECLINE)
        mock_provider.enqueue(mp.exec_command("echo changed >> guarded/kept"), mp.text("tried"),
                              mp.text("second"))
        with caplog.at_level(logging.WARNING, logger="hermes_codex_runtime.walls"):
            result = runtime.run_turn(Agent(), "change it")
            runtime.run_turn(Agent(), "another session")  # warned again, logged once
    finally:
        shutil.rmtree(shim, ignore_errors=True)
    assert result.ok, result.error
    starts = [m["params"] for conn in make_runtime.connections for m in conn.sent
              if m.get("method") in ("thread/start", "thread/resume")]
    assert [(s["sandbox"], s["approvalPolicy"]) for s in starts] == [("read-only",
                                                                      "untrusted")] * 2
    assert not [s for s in starts if "default_permissions" in s.get("config", {})]
    notices = [e.text for e in host.events if e.kind == "notice"]
    assert len(notices) == 2 and "a denied file was read" in notices[0], notices
    assert len([r for r in caplog.records if "could not be relied on" in r.getMessage()]) == 1
    assert (workspace / "guarded" / "kept").read_text() == "unchanged\n"
    assert [a.kind for a in host.approvals] == ["command"]  # codex asked; the host declined


def test_a_live_threads_walls_are_renewed_when_codex_creates_a_database_it_walls(
        make_runtime, mock_provider, codex_home, caplog):
    """On a home codex never ran on, its ``sessions/`` (every thread's rollout) and its
    ``thread_history`` database appear only after the first thread's walls were set. That
    thread's next turn runs with its walls renewed: another session's words there are
    unreadable for it (before: a plain ``grep -r`` over codex's home found them)."""
    from support import Agent, wait_for

    from hermes_codex_runtime.session import SessionSettings

    workspace = make_runtime.workdir
    settings = SessionSettings(**make_runtime.settings_defaults, cwd=str(workspace),
                               sandbox="workspace-write", turn_timeout=60.0,
                               deny_read=(str(workspace / "private"),))
    (workspace / "private").mkdir()
    runtime, _host = make_runtime(settings, per_agent=True)
    first, other = Agent("first"), Agent("other")
    word = "heron-" + os.urandom(6).hex()
    prefix, rest = word[:8], word[8:]  # the command never spells the word itself
    assert sorted(codex_home.glob("thread_history*")) == []
    mock_provider.enqueue(mp.text("hello"), mp.text("Noted."),
                          mp.exec_command(f"P={prefix}; grep -r -a -o -h \"$P{rest}\" "
                                          f"{codex_home} 2>&1 | head -40"),
                          mp.text("looked"))
    assert runtime.run_turn(first, "hi").ok  # its thread started before the database existed
    assert runtime.run_turn(other, f"Keep this between us: my word is {word}.").ok
    runtime.close(other)  # its thread unloaded: codex writes its items to the database

    def stored() -> list[str]:
        return [p.name for p in codex_home.glob("thread_history*")
                if word.encode() in p.read_bytes()]
    assert wait_for(stored), "codex never wrote the other session's items to its database"
    with caplog.at_level(logging.INFO, logger="hermes_codex_runtime.session.codex_session"):
        looked = runtime.run_turn(first, "look around")
    assert looked.ok, looked.error
    [output] = [str(item.get("output")) for item in mock_provider.requests[-1]["input"]
                if isinstance(item, dict) and item.get("type") == "function_call_output"]
    assert word not in output, output
    assert "thread_history_1.sqlite: Permission denied" in output, output
    assert "sessions: Permission denied" in output, output
    renewed = [r.getMessage() for r in caplog.records if "walls were set" in r.getMessage()]
    assert len(renewed) == 1, renewed  # once, at the first turn after the home grew


def test_a_walled_file_that_vanishes_and_returns_stays_walled_and_the_thread_is_kept(
        make_runtime, mock_provider, caplog):
    """A database's write-ahead log comes and goes with its connections (Hermes' ``state.db``
    under a workspace that holds Hermes' home). codex keeps the profile's path and walls it
    again once it is back, so the thread is not resumed for it: a command between works, the
    returned file's words stay unreadable, and no turn pays for renewed walls."""
    from support import Agent

    from hermes_codex_runtime.session import SessionSettings

    workspace = make_runtime.workdir
    kept = workspace / "kept"
    kept.mkdir()
    wal = kept / "state.db-wal"
    wal.write_text("page of a conversation\n")
    settings = SessionSettings(**make_runtime.settings_defaults, cwd=str(workspace),
                               sandbox="workspace-write", turn_timeout=60.0,
                               deny_read=(str(wal),), protect=(str(kept),))
    runtime, _host = make_runtime(settings, per_agent=True)
    agent = Agent("gateway")
    word = "plover-" + os.urandom(6).hex()
    mock_provider.enqueue(mp.text("hello"),  # codex's home grows at the first turn: renewed
                          mp.exec_command("cat kept/state.db-wal; echo first-ran"), mp.text("1"),
                          mp.exec_command("echo second-ran"), mp.text("2"),
                          mp.exec_command("cat kept/state.db-wal; echo third-ran"), mp.text("3"))

    def output() -> str:  # the last command's, as codex sent it to the model
        return [str(item.get("output")) for item in mock_provider.requests[-1]["input"]
                if isinstance(item, dict) and item.get("type") == "function_call_output"][-1]
    assert runtime.run_turn(agent, "hi").ok
    with caplog.at_level(logging.INFO, logger="hermes_codex_runtime.session.codex_session"):
        assert runtime.run_turn(agent, "one").ok
        assert "first-ran" in output() and "conversation" not in output(), output()
        wal.unlink()  # the last connection closed
        assert runtime.run_turn(agent, "two").ok
        assert "second-ran" in output(), output()
        assert list(kept.iterdir()) == []  # no placeholder left in its place
        wal.write_text(f"{word}\n")  # opened again
        assert runtime.run_turn(agent, "three").ok
    assert "third-ran" in output() and word not in output(), output()
    assert "Permission denied" in output(), output()
    assert not [r.getMessage() for r in caplog.records if "state.db-wal" in r.getMessage()]
