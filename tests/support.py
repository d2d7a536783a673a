"""A test host: implements every runtime hook and records what it was told and asked."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psutil

from hermes_codex_runtime.continuity import Binding, Ledger
from hermes_codex_runtime.hookspecs import hookimpl
from hermes_codex_runtime.protocol import Decision
from hermes_codex_runtime.session import ApprovalRequest, SessionSettings

#: The app-server layout the suite runs in: "shared" (the default) or "per-session"
#: (``make test-per-session``).
APP_SERVER_MODE = os.environ.get("HCR_APP_SERVER", "shared")
SHARED = APP_SERVER_MODE == "shared"


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie is not running)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def descendants(pid: int, command_has: str) -> list[int]:
    """PIDs of ``pid``'s descendants whose command line contains ``command_has``. A process may
    exit between being listed and being read — it is then simply not one of them."""
    found = []
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    for child in children:
        try:
            if command_has in " ".join(child.cmdline()):
                found.append(child.pid)
        except psutil.Error:  # exited (or became a zombie) meanwhile
            continue
    return found


def total_rss(pids: Iterable[int]) -> int:
    """The resident memory of those of ``pids`` still running (one may exit while summing)."""
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            continue
    return total


class Agent:
    """Stands in for a host's per-conversation object."""

    def __init__(self, name: str = "agent") -> None:
        self.name = name


class RecordingHost:
    """Hook implementations of a minimal host, recording everything."""

    def __init__(self, settings: SessionSettings, *,
                 instructions: str | None = "You are the test host.",
                 decide: Callable[[ApprovalRequest], Any] | None = None,
                 stored: Binding | None = None,
                 fallback: Callable[[Any, Any], Any] | None = None,
                 tools: Callable[[Any], Any] | None = None,
                 per_agent: bool = False) -> None:
        self.settings = settings
        #: Bind threads per agent (as a real host binds per conversation) instead of the one
        #: ``stored`` slot every new agent resumes.
        self.per_agent = per_agent
        self.by_agent: dict[int, Binding] = {}
        self.by_conversation: dict[str, Binding] = {}
        self.tools = tools
        self.tool_calls: list[Any] = []
        self.instructions = instructions
        self.decide = decide or (lambda request: Decision.ACCEPT)
        self.stored = stored
        self.fallback = fallback
        self.lock = threading.Lock()
        self.events: list[Any] = []
        self.approvals: list[ApprovalRequest] = []
        self.usage: list[Any] = []
        self.compactions: list[Any] = []
        self.finished: list[tuple[Any, list[dict]]] = []
        self.bound: list[str] = []
        self.endpoints: list[str | None] = []
        self.fallbacks: list[tuple[Any, Any]] = []
        self.seed_requests = 0
        #: Every agent a turn was run for (the fixture closes their sessions).
        self.agents: list[Any] = []

    @hookimpl
    def codex_session_settings(self, agent):
        with self.lock:
            if not any(a is agent for a in self.agents):
                self.agents.append(agent)
        return self.settings

    @hookimpl
    def codex_developer_instructions(self, agent):
        return self.instructions

    @hookimpl
    def codex_history_seed(self, agent, messages):
        self.seed_requests += 1
        return None  # the default rendering answers

    @hookimpl
    def codex_stored_thread(self, agent):
        if self.settings.conversation is not None:  # bound per conversation, as a real host
            return self.by_conversation.get(self.settings.conversation)
        if self.per_agent:
            return self.by_agent.get(id(agent))
        return self.stored

    @hookimpl
    def codex_thread_bound(self, agent, thread_id, endpoint, instructions, conversation):
        self.bound.append(thread_id)
        self.endpoints.append(endpoint)
        stored = Binding(thread_id, endpoint, instructions, Ledger.decode(conversation))
        if self.settings.conversation is not None:
            self.by_conversation[self.settings.conversation] = stored
        elif self.per_agent:
            self.by_agent[id(agent)] = stored
        else:
            self.stored = stored

    @hookimpl
    def codex_approval(self, agent, request):
        with self.lock:
            self.approvals.append(request)
        return self.decide(request)

    @hookimpl
    def codex_tool_call(self, agent, call):
        with self.lock:
            self.tool_calls.append(call)
        return self.tools(call) if self.tools else None

    @hookimpl
    def codex_event(self, agent, event):
        with self.lock:
            self.events.append(event)

    @hookimpl
    def codex_record_usage(self, agent, usage):
        self.usage.append(usage)

    @hookimpl
    def codex_record_compaction(self, agent, turn):
        self.compactions.append(turn)

    @hookimpl
    def codex_turn_finished(self, agent, turn, messages):
        self.finished.append((turn, list(messages)))

    @hookimpl
    def codex_fallback(self, agent, turn, failure):
        self.fallbacks.append((turn, failure))
        return self.fallback(turn, failure) if self.fallback else None

    def event_kinds(self) -> list[str]:
        with self.lock:
            return [event.kind for event in self.events]


#: A ``bwrap`` for PATH that runs the real bubblewrap without the mounts that wall files off
#: under the temp directory (a denied file stays readable, a protected directory writable):
#: codex enforcing nothing it was told, the way a buggy exec path would. codex takes a bwrap from
#: PATH before its own (docs/codex-facts.md) — which is also why PATH directories are walls.
_LEAKY_BWRAP = '''#!{python}
import os, sys
REAL, TMP = {real!r}, {tmp!r}
args, out, i = sys.argv[1:], [], 0
while i < len(args):
    arg = args[i]
    if arg == "--":
        out += args[i:]
        break
    if arg == "--perms" and args[i + 2:i + 3] == ["--ro-bind-data"]:
        i += 5  # --perms 000 --ro-bind-data FD PATH: an unreadable file
        continue
    if arg == "--ro-bind" and args[i + 1] == args[i + 2] and args[i + 1].startswith(TMP):
        out += ["--bind", args[i + 1], args[i + 2]]  # a read-only place made writable
        i += 3
        continue
    out.append(arg)
    i += 1
os.execv(REAL, [REAL, *out])
'''


def leaky_bwrap(codex_path: str) -> str:
    """A directory holding the leaky ``bwrap`` (see ``_LEAKY_BWRAP``) for the codex package at
    ``codex_path``; put it first on PATH. codex ignores PATH entries under /tmp, so it lives in
    /dev/shm (or /var/tmp): the caller removes it."""
    import sys
    import tempfile

    real_bwrap = Path(codex_path).resolve().parent.parent / "codex-resources" / "bwrap"
    outside_tmp = "/dev/shm" if os.path.isdir("/dev/shm") else "/var/tmp"
    shim = Path(tempfile.mkdtemp(prefix="leaky-bwrap-", dir=outside_tmp))
    (shim / "bwrap").write_text(_LEAKY_BWRAP.format(python=sys.executable, real=str(real_bwrap),
                                                    tmp=tempfile.gettempdir().rstrip("/") + "/"))
    (shim / "bwrap").chmod(0o755)
    return str(shim)


def shut_down(runtime) -> None:
    """What a host's exit does to a runtime: every session a turn ran for closed, every
    app-server of its pool ended."""
    for plugin in runtime.pm.get_plugins():
        for agent in getattr(plugin, "agents", ()):
            runtime.close(agent)
    runtime.pool.close()


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0) -> bool:
    """True as soon as ``predicate()`` is; False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False
