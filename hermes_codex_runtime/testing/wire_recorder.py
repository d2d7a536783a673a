"""A connection that records what the client sends, to check the wire against the schema.

:class:`RecordingConnection` is an :class:`AppServerConnection` that keeps every outgoing message
and the method of every server request it received, so a test on the REAL binary can assert that
each request and each reply to a server request was schema-valid and carried no field codex would
silently ignore (:meth:`RecordingConnection.wire_problems`). It also counts the notifications it
received, by method (``notifications``).
"""

from __future__ import annotations

import collections
import threading
from typing import Any

from hermes_codex_runtime.testing.schema import ProtocolSchema
from hermes_codex_runtime.wire import AppServerConnection, Inbound, SpawnOptions
from hermes_codex_runtime.wire.connection import JsonObject


class RecordingConnection(AppServerConnection):
    """Records outgoing messages (``sent``) and inbound server-request methods by id."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.sent: list[JsonObject] = []
        self.server_requests: dict[Any, str] = {}
        self.notifications: collections.Counter[str] = collections.Counter()
        self._record_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    @classmethod
    def spawn(cls, options: SpawnOptions | None = None) -> RecordingConnection:
        conn = super().spawn(options)
        assert isinstance(conn, RecordingConnection)
        return conn

    def _send(self, message: JsonObject) -> None:
        with self._record_lock:
            self.sent.append(message)
        super()._send(message)

    def _deliver(self, inbound: Inbound) -> None:
        with self._record_lock:
            if inbound.is_request:
                self.server_requests[inbound.id] = inbound.method
            else:
                self.notifications[inbound.method] += 1
        super()._deliver(inbound)

    @property
    def experimental(self) -> bool:
        """True when this connection opted in to codex's experimental API at ``initialize``."""
        with self._record_lock:
            for message in self.sent:
                if message.get("method") == "initialize":
                    capabilities = (message.get("params") or {}).get("capabilities") or {}
                    return bool(capabilities.get("experimentalApi"))
        return False

    def wire_problems(self, schema: ProtocolSchema) -> list[str]:
        """Everything sent that codex would reject or silently ignore."""
        problems: list[str] = []
        with self._record_lock:
            sent = list(self.sent)
            methods = dict(self.server_requests)
        for message in sent:
            method = message.get("method")
            if isinstance(method, str) and "id" in message:
                verdict = schema.check_client_request(method, message.get("params"))
                where = f"request {method}"
            elif isinstance(method, str):
                verdict = schema.check_client_notification(method, message.get("params"))
                where = f"notification {method}"
            elif "result" in message:
                request_method = methods.get(message.get("id"))
                if request_method is None:
                    problems.append(f"reply to unknown server request {message.get('id')}")
                    continue
                verdict = schema.check_reply_to_server_request(request_method, message["result"])
                where = f"reply to {request_method}"
            else:
                continue  # error replies (-32601) have no schema
            problems.extend(f"{where}: {e}" for e in verdict.errors)
            problems.extend(f"{where}: codex would ignore {f}" for f in verdict.ignored)
        return problems
