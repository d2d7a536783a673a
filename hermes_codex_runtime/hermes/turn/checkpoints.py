"""Hermes' filesystem checkpoints for codex turns: what ``/rollback`` restores.

With ``checkpoints.enabled`` in config.yaml, an agent's ``_checkpoint_mgr`` snapshots a working
directory before Hermes' own file tools write to it (at most once per directory per iteration
of Hermes' loop, which starts each iteration with ``new_turn()``). A codex turn leaves that loop
before its first iteration and changes files through codex's own tools, so nothing would be
snapshotted and ``/rollback`` would have nothing to restore. :func:`before_turn` takes the
snapshot Hermes would take: at the start of every codex turn, of the directory codex works in
(:func:`..config.walled.session_workspace`, the turn's ``cwd``) — the one ``/rollback`` lists.
The manager itself skips ``/`` and the home directory and takes nothing when the directory is
unchanged since its last snapshot. Nothing here raises into the turn.
"""

from __future__ import annotations

from typing import Any

from hermes_codex_runtime.hermes.config.walled import session_workspace
from hermes_codex_runtime.hermes.symbols.probe import swallowed

#: The checkpoint's reason, as ``/rollback`` lists it.
REASON = "before codex turn"


def before_turn(agent: Any, task_id: str | None = None) -> bool:
    """Snapshot the workspace of ``agent``'s codex turn when its checkpoints are on and the host
    allows them there (the 0.22 line refuses a container-backed terminal: the files belong to
    the container). True when a checkpoint was taken."""
    manager = getattr(agent, "_checkpoint_mgr", None)
    if manager is None or not getattr(manager, "enabled", False):
        return False
    try:
        refused = getattr(manager, "unsupported_backend_reason", None)
        if callable(refused) and refused(task_id or "default"):
            return False
        new_turn = getattr(manager, "new_turn", None)
        if callable(new_turn):
            new_turn()  # the codex turn is Hermes' iteration: one snapshot per directory
        return manager.ensure_checkpoint(session_workspace(agent), REASON) is True
    except Exception:
        swallowed("the checkpoint before the codex turn")
        return False

