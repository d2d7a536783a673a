"""Default hook implementations: what the runtime does when no host or plugin answers.

Registered like any other plugin, ``trylast``. They are deliberately conservative: default
settings, no stored thread, the built-in history seed, and approvals that fail CLOSED.
"""

from __future__ import annotations

from typing import Any

from hermes_codex_runtime.history_seed import render_history_seed
from hermes_codex_runtime.hookspecs import hookimpl
from hermes_codex_runtime.protocol import Decision
from hermes_codex_runtime.values import SessionSettings


@hookimpl(trylast=True)
def codex_session_settings(agent: Any) -> SessionSettings:
    """Defaults: the bundled/PATH codex, the process cwd, on-request approvals by the user."""
    return SessionSettings()


@hookimpl(trylast=True)
def codex_history_seed(agent: Any, messages: Any) -> str | None:
    """The built-in rendering of the prior transcript."""
    if not isinstance(messages, list | tuple):
        return None
    return render_history_seed(messages)


@hookimpl(trylast=True)
def codex_approval(agent: Any, request: Any) -> Decision:
    """Nobody can answer: decline."""
    return Decision.DECLINE
