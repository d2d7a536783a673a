"""Hermes' session commands in the interactive CLI (tmux), judged on what the model receives —
as with Hermes' own loop: ``/undo`` and ``/retry`` leave the undone turns out and send the
user's message once, ``/new`` starts a conversation the model knows nothing of. The codex thread
is mended with codex's own operations, so it is never re-seeded."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from hermes_env import base_config, hermes_env, write_hermes_home
from tmux import Tmux

from hermes_codex_runtime.offline import provider as mp

pytestmark = pytest.mark.real_hermes
HERMES = str(Path(sys.executable).with_name("hermes"))


def _received(mock_provider) -> list[str]:
    """The texts of the messages in the model's last request."""
    return [text for _, text in mock_provider.request_texts(-1)]


def _command(tmux: Tmux, command: str, *done: str, timeout: float = 30.0) -> None:
    """Run a slash command, confirming it when Hermes asks (its destructive commands do), until
    one of ``done`` shows."""
    tmux.say(command)
    deadline = time.monotonic() + timeout
    confirmed = False
    while time.monotonic() < deadline:
        screen = tmux.screen()
        if screen.rstrip().splitlines()[-3:].count(f"❯ {command}") and \
                time.monotonic() > deadline - timeout + 2:
            tmux.keys("Enter")  # the Enter chose the command in the completion menu: again
        elif not confirmed and "❯ [1]" in screen and "[3]" in screen:
            tmux.keys("1")  # Approve Once
            confirmed = True
        elif any(text in screen for text in done):
            return
        time.sleep(0.2)
    raise AssertionError(f"none of {done} appeared on the screen:\n{tmux.screen()}")


def test_undo_retry_and_new_give_the_model_what_hermes_holds(tmp_path, codex_binary,
                                                              mock_provider):
    from hermes_codex_runtime.offline.codex_home import prepare_codex_home

    codex_home = prepare_codex_home(tmp_path / "codex-home", mock_provider.base_url,
                                    codex_bin=codex_binary.path)
    home = tmp_path / "hermes-home"
    write_hermes_home(home, base_config(codex_home=str(codex_home)))
    for answer in ("ANSWER-ONE", "ANSWER-TWO", "ANSWER-THREE", "ANSWER-RETRIED",
                   "ANSWER-FRESH", "ANSWER-THOUGHT", "ANSWER-ARR", "ANSWER-BRANCHED"):
        mock_provider.enqueue(mp.text(answer))
    tmux = Tmux([HERMES, "chat"], hermes_env(home), tmp_path)
    try:
        tmux.wait_for("Type your message")
        tmux.say("SAY-ONE")
        tmux.wait_for("ANSWER-ONE")
        tmux.say("SAY-TWO")
        tmux.wait_for("ANSWER-TWO")
        _command(tmux, "/undo", "Undid", "undo_ok")  # a bare key on the 0.22 line (no locales)
        tmux.say("SAY-THREE")  # typed over the undone message the composer was given back
        tmux.wait_for("ANSWER-THREE")
        undone = _received(mock_provider)
        _command(tmux, "/retry", "ANSWER-RETRIED", timeout=60)
        retried = _received(mock_provider)
        _command(tmux, "/new", "New session", "new_session", "session.new")
        tmux.say("SAY-FRESH")
        tmux.wait_for("ANSWER-FRESH")
        fresh = _received(mock_provider)
        _command(tmux, "/reasoning high", "high")
        tmux.say("SAY-THINK")
        tmux.wait_for("ANSWER-THOUGHT")
        thought = mock_provider.requests[-1]
        _command(tmux, "/personality pirate", "pirate")
        tmux.say("SAY-ARR")
        tmux.wait_for("ANSWER-ARR")
        pirate = mock_provider.requests[-1]
        _command(tmux, "/branch", "⚙️  /branch")
        tmux.say("SAY-BRANCHED")
        tmux.wait_for("ANSWER-BRANCHED")
        branched = _received(mock_provider)
        tmux.keys("/exit", "Enter")
    finally:
        tmux.close()
    assert "SAY-ONE" in undone and "ANSWER-ONE" in undone and "SAY-THREE" in undone
    assert "SAY-TWO" not in undone and "ANSWER-TWO" not in undone
    assert retried.count("SAY-THREE") == 1 and "ANSWER-THREE" not in retried
    assert "SAY-ONE" in retried
    assert "SAY-FRESH" in fresh
    assert not any(t in fresh for t in ("SAY-ONE", "ANSWER-ONE", "SAY-THREE"))
    # the session's settings reach the next turn: the effort, the personality (with the
    # conversation so far, once)
    assert (thought.get("reasoning") or {}).get("effort") == "high"
    assert "Captain Hermes" in json.dumps(pirate)
    assert "SAY-THINK" in json.dumps(pirate) and _received(mock_provider).count("SAY-ARR") == 1
    # a branch goes on from the conversation it came from (a fork of its thread): once
    assert branched.count("SAY-ARR") == 1 and branched.count("ANSWER-ARR") == 1
    assert branched.count("SAY-BRANCHED") == 1
    log = (home / "logs" / "agent.log").read_text()
    assert "forked from" in log, log[-3000:]
    # codex's own operations, not a thread seeded with the conversation
    assert not any("already happened" in t for t in undone + retried)
