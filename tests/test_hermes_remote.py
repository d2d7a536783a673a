"""Hermes on remote app-servers, end to end: real ``hermes chat`` processes whose config.yaml
points ``model.codex_app_server`` at real ``codex app-server --listen ws://127.0.0.1:PORT``
processes (codex's own token auth) standing in for other machines."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hermes_env import base_config, chat_finished, hermes_env, write_hermes_home

from hermes_codex_runtime.offline import provider as mp
from hermes_codex_runtime.testing.remote_server import RemoteAppServer

pytestmark = pytest.mark.real_hermes
HERMES = str(Path(sys.executable).with_name("hermes"))


@pytest.fixture
def machines(tmp_path, mock_provider, codex_binary):
    """Two ws app-servers sharing one capability token (one token file for the user)."""
    servers = []
    token = "shared-capability-token-0123456789"
    try:
        for name in ("east", "west"):
            servers.append(RemoteAppServer(tmp_path / name, mock_provider.base_url,
                                           codex_bin=codex_binary.path, token=token))
        yield servers
    finally:
        for server in servers:
            server.stop()


def hermes_home_for(tmp_path: Path, **model) -> Path:
    home = tmp_path / "hermes-home"
    write_hermes_home(home, base_config(**model))
    return home


def hermes(home: Path, *args: str, timeout: float = 120):
    return subprocess.run([HERMES, *args], env=hermes_env(home), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, cwd=str(home))


def binding_of(home: Path, session_id: str) -> dict:
    """The session's codex thread and the server that holds it, as state.db keeps them."""
    with contextlib.closing(sqlite3.connect(home / "state.db")) as db:
        row = db.execute("SELECT model_config FROM sessions WHERE id = ?",
                         (session_id,)).fetchone()
    config = json.loads(row[0]) if row and row[0] else {}
    return {key: config.get(key) for key in ("codex_thread_id", "codex_thread_endpoint")}


def test_hermes_chat_on_a_remote_app_server_resumes_there_and_moves_when_it_vanishes(
        tmp_path, mock_provider, machines):
    east, west = machines
    home = hermes_home_for(tmp_path, codex_app_server=[east.url, west.url],
                           codex_app_server_token_file=str(east.token_file))
    mock_provider.enqueue(mp.text("Noted: FIG-3."))
    first = hermes(home, "chat", "-Q", "-q", "Remember FIG-3 please")
    assert chat_finished(first), first.stderr
    assert "Noted: FIG-3." in first.stdout
    session_id = re.search(r"session_id:\s*(\S+)", first.stderr).group(1)
    bound = binding_of(home, session_id)
    assert bound["codex_thread_endpoint"] == east.url and bound["codex_thread_id"]

    mock_provider.enqueue(mp.text("You said FIG-3."))
    second = hermes(home, "chat", "-Q", "--resume", session_id, "-q", "What did I say?")
    assert chat_finished(second), second.stderr
    assert "You said FIG-3." in second.stdout
    assert binding_of(home, session_id) == bound  # same server, same thread

    east.kill()  # that machine is gone
    mock_provider.enqueue(mp.text("Still FIG-3."))
    third = hermes(home, "chat", "-Q", "--resume", session_id, "-q", "And now?")
    assert chat_finished(third), third.stderr
    assert "Still FIG-3." in third.stdout
    assert "fresh thread" in third.stdout + third.stderr  # the user is told
    moved = binding_of(home, session_id)
    assert moved["codex_thread_endpoint"] == west.url
    assert moved["codex_thread_id"] != bound["codex_thread_id"]
    assert any("Remember FIG-3 please" in t for _, t in mock_provider.request_texts(-1))


def test_a_wrong_token_is_one_message_naming_the_setting(tmp_path, mock_provider, machines):
    east, _west = machines
    wrong = tmp_path / "wrong"
    wrong.write_text("definitely-not-it\n")
    home = hermes_home_for(tmp_path, codex_app_server=east.url,
                           codex_app_server_token_file=str(wrong))
    run = hermes(home, "chat", "-Q", "-q", "hello")
    shown = run.stdout + run.stderr
    assert "model.codex_app_server_token_file" in shown and "401" in shown
    assert "definitely-not-it" not in shown and east.token not in shown
    assert mock_provider.requests == []


def test_an_api_client_is_told_when_its_conversation_moves_to_another_app_server(
        tmp_path, mock_provider, machines):
    """The gateway's API server has no status channel: the notice that the thread's server
    vanished reaches the client in the run's own stream, before the answer, and in its output."""
    from hermes_env import Gateway

    east, west = machines
    home = hermes_home_for(tmp_path, codex_app_server=[east.url, west.url],
                           codex_app_server_token_file=str(east.token_file))
    gateway = Gateway(home)
    try:
        history: list[dict[str, str]] = []

        def run(text: str) -> tuple[str, str]:
            run_id = gateway.call("POST", "/v1/runs", {
                "input": text, "session_id": "api-conversation",
                "conversation_history": history})["run_id"]
            deltas, output = [], ""
            for event in gateway.events(run_id):
                if event.get("event") == "message.delta":
                    deltas.append(event["delta"])
                elif event.get("event") == "run.completed":
                    output = event["output"]
            return "".join(deltas), output

        mock_provider.enqueue(mp.text("Noted: KIWI-5."))
        _, first = run("Remember KIWI-5")
        assert first == "Noted: KIWI-5."
        history += [{"role": "user", "content": "Remember KIWI-5"},
                    {"role": "assistant", "content": first}]  # the client goes on
        east.kill()
        mock_provider.enqueue(mp.text("Still KIWI-5."))
        streamed, output = run("And now?")
    finally:
        gateway.stop()
    assert output.endswith("Still KIWI-5.")
    notice = output[:-len("Still KIWI-5.")]
    assert east.url in notice and "fresh thread" in notice
    assert streamed.index("fresh thread") < streamed.index("Still KIWI-5.")
