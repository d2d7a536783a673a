"""Where a session's codex thread runs: which app-server, started or connected when.

Owns :class:`ServerPool` — the process-wide set of app-server connections of one runtime:

* **shared** (the default): sessions with the same launch settings (codex binary, codex home,
  environment, arguments — not the working directory, which is per thread) share one local
  process, up to :attr:`PoolLimits.threads_per_process` loaded threads. A session idle
  :attr:`PoolLimits.idle_thread` seconds has its thread unloaded (it keeps its seat and resumes
  the thread on its next turn), and a full process unloads the thread idle the longest to seat a
  newcomer; only when every thread is busy does another process start, up to
  :attr:`PoolLimits.max_processes`. A process ends :attr:`PoolLimits.idle_grace` seconds after
  its last session closed, or at :meth:`ServerPool.close`.
* **per-session**: one process per session, ended with it (the classic layout).
* **endpoints**: app-servers someone else runs (``ws://``/``wss://``/``unix://``, with codex's
  own token auth). A session is placed on the endpoint with the fewest sessions of this pool and
  stays there; resuming a thread goes to the endpoint that holds it.

All three hand the session a :class:`~.shared.Channel`, so the session never knows which.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import itertools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from hermes_codex_runtime.pool.launch import launch
from hermes_codex_runtime.pool.placement import (
    PER_SESSION,
    SHARED,
    EndpointSpec,
    Placement,
    PoolLimits,
    launch_key,
    unload_after,
)
from hermes_codex_runtime.pool.shared import Channel, SharedServer
from hermes_codex_runtime.wire import AppServerConnection, SpawnOptions
from hermes_codex_runtime.wire.codex_config import unloads_at_once
from hermes_codex_runtime.wire.files import atomic_write_json
from hermes_codex_runtime.wire.websocket import EndpointError

log = logging.getLogger(__name__)

#: How long an app-server started ahead of its first session waits for it (seconds).
PREWARM_HOLD = 120.0
#: Why an endpoint could not be used that means "it is gone", not "it refused us".
UNREACHABLE = frozenset({"refused", "timeout", "closed"})

Spawner = Callable[[SpawnOptions], AppServerConnection]
Connector = Callable[[EndpointSpec, SpawnOptions], AppServerConnection]

_POOLS: weakref.WeakSet[ServerPool] = weakref.WeakSet()


@atexit.register
def _close_pools() -> None:  # pragma: no cover - interpreter exit
    for pool in list(_POOLS):
        with contextlib.suppress(Exception):
            pool.close()


class ServerPool:
    """The app-server connections of one runtime, and the placement of sessions on them."""

    def __init__(self, *, spawn: Spawner | None = None, connect: Connector | None = None,
                 status_dir: str | os.PathLike[str] | None = None) -> None:
        self._spawn = spawn or AppServerConnection.spawn
        self._connect = connect
        #: Where this pool publishes its app-servers for ``status`` (one file per host process).
        self._status_file = Path(status_dir) / f"{os.getpid()}.json" if status_dir else None
        self._publish_lock = threading.Lock()
        self._lock = threading.Lock()
        self._servers: dict[tuple[Any, ...], list[SharedServer]] = {}
        #: the idle servers waiting out their grace, by ``id``: the timer that ends each
        self._timers: dict[int, tuple[threading.Timer, SharedServer]] = {}
        self._key_locks: dict[tuple[Any, ...], threading.Lock] = {}
        self._serial = itertools.count(1)
        self._reaper: threading.Thread | None = None
        self._idle_limit: float | None = None  # how often the reaper looks (a tenth of it)
        self._park_limit: float | None = None
        self._stop = threading.Event()
        self._closed = False
        _POOLS.add(self)

    # ------------------------------------------------------------------ placement

    def channel(self, options: SpawnOptions, placement: Placement | None = None, *,
                endpoint: str | None = None, thread_id: str | None = None) -> Channel:
        """A channel for one session: on a shared process, a process of its own, or an endpoint
        (``endpoint``: the one that holds the session's thread, when resuming). A session that
        will resume ``thread_id`` goes back to the process that still has it loaded. Raises what
        starting or connecting raises (:class:`~hermes_codex_runtime.wire.WireError`)."""
        placement = placement or Placement()
        spawner = self._spawn
        if placement.mode == "endpoints":
            return self._endpoint_channel(options, placement, endpoint)
        self._ensure_reaper(placement.limits)
        if placement.mode == PER_SESSION:
            ahead = self._take_ahead(options)
            if ahead is not None:
                with contextlib.suppress(Exception):
                    return ahead.open_channel()
            with self._lock:
                full = self._process_count() >= placement.limits.max_processes
            if full:
                self._park_least_recent()  # the cap: an idle session makes room
            server = self._start(("per-session", next(self._serial)),
                                 lambda: launch(spawner, options), grace=0.0)
            return server.open_channel()
        key = ("shared", *launch_key(options))
        limits = placement.limits
        with self._placing(key):
            with self._lock:
                self._servers[key] = [s for s in self._servers.get(key, []) if s.ended is None]
                for server in self._servers[key]:
                    if not server.draining and len(server.released) >= limits.recycle_after:
                        log.info("recycling a codex app-server that holds %d threads",
                                 len(server.released))
                        server.drain_out(suspect=False)
                home = next((s for s in self._servers[key]
                             if not s.suspect and s.holds(thread_id)), None)
                live = [s for s in self._servers[key] if not s.draining]
                roomy = [s for s in live if s.load < limits.threads_per_process]
                chosen = home or (min(roomy, key=lambda s: s.load) if roomy else None)
            if chosen is None and live:
                chosen = self._make_room(live)  # an idle session's thread unloaded for this one
            with self._lock:
                if chosen is None and live and self._process_count() >= limits.max_processes:
                    chosen = min(live, key=lambda s: s.load)
                    log.warning("codex app-server cap reached (%d processes): placing a "
                                "session on a full one", limits.max_processes)
                if chosen is not None:
                    self._cancel_timer(chosen)
            if chosen is not None:
                with contextlib.suppress(Exception):
                    return chosen.open_channel(returning=thread_id)
            return self._start_shared(key, options, limits).open_channel()

    def prewarm(self, options: SpawnOptions, placement: Placement | None = None, *,
                hold: float = PREWARM_HOLD) -> bool:
        """Start the app-server a first session with ``options`` will be placed on, so that
        session finds it up; True when one was started. Only for a pool without a live local
        process (later sessions find theirs up) and a local placement (an endpoint is someone
        else's): shared, the process that session joins; per-session, the process that becomes
        that session's own (the next session gets one of its own as usual). One that no session
        takes within ``hold`` seconds ends. Raises what starting raises."""
        placement = placement or Placement()
        if placement.mode not in (SHARED, PER_SESSION):
            return False
        key = (placement.mode if placement.mode == SHARED else "ahead", *launch_key(options))
        with self._placing(key):
            with self._lock:
                if self._closed or self._process_count():
                    return False
            if placement.mode == SHARED:
                server = self._start_shared(key, options, placement.limits)
            else:
                ready = dataclasses.replace(options, cwd=None)  # the thread carries its own cwd
                server = self._start(key, lambda: launch(self._spawn, ready), grace=0.0)
            self._idle(server, hold)
        return True

    def _take_ahead(self, options: SpawnOptions) -> SharedServer | None:
        """The per-session process :meth:`prewarm` started for sessions with ``options``, now
        this session's own (it leaves the waiting list, so no other session takes it)."""
        key = ("ahead", *launch_key(options))
        with self._lock:
            waiting = [s for s in self._servers.get(key, []) if s.ended is None
                       and not s.draining and s.channel_count == 0]
            if not waiting:
                return None
            server = waiting[0]
            self._servers[key].remove(server)
            server.key = ("per-session", next(self._serial))
            self._servers[server.key] = [server]
            self._cancel_timer(server)
            return server

    def _start_shared(self, key: tuple[Any, ...], options: SpawnOptions,
                      limits: PoolLimits) -> SharedServer:
        shared = dataclasses.replace(options, cwd=None)  # threads carry their own cwd
        unloads = unloads_at_once(options.extra_args)
        # a process whose closed sessions' threads stay loaded (the user's own
        # thread_unload_delay_secs) would keep another process from resuming them: no grace
        return self._start(key, lambda: launch(self._spawn, shared),
                           grace=limits.idle_grace if unloads else 0.0, unloads=unloads,
                           unload_after=unload_after(limits))

    @staticmethod
    def _make_room(servers: Sequence[SharedServer]) -> SharedServer | None:
        """Every process is full: unload the thread of the session idle the longest (it resumes
        on its next turn) and place the newcomer on its process — not a process more."""
        idle = [c for s in servers if s.unloads.at_once for c in s.channels()
                if c.idle and not c.thread_unloaded and c.thread_id is not None]
        for channel in sorted(idle, key=lambda c: c.idle_since):
            if channel.unload():
                log.info("unloaded the codex thread %s of a session idle for %.0fs to make "
                         "room", channel.thread_id, time.monotonic() - channel.idle_since)
                return channel.shared
        return None

    def shares_process(self, channel: Channel | None, options: SpawnOptions,
                       placement: Placement | None) -> bool:
        """True when a session with ``options`` and ``placement`` would be placed on
        ``channel``'s process (a live shared app-server of this pool with the same launch
        key) — so a session replacing ``channel``'s can take its thread over there."""
        if channel is None or not channel.is_alive() or \
                (placement is not None and placement.mode != SHARED):
            return False
        server = channel.shared
        with self._lock:
            ours = server in self._servers.get(server.key, [])
        return ours and server.key == ("shared", *launch_key(options))

    @contextlib.contextmanager
    def _placing(self, key: tuple[Any, ...]) -> Iterator[None]:
        """Placement for one key runs one at a time: sessions arriving together while the first
        process starts join it instead of starting one each."""
        with self._lock:
            lock = self._key_locks.setdefault(key, threading.Lock())
        with lock:
            yield

    def _endpoint_channel(self, options: SpawnOptions, placement: Placement,
                          wanted: str | None) -> Channel:
        if self._connect is None:
            from hermes_codex_runtime.pool.remote import connect_endpoint

            connect: Connector = connect_endpoint
        else:
            connect = self._connect
        by_url = {spec.url: spec for spec in placement.endpoints}
        with self._lock:
            load = {url: sum(s.channel_count for s in self._servers.get(("endpoint", url), [])
                             if s.ended is None) for url in by_url}
        order = sorted(by_url, key=lambda url: (url != wanted, load[url], list(by_url).index(url)))
        failure: EndpointError | None = None
        for url in order:
            try:
                return self._on_endpoint(by_url[url], options, placement, connect)
            except EndpointError as exc:
                if exc.kind not in UNREACHABLE:
                    raise  # a refusal (auth, TLS, not codex) is a setting to fix, not a detour
                log.warning("codex app-server %s is unreachable: %s", url, exc)
                failure = failure or exc
        assert failure is not None
        raise failure

    def _on_endpoint(self, spec: EndpointSpec, options: SpawnOptions, placement: Placement,
                     connect: Connector) -> Channel:
        key = ("endpoint", spec.url)
        with self._placing(key):
            with self._lock:
                self._servers[key] = [s for s in self._servers.get(key, []) if s.ended is None]
                live = [s for s in self._servers[key] if not s.draining]
                server = live[0] if live else None
                if server is not None:
                    self._cancel_timer(server)
            if server is not None:
                with contextlib.suppress(Exception):
                    return server.open_channel()
            server = self._start(key, lambda: connect(spec, options),
                                 grace=placement.limits.idle_grace,
                                 unload_after=unload_after(placement.limits))
            return server.open_channel()

    def _start(self, key: tuple[Any, ...], start: Callable[[], AppServerConnection], *,
               grace: float, unloads: bool = False, unload_after: float = 0.0) -> SharedServer:
        conn = start()
        server = SharedServer(conn, key=key, on_idle=lambda s: self._idle(s, grace),
                              on_change=self._publish, unloads=unloads,
                              unload_after=unload_after)
        with self._lock:
            if self._closed:
                conn.close()
                raise RuntimeError("the codex app-server pool is closed")
            self._servers.setdefault(key, []).append(server)
        return server

    # ------------------------------------------------------------------ idle sessions

    def _ensure_reaper(self, limits: PoolLimits) -> None:
        """Start the idle reaper once (a daemon thread, woken every tenth of the shortest idle
        limit: parking a session, or unloading its thread)."""
        if limits.idle_session <= 0:
            return
        shortest = min(limits.idle_session, unload_after(limits) or limits.idle_session)
        with self._lock:
            self._idle_limit = min(self._idle_limit or shortest, shortest)
            self._park_limit = min(self._park_limit or limits.idle_session, limits.idle_session)
            if self._reaper is not None:
                return
            self._reaper = threading.Thread(target=self._reap_loop, args=(self._stop,),
                                            name="codex-pool-reaper", daemon=True)
        self._reaper.start()

    def _reap_loop(self, stop: threading.Event) -> None:
        while not stop.wait(max(0.05, min(30.0, (self._idle_limit or 60.0) / 10))):
            try:
                self.park_idle(self._park_limit or 0.0)
                self.unload_idle()
            except Exception:
                log.warning("parking idle codex sessions failed", exc_info=True)

    def unload_idle(self) -> int:
        """Unload the thread of every session idle longer than its process's ``unload_after``
        (the session keeps its seat; its next turn resumes the thread); returns how many."""
        now = time.monotonic()
        unloaded = 0
        for server in self.servers():
            if server.unload_after <= 0:
                continue
            for channel in server.channels():
                if channel.idle and now - channel.idle_since >= server.unload_after \
                        and channel.unload():
                    log.info("unloaded the codex thread %s of a session idle for %.0fs",
                             channel.thread_id, now - channel.idle_since)
                    unloaded += 1
        return unloaded

    def park_idle(self, older_than: float) -> int:
        """Park every session idle longer than ``older_than`` seconds; returns how many."""
        if older_than <= 0:
            return 0
        now = time.monotonic()
        parked = 0
        for server in self.servers():
            for channel in server.channels():
                if channel.idle and now - channel.idle_since >= older_than and channel.park():
                    log.info("parked a codex session idle for %.0fs (thread %s)",
                             now - channel.idle_since, channel.thread_id)
                    parked += 1
        return parked

    def _park_least_recent(self) -> bool:
        """Park the session idle the longest (the process cap is reached); False when every
        session is in a turn (then the cap is exceeded, with a warning — a turn never fails for
        it)."""
        idle = [c for s in self.servers() for c in s.channels() if c.idle]
        for channel in sorted(idle, key=lambda c: c.idle_since):
            if channel.park():
                return True
        log.warning("codex process cap reached and every session is in a turn: starting one "
                    "more")
        return False

    def _process_count(self) -> int:
        """Live local processes (call with the lock held)."""
        return sum(1 for servers in self._servers.values() for s in servers
                   if s.ended is None and s.conn.pid is not None)

    # ------------------------------------------------------------------ ending

    def _idle(self, server: SharedServer, grace: float) -> None:
        """``server`` carries no session: end it now (per-session, endpoints' grace 0) or after
        the grace unless a session arrives meanwhile."""
        if grace <= 0:
            self._retire(server)
            return
        timer = threading.Timer(grace, self._retire_if_idle, args=(server,))
        timer.daemon = True
        with self._lock:
            self._cancel_timer(server)
            self._timers[id(server)] = (timer, server)
        timer.start()

    def _cancel_timer(self, server: SharedServer) -> None:
        waiting = self._timers.pop(id(server), None)  # lock held by the caller
        if waiting is not None:
            waiting[0].cancel()

    def _retire_if_idle(self, server: SharedServer) -> None:
        with self._lock:
            self._timers.pop(id(server), None)
        self._retire(server)

    def end_idle(self) -> int:
        """End now every app-server that carries no session and is waiting out its grace (a
        host done with codex for a while); how many ended. The next session starts afresh."""
        with self._lock:
            waiting, self._timers = list(self._timers.values()), {}
        ended = 0
        for timer, server in waiting:
            timer.cancel()
            ended += self._retire(server)
        return ended

    def _retire(self, server: SharedServer) -> bool:
        """End ``server`` — unless a session arrived since it became idle. True if it ended."""
        if not server.retire_if_empty():
            return False
        with self._lock:
            servers = self._servers.get(server.key, [])
            if server in servers:
                servers.remove(server)
        server.close()
        return True

    def close(self) -> None:
        """End every connection of this pool (host shutdown)."""
        self._stop.set()
        with self._lock:
            self._closed = True
            self._reaper = None
            servers = [s for group in self._servers.values() for s in group]
            self._servers.clear()
            waiting, self._timers = list(self._timers.values()), {}
        for timer, _server in waiting:
            timer.cancel()
        for server in servers:
            server.close()

    # ------------------------------------------------------------------ status

    def servers(self) -> Sequence[SharedServer]:
        """Every live connection of this pool."""
        with self._lock:
            return [s for group in self._servers.values() for s in group if s.ended is None]

    def snapshot(self) -> list[dict[str, Any]]:
        """The live connections as data (kind, pid or endpoint, sessions, threads)."""
        return [server.describe() for server in self.servers()]

    def _publish(self) -> None:
        """Write :meth:`snapshot` to the status file (atomically), if there is one."""
        if self._status_file is None:
            return
        with self._publish_lock:
            servers = self.snapshot()
            if not servers:
                with contextlib.suppress(OSError):
                    self._status_file.unlink()
                return
            atomic_write_json(self._status_file, {"host_pid": os.getpid(),
                                                  "updated": time.time(), "servers": servers})
