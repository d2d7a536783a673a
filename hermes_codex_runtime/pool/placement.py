"""How the host wants a session's thread run, as plain values: the placement mode, remote
endpoints, the pool's caps, and the key that decides which sessions share a local process.

No I/O here; :mod:`.pool` acts on these values and :mod:`.remote` connects to an endpoint.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from hermes_codex_runtime.wire import SpawnOptions

SHARED = "shared"
PER_SESSION = "per-session"
MODES = (SHARED, PER_SESSION)


def default_threads_per_process() -> int:
    """How many threads one local app-server carries before another starts: below the knee
    measured on this project's bench (``bench/knee.py``) — 16 concurrent turns per core."""
    return max(8, 16 * (os.cpu_count() or 1))


@dataclass(frozen=True, slots=True)
class PoolLimits:
    """Caps that apply to every mode."""

    threads_per_process: int = dataclasses.field(default_factory=default_threads_per_process)
    max_processes: int = 64
    #: A process whose sessions have left this many threads loaded takes no new sessions
    #: (returning threads excepted) and ends with its last one, bounding what it holds.
    recycle_after: int = 256
    #: A session idle this long is parked: its channel closes (a per-session process ends) and
    #: its next turn reconnects and resumes its thread. ``0`` never parks (nor unloads).
    idle_session: float = 900.0
    #: A session on a shared process (or an endpoint) idle this long has its thread unloaded
    #: from codex — its next turn resumes it on the same connection — so a process's memory
    #: follows the sessions that are busy, not every session it ever served. A process whose
    #: threads are all loaded also unloads the idle-longest one to seat a new session.
    idle_thread: float = 30.0
    #: A shared process (or an endpoint's connection) outlives its last session this long, so
    #: the next session starts no process. Only where codex unloads a closed session's thread
    #: at once (the runtime's ``thread_unload_delay_secs=0``): a process lingering with a
    #: user's own delay would keep another process (a host's ``--resume``) from resuming its
    #: threads, so it ends at once. 0 here; a host chooses its own.
    idle_grace: float = 0.0


def unload_after(limits: PoolLimits) -> float:
    """How long a session on a shared process may idle before its thread is unloaded (``0``:
    never — as when sessions are never parked)."""
    if limits.idle_session <= 0 or limits.idle_thread <= 0:
        return 0.0
    return min(limits.idle_thread, limits.idle_session)


@dataclass(frozen=True, slots=True)
class EndpointSpec:
    """A remote app-server: its URL and how to authenticate (codex's ``--ws-auth``)."""

    url: str
    token_file: str | None = None  # capability token, sent as a bearer token
    token_env: str | None = None  # or: the name of an environment variable holding it


@dataclass(frozen=True, slots=True)
class Placement:
    """How the host wants a session's thread run (the ``app_server`` setting)."""

    mode: str = SHARED  # "shared" | "per-session" | "endpoints"
    endpoints: tuple[EndpointSpec, ...] = ()
    limits: PoolLimits = dataclasses.field(default_factory=PoolLimits)

    def __post_init__(self) -> None:
        if self.mode not in (*MODES, "endpoints"):
            raise ValueError(f"app-server mode must be shared, per-session or endpoints, got "
                             f"{self.mode!r}")
        if self.mode == "endpoints" and not self.endpoints:
            raise ValueError("app-server endpoints mode needs at least one endpoint")


def launch_key(options: SpawnOptions) -> tuple[Any, ...]:
    """What must be equal for two sessions to share a local process (not the cwd: codex takes
    the working directory per thread)."""
    def frozen(mapping: Any) -> Any:
        return tuple(sorted(mapping.items())) if mapping else None

    return (options.codex_bin, options.codex_home, frozen(options.env),
            frozen(options.extra_env), tuple(options.extra_args), options.client_version,
            options.client_title, options.registry_path, tuple(options.provider_keys),
            tuple(options.env_passthrough), options.experimental_api)
