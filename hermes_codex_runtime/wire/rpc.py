"""The JSON-RPC conversation of one connection, whatever carries it: request/reply correlation,
notifications and replies to server requests going out, and every message coming in routed —
replies to the request waiting for them; notifications and server requests, in wire order, to
ONE inbound stream (or to a router, on a connection many threads share).

Invariants:

* Only the transport's reader thread calls :meth:`JsonRpcConnection._dispatch_line`.
* When the transport ends, every pending request fails at once with :class:`TransportClosed`,
  and the inbound stream ends (``next_inbound`` raises once it is consumed).
* Non-protocol output is kept, bounded and redacted, for diagnostics.

The transports — a child process's stdio, an endpoint's WebSocket — are
:class:`~hermes_codex_runtime.wire.connection.AppServerConnection`'s.
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from hermes_codex_runtime.wire.errors import RequestTimeout, ServerError, TransportClosed
from hermes_codex_runtime.wire.inbound import Inbound, InboundStream, JsonObject, RequestId
from hermes_codex_runtime.wire.redact import redact

log = logging.getLogger(__name__)

DIAGNOSTIC_LINES = 100
DIAGNOSTIC_LINE_MAX = 1000


class _Waiter:
    __slots__ = ("event", "reply")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reply: JsonObject | BaseException | None = None


class JsonRpcConnection:
    """JSON-RPC over a message transport; a subclass supplies :meth:`_write` and a reader that
    feeds :meth:`_dispatch_line` and ends with :meth:`_end_stream`."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._pending: dict[RequestId, _Waiter] = {}
        self._pending_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self.stream = InboundStream()
        self._router: Callable[[Inbound], None] | None = None
        self._on_end: list[Callable[[str], None]] = []
        self._transport_error: str | None = None
        self._closed = False
        self._diagnostics: collections.deque[str] = collections.deque(maxlen=DIAGNOSTIC_LINES)

    # ------------------------------------------------------------------ outbound

    def request(self, method: str, params: Mapping[str, Any] | None = None, *,
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

    def respond(self, request_id: RequestId, result: Mapping[str, Any]) -> None:
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
            self._write(data)

    def _write(self, data: bytes) -> None:
        """Send one encoded message (called with the write lock held); raises
        :class:`TransportClosed` when the transport cannot take it."""
        raise NotImplementedError

    def _tail_hint(self, lines: int = 8) -> str:
        """What the transport can add to an error (a process's last stderr lines)."""
        del lines
        return ""

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

    def _before_delivery(self, message: Inbound) -> None:
        """Called on the reader thread for each notification or server request before anyone
        can see it: a transport's hook (nothing here)."""

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
            inbound = Inbound(method, params, rid)
            self._before_delivery(inbound)
            self._deliver(inbound)
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

    # ------------------------------------------------------------------ diagnostics

    def diagnostics(self) -> list[str]:
        """Recent stdout lines that were not protocol messages (redacted)."""
        return [redact(line) for line in self._diagnostics]

    @property
    def transport_error(self) -> str | None:
        """Why the stream ended, once it has."""
        return self._transport_error
