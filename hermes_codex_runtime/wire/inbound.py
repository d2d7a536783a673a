"""The ordered stream of what the server sends on its own (notifications and server requests).

Owns :class:`InboundStream`: one consumer blocks on :meth:`InboundStream.next` (no polling
interval) and receives messages in wire order; between turns an *idle handler* receives them
instead, on the producer's thread, so a request that arrives then is answered at once.

A connection has one stream; a connection shared by many threads (see
:mod:`hermes_codex_runtime.pool`) gives every session its own stream and routes into it.

Backpressure: while the consumer lags :data:`MAX_QUEUED` messages behind, a streaming delta is
not queued as a message of its own: its text is appended to the still-queued delta of the same
item (counted in ``coalesced_deltas``). Nothing is lost — the consumer receives the same text in
fewer, larger pieces, in the same order — and memory stays bounded by the item's own size.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hermes_codex_runtime.wire.errors import TransportClosed

log = logging.getLogger(__name__)

JsonObject = dict[str, Any]
RequestId = int | str

MAX_QUEUED = 2_000
DROPPABLE = frozenset({"item/agentMessage/delta", "item/reasoning/summaryTextDelta",
                       "item/reasoning/textDelta", "item/commandExecution/outputDelta",
                       "item/fileChange/outputDelta"})
LOCAL_PREFIX = "$local/"


@dataclass(frozen=True, slots=True)
class Inbound:
    """A message the server sent on its own: a notification (``id is None``) or a server request
    that must be answered (``respond`` / ``respond_error`` on the connection)."""

    method: str
    params: JsonObject
    id: RequestId | None = None

    @property
    def is_request(self) -> bool:
        """True for a server request (it carries an id, and 0 is a valid id)."""
        return self.id is not None

    @property
    def is_local(self) -> bool:
        """True for a wake-up marker posted by :meth:`InboundStream.wake`."""
        return self.method.startswith(LOCAL_PREFIX)


#: Item types that run nothing on this machine (text, reasoning, plans, server-side tools):
#: codex starts no process for them. Any other item — a command, a file change, a tool or hook
#: call, and any type codex adds later — may have started one.
RUNS_NOTHING = frozenset({"userMessage", "agentMessage", "reasoning", "plan", "contextCompaction",
                          "webSearch", "imageGeneration", "enteredReviewMode",
                          "exitedReviewMode", "sleep", "functionCallOutput"})


def may_start_process(message: Inbound) -> bool:
    """Whether codex may have left a process running by the time it sent ``message``: a
    thread's start (its MCP servers), or the end of an item not in :data:`RUNS_NOTHING` (what
    a command, a tool or a hook left behind — the sandbox's helpers start after the item's
    ``item/started``, so that one shows nothing new)."""
    if message.method == "thread/started":
        return True
    if message.method != "item/completed":
        return False
    item = message.params.get("item")
    return not isinstance(item, dict) or item.get("type") not in RUNS_NOTHING


class _Coalesced:
    """A queued streaming delta that later deltas of the same item join while it waits."""

    __slots__ = ("key", "method", "params", "pieces", "taken")

    def __init__(self, key: tuple[Any, ...], method: str, params: JsonObject) -> None:
        self.key = key
        self.method = method
        self.params = params
        self.pieces: list[str] = [str(params.get("delta", ""))]
        self.taken = False


_END = object()  # the stream's end marker


class InboundStream:
    """One consumer's ordered view of the server's notifications and requests."""

    def __init__(self, name: str = "codex app-server") -> None:
        self._name = name
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._ended = False  # the consumer has seen the end
        self._end_reason: str | None = None
        self._lock = threading.RLock()  # routing vs. handler changes; drain() unwraps under it
        self._idle_handler: Callable[[Inbound], None] | None = None
        self._tail: _Coalesced | None = None  # the last thing queued, when it is a delta slot
        self.coalesced_deltas = 0

    # ------------------------------------------------------------------ producer side

    def offer(self, item: Inbound) -> None:
        """Deliver ``item``: to the idle handler when one is set, else to the queue (coalescing a
        lagging delta into the queued slot of the same item)."""
        if item.id is None and item.method in DROPPABLE and isinstance(
                item.params.get("delta"), str) and self._queue.qsize() > MAX_QUEUED \
                and self._coalesce(item.method, item.params):
            return
        with self._lock:
            handler = self._idle_handler
            if handler is None:
                self._queue.put(item)
                self._tail = None
                return
            _call(handler, item)

    def end(self, reason: str) -> None:
        """No more messages: once everything queued is consumed, :meth:`next` raises."""
        with self._lock:
            if self._end_reason is not None:
                return
            self._end_reason = reason
        self._queue.put(_END)

    @property
    def ended(self) -> bool:
        """True once :meth:`end` was called."""
        return self._end_reason is not None

    def wake(self, reason: str = "wake") -> None:
        """Wake a consumer blocked in :meth:`next` from another thread (an interrupt, a decided
        approval). It receives a local marker: ``Inbound("$local/<reason>", {})`` — codex method
        names never start with ``$``."""
        self._queue.put(Inbound(f"{LOCAL_PREFIX}{reason}", {}))

    def _coalesce(self, method: str, params: JsonObject) -> bool:
        """Join ``params["delta"]`` to the delta slot of the same item when that slot is the last
        thing queued and not yet taken — so the order of everything is kept — else queue a new
        slot later deltas can join. False between turns (nothing is queued then)."""
        key = (method, params.get("threadId"), params.get("turnId"), params.get("itemId"))
        with self._lock:
            if self._idle_handler is not None:
                return False
            slot = self._tail
            if slot is not None and slot.key == key and not slot.taken:
                slot.pieces.append(params["delta"])
                self.coalesced_deltas += 1
                return True
            slot = _Coalesced(key, method, params)
            self._queue.put(slot)
            self._tail = slot
            return True

    # ------------------------------------------------------------------ consumer side

    def next(self, timeout: float | None = None) -> Inbound | None:
        """The next message, in wire order; ``None`` when ``timeout`` elapsed. Raises
        :class:`TransportClosed` once the stream ended and everything before the end was
        consumed."""
        if self._ended:
            raise TransportClosed(self._end_reason or f"the {self._name} stream ended")
        try:
            item = self._queue.get(timeout=timeout) if timeout is None or timeout > 0 \
                else self._queue.get_nowait()
        except queue.Empty:
            return None
        if item is _END:
            self._ended = True
            raise TransportClosed(self._end_reason or f"the {self._name} stream ended")
        return self._unwrap(item)

    def drain(self, limit: int = 256) -> list[Inbound]:
        """Up to ``limit`` messages already queued, without waiting. Stops at the end of the
        stream; the next :meth:`next` then raises."""
        items: list[Inbound] = []
        if self._ended:
            return items
        get = self._queue.get_nowait
        for _ in range(limit):
            try:
                item = get()
            except queue.Empty:
                break
            if item is _END:
                self._queue.put(_END)
                break
            items.append(self._unwrap(item))
        return items

    def set_idle_handler(self, handler: Callable[[Inbound], None] | None) -> None:
        """While no consumer drives the stream (between turns), ``handler`` receives every
        message on the producer's thread. Setting it first hands it what is already queued, in
        order; ``None`` sends messages to the queue again. The handler must be quick."""
        with self._lock:
            self._idle_handler = handler
            if handler is None:
                return
            for item in self.drain(limit=1_000_000):
                _call(handler, item)

    def _unwrap(self, item: object) -> Inbound:
        if isinstance(item, _Coalesced):
            with self._lock:
                item.taken = True
                text = "".join(item.pieces)
            return Inbound(item.method, {**item.params, "delta": text})
        assert isinstance(item, Inbound)
        return item


def _call(handler: Callable[[Inbound], None], item: Inbound) -> None:
    try:
        handler(item)
    except Exception:
        log.exception("the idle message handler raised; continuing")
