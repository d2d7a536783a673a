"""One app-server connection carrying many codex threads (:class:`SharedServer`, routing BY
THREAD), and each session's view of it (:class:`Channel`: the interface narrowed to its thread).

Routing, on the reader thread: a message that names a thread goes to the channel that owns it,
in wire order (each channel has its own :class:`~hermes_codex_runtime.wire.InboundStream`); one
for a thread nobody owns yet is held briefly (``thread/started`` can beat the ``thread/start``
reply) and handed over on binding — a server request for an unowned thread is answered at once
with its safe answer (nobody is there to decide, and codex must not wait); one that names no
thread (``configWarning``, account notes) goes to every channel, and those before the first
thread are replayed to each new channel. A thread-level error stays on that thread's stream;
only the connection ending ends every stream, with the reason. Closing a channel unsubscribes
its thread, never the process: :mod:`.pool` ends the process when no channel is left (decided
at once with refusing newcomers, :meth:`SharedServer.retire_if_empty`). Between turns a channel
may *unload* its thread (:meth:`Channel.unload`: idle a while, or to make room) and keep its
seat; its next turn resumes the thread here, after codex's ``thread/closed`` (:mod:`.unload`).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from hermes_codex_runtime.pool.unload import Unloads
from hermes_codex_runtime.protocol import METHOD_NOT_FOUND, default_answer, scope_of
from hermes_codex_runtime.wire import AppServerConnection, Inbound, TransportClosed
from hermes_codex_runtime.wire.inbound import InboundStream, JsonObject, RequestId

log = logging.getLogger(__name__)

#: Messages for a thread nobody owns yet are held this long / this many, then dropped.
UNCLAIMED_TTL = 30.0
UNCLAIMED_PER_THREAD = 512
UNCLAIMED_THREADS = 256
#: Connection-level notes (no thread) from start-up, replayed to each new channel.
STARTUP_NOTES = 64
_THREAD_BINDING = frozenset({"thread/start", "thread/resume", "thread/fork"})


class SharedServer:
    """A connection and the channels (sessions) on it, routed by thread id."""

    def __init__(self, conn: AppServerConnection, *, key: Any = None,
                 on_idle: Callable[[SharedServer], None] | None = None,
                 on_change: Callable[[], None] | None = None,
                 unsubscribe_timeout: float = 2.0, unloads: bool = False,
                 unload_after: float = 0.0) -> None:
        self.conn = conn
        self.key = key
        #: The threads codex is unloading for this connection (``unloads``: codex unloads an
        #: unsubscribed thread at once here).
        self.unloads = Unloads(unloads)
        #: A session idle this long has its thread unloaded (``0``: never; see the pool).
        self.unload_after = unload_after
        self._on_idle = on_idle
        self._on_change = on_change
        self._unsubscribe_timeout = unsubscribe_timeout
        self._lock = threading.Lock()
        self._channels: set[Channel] = set()
        self._by_thread: dict[str, Channel] = {}
        self._unclaimed: dict[str, tuple[float, collections.deque[Inbound]]] = {}
        self._startup: collections.deque[Inbound] = collections.deque(maxlen=STARTUP_NOTES)
        self._seen_thread = False
        self.ended: str | None = None
        #: Takes no new sessions; ends with its last session. ``suspect``: a session found it
        #: wedged (nothing returns to it either); else it is being recycled (see the pool).
        self.draining = False
        self.suspect = False
        self._retiring = False  # ending for want of sessions: no channel opens any more
        #: Threads let go of here (their session left, or unloaded them) that codex may still
        #: hold: a session resuming one comes back to this process. A thread leaves the set
        #: when codex reports it closed; where codex does not unload at once it stays (loaded,
        #: its writer lock held) until the process ends.
        self.released: set[str] = set()
        # what was queued on the connection before routing began (start-up notes)
        for message in conn.drain(limit=STARTUP_NOTES):
            self._route(message)
        conn.set_router(self._route, on_end=self._end)

    # ------------------------------------------------------------------ channels

    def holds(self, thread_id: str | None) -> bool:
        """True when ``thread_id`` is loaded in this process (bound now, or released)."""
        return bool(thread_id) and (thread_id in self.released or thread_id in self._by_thread)

    def open_channel(self, *, returning: str | None = None) -> Channel:
        """A new channel (a session's view); ``returning``: the thread it will resume, which a
        recycling server still accepts. Raises :class:`TransportClosed` if the connection has
        ended or takes no new sessions."""
        channel = Channel(self)
        with self._lock:
            if self.ended is not None or self._retiring:
                raise TransportClosed(self.ended or "the codex app-server is ending (no session)")
            if self.draining and (self.suspect or not self.holds(returning)):
                raise TransportClosed("the codex app-server takes no new sessions")
            self._channels.add(channel)
            for note in self._startup:
                channel.stream.offer(note)
        self._changed()
        return channel

    def _changed(self) -> None:
        if self._on_change is not None:
            try:
                self._on_change()
            except Exception:
                log.warning("publishing the codex app-server status failed", exc_info=True)

    def describe(self) -> dict[str, Any]:
        """What ``status`` shows of this connection."""
        with self._lock:
            return {"kind": "remote" if self.conn.endpoint else "local",
                    "pid": self.conn.pid, "endpoint": self.conn.endpoint,
                    "sessions": len(self._channels), "threads": len(self._by_thread),
                    "threads_left_loaded": len(self.released),
                    "draining": self.draining, "ended": self.ended is not None}

    @property
    def channel_count(self) -> int:
        """How many sessions hold a channel on this connection."""
        return len(self._channels)

    @property
    def load(self) -> int:
        """How many of those sessions have their thread loaded (or about to be)."""
        with self._lock:
            return sum(1 for channel in self._channels if not channel.thread_unloaded)

    def channels(self) -> list[Channel]:
        """The channels on this connection."""
        with self._lock:
            return list(self._channels)

    @property
    def thread_ids(self) -> list[str]:
        """The threads currently routed to a channel."""
        with self._lock:
            return list(self._by_thread)

    def bind(self, channel: Channel, thread_id: str) -> None:
        """Route ``thread_id`` to ``channel`` from now on, handing over what was held for it."""
        with self._lock:
            previous = channel.thread_id
            if previous and self._by_thread.get(previous) is channel and previous != thread_id:
                del self._by_thread[previous]
            owner = self._by_thread.get(thread_id)
            if owner is not None and owner is not channel:
                log.warning("codex thread %s moved to another session on the same app-server",
                            thread_id)
            self._by_thread[thread_id] = channel
            self.released.discard(thread_id)
            channel.thread_id = thread_id
            channel._unloaded = False
            held = self._unclaimed.pop(thread_id, None)
            if held is not None:
                for message in held[1]:
                    channel.stream.offer(message)
        self._changed()

    def unbind(self, channel: Channel, thread_id: str) -> None:
        """Stop routing ``thread_id`` to ``channel`` (a resume that came back with another id)."""
        with self._lock:
            if self._by_thread.get(thread_id) is channel:
                del self._by_thread[thread_id]
            if channel.thread_id == thread_id:
                channel.thread_id = None

    def _let_go(self, channel: Channel) -> str | None:
        """Stop routing ``channel``'s thread (lock held); the thread to unsubscribe, if any."""
        thread_id = channel.thread_id
        if thread_id and self._by_thread.get(thread_id) is channel:
            del self._by_thread[thread_id]
            self.released.add(thread_id)
            return thread_id
        return None

    def _unsubscribe(self, thread_id: str | None) -> None:
        if thread_id and self.ended is None and self.conn.is_alive():
            self.unloads.unsubscribe(self.conn, thread_id, self._unsubscribe_timeout)

    def unload(self, channel: Channel) -> None:
        """Unsubscribe ``channel``'s thread while its session stays (see :meth:`Channel.unload`).
        """
        with self._lock:
            thread_id = self._let_go(channel) if channel in self._channels else None
        self._unsubscribe(thread_id)
        self._changed()

    def release(self, channel: Channel) -> None:
        """``channel`` is closed: unsubscribe its thread and forget it; tell the owner when the
        connection carries no session any more."""
        with self._lock:
            if channel not in self._channels:
                return
            self._channels.discard(channel)
            thread_id = self._let_go(channel)
            idle = not self._channels
        channel.stream.end("the codex session was closed")
        self._unsubscribe(thread_id)
        if idle and self.draining:
            self.close()
        if idle and self._on_idle is not None:
            self._on_idle(self)
        self._changed()

    def drain_out(self, *, suspect: bool = True) -> None:
        """Take no new sessions (``suspect``: not even returning ones); end the connection when
        the last one leaves."""
        self.draining = True
        self.suspect = self.suspect or suspect

    def retire_if_empty(self) -> bool:
        """True when no session holds a channel — and then none opens any more (one decision: a
        newcomer placed here meanwhile gets TransportClosed, never a process closed under it)."""
        with self._lock:
            if self._channels:
                return False
            self._retiring = True
            return True

    def close(self) -> None:
        """Close the connection (every channel's stream ends)."""
        self.conn.close()

    # ------------------------------------------------------------------ routing

    def _route(self, message: Inbound) -> None:
        """Reader thread: deliver ``message`` to the channel(s) it belongs to."""
        if message.is_local:
            return
        thread_id = scope_of(message.params).thread_id
        if thread_id is not None and message.method == "thread/closed":
            self.unloads.closed(thread_id)
        with self._lock:
            if thread_id is None:
                if not self._seen_thread:
                    self._startup.append(message)
                targets = list(self._channels)
                owner = None
            else:
                self._seen_thread = True
                owner = self._by_thread.get(thread_id)
                targets = []
                if message.method == "thread/closed":
                    self.released.discard(thread_id)
                if owner is None and not message.is_request:
                    # held for a thread not bound yet; what a thread let go of says is dropped
                    if thread_id not in self.released and message.method != "thread/closed":
                        self._hold(thread_id, message)
                    return
            if owner is not None:
                owner.stream.offer(message)
                return
        if message.is_request:
            if targets:
                targets[0].stream.offer(message)  # a thread-less request: any session answers
            else:
                self._answer_unowned(message)
            return
        for channel in targets:
            channel.stream.offer(message)

    def _hold(self, thread_id: str, message: Inbound) -> None:
        """Keep a message for a thread not bound yet (lock held)."""
        now = time.monotonic()
        entry = self._unclaimed.get(thread_id)
        if entry is None:
            if len(self._unclaimed) >= UNCLAIMED_THREADS:
                for stale in [t for t, (at, _) in self._unclaimed.items()
                              if now - at > UNCLAIMED_TTL] or [next(iter(self._unclaimed))]:
                    del self._unclaimed[stale]
            entry = (now, collections.deque(maxlen=UNCLAIMED_PER_THREAD))
            self._unclaimed[thread_id] = entry
        entry[1].append(message)

    def _answer_unowned(self, message: Inbound) -> None:
        """A server request for a thread no session holds: nobody can decide it, and codex must
        not wait — it gets the default answer (a decision declined), or ``-32601``."""
        method, request_id = message.method, message.id
        assert request_id is not None
        answer = default_answer(method, dict(message.params))
        try:
            if answer is None:
                self.conn.respond_error(request_id, METHOD_NOT_FOUND,
                                        f"method not found: {method}")
                return
            log.info("codex asked %s for a thread no session holds; declining", method)
            self.conn.respond(request_id, answer)
        except TransportClosed:
            pass

    def _end(self, reason: str) -> None:
        """The connection ended: every channel's stream ends with the reason."""
        with self._lock:
            self.ended = reason
            channels = list(self._channels)
            self._unclaimed.clear()
        self.unloads.end()
        for channel in channels:
            channel.stream.end(reason)
        self._changed()


class Channel:
    """One session's view of a shared connection: requests go out on the connection, and only
    this session's thread's messages (plus connection-level notes) come in."""

    def __init__(self, server: SharedServer) -> None:
        self._server = server
        self.stream = InboundStream()
        self.thread_id: str | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._held = False  # a turn runs on it: never parked
        self._binding = 0  # thread/start or /resume in flight: never parked or unloaded
        self._unloaded = False  # its thread was unloaded between turns (resumed on the next)
        #: Closed by the pool while its session was idle (the session reconnects and resumes).
        self.parked = False
        self.idle_since = time.monotonic()

    # --- the pool's idle reaper

    def hold(self) -> bool:
        """A turn starts: this channel may not be parked until :meth:`unhold`. False when it was
        parked (or closed) already — the session reconnects first."""
        with self._lock:
            if self._closed:
                return False
            self._held = True
            return True

    def unhold(self) -> None:
        """The turn ended: the channel is idle from now."""
        with self._lock:
            self._held = False
            self.idle_since = time.monotonic()

    @property
    def idle(self) -> bool:
        """True between turns (and not starting or resuming its thread)."""
        return not self._held and not self._binding and not self._closed

    def park(self) -> bool:
        """Close this channel if its session is between turns (the reaper's move); the session's
        next turn reconnects and resumes its thread. True when parked."""
        with self._lock:
            if self._held or self._binding or self._closed:
                return False
            self._closed = True
            self.parked = True
        self._server.release(self)
        return True

    @property
    def thread_unloaded(self) -> bool:
        """True when this channel's thread was unloaded between turns: the session resumes it
        (on this channel) before its next turn."""
        return self._unloaded

    def unload(self) -> bool:
        """Unload this channel's thread if its session is between turns (the pool's move for
        an idle session, or to make room); the channel stays. True when unloaded."""
        with self._lock:
            if self._held or self._binding or self._closed or self._unloaded \
                    or self.thread_id is None:
                return False
            self._unloaded = True
        self._server.unload(self)
        return True
    # --- what the session uses of a connection

    @property
    def server(self) -> Any:
        """What ``initialize`` answered on the shared connection."""
        return self._server.conn.server

    @property
    def binary(self) -> Any:
        """The codex binary of the shared process (``None`` for an endpoint)."""
        return self._server.conn.binary

    @property
    def endpoint(self) -> str | None:
        """The endpoint URL, or ``None`` for a local process."""
        return self._server.conn.endpoint

    @property
    def shared(self) -> SharedServer:
        """The connection this channel rides on."""
        return self._server

    @property
    def pid(self) -> int | None:
        """The shared app-server's process id (``None`` for an endpoint)."""
        return self._server.conn.pid

    def request(self, method: str, params: Mapping[str, Any] | None = None, *,
                timeout: float = 30.0) -> JsonObject:
        """A request on the shared connection. Starting or resuming a thread binds it to this
        channel (a resumed id before the request, so nothing of it is missed)."""
        if self._closed:
            raise TransportClosed("the codex session is closed")
        if method not in _THREAD_BINDING:
            return self._server.conn.request(method, params, timeout=timeout)
        with self._lock:
            self._binding += 1
        try:
            return self._bind_by(method, params, timeout)
        finally:
            with self._lock:
                self._binding -= 1
                self.idle_since = time.monotonic()

    def _bind_by(self, method: str, params: Mapping[str, Any] | None,
                 timeout: float) -> JsonObject:
        asked = (params or {}).get("threadId") if method == "thread/resume" else None
        if isinstance(asked, str) and asked:
            self._server.unloads.wait(asked)  # a resume must not race codex's unload of it
            self._server.bind(self, asked)
        try:
            result = self._server.conn.request(method, params, timeout=timeout)
        except BaseException:
            if isinstance(asked, str) and asked:
                self._server.unbind(self, asked)
            raise
        thread = result.get("thread")
        answered = thread.get("id") if isinstance(thread, dict) else None
        if isinstance(asked, str) and asked and answered != asked:
            self._server.unbind(self, asked)
        if isinstance(answered, str) and answered:
            self._server.bind(self, answered)
        return result

    def notify(self, method: str, params: JsonObject | None = None) -> None:
        """A notification on the shared connection."""
        self._server.conn.notify(method, params)

    def respond(self, request_id: RequestId, result: Mapping[str, Any]) -> None:
        """Answer a server request routed to this channel."""
        self._server.conn.respond(request_id, result)

    def respond_error(self, request_id: RequestId, code: int, message: str,
                      data: Any = None) -> None:
        """Answer a server request routed to this channel with an error."""
        self._server.conn.respond_error(request_id, code, message, data)

    def next_inbound(self, timeout: float | None = None) -> Inbound | None:
        """The next message for this channel's thread (see :meth:`InboundStream.next`)."""
        return self.stream.next(timeout)

    def drain(self, limit: int = 256) -> list[Inbound]:
        """What is already queued for this channel."""
        return self.stream.drain(limit)

    def set_idle_handler(self, handler: Callable[[Inbound], None] | None) -> None:
        """Between turns, this channel's messages go to ``handler`` on the reader thread."""
        self.stream.set_idle_handler(handler)

    def wake(self, reason: str = "wake") -> None:
        """Wake this channel's consumer."""
        self.stream.wake(reason)

    def stderr_tail(self, lines: int = 40) -> list[str]:
        """The shared process's stderr tail (redacted)."""
        return self._server.conn.stderr_tail(lines)

    def diagnostics(self) -> list[str]:
        """The shared connection's non-protocol output (redacted)."""
        return self._server.conn.diagnostics()

    def is_alive(self) -> bool:
        """True while the shared connection is up and this channel is open."""
        return not self._closed and self._server.conn.is_alive()

    @property
    def transport_error(self) -> str | None:
        """Why the shared connection ended, once it has."""
        return self._server.conn.transport_error

    @property
    def returncode(self) -> int | None:
        """The shared process's exit code once it exited."""
        return self._server.conn.returncode

    def close(self, *, suspect: bool = False) -> None:
        """End this session's use: its thread is unsubscribed; the process lives on for the
        other sessions (the pool ends it when none is left). ``suspect``: the session found the
        process wedged or dying — it takes no new sessions and ends with its last one."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if suspect:
            self._server.drain_out()
        with contextlib.suppress(Exception):
            self._server.release(self)
