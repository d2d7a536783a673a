"""Files that become instructions: one copy for the model, and none from a shared, writable
workspace.

Hermes puts the project context files of the workspace (``.hermes.md``/``HERMES.md`` up to the
git root, else ``AGENTS.md``, ``CLAUDE.md``, ``.cursorrules`` or ``.cursor/rules`` from the
workspace itself, scanned for prompt injection first) into its system prompt — codex's
developer instructions. codex would add ``AGENTS.override.md`` or ``AGENTS.md`` from the project
root down to the workspace a second time, unscanned, and read them through its sandboxed
file-system helper at every thread's start (a process per look, 0.1–0.2 s with a profile,
docs/codex-facts.md): every thread of the plugin is started with ``project_doc_max_bytes = 0``
(:data:`CODEX_CONFIG`), so Hermes' copy is the one. (codex's own global instructions in its
home, which no command can change, still load.)

Where the model's commands may write the workspace and several sessions share it — the home
directory, or the workspace of any surface but the local CLI, TUI, ACP or a library agent (a
gateway's chats, its API server, cron) — a command in one session could write such a file
unasked and steer every later session; codex's sandbox cannot keep a missing name from being
created without leaving files behind in the workspace. So there, unless ``model.codex_
workspace_instructions: load`` says otherwise, Hermes' builder skips the workspace's files for
that agent (``SOUL.md`` in ``HERMES_HOME``, which no command can change, still loads).

Owns the decision (:func:`left_out`, made once when an agent is built for codex and kept on
it, :func:`mark`), the thread's codex setting (:data:`CODEX_CONFIG`) and the seam that keeps
Hermes' builder from loading them (:func:`install`).
"""

from __future__ import annotations

import contextvars
import logging
import os
import sys
from pathlib import Path
from typing import Any

from hermes_codex_runtime.hermes.symbols.patch import wrap_in_place
from hermes_codex_runtime.hermes.symbols.probe import symbol

log = logging.getLogger("hermes_codex_runtime.hermes")

#: The surfaces where one person works in their own workspace.
LOCAL_PLATFORMS = frozenset({"", "cli", "tui", "acp"})
#: What Hermes and codex load from a workspace as standing instructions.
INSTRUCTION_FILES = (".hermes.md", "HERMES.md", "AGENTS.md", "agents.md", "AGENTS.override.md",
                     "CLAUDE.md", "claude.md", ".cursorrules", ".cursor/rules")
#: The thread setting that keeps codex from loading project instruction files itself.
CODEX_CONFIG = {"project_doc_max_bytes": 0}
WRITABLE_MODES = frozenset({"workspace-write", "danger-full-access"})
_FLAG = "_codex_runtime_instructions_left_out"
_building: contextvars.ContextVar[bool] = contextvars.ContextVar("codex_instructions_out",
                                                                 default=False)


def shared(platform: str | None, cwd: str) -> bool:
    """Several sessions share ``cwd``: it is the home directory, or the agent serves a surface
    other than a local one."""
    from hermes_codex_runtime.hermes.config.walled import workspace_is_home

    return workspace_is_home(cwd) or (platform or "").strip().lower() not in LOCAL_PLATFORMS


def left_out(*, platform: str | None, cwd: str, mode: str | None, setting: str) -> bool:
    """The workspace's instruction files stay out of a codex turn (see the module
    docstring)."""
    return setting != "load" and mode in WRITABLE_MODES and shared(platform, cwd)


def mark(agent: Any, *, cwd: str, mode: str | None, setting: str) -> bool:
    """Decide for an agent built for codex, and keep the decision on it (Hermes builds its
    system prompt once, at its first turn)."""
    out = left_out(platform=getattr(agent, "platform", None), cwd=cwd, mode=mode,
                   setting=setting)
    setattr(agent, _FLAG, out)
    if out:
        log.info("codex-runtime: the workspace %s is shared and writable: its instruction "
                 "files (%s) are not loaded", cwd, ", ".join(present_files(cwd)) or "none now")
    return out


def mark_agent(agent: Any) -> bool:
    """:func:`mark` with this Hermes' settings: the agent's workspace, the sandbox its threads
    get, ``model.codex_workspace_instructions``."""
    from hermes_codex_runtime.hermes.config.standing import standing
    from hermes_codex_runtime.hermes.config.walled import session_workspace
    from hermes_codex_runtime.wire.codex_config import sandbox_defaults

    fixed = standing()
    mode = fixed.sandbox or sandbox_defaults(fixed.plugin.codex_home).mode
    return mark(agent, cwd=session_workspace(agent), mode=mode,
                setting=fixed.plugin.workspace_instructions)


def present_files(cwd: str) -> list[str]:
    """The instruction files in ``cwd`` now."""
    return [name for name in INSTRUCTION_FILES if os.path.lexists(Path(cwd) / name)]


def install() -> bool:
    """Keep Hermes' context-file builder from loading a marked agent's workspace files: the
    builder is wrapped where Hermes looks it up (``agent.prompt_builder``, and ``run_agent``'s
    copy on 0.19), and ``build_system_prompt_parts`` says which agent is being built."""
    feature = "leaving a shared workspace's instruction files out of codex turns"
    if not callable(symbol("agent.prompt_builder", "build_context_files_prompt",
                           feature=feature)):
        return False
    if not wrap_in_place("agent.system_prompt", "build_system_prompt_parts", _saying_which,
                         feature=feature):
        return False
    for name in ("agent.prompt_builder", "run_agent"):  # run_agent's copy: 0.19 only
        if hasattr(sys.modules.get(name), "build_context_files_prompt"):
            wrap_in_place(name, "build_context_files_prompt", _skipping, feature=feature)
    return True


def _saying_which(parts: Any) -> Any:
    def build_parts(agent: Any, *args: Any, **kwargs: Any) -> Any:
        token = _building.set(getattr(agent, _FLAG, None) is True)
        try:
            return parts(agent, *args, **kwargs)
        finally:
            _building.reset(token)

    return build_parts


def _skipping(original: Any) -> Any:
    def build_context_files_prompt(*args: Any, **kwargs: Any) -> Any:
        # SOUL.md comes with these files only when it was not loaded as the identity — and
        # then it is missing or empty: nothing of it is lost
        return "" if _building.get() else original(*args, **kwargs)

    return build_context_files_prompt
