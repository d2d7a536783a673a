"""Walls that hold: what every thread with walls is started with, and the proof — on this binary
and this machine — that codex really enforces them.

codex has had releases where deny rules were not enforced on some exec paths, so the profile
(:mod:`.protocol.permissions`) is not trusted on sight. :func:`verify` runs ONE scripted turn on
the real binary, offline: a loopback model (:mod:`.offline.provider`) asks codex, through the
same ``thread/start`` profile a session sends, to ``cat`` a denied file and a file in a denied
directory, append to a file in a protected directory inside the writable workspace, write an
ordinary workspace file, and patch a new file into the protected directory. The walls hold when
neither secret reaches the model, the protected directory is unchanged and the ordinary write
worked. The verdict is kept per binary — by its content, in a file every home of the user shares
(:class:`~.wire.verdicts.VerdictCache`) — so a binary is probed once.

:func:`thread_walls` is what a session asks before it starts a thread: the host's paths and
codex's own, shaped for what codex can enforce in the thread's writable places
(:func:`.wire.walls.shape`), the user's own sandbox choices, and the verdict, turned into
``thread/start`` fields (:func:`.protocol.permissions.thread_permissions`). When the walls did not
hold — or could not be shown to — the thread gets the fallback (read-only, codex asks before any
command it does not know to be read-only) and a warning, once per binary in the log. A link a
command could point elsewhere is a warning too (once per session, once per link in the log).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import shutil
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

from hermes_codex_runtime.protocol import thread_start_params, to_user_input, turn_start_params
from hermes_codex_runtime.protocol.permissions import (
    FALLBACK,
    UP,
    Exposure,
    ThreadPermissions,
    Walls,
    profile_config,
    thread_permissions,
)
from hermes_codex_runtime.values import SessionSettings
from hermes_codex_runtime.wire import (
    AppServerConnection,
    SpawnOptions,
    WireError,
    redact,
    resolve_codex_binary,
)
from hermes_codex_runtime.wire.codex_config import codex_home_path, sandbox_defaults
from hermes_codex_runtime.wire.verdicts import Verdict, VerdictCache
from hermes_codex_runtime.wire.walls import (
    codex_own,
    search_path_dirs,
    shape,
    writable_roots,
)

log = logging.getLogger(__name__)

PROBE_TIMEOUT = 60.0
_memo: dict[str, Verdict] = {}
_locks: dict[str, threading.Lock] = {}
_guard = threading.Lock()
_warned: set[str] = set()


def verify(codex_bin: str | None, cache: str | os.PathLike[str] | None = None, *,
           timeout: float = PROBE_TIMEOUT) -> Verdict:
    """The verdict for ``codex_bin`` (resolved as a session resolves it): from this process's
    memory, else from ``cache``, else probed now (one probe per binary at a time). An unknown
    verdict is remembered for this process only: a probe that cannot run is not retried for
    every session, and the next process (or doctor) tries again."""
    try:
        binary = resolve_codex_binary(codex_bin).path
    except WireError as exc:
        return Verdict(None, f"no codex binary to probe ({redact(str(exc))})", codex_bin or "")
    kept = VerdictCache(cache)
    key = kept.key(binary)
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        known = _memo.get(key) or kept.get(binary, key)
        if known is None:
            known = probe(binary, timeout=timeout)
            kept.put(known)
        _memo[key] = known
        return known


def probe(binary: str, *, timeout: float = PROBE_TIMEOUT) -> Verdict:
    """Run the scripted turn (see the module docstring) on ``binary``; never raises."""
    from hermes_codex_runtime.offline import provider as mp
    from hermes_codex_runtime.offline.codex_home import prepare_codex_home

    root = Path(tempfile.mkdtemp(prefix="codex-walls-"))
    started = time.monotonic()
    provider = mp.MockResponsesProvider()
    try:
        workspace, guard = root / "workspace", root / "workspace" / "guarded"
        guard.mkdir(parents=True)
        marker = "walls-probe-" + os.urandom(8).hex()
        (guard / "secret").write_text(marker + "\n")
        (guard / "private").mkdir()
        (guard / "private" / "log").write_text(marker + "-in-a-directory\n")
        (guard / "kept").write_text("unchanged\n")
        provider.enqueue(
            mp.exec_command("cat guarded/secret; cat guarded/private/log; "
                            "echo changed >> guarded/kept; echo written > ordinary"),
            mp.apply_patch(mp.add_file_patch("guarded/added", ["patched"])),
            mp.text("done"))
        provider.start()
        home = prepare_codex_home(root / "codex-home", provider.base_url, codex_bin=binary,
                                  catalog_timeout=min(timeout, 60.0))
        walls = Walls(deny_read=(str(guard / "secret"), str(guard / "private")),
                      protect=(str(guard),))
        if not _run_turn(binary, home, workspace, walls, timeout):
            return Verdict(None, f"the probe's turn did not finish within {timeout:g}s", binary)
        outputs = [_output_text(item) for body in list(provider.requests)
                   for item in body.get("input", ()) if isinstance(item, dict)
                   and item.get("type") in ("function_call_output", "custom_tool_call_output")]
        return _judge(outputs, marker, workspace, guard, binary, time.monotonic() - started)
    except Exception as exc:  # whatever the binary does, the verdict is "unknown": the fallback
        return Verdict(None, f"the probe could not run: {redact(str(exc)) or type(exc).__name__}",
                       binary)
    finally:
        provider.stop()
        shutil.rmtree(root, ignore_errors=True)


def _run_turn(binary: str, home: Path, workspace: Path, walls: Walls, timeout: float) -> bool:
    """The probe's turn, on its own app-server; True when it completed in time."""
    from hermes_codex_runtime.offline.codex_home import OFFLINE_OVERRIDES

    deadline = time.monotonic() + timeout
    conn = AppServerConnection.spawn(SpawnOptions(
        codex_bin=binary, codex_home=str(home), cwd=str(workspace), extra_args=OFFLINE_OVERRIDES,
        initialize_timeout=min(30.0, timeout)))
    try:
        params = thread_start_params(
            cwd=str(workspace), approval_policy="never", ephemeral=True,
            config=profile_config("workspace-write", shape(walls, cwd=str(workspace), writable=(
                str(workspace.resolve()), "/tmp")).walls))
        thread = conn.request("thread/start", params, timeout=30)["thread"]["id"]
        conn.request("turn/start", turn_start_params(thread, to_user_input("probe")), timeout=30)
        while (left := deadline - time.monotonic()) > 0:
            message = conn.next_inbound(timeout=min(left, 5.0))
            if message is not None and message.method == "turn/completed" \
                    and (message.params or {}).get("threadId") == thread:
                return True
        return False
    finally:
        conn.close()


def _output_text(item: dict[str, Any]) -> str:
    output = item.get("output")
    return output if isinstance(output, str) else repr(output)


def _judge(outputs: list[str], marker: str, workspace: Path, guard: Path, binary: str,
           seconds: float) -> Verdict:
    """The verdict from what reached the model and what is on disk."""
    failures = []
    if len(outputs) < 2:
        return Verdict(None, f"codex ran {len(outputs)} of the probe's 2 tool calls", binary)
    if any(marker + "\n" in text for text in outputs):
        failures.append("a denied file was read")
    if any(marker + "-in-a-directory" in text for text in outputs):
        failures.append("a file in a denied directory was read")
    if (guard / "kept").read_text() != "unchanged\n":
        failures.append("a file in a protected directory was changed")
    if (guard / "added").exists():
        failures.append("a patch added a file to a protected directory")
    ordinary = workspace / "ordinary"
    if not failures and not (ordinary.exists() and ordinary.read_text() == "written\n"):
        return Verdict(None, "the sandbox ran no command at all (an ordinary workspace write "
                       "failed too)", binary)
    if failures:
        return Verdict(False, "; ".join(failures), binary)
    return Verdict(True, f"denied reads (a file, a directory), a protected write and a "
                   f"protected patch failed, a workspace write worked ({seconds:.1f}s)", binary)


def on_this_machine(endpoint: str | None) -> bool:
    """True for a local process, and for an app-server listening on this machine (a unix
    socket, or a loopback address): its commands see this file system."""
    if endpoint is None:
        return True
    url = urllib.parse.urlsplit(endpoint)
    if url.scheme == "unix":
        return True
    host = (url.hostname or "").lower()
    return host == "localhost" or host.startswith("127.") or host == "::1"


def thread_walls(settings: SessionSettings, *, endpoint: str | None = None) -> ThreadPermissions:
    """The ``thread/start`` fields for a session's thread on ``endpoint`` (``None``: a local
    process); see the module docstring. Another machine's file system is its operator's: no
    walls are sent there. When the host names walls, codex's own are added
    (:func:`.wire.walls.codex_own`), and the whole set is shaped for the thread's writable
    places (:func:`.wire.walls.shape`), looked at afresh for every thread — and for a live one
    once what they were shaped from changed (``watched``, :func:`.wire.walls.outgrown`)."""
    if not (settings.deny_read or settings.protect) or not on_this_machine(endpoint):
        return thread_permissions(sandbox=settings.sandbox, walls=Walls(), user_mode=None,
                                  user_profile=None, held=None)
    user = sandbox_defaults(settings.codex_home)
    env = settings.env or os.environ
    own = codex_own(codex_home_path(settings.codex_home, env))
    asked = Walls(deny_read=(*settings.deny_read, *own.deny_read),
                  protect=(*settings.protect, *own.protect,
                           *search_path_dirs(env.get("PATH", ""), settings.cwd)),
                  writable_roots=user.writable_roots, network=user.network_access)
    decide = functools.partial(thread_permissions, sandbox=settings.sandbox,
                               user_mode=user.mode, user_profile=user.profile,
                               approval_policy=settings.approval_policy)
    planned = decide(walls=asked, held=True)
    if planned.status != UP:
        return decide(walls=asked, held=None)  # no profile to rely on: nothing to probe
    verdict = verify(settings.codex_bin, settings.walls_cache)  # first: it may make its file
    shaped = shape(asked, cwd=settings.cwd, writable=writable_roots(
        planned.mode, settings.cwd, tmpdir=env.get("TMPDIR"), extra=user.writable_roots))
    result = decide(walls=shaped.walls, held=verdict.held)
    if result.status == FALLBACK:  # read-only: nothing a link could be changed by
        note = fallback_notice(verdict)
        _log_once(verdict.binary, note)  # the log once per binary; the user once per session
        return dataclasses.replace(result, note=note)
    notes = [exposure_notice(exposure) for exposure in shaped.exposed]
    for exposure, note in zip(shaped.exposed, notes, strict=True):
        _log_once(exposure.link, note)
    return dataclasses.replace(result, exposed=shaped.exposed, creatable=shaped.creatable,
                               watched=shaped.watched, note="\n".join(notes))


def _log_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning("%s", message)


def exposure_notice(exposure: Exposure) -> str:
    """What the user is told about a link the sandbox cannot keep (host-neutral words)."""
    return (f"codex's sandbox cannot keep {exposure.link} as it is: it is a symbolic link "
            f"(now to {exposure.target}) in a place the model's commands can write, so a "
            f"command could point it elsewhere. What it leads to now is walled; the link is "
            f"not. Replace the link with what it points to, or give codex a workspace that "
            f"does not contain it.")


def fallback_notice(verdict: Verdict) -> str:
    """The warning for a thread on the fallback (host-neutral words)."""
    return (f"codex's sandbox walls could not be relied on ({verdict.detail}): commands run "
            "read-only, and codex asks before any command it does not know to be read-only "
            "(reads such as `cat` still run). Use a codex release whose permission profiles "
            "hold on this machine.")
