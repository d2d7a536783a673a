"""The wire layer: one ``codex app-server`` process and the JSON-RPC conversation with it.

Knows nothing about threads, turns or hosts; see :mod:`hermes_codex_runtime.wire.connection`.
"""

from hermes_codex_runtime.wire.binary import (
    MIN_CODEX_VERSION,
    CodexBinary,
    parse_version,
    probe_version,
    resolve_codex_binary,
)
from hermes_codex_runtime.wire.connection import (
    AppServerConnection,
    Inbound,
    ServerInfo,
    SpawnOptions,
)
from hermes_codex_runtime.wire.env import is_host_private, scrubbed_environment, spawn_environment
from hermes_codex_runtime.wire.errors import (
    CodexBinaryError,
    RequestTimeout,
    ServerError,
    TransportClosed,
    WireError,
)
from hermes_codex_runtime.wire.redact import redact

__all__ = [
    "MIN_CODEX_VERSION",
    "AppServerConnection",
    "CodexBinary",
    "CodexBinaryError",
    "Inbound",
    "RequestTimeout",
    "ServerError",
    "ServerInfo",
    "SpawnOptions",
    "TransportClosed",
    "WireError",
    "is_host_private",
    "parse_version",
    "probe_version",
    "redact",
    "resolve_codex_binary",
    "scrubbed_environment",
    "spawn_environment",
]
