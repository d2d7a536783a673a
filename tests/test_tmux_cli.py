"""Tried as a user would: an interactive ``hermes`` in tmux, the plugin enabled, where codex's
command approvals appear as Hermes' normal approval prompt and keystrokes answer them."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hermes_env import base_config, hermes_env, write_hermes_home

from hermes_codex_runtime.testing import mock_provider as mp

pytestmark = pytest.mark.real_hermes
HERMES = str(Path(sys.executable).with_name("hermes"))


class Tmux:
    """One private tmux server running one program."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path) -> None:
        if shutil.which("tmux") is None:
            if os.environ.get("HCR_REQUIRE_REAL"):
                pytest.fail("tmux is required (apt-get install tmux)")
            pytest.skip("tmux is not installed")
        self.socket = f"hcr-{os.getpid()}-{time.monotonic_ns()}"
        self.env = env
        subprocess.run(["tmux", "-L", self.socket, "new-session", "-d", "-s", "main",
                        "-x", "160", "-y", "50", "-c", str(cwd), *command], env=env,
                       check=True, timeout=30)

    def screen(self) -> str:
        proc = subprocess.run(["tmux", "-L", self.socket, "capture-pane", "-p", "-t", "main"],
                              capture_output=True, text=True, timeout=10, check=False)
        return proc.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-L", self.socket, "send-keys", "-t", "main", *keys],
                       check=True, timeout=10)

    def say(self, text: str) -> None:
        """Type ``text`` and submit it once it shows in the input line (keys typed while the
        CLI is still drawing, or finishing the last turn, may be dropped: typed again)."""
        for _ in range(3):
            self.keys("C-u", text)
            try:
                self.wait_for(f"❯ {text}", timeout=15)
                break
            except AssertionError:
                continue
        time.sleep(0.3)
        self.keys("Enter")

    def wait_for(self, text: str, timeout: float = 60.0, after: int = 0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if screen.count(text) > after:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never appeared on the screen:\n{self.screen()}")

    def close(self) -> None:
        """End the program and everything it started (hermes, codex), then the server."""
        import psutil

        from hermes_codex_runtime.wire.proctree import reap, snapshot_descendants

        proc = subprocess.run(["tmux", "-L", self.socket, "display-message", "-p", "-t", "main",
                               "#{pane_pid}"], capture_output=True, text=True, timeout=10,
                              check=False)
        tree = []
        if proc.stdout.strip().isdigit():
            pid = int(proc.stdout.strip())
            tree = snapshot_descendants(pid)
            with contextlib.suppress(psutil.Error):
                tree.insert(0, psutil.Process(pid))
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], timeout=10, check=False,
                       capture_output=True)
        assert reap(tree, timeout=5.0) == []


def test_codex_approvals_are_answered_at_hermes_prompt(tmp_path, codex_binary, mock_provider):
    from hermes_codex_runtime.testing.codex_home import prepare_codex_home

    codex_home = prepare_codex_home(tmp_path / "codex-home", mock_provider.base_url,
                                    codex_bin=codex_binary.path)
    home = tmp_path / "hermes-home"
    config = base_config(codex_home=str(codex_home))
    config["approvals"] = {"mode": "manual", "timeout": 60}
    write_hermes_home(home, config)
    mock_provider.enqueue(mp.exec_command("echo tmux-approved-once", escalated=True),
                          mp.text("First command done."),
                          mp.exec_command("echo tmux-should-not-run", escalated=True),
                          mp.text("Second command declined."))
    tmux = Tmux([HERMES, "chat"], hermes_env(home), tmp_path)
    try:
        tmux.wait_for("Type your message")
        tmux.say("Please run a command")
        screen = tmux.wait_for("Allow once")
        assert "echo tmux-approved-once" in screen and "Deny" in screen
        tmux.keys("Enter")  # 1. Allow once
        tmux.wait_for("First command done.")
        tmux.say("Run another one")
        screen = tmux.wait_for("Allow once", after=0)
        tmux.wait_for("tmux-should-not-run")
        tmux.keys("Down", "Down", "Down")  # 4. Deny
        time.sleep(0.3)
        tmux.keys("Enter")
        tmux.wait_for("Second command declined.")  # (did it run? the provider's log says, below)
        tmux.keys("/exit", "Enter")
    finally:
        tmux.close()
    outputs = [json.dumps(r["input"][-1]) for r in mock_provider.requests
               if r["input"] and r["input"][-1].get("type") == "function_call_output"]
    assert len(outputs) == 2
    assert "tmux-approved-once" in outputs[0]
    assert "tmux-should-not-run" not in outputs[1]
