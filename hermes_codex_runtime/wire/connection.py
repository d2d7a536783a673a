"""One connection to one ``codex app-server``: a child process (newline-delimited JSON-RPC over
stdio) or an app-server at an endpoint (one message per WebSocket message, :mod:`.websocket`).

Owns the transports and the process: spawning it, the ``initialize``/``initialized`` handshake,
the reader threads (stdout, or the endpoint's messages), the stderr tail, and closing the whole
process tree. The JSON-RPC conversation on top — correlation, the ordered inbound stream,
routing — is :class:`~.rpc.JsonRpcConnection`'s.

Invariants:

* Only the reader thread consumes stdout (or the endpoint's messages); when it ends (codex
  died, or :meth:`close`), every pending request fails at once and the inbound stream ends.
* Stderr is always drained into a bounded tail; :meth:`stderr_tail` is redacted.
* :meth:`close` is idempotent, thread-safe and bounded: it closes stdin, waits briefly,
  terminates, kills, and reaps every descendant snapshotted before the root was retired.
* A codex that dies by itself (killed, crashed) leaves its own children behind — MCP servers,
  shells, the sandbox's file-system helper — reparented to init the moment codex is gone. The
  reader keeps the descendants it saw whenever codex may have left something running (a
  thread's load, the end of an item that runs something, the end of a turn that had either —
  not a text-only turn: a snapshot reads all of /proc); codex leads a process group of its own,
  where what no look saw stays. Both are reaped (identity re-checked) when codex dies or is
  closed (:class:`~.proctree.Descendants`). The group also keeps the terminal's Ctrl-C to the
  host, which interrupts a turn through ``turn/interrupt``, not by signalling codex.

What the messages *mean* (turns, approvals, projections) is the session layer's business.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import re
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Protocol, cast

from hermes_codex_runtime.protocol.requests import initialize_params
from hermes_codex_runtime.protocol.schema_types import InitializeResponse
from hermes_codex_runtime.wire.binary import (
    CodexBinary,
    parse_version,
    require_supported,
    resolve_codex_binary,
)
from hermes_codex_runtime.wire.env import spawn_environment
from hermes_codex_runtime.wire.errors import (
    CodexBinaryError,
    TransportClosed,
    WireError,
)
from hermes_codex_runtime.wire.inbound import (
    DROPPABLE,
    LOCAL_PREFIX,
    MAX_QUEUED,
    Inbound,
    JsonObject,
    RequestId,
    may_start_process,
)
from hermes_codex_runtime.wire.proctree import Descendants, merge_snapshots, reap
from hermes_codex_runtime.wire.redact import redact
from hermes_codex_runtime.wire.rpc import JsonRpcConnection

_LOADS_THREAD = frozenset({"thread/start", "thread/resume", "thread/fork"})  # + MCP servers

log = logging.getLogger(__name__)


STDERR_TAIL_LINES = 500
STDERR_LINE_MAX = 4096
EXIT_SETTLE = 0.2
#: A shell's exit codes for a command it could not run (not executable / not found): what a
#: broken wrapper around codex exits with.
NOT_RUNNABLE = frozenset({126, 127})
CLIENT_NAME = "hermes-codex-runtime"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class MessagePipe(Protocol):
    """A message transport to a server at an endpoint (see :mod:`.websocket`)."""

    def send_text(self, data: bytes) -> None: ...
    def recv(self) -> bytes | None: ...
    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What ``initialize`` answered, plus the version parsed from ``userAgent``."""

    user_agent: str
    codex_home: str
    platform_family: str
    platform_os: str
    version: tuple[int, int, int] | None


@dataclass(slots=True)
class SpawnOptions:
    """How to start ``codex app-server``. Every field is optional; see :func:`spawn_environment`
    for the default environment policy."""

    codex_bin: str | None = None
    codex_home: str | None = None
    env: Mapping[str, str] | None = None
    extra_env: Mapping[str, str] | None = None
    extra_args: Sequence[str] = ()
    cwd: str | None = None
    initialize_timeout: float = 20.0
    client_version: str = "0"
    client_title: str | None = None  # how the host names itself (default: CLIENT_NAME)
    opt_out_notifications: Sequence[str] = field(default_factory=tuple)
    registry_path: str | None = None  # record the process for orphan reaping (see registry)
    provider_keys: Sequence[str] = ()  # the model provider's credential names (codex_config)
    env_passthrough: Sequence[str] = ()  # further names (or globs) the user lets through
    experimental_api: bool = False  # ask for codex's experimental API (dynamic tools)


class AppServerConnection(JsonRpcConnection):
    """A live ``codex app-server`` child and the JSON-RPC conversation with it.

    Use :meth:`spawn` (which also performs the handshake) or construct with an already started
    ``subprocess.Popen`` (tests, custom launchers) and call :meth:`initialize` yourself.
    """

    def __init__(self, process: subprocess.Popen[bytes] | None = None, *,
                 binary: CodexBinary | None = None, pipe: MessagePipe | None = None,
                 endpoint: str | None = None) -> None:
        if (process is None) == (pipe is None):
            raise ValueError("a connection needs either an app-server process or a message pipe")
        if process is not None and (process.stdin is None or process.stdout is None
                                    or process.stderr is None):
            raise ValueError("the app-server process needs stdin, stdout and stderr pipes")
        super().__init__()
        self._proc = process
        self._pipe = pipe
        #: Where the server is: ``None`` for a child process, else the endpoint's URL.
        self.endpoint = endpoint
        self._stdin: IO[bytes] | None = process.stdin if process is not None else None
        self.binary = binary
        self.server: ServerInfo | None = None
        self._close_lock = threading.Lock()
        self._registry: Any = None
        #: what codex started, reaped when it ends (none for a server at an endpoint)
        self._tree = (Descendants(process.pid, binary.path if binary else None)
                      if process is not None else None)
        #: codex may have started something since the last turn's end (an item that runs
        #: something, or a thread loaded: its MCP servers): look at the next turn's end
        self._look_at_turn_end = False
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        label = process.pid if process is not None else "remote"
        self._reader = threading.Thread(
            target=self._read_stdout if process is not None else self._read_pipe,
            name=f"codex-stdout-{label}", daemon=True)
        self._stderr_reader: threading.Thread | None = None
        if process is not None:
            self._stderr_reader = threading.Thread(
                target=self._read_stderr, name=f"codex-stderr-{label}", daemon=True)
        if self._stderr_reader is not None:
            self._stderr_reader.start()  # first: the stdout reader joins it when codex exits
        self._reader.start()

    # ------------------------------------------------------------------ start-up

    @classmethod
    def spawn(cls, options: SpawnOptions | None = None) -> AppServerConnection:
        """Resolve the binary, start ``codex app-server`` and complete the handshake.

        Raises :class:`CodexBinaryError` (missing / not runnable / too old),
        :class:`TransportClosed` (it exited during start-up; the message carries the redacted
        stderr tail) or :class:`RequestTimeout`. Never leaves a process behind on failure.
        """
        opts = options or SpawnOptions()
        binary = resolve_codex_binary(opts.codex_bin)
        env = spawn_environment(
            opts.env,
            codex_home=opts.codex_home,
            path_prepend=binary.path_prepend,
            extra=opts.extra_env,
            provider_keys=opts.provider_keys,
            passthrough=opts.env_passthrough,
        )
        argv = [binary.path, "app-server", *opts.extra_args]
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=opts.cwd,
                bufsize=-1,
                close_fds=True,
                process_group=0,
            )
        except OSError as exc:
            raise CodexBinaryError(
                f"Could not start {binary.path!r} ({exc}).",
                "Check the codex binary setting / $CODEX_BIN, or reinstall codex.",
            ) from exc
        conn = cls(process, binary=binary)
        if opts.registry_path:
            from hermes_codex_runtime.wire.registry import ProcessRegistry

            conn._registry = ProcessRegistry(opts.registry_path)
            try:
                conn._registry.register(process.pid)
            except OSError:
                log.warning("could not record codex pid %s in %s", process.pid,
                            opts.registry_path, exc_info=True)
        try:
            conn.initialize(
                timeout=opts.initialize_timeout,
                client_version=opts.client_version,
                client_title=opts.client_title,
                opt_out_notifications=opts.opt_out_notifications,
                experimental_api=opts.experimental_api,
            )
        except BaseException:
            conn.close()
            raise
        return conn

    def initialize(
        self,
        *,
        timeout: float = 20.0,
        client_version: str = "0",
        client_title: str | None = None,
        opt_out_notifications: Sequence[str] = (),
        experimental_api: bool = False,
    ) -> ServerInfo:
        """Send ``initialize`` then ``initialized``; check the server's version.

        ``experimental_api`` opts in to codex's experimental surface — needed for
        ``thread/start.dynamicTools`` (host tools codex calls back through ``item/tool/call``).
        """
        params = initialize_params(CLIENT_NAME, client_title or CLIENT_NAME, client_version,
                                   experimental_api=experimental_api,
                                   opt_out_notifications=opt_out_notifications)
        try:
            result = cast(InitializeResponse, self.request("initialize", params, timeout=timeout))
        except TransportClosed as exc:
            code, tail = self._ended()
            if self._proc is not None and (not tail or code in NOT_RUNNABLE):
                # nothing of codex's own ran: the binary itself (a broken wrapper, a missing
                # interpreter, a file that is not codex) is what needs fixing
                path = self.binary.path if self.binary else "codex"
                said = "printed nothing" if not tail else "printed: " + " | ".join(tail)
                raise CodexBinaryError(
                    f"The codex binary {path} exited during start-up (exit code {code}) and "
                    f"{said}.", f"Check that `{path} --version` runs, or point the codex "
                    "binary setting / $CODEX_BIN at a working codex.") from exc
            raise TransportClosed(
                f"codex app-server exited during start-up (exit code {code}). "
                f"{self._tail_hint()}"
            ) from exc
        user_agent = str(result.get("userAgent", ""))
        version = parse_version(user_agent)
        if version is not None:
            require_supported(version, self.binary.path if self.binary else "codex")
        self.server = ServerInfo(
            user_agent=user_agent,
            codex_home=str(result.get("codexHome", "")),
            platform_family=str(result.get("platformFamily", "")),
            platform_os=str(result.get("platformOs", "")),
            version=version,
        )
        self.notify("initialized")
        return self.server

    def request(self, method: str, params: Mapping[str, Any] | None = None, *,
                timeout: float = 30.0) -> JsonObject:
        if method in _LOADS_THREAD:
            self._look_at_turn_end = True
        return super().request(method, params, timeout=timeout)

    # ------------------------------------------------------------------ transports

    def _write(self, data: bytes) -> None:
        if self._pipe is not None:
            try:
                self._pipe.send_text(data)
            except (WireError, OSError) as exc:
                raise TransportClosed(
                    f"the codex app-server at {self.endpoint} stopped answering ({exc})"
                ) from exc
            return
        assert self._stdin is not None
        try:
            self._stdin.write(data + b"\n")
            self._stdin.flush()
        except (OSError, ValueError) as exc:
            raise TransportClosed(
                f"codex app-server stopped reading its input ({exc}). {self._tail_hint()}"
            ) from exc

    def _read_pipe(self) -> None:
        """The reader for a server at an endpoint: one JSON-RPC message per message."""
        assert self._pipe is not None
        reason = f"the codex app-server at {self.endpoint} closed the connection"
        try:
            while True:
                data = self._pipe.recv()
                if data is None:
                    break
                line = data.strip()
                if line:
                    self._dispatch_line(line)
        except WireError as exc:
            if not self._closed:
                reason = f"{reason} ({exc})"
        except Exception as exc:  # pragma: no cover - a reader failure must still end the stream
            reason = f"the codex app-server reader failed: {exc!r}"
            log.exception("codex app-server reader failed")
        finally:
            self._end_stream(reason)

    def _read_stdout(self) -> None:
        assert self._proc is not None
        stdout = self._proc.stdout
        assert stdout is not None
        reason = "codex app-server closed its output (the process exited)"
        try:
            for raw in stdout:
                line = raw.strip()
                if line:
                    self._dispatch_line(line)
        except Exception as exc:  # pragma: no cover - a reader failure must still end the stream
            reason = f"the codex app-server reader failed: {exc!r}"
            log.exception("codex app-server reader failed")
        finally:
            if not self._closed:
                # codex died: give it a moment to be reaped and its last stderr lines to drain,
                # so the error carries the exit code and the reason (bounded: 0.2 s each).
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(timeout=EXIT_SETTLE)
                if self._stderr_reader is not None:
                    self._stderr_reader.join(timeout=EXIT_SETTLE)
                if self._proc.returncode is not None:
                    reason = f"{reason} with code {self._proc.returncode}"
                    self._reap_left_behind()
            self._end_stream(reason)

    def _before_delivery(self, message: Inbound) -> None:
        """Note codex's descendants where it may have started one, before anyone sees why."""
        if self._tree is None:
            return  # a server at an endpoint: its processes are not ours
        if may_start_process(message):
            self._remember_descendants()
            self._look_at_turn_end = True
        elif self._look_at_turn_end and message.method == "turn/completed":
            self._remember_descendants()
            self._look_at_turn_end = False

    def _remember_descendants(self) -> None:
        """Add codex's current descendants to those seen (reader thread)."""
        assert self._tree is not None
        if self._tree.note() and self._registry is not None:
            with contextlib.suppress(OSError):
                # for the next host start, should this host die with codex
                self._registry.note_descendants(self._tree.pid, self._tree.running())

    def _reap_left_behind(self) -> None:
        """codex died by itself: what it started is orphaned now; end it (reader thread)."""
        assert self._tree is not None
        survivors = reap(self._tree.left(), timeout=1.0)
        if survivors:
            log.warning("children of a dead codex app-server survived SIGKILL: %s", survivors)

    def _read_stderr(self) -> None:
        assert self._proc is not None
        stderr = self._proc.stderr
        assert stderr is not None
        with contextlib.suppress(Exception):
            while True:
                chunk = stderr.readline(STDERR_LINE_MAX)
                if not chunk:
                    break
                if not chunk.endswith(b"\n"):
                    # Drop the rest of an over-long line without keeping it in memory.
                    while chunk and not chunk.endswith(b"\n"):
                        chunk = stderr.readline(STDERR_LINE_MAX)
                    self._stderr.append("<stderr line truncated>")
                    continue
                self._stderr.append(chunk.decode("utf-8", "replace").rstrip())

    # ------------------------------------------------------------------ diagnostics

    def stderr_tail(self, lines: int = 40) -> list[str]:
        """The last ``lines`` lines codex wrote to stderr, ANSI colours stripped, redacted."""
        tail = list(self._stderr)[-lines:] if lines > 0 else []
        return [redact(_ANSI.sub("", line)) for line in tail]

    def _ended(self, wait: float = 1.0) -> tuple[int | None, list[str]]:
        """The exit code of a child that closed its output, and its last stderr lines, once it
        has exited and its stderr is read (waiting up to ``wait`` seconds for both)."""
        if self._proc is None:
            return None, self.stderr_tail(8)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=wait)
        reader = getattr(self, "_stderr_reader", None)
        if reader is not None:
            reader.join(timeout=wait)
        return self._proc.poll(), self.stderr_tail(8)

    def _tail_hint(self, lines: int = 8) -> str:
        tail = self.stderr_tail(lines)
        return ("codex stderr (last lines): " + " | ".join(tail)) if tail else ""

    @property
    def pid(self) -> int | None:
        """The app-server's process id (``None`` for a server at an endpoint)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        """The exit code once the child process has exited, else ``None``."""
        return self._proc.poll() if self._proc is not None else None

    def is_alive(self) -> bool:
        """True while the process runs (or the endpoint's connection is open) and the output
        stream is open."""
        if self._proc is None:
            return not self._closed and self._transport_error is None
        return self._proc.poll() is None and self._transport_error is None

    # ------------------------------------------------------------------ shutdown

    def close(self, grace: float = 1.0) -> None:
        """Close the connection and reap the whole process tree. Idempotent, thread-safe, bounded
        to a few seconds. Pending requests fail with :class:`TransportClosed` at once."""
        with self._close_lock:
            if self._closed:
                return
            if self._proc is None:
                self._close_pipe(grace)
                return
            assert self._tree is not None
            first = self._tree.current()
            with self._write_lock:
                self._closed = True
                with contextlib.suppress(Exception):
                    if self._stdin is not None:
                        self._stdin.close()
            self._end_stream("the codex app-server connection was closed")
            deadline = time.monotonic() + grace
            try:
                self._proc.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                first = merge_snapshots(first, self._tree.current())
                with contextlib.suppress(OSError):
                    self._proc.terminate()
                try:
                    self._proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(OSError):
                        self._proc.kill()
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self._proc.wait(timeout=grace)
            survivors = reap(self._tree.left(first), timeout=grace)
            if survivors:
                log.warning("codex app-server descendants survived SIGKILL: %s", survivors)
            if self._registry is not None and self._proc.returncode is not None:
                with contextlib.suppress(OSError):
                    self._registry.unregister(self._proc.pid)
            for thread in (self._reader, self._stderr_reader):
                if thread is not None and thread is not threading.current_thread():
                    thread.join(timeout=grace)
            for stream in (self._proc.stdout, self._proc.stderr):
                with contextlib.suppress(Exception):
                    if stream is not None:
                        stream.close()

    def _close_pipe(self, grace: float) -> None:
        """Close the connection to a server at an endpoint (the server keeps running)."""
        assert self._pipe is not None
        with self._write_lock:
            self._closed = True
        self._end_stream("the codex app-server connection was closed")
        with contextlib.suppress(Exception):
            self._pipe.close()
        if self._reader is not threading.current_thread():
            self._reader.join(timeout=grace)

    def __enter__(self) -> AppServerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort for forgotten connections
        with contextlib.suppress(Exception):
            if not self._closed and self._proc is not None and self._proc.poll() is None:
                log.warning("an AppServerConnection (pid %s) was not closed", self._proc.pid)


__all__ = [
    "DROPPABLE",
    "LOCAL_PREFIX",
    "MAX_QUEUED",
    "AppServerConnection",
    "Inbound",
    "JsonObject",
    "MessagePipe",
    "RequestId",
    "ServerInfo",
    "SpawnOptions",
    "WireError",
]
