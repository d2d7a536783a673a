"""Where codex threads run: app-server connections shared by many sessions, per-session
processes, and app-servers at remote endpoints — and routing by thread between them.

Sits between :mod:`hermes_codex_runtime.wire` (one connection) and
:mod:`hermes_codex_runtime.session` (one thread): the wire knows one connection, the session knows
one thread, the pool knows both.
"""

from hermes_codex_runtime.pool.placement import (
    MODES,
    PER_SESSION,
    SHARED,
    EndpointSpec,
    Placement,
    PoolLimits,
    default_threads_per_process,
    launch_key,
)
from hermes_codex_runtime.pool.pool import ServerPool
from hermes_codex_runtime.pool.shared import Channel, SharedServer

__all__ = [
    "MODES",
    "PER_SESSION",
    "SHARED",
    "Channel",
    "EndpointSpec",
    "Placement",
    "PoolLimits",
    "ServerPool",
    "SharedServer",
    "default_threads_per_process",
    "launch_key",
]
