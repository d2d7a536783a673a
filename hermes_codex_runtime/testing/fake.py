"""The harness around the fake app-server: install it as a ``codex`` executable, script it, and
read back what it saw.

:class:`FakeCodex` writes a launcher script named ``codex`` that runs
:mod:`hermes_codex_runtime.testing.fake_app_server` with this interpreter, the scenario and the
schema directory baked in (so the spawn environment cannot lose them). Its log records every
message the client sent, with the schema verdict; :meth:`FakeCodex.assert_wire_clean` fails on
anything codex would reject or silently ignore, and on any message the fake itself sent that the
schema does not allow.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import stat
import sys
from pathlib import Path
from typing import Any

import psutil

from hermes_codex_runtime.wire.proctree import started

JsonObject = dict[str, Any]
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class FakeCodex:
    """A scripted fake ``codex`` binary in ``directory``."""

    def __init__(self, directory: str | os.PathLike[str], schema_dir: str | os.PathLike[str] | None,
                 scenario: JsonObject | None = None, *,
                 experimental_schema_dir: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(directory)
        self.state = self.root / "state"
        self.state.mkdir(parents=True, exist_ok=True)
        self.bin_path = self.root / "codex"
        env_lines = [f"export FAKE_CODEX_STATE={shlex.quote(str(self.state))}",
                     f"export FAKE_CODEX_BINARY={shlex.quote(os.path.realpath(self.bin_path))}"]
        if schema_dir is not None:
            env_lines.append(f"export FAKE_CODEX_SCHEMA={shlex.quote(str(schema_dir))}")
        if experimental_schema_dir is not None:  # what a client that opts in may send
            env_lines.append("export FAKE_CODEX_SCHEMA_EXPERIMENTAL="
                             f"{shlex.quote(str(experimental_schema_dir))}")
        env_lines.append(f"export PYTHONPATH={shlex.quote(str(_PACKAGE_ROOT))}"
                         '${PYTHONPATH:+:$PYTHONPATH}')
        script = "\n".join([
            "#!/bin/sh",
            *env_lines,
            f"exec {shlex.quote(sys.executable)} -m "
            'hermes_codex_runtime.testing.fake_app_server "$@"',
            "",
        ])
        self.bin_path.write_text(script)
        self.bin_path.chmod(self.bin_path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP)
        self.set_scenario(scenario or {})

    def set_scenario(self, scenario: JsonObject) -> None:
        """Replace the scenario (turn scripts are consumed in order, across processes)."""
        (self.state / "scenario.json").write_text(json.dumps(scenario))
        counter = self.state / "turn_counter.json"
        if counter.exists():
            counter.unlink()

    @property
    def path(self) -> str:
        """The launcher's path: pass it as ``codex_bin``."""
        return str(self.bin_path)

    def log(self) -> list[JsonObject]:
        """Every log entry, in order."""
        path = self.state / "log.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def requests(self, method: str | None = None) -> list[JsonObject]:
        """Client requests the fake received (optionally of one method)."""
        return [e for e in self.log() if e.get("kind") == "request"
                and (method is None or e.get("method") == method)]

    def replies(self, method: str | None = None) -> list[JsonObject]:
        """Client replies to the fake's server requests."""
        return [e for e in self.log() if e.get("kind") == "reply"
                and (method is None or e.get("method") == method)]

    def wire_problems(self) -> list[str]:
        """Everything that makes the wire unclean, one line each."""
        problems: list[str] = []
        for entry in self.log():
            where = f"{entry.get('kind', entry.get('dir'))} {entry.get('method')}"
            problems.extend(f"{where}: rejected: {e}" for e in entry.get("errors", []))
            problems.extend(f"{where}: codex would ignore {f}" for f in entry.get("ignored", []))
            problems.extend(f"{where}: the fake sent an invalid message: {e}"
                            for e in entry.get("self_errors", []))
            if entry.get("kind") == "fake_error":
                problems.append(f"the fake app-server failed: {entry.get('error')}")
            if entry.get("kind") == "late_or_unknown_reply":
                problems.append(f"reply to unknown/abandoned server request {entry.get('id')}")
        return problems

    def assert_wire_clean(self) -> None:
        """Fail when anything sent (either way) was invalid or would be silently ignored."""
        problems = self.wire_problems()
        if problems:
            raise AssertionError("the wire is not clean:\n  " + "\n  ".join(problems))

    def grandchildren(self) -> list[tuple[int, float]]:
        """(PID, create time) of grandchildren the fake started in their own sessions."""
        path = self.state / "grandchildren.txt"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            pid, created = line.split()
            out.append((int(pid), float(created)))
        return out

    def live_grandchildren(self) -> list[int]:
        """PIDs of those grandchildren that are still running (identity re-checked)."""
        return [pid for pid, created in self.grandchildren() if _alive(pid, created)]

    def kill_leftovers(self) -> None:
        """Test teardown: SIGKILL any grandchild still alive (a failed test must not leak)."""
        for pid, created in self.grandchildren():
            if _alive(pid, created):
                with contextlib.suppress(psutil.Error):
                    psutil.Process(pid).kill()


def _alive(pid: int, created: float) -> bool:
    start = started(pid)
    return start is not None and abs(start - created) < 0.005
