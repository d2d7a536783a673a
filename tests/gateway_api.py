"""``hermes gateway run`` with only its API server platform, on 127.0.0.1: a real gateway a
test drives over HTTP (``POST /v1/runs``, the run's SSE event stream, approvals)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from hermes_env import hermes_env

HERMES = str(Path(sys.executable).with_name("hermes"))


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Gateway:
    """``hermes gateway run`` with only the API server platform, on 127.0.0.1."""

    def __init__(self, home: Path, **env: str):
        self.port = _free_port()
        self.key = "gateway-test-key-" + os.urandom(8).hex()
        self.log_path = home / "gateway.log"
        env.setdefault("TERMINAL_CWD", str(home))
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [HERMES, "gateway", "run"],
            env=hermes_env(home, API_SERVER_ENABLED="1", API_SERVER_KEY=self.key,
                           API_SERVER_HOST="127.0.0.1", API_SERVER_PORT=str(self.port), **env),
            stdout=self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, cwd=str(home), start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.call("GET", "/health")
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise AssertionError("the gateway did not start:\n"
                                         + self.log_path.read_text()[-3000:]) from None
                time.sleep(0.2)

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"{}")

    def events(self, run_id: str):
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/runs/{run_id}/events",
                                         headers={"Authorization": f"Bearer {self.key}"})
        with urllib.request.urlopen(request, timeout=60) as response:
            for raw in response:
                line = raw.decode().strip()
                if line.startswith("data:"):
                    event = json.loads(line[5:])
                    yield event
                    if event.get("event") in ("run.completed", "run.failed", "run.cancelled"):
                        return

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self._log.close()
