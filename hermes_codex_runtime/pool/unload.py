"""Threads on their way out of a codex process: :class:`Unloads`.

``thread/unsubscribe`` is the only way to let go of a thread (there is no unload request). On
an app-server started with ``thread_unload_delay_secs=0`` (what the runtime passes, see
:func:`hermes_codex_runtime.wire.codex_config.runtime_args`) codex then unloads the thread at
once: ``thread/status/changed`` ``notLoaded`` and ``thread/closed`` follow the reply within
milliseconds, the thread's memory is reused, and its writer lock is free for another process.

A ``thread/resume`` sent before that ``thread/closed`` races the unload — codex answers "is
closing; retry", "thread listener command channel is closed", or even "no rollout found" (the
same words as for an unknown thread) — so a resume of a thread this connection is unloading
first waits for its ``thread/closed`` (:meth:`Unloads.wait`, bounded). Elsewhere (a remote
app-server, a user's own delay) codex keeps the thread loaded until its delay passes, and a
resume on the same connection re-subscribes it in place: nothing to wait for.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, cast

from hermes_codex_runtime.protocol.schema_types import (
    ThreadUnsubscribeParams,
    ThreadUnsubscribeResponse,
)
from hermes_codex_runtime.wire import WireError

log = logging.getLogger(__name__)

#: How long a resume waits for codex's ``thread/closed`` of a thread being unloaded (it comes
#: within milliseconds; the bound is for a codex that never sends it).
CLOSE_WAIT = 5.0


class Unloads:
    """The threads a connection unsubscribed that codex is still unloading."""

    def __init__(self, at_once: bool) -> None:
        #: codex unloads an unsubscribed thread at once on this connection.
        self.at_once = at_once
        self._lock = threading.Lock()
        self._closing: dict[str, threading.Event] = {}

    def unsubscribe(self, conn: Any, thread_id: str, timeout: float) -> None:
        """``thread/unsubscribe`` of ``thread_id``; on an unloading connection, its
        ``thread/closed`` is awaited by the next resume of it."""
        if self.at_once:
            with self._lock:
                self._closing.setdefault(thread_id, threading.Event())
        status: Any = None
        try:
            params: ThreadUnsubscribeParams = {"threadId": thread_id}
            reply = cast(ThreadUnsubscribeResponse,
                         conn.request("thread/unsubscribe", params, timeout=timeout))
            status = reply.get("status")
        except WireError as exc:
            log.info("thread/unsubscribe %s: %s", thread_id, exc)
        if status != "unsubscribed":  # already unloaded, or codex did not say: nothing to await
            self.closed(thread_id)

    def closed(self, thread_id: str) -> None:
        """codex unloaded ``thread_id`` (its ``thread/closed``)."""
        with self._lock:
            event = self._closing.pop(thread_id, None)
        if event is not None:
            event.set()

    def closing(self, thread_id: str) -> bool:
        """True while codex is unloading ``thread_id`` for this connection."""
        with self._lock:
            return thread_id in self._closing

    def wait(self, thread_id: str, timeout: float = CLOSE_WAIT) -> bool:
        """Wait until codex unloaded ``thread_id`` (at once when it is not being unloaded);
        False when the wait ran out."""
        with self._lock:
            event = self._closing.get(thread_id)
        if event is None or event.wait(timeout):
            return True
        log.warning("codex did not report thread %s closed within %.0fs; resuming anyway",
                    thread_id, timeout)
        self.closed(thread_id)
        return False

    def end(self) -> None:
        """The connection ended: nothing is being unloaded any more."""
        with self._lock:
            events, self._closing = list(self._closing.values()), {}
        for event in events:
            event.set()
