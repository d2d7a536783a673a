"""One connection to one ``codex app-server`` process (newline-delimited JSON-RPC over stdio).

Owns: spawning the process, the ``initialize``/``initialized`` handshake, framing, request/reply
correlation, the ordered inbound stream, the stderr tail, and closing the whole process tree.

Invariants:

* Only the reader thread consumes stdout. Replies go to the request waiting for them;
  notifications and server requests go, in wire order, to ONE inbound stream that the session layer
  consumes by blocking on :meth:`AppServerConnection.next_inbound` — no polling interval.
* When stdout closes (codex died, or :meth:`close`), every pending request fails at once with
  :class:`TransportClosed`, and the inbound stream ends (``next_inbound`` raises).
* Stderr is always drained into a bounded tail; :meth:`stderr_tail` is redacted.
* :meth:`close` is idempotent, thread-safe and bounded: it closes stdin, waits briefly,
  terminates, kills, and reaps every descendant snapshotted before the root was retired.

What the messages *mean* (turns, approvals, projections) is the session layer's business.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import logging
import re
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from hermes_codex_runtime.wire.binary import (
    CodexBinary,
    parse_version,
    require_supported,
    resolve_codex_binary,
)
from hermes_codex_runtime.wire.env import spawn_environment
from hermes_codex_runtime.wire.errors import (
    CodexBinaryError,
    RequestTimeout,
    ServerError,
    TransportClosed,
    WireError,
)
from hermes_codex_runtime.wire.inbound import (
    DROPPABLE,
    LOCAL_PREFIX,
    MAX_QUEUED,
    Inbound,
    InboundStream,
    JsonObject,
    RequestId,
)
from hermes_codex_runtime.wire.proctree import merge_snapshots, reap, snapshot_descendants
from hermes_codex_runtime.wire.redact import redact

log = logging.getLogger(__name__)

STDERR_TAIL_LINES = 500
STDERR_LINE_MAX = 4096
DIAGNOSTIC_LINES = 100
DIAGNOSTIC_LINE_MAX = 1000
EXIT_SETTLE = 0.2
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


class _Waiter:
    __slots__ = ("event", "reply")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reply: JsonObject | BaseException | None = None


class AppServerConnection:
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
        self._proc = process
        self._pipe = pipe
        #: Where the server is: ``None`` for a child process, else the endpoint's URL.
        self.endpoint = endpoint
        self._stdin: IO[bytes] | None = process.stdin if process is not None else None
        self.binary = binary
        self.server: ServerInfo | None = None
        self._ids = itertools.count(1)
        self._pending: dict[RequestId, _Waiter] = {}
        self._pending_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._close_lock = threading.Lock()
        self.stream = InboundStream()
        self._router: Callable[[Inbound], None] | None = None
        self._on_end: list[Callable[[str], None]] = []
        self._transport_error: str | None = None
        self._closed = False
        self._registry: Any = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._diagnostics: collections.deque[str] = collections.deque(maxlen=DIAGNOSTIC_LINES)
        label = process.pid if process is not None else "remote"
        self._reader = threading.Thread(
            target=self._read_stdout if process is not None else self._read_pipe,
            name=f"codex-stdout-{label}", daemon=True)
        self._stderr_reader: threading.Thread | None = None
        if process is not None:
            self._stderr_reader = threading.Thread(
                target=self._read_stderr, name=f"codex-stderr-{label}", daemon=True)
        self._reader.start()
        if self._stderr_reader is not None:
            self._stderr_reader.start()

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
        capabilities: JsonObject = {}
        if experimental_api:
            capabilities["experimentalApi"] = True
        if opt_out_notifications:
            capabilities["optOutNotificationMethods"] = list(opt_out_notifications)
        params: JsonObject = {
            "clientInfo": {
                "name": CLIENT_NAME,
                "title": client_title or CLIENT_NAME,
                "version": client_version,
            },
            "capabilities": capabilities,
        }
        try:
            result = self.request("initialize", params, timeout=timeout)
        except TransportClosed as exc:
            raise TransportClosed(
                f"codex app-server exited during start-up (exit code {self.returncode}). "
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

    # ------------------------------------------------------------------ outbound

    def request(self, method: str, params: JsonObject | None = None, *,
                timeout: float = 30.0) -> JsonObject:
        """Send a request and block (at most ``timeout`` s) for its result.

        Raises :class:`ServerError` on a JSON-RPC error reply, :class:`RequestTimeout`, or
        :class:`TransportClosed` — at once when the process dies while we wait.
        """
        rid = next(self._ids)
        waiter = _Waiter()
        with self._pending_lock:
            if self._transport_error is not None:
                raise TransportClosed(self._transport_error)
            self._pending[rid] = waiter
        try:
            self._send({"id": rid, "method": method, "params": params or {}})
            if not waiter.event.wait(timeout):
                raise RequestTimeout(method, timeout)
        finally:
            with self._pending_lock:
                self._pending.pop(rid, None)
        reply = waiter.reply
        if isinstance(reply, BaseException):
            raise reply
        assert reply is not None
        error = reply.get("error")
        if error is not None:
            if not isinstance(error, dict):
                error = {"code": -32603, "message": str(error)}
            raise ServerError(method, int(error.get("code", -32603)),
                              str(error.get("message", "")), error.get("data"))
        result = reply.get("result")
        return result if isinstance(result, dict) else {}

    def notify(self, method: str, params: JsonObject | None = None) -> None:
        """Send a notification (no reply expected)."""
        message: JsonObject = {"method": method}
        if params is not None:
            message["params"] = params
        self._send(message)

    def respond(self, request_id: RequestId, result: JsonObject) -> None:
        """Answer a server request with a result."""
        self._send({"id": request_id, "result": result})

    def respond_error(self, request_id: RequestId, code: int, message: str,
                      data: Any = None) -> None:
        """Answer a server request with a JSON-RPC error (e.g. ``-32601`` for unknown methods)."""
        error: JsonObject = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self._send({"id": request_id, "error": error})

    def _send(self, message: JsonObject) -> None:
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        with self._write_lock:
            if self._closed:
                raise TransportClosed("the codex app-server connection is closed")
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

    # ------------------------------------------------------------------ inbound

    def next_inbound(self, timeout: float | None = None) -> Inbound | None:
        """The next notification or server request, in wire order.

        Blocks up to ``timeout`` seconds (``None``: until something arrives) and returns ``None``
        when the wait elapsed. Raises :class:`TransportClosed` once the stream has ended (the
        process died or the connection was closed) and everything before the end was consumed.
        """
        return self.stream.next(timeout)

    def drain(self, limit: int = 256) -> list[Inbound]:
        """Up to ``limit`` messages that are already queued, without waiting (a consumer that
        just woke up handles a burst in one go)."""
        return self.stream.drain(limit)

    def set_idle_handler(self, handler: Callable[[Inbound], None] | None) -> None:
        """Between turns, ``handler`` receives every message on the reader thread (see
        :meth:`InboundStream.set_idle_handler`)."""
        self.stream.set_idle_handler(handler)

    def wake(self, reason: str = "wake") -> None:
        """Wake a consumer blocked in :meth:`next_inbound` from another thread."""
        self.stream.wake(reason)

    @property
    def coalesced_deltas(self) -> int:
        """How many streamed deltas were joined to a queued one because the consumer lagged."""
        return self.stream.coalesced_deltas

    def set_router(self, router: Callable[[Inbound], None] | None,
                   on_end: Callable[[str], None] | None = None) -> None:
        """Hand every notification and server request to ``router`` on the reader thread instead
        of this connection's own stream (a connection shared by many threads routes them to each
        thread's stream). ``on_end`` is called once, with the reason, when the stream ends — at
        once if it already has. The router must be quick and must not raise."""
        self._router = router
        if on_end is not None:
            with self._pending_lock:
                ended = self._transport_error
                if ended is None:
                    self._on_end.append(on_end)
            if ended is not None:
                on_end(ended)

    def _deliver(self, inbound: Inbound) -> None:
        router = self._router
        if router is None:
            self.stream.offer(inbound)
            return
        try:
            router(inbound)
        except Exception:
            log.exception("routing a codex message failed; continuing")

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
            self._end_stream(reason)

    def _dispatch_line(self, line: bytes) -> None:
        try:
            # Decoding first skips json's per-call encoding detection (a fifth of the reader's
            # time on a delta flood); invalid UTF-8 is a non-JSON line like any other.
            message = json.loads(line.decode("utf-8"))
        except ValueError:  # JSONDecodeError and UnicodeDecodeError
            self._note_diagnostic("non-JSON line on stdout", line)
            return
        if not isinstance(message, dict):
            self._note_diagnostic("non-object JSON on stdout", line)
            return
        method = message.get("method")
        if isinstance(method, str):
            params = message.get("params")
            if not isinstance(params, dict):
                params = {}
            rid = message.get("id")
            if rid is not None and (not isinstance(rid, int | str) or isinstance(rid, bool)):
                self._note_diagnostic("server request with an invalid id", line)
                return
            self._deliver(Inbound(method, params, rid))
            return
        if "id" in message and ("result" in message or "error" in message):
            rid = message["id"]
            if not isinstance(rid, int | str) or isinstance(rid, bool):
                self._note_diagnostic("reply with an invalid id", line)
                return
            with self._pending_lock:
                waiter = self._pending.pop(rid, None)
            if waiter is None:
                self._note_diagnostic("reply to an unknown request id", line)
                return
            waiter.reply = message
            waiter.event.set()
            return
        self._note_diagnostic("unrecognised message on stdout", line)

    def _end_stream(self, reason: str) -> None:
        with self._pending_lock:
            if self._transport_error is None:
                self._transport_error = reason
            waiters = list(self._pending.values())
            self._pending.clear()
            callbacks, self._on_end = self._on_end, []
        for waiter in waiters:
            waiter.reply = TransportClosed(f"{reason}. {self._tail_hint()}".strip())
            waiter.event.set()
        self.stream.end(self._transport_error or reason)
        for callback in callbacks:
            try:
                callback(self._transport_error or reason)
            except Exception:
                log.exception("a codex connection's end callback raised")

    def _note_diagnostic(self, what: str, line: bytes) -> None:
        text = line[:DIAGNOSTIC_LINE_MAX].decode("utf-8", "replace")
        suffix = f" … ({len(line)} bytes)" if len(line) > DIAGNOSTIC_LINE_MAX else ""
        self._diagnostics.append(f"{what}: {text}{suffix}")

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

    def diagnostics(self) -> list[str]:
        """Recent stdout lines that were not protocol messages (redacted)."""
        return [redact(line) for line in self._diagnostics]

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

    @property
    def transport_error(self) -> str | None:
        """Why the stream ended, once it has."""
        return self._transport_error

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
            first = snapshot_descendants(self._proc.pid)
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
                second = snapshot_descendants(self._proc.pid)
                first = merge_snapshots(first, second)
                with contextlib.suppress(OSError):
                    self._proc.terminate()
                try:
                    self._proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(OSError):
                        self._proc.kill()
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self._proc.wait(timeout=grace)
            survivors = reap(first, timeout=grace)
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
