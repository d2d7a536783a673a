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
import queue
import re
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

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
from hermes_codex_runtime.wire.proctree import merge_snapshots, reap, snapshot_descendants
from hermes_codex_runtime.wire.redact import redact

log = logging.getLogger(__name__)

JsonObject = dict[str, Any]
RequestId = int | str

STDERR_TAIL_LINES = 500
STDERR_LINE_MAX = 4096
DIAGNOSTIC_LINES = 100
DIAGNOSTIC_LINE_MAX = 1000
EXIT_SETTLE = 0.2
#: Backpressure: while the consumer lags this many messages behind, a streaming delta is not
#: queued as a message of its own: its text is appended to the still-queued delta of the same
#: item (counted in ``coalesced_deltas``). Nothing is lost — the consumer receives the same text
#: in fewer, larger pieces — and memory stays bounded by the item's own size.
MAX_QUEUED = 2_000
DROPPABLE = frozenset({"item/agentMessage/delta", "item/reasoning/summaryTextDelta",
                       "item/reasoning/textDelta", "item/commandExecution/outputDelta",
                       "item/fileChange/outputDelta"})
LOCAL_PREFIX = "$local/"
CLIENT_NAME = "hermes-codex-runtime"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


@dataclass(frozen=True, slots=True)
class Inbound:
    """A message the server sent on its own: a notification (``id is None``) or a server request
    that must be answered with :meth:`AppServerConnection.respond` / ``respond_error``."""

    method: str
    params: JsonObject
    id: RequestId | None = None

    @property
    def is_request(self) -> bool:
        """True for a server request (it carries an id, and 0 is a valid id)."""
        return self.id is not None

    @property
    def is_local(self) -> bool:
        """True for a wake-up marker posted by :meth:`AppServerConnection.wake`."""
        return self.method.startswith(LOCAL_PREFIX)


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
    client_title: str = "Hermes Agent (codex runtime)"
    opt_out_notifications: Sequence[str] = field(default_factory=tuple)
    registry_path: str | None = None  # record the process for orphan reaping (see registry)
    provider_keys: Sequence[str] = ()  # the model provider's credential names (codex_config)
    env_passthrough: Sequence[str] = ()  # further names (or globs) the user lets through
    experimental_api: bool = False  # ask for codex's experimental API (dynamic tools)


class _Coalesced:
    """A queued streaming delta that later deltas of the same item join while it waits."""

    __slots__ = ("key", "method", "params", "pieces", "taken")

    def __init__(self, key: tuple[Any, ...], method: str, params: JsonObject) -> None:
        self.key = key
        self.method = method
        self.params = params
        self.pieces: list[str] = [str(params.get("delta", ""))]
        self.taken = False


class _Waiter:
    __slots__ = ("event", "reply")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reply: JsonObject | BaseException | None = None


_END = object()  # the inbound stream's end marker


class AppServerConnection:
    """A live ``codex app-server`` child and the JSON-RPC conversation with it.

    Use :meth:`spawn` (which also performs the handshake) or construct with an already started
    ``subprocess.Popen`` (tests, custom launchers) and call :meth:`initialize` yourself.
    """

    def __init__(self, process: subprocess.Popen[bytes], *,
                 binary: CodexBinary | None = None) -> None:
        if process.stdin is None or process.stdout is None or process.stderr is None:
            raise ValueError("the app-server process needs stdin, stdout and stderr pipes")
        self._proc = process
        self._stdin: IO[bytes] = process.stdin
        self.binary = binary
        self.server: ServerInfo | None = None
        self._ids = itertools.count(1)
        self._pending: dict[RequestId, _Waiter] = {}
        self._pending_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._close_lock = threading.Lock()
        self._inbound: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._inbound_ended = False
        self._route_lock = threading.RLock()  # drain() unwraps under it
        self._idle_handler: Callable[[Inbound], None] | None = None
        self.coalesced_deltas = 0
        self._tail: _Coalesced | None = None  # the last thing queued, when it is a delta slot
        self._transport_error: str | None = None
        self._closed = False
        self._registry: Any = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._diagnostics: collections.deque[str] = collections.deque(maxlen=DIAGNOSTIC_LINES)
        self._reader = threading.Thread(
            target=self._read_stdout, name=f"codex-stdout-{process.pid}", daemon=True
        )
        self._stderr_reader = threading.Thread(
            target=self._read_stderr, name=f"codex-stderr-{process.pid}", daemon=True
        )
        self._reader.start()
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
        client_title: str = "Hermes Agent (codex runtime)",
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
                "title": client_title,
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
        if self._inbound_ended:
            raise TransportClosed(self._transport_error or "the codex app-server stream ended")
        try:
            item = self._inbound.get(timeout=timeout) if timeout is None or timeout > 0 \
                else self._inbound.get_nowait()
        except queue.Empty:
            return None
        if item is _END:
            self._inbound_ended = True
            raise TransportClosed(self._transport_error or "the codex app-server stream ended")
        return self._unwrap(item)

    def drain(self, limit: int = 256) -> list[Inbound]:
        """Up to ``limit`` messages that are already queued, without waiting (a consumer that
        just woke up handles a burst in one go). Stops at the end of the stream; the next
        :meth:`next_inbound` then raises."""
        items: list[Inbound] = []
        if self._inbound_ended:
            return items
        get = self._inbound.get_nowait
        for _ in range(limit):
            try:
                item = get()
            except queue.Empty:
                break
            if item is _END:
                self._inbound.put(_END)
                break
            items.append(self._unwrap(item))
        return items

    def set_idle_handler(self, handler: Callable[[Inbound], None] | None) -> None:
        """While no consumer drives the stream (between turns), ``handler`` receives every
        notification and server request on the reader thread, so a request that arrives then
        (e.g. a token refresh) is answered at once. Setting it first hands it what is already
        queued, in order; ``None`` sends messages to the inbound stream again. The handler must
        be quick: it runs on the reader thread."""
        with self._route_lock:
            self._idle_handler = handler
            if handler is None:
                return
            for item in self.drain(limit=1_000_000):
                self._call_idle_handler(handler, item)

    @staticmethod
    def _call_idle_handler(handler: Callable[[Inbound], None], item: Inbound) -> None:
        try:
            handler(item)
        except Exception:
            log.exception("the idle message handler raised; continuing")

    def wake(self, reason: str = "wake") -> None:
        """Wake a consumer blocked in :meth:`next_inbound` from another thread (an interrupt, a
        decided approval). It receives a local marker: ``Inbound("$local/<reason>", {})`` —
        codex method names never start with ``$``."""
        self._inbound.put(Inbound(f"{LOCAL_PREFIX}{reason}", {}))

    def _read_stdout(self) -> None:
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
            if rid is None and method in DROPPABLE and isinstance(params.get("delta"), str) \
                    and self._inbound.qsize() > MAX_QUEUED and self._coalesce(method, params):
                return
            inbound = Inbound(method, params, rid)
            with self._route_lock:
                handler = self._idle_handler
                if handler is None:
                    self._inbound.put(inbound)
                    self._tail = None
                    return
                self._call_idle_handler(handler, inbound)
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

    def _coalesce(self, method: str, params: JsonObject) -> bool:
        """Join ``params["delta"]`` to the delta slot of the same item when that slot is the last
        thing queued and not yet taken — so the order of everything is kept — else queue a new
        slot later deltas can join (reader thread only). False between turns (nothing queued)."""
        key = (method, params.get("threadId"), params.get("turnId"), params.get("itemId"))
        with self._route_lock:
            if self._idle_handler is not None:
                return False
            slot = self._tail
            if slot is not None and slot.key == key and not slot.taken:
                slot.pieces.append(params["delta"])
                self.coalesced_deltas += 1
                return True
            slot = _Coalesced(key, method, params)
            self._inbound.put(slot)
            self._tail = slot
            return True

    def _unwrap(self, item: object) -> Inbound:
        if isinstance(item, _Coalesced):
            with self._route_lock:
                item.taken = True
                text = "".join(item.pieces)
            return Inbound(item.method, {**item.params, "delta": text})
        assert isinstance(item, Inbound)
        return item

    def _end_stream(self, reason: str) -> None:
        with self._pending_lock:
            if self._transport_error is None:
                self._transport_error = reason
            waiters = list(self._pending.values())
            self._pending.clear()
        for waiter in waiters:
            waiter.reply = TransportClosed(f"{reason}. {self._tail_hint()}".strip())
            waiter.event.set()
        self._inbound.put(_END)

    def _note_diagnostic(self, what: str, line: bytes) -> None:
        text = line[:DIAGNOSTIC_LINE_MAX].decode("utf-8", "replace")
        suffix = f" … ({len(line)} bytes)" if len(line) > DIAGNOSTIC_LINE_MAX else ""
        self._diagnostics.append(f"{what}: {text}{suffix}")

    def _read_stderr(self) -> None:
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
    def pid(self) -> int:
        """The app-server's process id."""
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        """The exit code once the process has exited, else ``None``."""
        return self._proc.poll()

    def is_alive(self) -> bool:
        """True while the process runs and its output stream is open."""
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
            first = snapshot_descendants(self._proc.pid)
            with self._write_lock:
                self._closed = True
                with contextlib.suppress(Exception):
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
                if thread is not threading.current_thread():
                    thread.join(timeout=grace)
            for stream in (self._proc.stdout, self._proc.stderr):
                with contextlib.suppress(Exception):
                    if stream is not None:
                        stream.close()

    def __enter__(self) -> AppServerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort for forgotten connections
        with contextlib.suppress(Exception):
            if not self._closed and self._proc.poll() is None:
                log.warning("an AppServerConnection (pid %s) was not closed", self._proc.pid)


__all__ = [
    "AppServerConnection",
    "Inbound",
    "JsonObject",
    "RequestId",
    "ServerInfo",
    "SpawnOptions",
    "WireError",
]
