"""The wire layer: one ``codex app-server`` process and the JSON-RPC conversation with it.

Knows nothing about threads, turns or hosts; see :mod:`hermes_codex_runtime.wire.connection`.
"""

from hermes_codex_runtime.wire.binary import (
    MIN_CODEX_VERSION,
    TESTED_CODEX_VERSIONS,
    CodexBinary,
    parse_version,
    probe_version,
    resolve_codex_binary,
    tested_note,
)
from hermes_codex_runtime.wire.codex_config import provider_credential_names
from hermes_codex_runtime.wire.connection import (
    AppServerConnection,
    Inbound,
    ServerInfo,
    SpawnOptions,
)
from hermes_codex_runtime.wire.env import (
    allowed_environment,
    command_env_policy,
    command_environment,
    spawn_environment,
)
from hermes_codex_runtime.wire.errors import (
    CodexBinaryError,
    CodexConfigError,
    CodexHomeError,
    RequestTimeout,
    ServerError,
    TransportClosed,
    WireError,
)
from hermes_codex_runtime.wire.redact import redact

__all__ = [
    "MIN_CODEX_VERSION",
    "TESTED_CODEX_VERSIONS",
    "AppServerConnection",
    "CodexBinary",
    "CodexBinaryError",
    "CodexConfigError",
    "CodexHomeError",
    "Inbound",
    "RequestTimeout",
    "ServerError",
    "ServerInfo",
    "SpawnOptions",
    "TransportClosed",
    "WireError",
    "allowed_environment",
    "command_env_policy",
    "command_environment",
    "parse_version",
    "probe_version",
    "provider_credential_names",
    "redact",
    "resolve_codex_binary",
    "spawn_environment",
    "tested_note",
]
