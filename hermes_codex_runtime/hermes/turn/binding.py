"""Which codex thread a Hermes session lives on, kept across processes: in the session database
(``sessions.model_config``'s ``codex_thread_id`` / ``codex_thread_endpoint`` /
``codex_thread_instructions`` / ``codex_thread_conversation``) where the agent has one, and in
the plugin's own small file (:func:`~..config.paths.bindings_path`), so a session resumes its
thread — on the remote app-server that holds it, if any, only while Hermes' system prompt is the
one the thread started with, and mended to hold the conversation Hermes holds (the runtime
compares: :mod:`hermes_codex_runtime.continuity`). Where state.db took the binding, the file is
rewritten (an ``fsync``) only when the thread changes; where it did not, after every turn (the
conversation must never lag: a lagging one would hand codex turns it already has).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from hermes_codex_runtime.bindings import ThreadBindings
from hermes_codex_runtime.continuity import Binding, Ledger
from hermes_codex_runtime.hermes.config.paths import bindings_path
from hermes_codex_runtime.hermes.symbols.probe import swallowed

log = logging.getLogger("hermes_codex_runtime.hermes")
THREAD_KEY = "codex_thread_id"
ENDPOINT_KEY = "codex_thread_endpoint"
INSTRUCTIONS_KEY = "codex_thread_instructions"
CONVERSATION_KEY = "codex_thread_conversation"
#: The same binding is written to the file again after this long at most (its ``updated`` time
#: decides which entries the file keeps when it is full).
REWRITE_AFTER = 3600.0
#: What this process last wrote to a binding file: (file, session) → (binding, when).
_written: dict[tuple[str, str], tuple[tuple[Any, ...], float]] = {}


def bindings() -> ThreadBindings:
    """The plugin's own binding file."""
    return ThreadBindings(bindings_path())


def stored_thread(agent: Any) -> Binding | None:
    """The thread bound to the agent's session by an earlier process, read from what Hermes'
    session database (or the plugin's file) stored (``None`` for what a binding lacks — one from
    an older version has no instructions digest or turn count — and for a value of another
    type)."""
    session_id = getattr(agent, "session_id", None)
    if not session_id or getattr(agent, "_persist_disabled", False):
        return None  # e.g. the review fork, which shares its parent's session id
    config = _model_config(agent)
    stored = {"thread_id": config.get(THREAD_KEY), "endpoint": config.get(ENDPOINT_KEY),
              "instructions": config.get(INSTRUCTIONS_KEY),
              "conversation": config.get(CONVERSATION_KEY)}
    if not _text(stored["thread_id"]):
        stored = bindings().entry(str(session_id))
    thread_id = _text(stored.get("thread_id"))
    if thread_id is None:
        return None
    return Binding(thread_id, _text(stored.get("endpoint")), _text(stored.get("instructions")),
                   Ledger.decode(stored.get("conversation")))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _model_config(agent: Any) -> dict[str, Any]:
    """The session's ``model_config`` in state.db, if the agent has a database."""
    db = getattr(agent, "_session_db", None)
    session_id = getattr(agent, "session_id", None)
    if db is None or not hasattr(db, "get_session") or not session_id:
        return {}
    try:
        row = db.get_session(session_id)
        raw = row["model_config"] if row else None
        value = json.loads(raw) if raw else {}
        return value if isinstance(value, dict) else {}
    except Exception:
        swallowed("reading the codex thread binding from state.db")
    return {}


def bind_thread(agent: Any, thread_id: str, endpoint: str | None, instructions: str,
                conversation: str | None) -> None:
    """Persist the binding with the session (after the turn's transcript is committed): the
    remote app-server holding the thread, so a resume goes where its rollout is, the digest
    of the instructions it started with and the conversation it holds."""
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
                f"'$.{THREAD_KEY}', ?, '$.{ENDPOINT_KEY}', ?, '$.{INSTRUCTIONS_KEY}', ?, "
                f"'$.{CONVERSATION_KEY}', ?) WHERE id = ?",
                (thread_id, endpoint, instructions, conversation, session_id)))
            stored = True
        except Exception:
            swallowed("storing the codex thread binding in state.db")
    init_config = getattr(agent, "_session_init_model_config", None)
    if isinstance(init_config, dict):
        init_config[THREAD_KEY] = thread_id  # survives a compression-rotated session id
        init_config[ENDPOINT_KEY] = endpoint
        init_config[INSTRUCTIONS_KEY] = instructions
        init_config[CONVERSATION_KEY] = conversation
    platform = getattr(agent, "platform", "")
    where = (str(bindings_path()), str(session_id))
    # where state.db holds the conversation, the file's may lag (it is read only without one)
    binding = (thread_id, endpoint, instructions, platform, None if stored else conversation)
    last = _written.get(where)
    if last is not None and last[0] == binding and time.monotonic() - last[1] < REWRITE_AFTER:
        return
    try:
        bindings().set(str(session_id), thread_id, platform=platform, endpoint=endpoint,
                       instructions=instructions, conversation=conversation)
        _written[where] = (binding, time.monotonic())
    except OSError:
        if not stored:
            log.warning("codex-runtime: could not store the codex thread binding",
                        exc_info=True)
