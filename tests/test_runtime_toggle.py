"""The toggle the README tells users to use, typed into the real interactive ``hermes`` CLI
(tmux) on whichever host line is installed: ``/codex-runtime`` finds the plugin's codex (not
on ``PATH``), says what it changed and from when — and that is what the next message does —
``/codex-status`` agrees, and codex's own ``config.toml`` is never touched."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from hermes_env import base_config, hermes_env, write_hermes_home
from tmux import Tmux

from hermes_codex_runtime.offline import provider as mp

pytestmark = pytest.mark.real_hermes
HERMES = str(Path(sys.executable).with_name("hermes"))


def test_codex_runtime_toggle_says_what_the_next_message_does_and_leaves_codex_config_alone(
        tmp_path, codex_binary, mock_provider):
    from hermes_codex_runtime.offline.codex_home import prepare_codex_home

    codex_home = prepare_codex_home(tmp_path / "codex-home", mock_provider.base_url,
                                    codex_bin=codex_binary.path)
    codex_config = (codex_home / "config.toml").read_bytes()
    home = tmp_path / "hermes-home"
    write_hermes_home(home, base_config(codex_home=str(codex_home)))
    env = hermes_env(home)
    # like most users: codex is where the plugin finds it (its bundled binary, CODEX_BIN), not
    # on PATH, which is all Hermes' own toggle looks at
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if not (Path(p) / "codex").exists())
    assert shutil.which("codex", path=env["PATH"]) is None
    mock_provider.enqueue(mp.text("codex answered ONE."), mp.text("codex answered TWO."))
    tmux = Tmux([HERMES, "chat"], env, tmp_path)
    try:
        tmux.wait_for("Type your message")
        tmux.say("/codex-runtime")
        screen = tmux.wait_for("your next message: codex app-server")
        assert "not available" not in screen and "npm i -g" not in screen
        assert f"codex: {codex_binary.path}"[:60] in screen.replace("\n", "")

        tmux.say("What is one?")
        tmux.wait_for("codex answered ONE.")

        tmux.say("/codex-runtime auto")
        screen = tmux.wait_for("from your next message: Hermes' own runtime")
        assert "codex_app_server → auto" in screen
        assert "Effective on next session" not in screen  # it is the next message
        tmux.say("/codex-status")
        tmux.wait_for("next message:  Hermes' own runtime")

        tmux.say("/codex-runtime codex_app_server")
        screen = tmux.wait_for("from your next message: codex app-server")
        assert "auto → codex_app_server" in screen
        assert "config.toml is left as it is" in screen
        tmux.say("/codex-status")
        tmux.wait_for("next message:  codex app-server")

        tmux.say("What is two?")
        tmux.wait_for("codex answered TWO.")
        tmux.keys("/exit", "Enter")
    finally:
        tmux.close()
    assert (codex_home / "config.toml").read_bytes() == codex_config
    assert sorted(p.name for p in codex_home.iterdir() if "config.toml" in p.name) == \
        ["config.toml"]
    config = yaml.safe_load((home / "config.yaml").read_text())
    assert config["model"]["openai_runtime"] == "codex_app_server"
    assert len(mock_provider.requests) == 2  # both questions, each answered by codex
