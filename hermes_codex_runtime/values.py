"""The plain values a session and its host exchange: settings in, approval questions during a
turn, a :class:`TurnResult` out, and the :class:`TurnContext` every per-turn hook gets (the events
of a turn are :mod:`.events`'). No I/O here.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from hermes_codex_runtime.pool import Placement
from hermes_codex_runtime.protocol import Failure, HostTool
from hermes_codex_runtime.usage import UsageReport

log = logging.getLogger(__name__)

MAX_TIMEOUT = 86_400.0  # a day: more is a typo (and time.monotonic() + inf breaks waits)


@dataclass(slots=True)
class SessionSettings:
    """How to run codex for one host session. Every field has a working default."""

    codex_bin: str | None = None
    codex_home: str | None = None
    cwd: str | None = None
    model: str | None = None
    model_provider: str | None = None
    approval_policy: str | dict[str, Any] | None = "on-request"
    approvals_reviewer: str | None = "user"
    sandbox: str | None = None
    effort: str | None = None
    #: The host's name for the conversation (``None``: one conversation per agent): a turn of
    #: another conversation on the same agent resumes that conversation's thread, or forks
    #: this one's when the conversation came from it (a branch).
    conversation: str | None = None
    #: The provider's service tier (e.g. ``"priority"``, ``"flex"``; ``None``: its default).
    service_tier: str | None = None
    env: Mapping[str, str] | None = None
    extra_env: Mapping[str, str] | None = None
    extra_args: tuple[str, ...] = ()
    #: Names (or globs) of further variables the app-server may inherit (see ``wire.env``).
    env_passthrough: tuple[str, ...] = ()
    #: Names (or globs) that commands the model runs may inherit on top of the process basics.
    command_env_passthrough: tuple[str, ...] = ()
    turn_timeout: float = 600.0
    startup_timeout: float = 30.0
    request_timeout: float = 30.0
    control_timeout: float = 5.0
    post_tool_quiet_warning: float = 90.0
    client_version: str = "0"
    #: How the host names itself to codex (``initialize``'s ``clientInfo.title``).
    client_title: str | None = None
    registry_path: str | None = None  # app-servers recorded here are reaped if the host dies
    #: The host's own tools codex may call on this thread (codex's experimental dynamic tools);
    #: each call goes to the session's ``call_tool``.
    host_tools: tuple[HostTool, ...] = ()
    #: Where the thread runs: a shared local app-server (``None``: the default), a process of
    #: its own, or remote endpoints (see :mod:`hermes_codex_runtime.pool`).
    app_server: Placement | None = None
    #: Further codex config for the thread (``thread/start``'s ``config``), e.g.
    #: ``{"sandbox_workspace_write": {"network_access": False}}``.
    config_overrides: Mapping[str, Any] | None = None
    #: Paths (or globs) the commands codex runs may not read, and paths that stay read-only for
    #: them inside a writable workspace — sent as a permission profile (:mod:`.walls`).
    deny_read: tuple[str, ...] = ()
    protect: tuple[str, ...] = ()
    #: Where the verdict of the walls probe is kept per codex binary (``None``: in memory).
    walls_cache: str | None = None

    def __post_init__(self) -> None:
        for name in ("turn_timeout", "startup_timeout", "request_timeout", "control_timeout",
                     "post_tool_quiet_warning"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT:
                raise ValueError(f"{name} must be a positive number of seconds, at most "
                                 f"{MAX_TIMEOUT:g}, got {value!r}")
        if not all(isinstance(tool, HostTool) for tool in self.host_tools):
            raise ValueError("host_tools must be HostTool values")
        names = [tool.name for tool in self.host_tools]
        if len(set(names)) != len(names):
            raise ValueError(f"host_tools names must be unique, got {names}")


class Cancellation:
    """Set once a question no longer needs an answer (the turn ended or was interrupted, or codex
    resolved the request itself). Event-like (``set``/``is_set``/``wait``), and a host can hang
    the withdrawal of its own prompt on it: callbacks run once, on :meth:`set` — or at once when
    added after it."""

    __slots__ = ("_callbacks", "_event", "_lock")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def set(self) -> None:
        """Mark the question withdrawn and run the callbacks (each at most once)."""
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _run_callback(callback)

    def is_set(self) -> bool:
        """True once withdrawn."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until withdrawn (at most ``timeout`` s); True when it was."""
        return self._event.wait(timeout)

    def add_callback(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` when the question is withdrawn (now, if it already was)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        _run_callback(callback)

    def remove_callback(self, callback: Callable[[], None]) -> None:
        """Forget ``callback`` (the host's prompt was answered; nothing to withdraw)."""
        with self._lock, contextlib.suppress(ValueError):
            self._callbacks.remove(callback)


def _run_callback(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:
        log.exception("withdrawing a host's approval prompt failed")


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What codex asks the host to decide. ``cancelled`` is set when the question no longer needs
    an answer (the turn ended, or codex resolved it): an interactive host should drop its prompt."""

    method: str
    kind: str
    params: Mapping[str, Any]
    thread_id: str | None
    turn_id: str | None
    item_id: str | None
    command: str | None
    cwd: str | None
    reason: str | None
    changes: tuple[Mapping[str, Any], ...]
    cancelled: Cancellation = field(default_factory=Cancellation, compare=False)

    def summary(self) -> str:
        """One human-readable line: what will happen if the host says yes."""
        if self.kind == "command":
            text = f"run `{self.command}`" + (f" in {self.cwd}" if self.cwd else "")
        elif self.kind == "file_change":
            paths = [str(c.get("path")) for c in self.changes if c.get("path")]
            text = "change " + (", ".join(paths[:5]) if paths else "files")
            if len(paths) > 5:
                text += f" (+{len(paths) - 5} more)"
        elif self.kind == "permissions":
            text = f"grant extra permissions {dict(self.params.get('permissions') or {})}"
        elif self.kind in ("mcp_tool_call", "elicitation"):
            text = str(self.params.get("message") or f"answer {self.params.get('serverName')}")
        else:
            text = self.method
        return f"{text} — {self.reason}" if self.reason else text


@dataclass(slots=True)
class TurnResult:
    """The outcome of one turn (or one compaction). A plain value: no exception crosses the
    session boundary."""

    final_text: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    tool_iterations: int = 0
    interrupted: bool = False
    timed_out: bool = False
    failure: Failure | None = None
    #: the last error codex reported it would retry on its own (a provider it could not reach):
    #: what a turn that runs out of time was waiting on
    retrying: Failure | None = None
    status: str | None = None
    turn_id: str | None = None
    thread_id: str | None = None
    usage: UsageReport | None = None
    compacted: bool = False
    should_retire: bool = False
    submitted_user_text: str = ""
    thread_origin: str | None = None  # "started" | "resumed" | "seeded" (fresh + history seed)
    model: str | None = None  # the model codex reported for the thread (not the host's name)
    reasoning: str = ""  # the turn's last reasoning summary
    #: the host's own result of this turn, run on its fallback (the ``codex_fallback`` hook)
    fallback: dict[str, Any] | None = None
    endpoint: str | None = None  # the remote app-server the thread lives on (None: local)

    @property
    def error(self) -> str | None:
        """What went wrong, in a line (``None`` when nothing did)."""
        return self.failure.describe() if self.failure is not None else None

    @property
    def ok(self) -> bool:
        """True when the turn completed without an error."""
        return self.error is None and not self.interrupted

    @property
    def model_context_window(self) -> int | None:
        """The model's usable context window, as codex reported it."""
        return self.usage.context_window if self.usage else None

    def fail(self, failure: Failure, *, retire: bool | None = None) -> None:
        """Record ``failure`` (the first one wins) and whether the session must be replaced."""
        if self.failure is None:
            self.failure = failure
        if retire if retire is not None else failure.retire_session:
            self.should_retire = True


HostState = TypeVar("HostState")


@dataclass(slots=True)
class TurnContext(Generic[HostState]):
    """One turn as the host started it, handed to every hook the runtime calls for that turn
    (pluggy passes it only to implementations that name ``context``). ``host`` is the host's own
    per-turn data — the runtime never looks inside — so nothing of a turn has to be stored on
    the host's agent object. A compaction or a hook call outside a turn gets an empty context."""

    host: HostState | None = None
