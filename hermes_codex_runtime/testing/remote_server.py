"""A real ``codex app-server --listen ws://127.0.0.1:PORT`` standing in for another machine.

Owns :class:`RemoteAppServer`: its own codex home (on the mock provider), codex's own capability
token auth (``--ws-auth capability-token --ws-token-file``), the address codex prints on stderr,
and ending the whole process tree by PID. Used by the tests and the bench; every wait is bounded.
"""

from __future__ import annotations

import os
import queue
import re
import secrets
import subprocess
import threading
from pathlib import Path

from hermes_codex_runtime.offline.codex_home import OFFLINE_OVERRIDES, prepare_codex_home
from hermes_codex_runtime.wire import resolve_codex_binary, spawn_environment
from hermes_codex_runtime.wire.proctree import reap, snapshot_descendants

START_TIMEOUT = 30.0
_BANNER = re.compile(r"listening on: (ws://127\.0\.0\.1:\d+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class RemoteAppServer:
    """One ws app-server in ``directory`` (its codex home and token file live there)."""

    def __init__(self, directory: str | os.PathLike[str], provider_url: str, *,
                 codex_bin: str | None = None, auth: bool = True,
                 token: str | None = None) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        binary = resolve_codex_binary(codex_bin)
        self.codex_home = prepare_codex_home(self.directory / "codex-home", provider_url,
                                             codex_bin=binary.path)
        self.token = token or secrets.token_urlsafe(24)
        self.token_file = self.directory / "ws-token"
        self.token_file.write_text(self.token + "\n")
        self.token_file.chmod(0o600)
        auth_args = ["--ws-auth", "capability-token", "--ws-token-file",
                     str(self.token_file.resolve())] if auth else []
        self.argv = [binary.path, "app-server", *OFFLINE_OVERRIDES, "--listen",
                     "ws://127.0.0.1:0", *auth_args]
        env = spawn_environment(codex_home=str(self.codex_home),
                                path_prepend=binary.path_prepend)
        self.stderr_lines: list[str] = []
        self._banner: queue.Queue[str] = queue.Queue()
        self.proc = subprocess.Popen(self.argv, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     cwd=str(self.directory))
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()
        try:
            self.url = self._banner.get(timeout=START_TIMEOUT)
        except queue.Empty:
            self.stop()
            raise RuntimeError(f"codex printed no listening address in {START_TIMEOUT}s:\n"
                               + "".join(self.stderr_lines[-20:])) from None

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = _ANSI.sub("", raw.decode("utf-8", "replace"))
            if len(self.stderr_lines) < 2000:
                self.stderr_lines.append(line)
            match = _BANNER.search(line)
            if match:
                self._banner.put(match.group(1))

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL the server (a machine that vanished) and reap its tree."""
        children = snapshot_descendants(self.proc.pid)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        reap(children)

    def stop(self) -> None:
        """End the server: SIGTERM, then SIGKILL after 5 s; its whole tree is reaped."""
        children = snapshot_descendants(self.proc.pid)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        reap(children)
        self._drain.join(timeout=5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    def __enter__(self) -> RemoteAppServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
