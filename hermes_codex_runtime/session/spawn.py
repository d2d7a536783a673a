"""How a session (or a side task) with given settings starts an app-server, or which shared one
it joins: :func:`spawn_options` (two sessions with equal options share a local process); and
:func:`prepare`, what a first session would wait for, done ahead of it."""

from __future__ import annotations

import os

from hermes_codex_runtime.pool import ServerPool
from hermes_codex_runtime.protocol import UNUSED_NOTIFICATIONS
from hermes_codex_runtime.values import SessionSettings
from hermes_codex_runtime.walls import thread_walls
from hermes_codex_runtime.wire import CodexHomeError, SpawnOptions, provider_credential_names
from hermes_codex_runtime.wire.codex_config import runtime_args


def spawn_options(settings: SessionSettings) -> SpawnOptions:
    """How to start (or which shared process to join for) a session with ``settings``: two
    sessions with equal options share a local app-server. Raises :class:`CodexHomeError` for a
    codex home that does not exist."""
    s = settings
    if s.codex_home and not os.path.isdir(s.codex_home):
        # codex app-server panics at start-up on a missing CODEX_HOME (0.163). A home the
        # user named is never created behind their back: a typo would log them out.
        raise CodexHomeError(
            f"The codex home {s.codex_home} does not exist (codex cannot start without it).",
            "Create it (logging in to codex with that home does), or point the codex home "
            "setting at your existing codex home.")
    return SpawnOptions(
        codex_bin=s.codex_bin, codex_home=s.codex_home, env=s.env, extra_env=s.extra_env,
        extra_args=(*runtime_args(s.codex_home), *s.extra_args), cwd=s.cwd,
        initialize_timeout=s.startup_timeout,
        client_version=s.client_version, client_title=s.client_title,
        registry_path=s.registry_path,
        provider_keys=provider_credential_names(s.codex_home, s.model_provider),
        # a name commands may inherit must first reach the process they inherit from
        env_passthrough=(*s.env_passthrough, *s.command_env_passthrough),
        # always: a host's tools need it, and sessions with and without tools (side tasks)
        # then share one process
        experimental_api=True, opt_out_notifications=UNUSED_NOTIFICATIONS)


def prepare(pool: ServerPool, settings: SessionSettings) -> None:
    """What the first session with ``settings`` would otherwise wait for, done now: its shared
    app-server started (:meth:`.ServerPool.prewarm`) and, for a thread on this machine, the
    walls' verdict settled (a fresh install probes its binary once). Raises what starting
    raises; the session meets the same failure and reports it."""
    pool.prewarm(spawn_options(settings), settings.app_server)
    if settings.app_server is None or settings.app_server.mode != "endpoints":
        thread_walls(settings)
