"""A private tmux server running one interactive program (the real ``hermes`` CLI), driven by
keystrokes and read from its screen — as a person would use it."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest


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
