"""Which codex thread a Hermes session lives on, kept across processes: in the session database
(``sessions.model_config``'s ``codex_thread_id`` / ``codex_thread_endpoint``) where the agent has
one, and always in the plugin's own small file (:func:`~.paths.bindings_path`), so a session
resumes its thread — on the remote app-server that holds it, if any. The file is rewritten (an
``fsync``) when a binding changes, not after every turn of the same binding.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from hermes_codex_runtime.bindings import ThreadBindings
from hermes_codex_runtime.hermes.paths import bindings_path
from hermes_codex_runtime.hermes.probe import swallowed

log = logging.getLogger("hermes_codex_runtime.hermes")
THREAD_KEY = "codex_thread_id"
ENDPOINT_KEY = "codex_thread_endpoint"
#: The same binding is written to the file again after this long at most (its ``updated`` time
#: decides which entries the file keeps when it is full).
REWRITE_AFTER = 3600.0
#: What this process last wrote to a binding file: (file, session) → (binding, when).
_written: dict[tuple[str, str], tuple[tuple[Any, ...], float]] = {}


def bindings() -> ThreadBindings:
    """The plugin's own binding file."""
    return ThreadBindings(bindings_path())


def stored_thread(agent: Any) -> str | dict[str, str] | None:
    """The thread bound to the agent's session by an earlier process: its id, or
    ``{"thread_id", "endpoint"}`` when a remote app-server holds it."""
    session_id = getattr(agent, "session_id", None)
    thread = _stored_thread_id(agent)
    if thread is None or not session_id:
        return thread
    endpoint = _model_config(agent, ENDPOINT_KEY, "the codex thread's endpoint") or \
        bindings().endpoint(str(session_id))
    return {"thread_id": thread, "endpoint": endpoint} if endpoint else thread


def _stored_thread_id(agent: Any) -> str | None:
    session_id = getattr(agent, "session_id", None)
    if not session_id or getattr(agent, "_persist_disabled", False):
        return None  # e.g. the review fork, which shares its parent's session id
    return _model_config(agent, THREAD_KEY, "the codex thread binding") or \
        bindings().get(str(session_id))


def _model_config(agent: Any, key: str, what: str) -> str | None:
    """``key`` of the session's ``model_config`` in state.db, if the agent has a database."""
    db = getattr(agent, "_session_db", None)
    session_id = getattr(agent, "session_id", None)
    if db is None or not hasattr(db, "get_session") or not session_id:
        return None
    try:
        row = db.get_session(session_id)
        raw = row["model_config"] if row else None
        if raw:
            value = json.loads(raw).get(key)
            return value if isinstance(value, str) and value else None
    except Exception:
        swallowed(f"reading {what} from state.db")
    return None


def bind_thread(agent: Any, thread_id: str, endpoint: str | None) -> None:
    """Persist the binding with the session (after the turn's transcript is committed), and the
    remote app-server holding the thread, so a resume goes where its rollout is."""
    session_id = getattr(agent, "session_id", None)
    if not session_id or getattr(agent, "_persist_disabled", False):
        return
    stored = False
    db = getattr(agent, "_session_db", None)
    write = getattr(db, "_execute_write", None)
    if callable(write):
        try:
            write(lambda conn: conn.execute(
                "UPDATE sessions SET model_config = json_set(COALESCE(model_config, '{}'), "
                "'$.codex_thread_id', ?, '$.codex_thread_endpoint', ?) WHERE id = ?",
                (thread_id, endpoint, session_id)))
            stored = True
        except Exception:
            swallowed("storing the codex thread binding in state.db")
    init_config = getattr(agent, "_session_init_model_config", None)
    if isinstance(init_config, dict):
        init_config[THREAD_KEY] = thread_id  # survives a compression-rotated session id
        init_config[ENDPOINT_KEY] = endpoint
    platform = getattr(agent, "platform", "")
    where = (str(bindings_path()), str(session_id))
    binding = (thread_id, endpoint, platform)
    last = _written.get(where)
    if last is not None and last[0] == binding and time.monotonic() - last[1] < REWRITE_AFTER:
        return
    try:
        bindings().set(str(session_id), thread_id, platform=platform, endpoint=endpoint)
        _written[where] = (binding, time.monotonic())
    except OSError:
        if not stored:
            log.warning("codex-runtime: could not store the codex thread binding",
                        exc_info=True)
