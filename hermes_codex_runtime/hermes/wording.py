"""Every Hermes word the plugin says to a user about a codex turn: the fix for each kind of
failure in Hermes' own terms (its config keys, commands and files), and the way back to Hermes'
own runtime. The layers below speak in host-neutral terms (``protocol.failures`` gives the
codex-level hint, the wire says "the codex binary setting"); the Hermes names are added here.
"""

from __future__ import annotations

from hermes_codex_runtime.hermes import fixes
from hermes_codex_runtime.hermes.config.file import config_path
from hermes_codex_runtime.protocol import FailureKind
from hermes_codex_runtime.values import TurnResult
from hermes_codex_runtime.wire.binary import INSTALL_HINT, SETTING_LABEL

#: Hermes' key for the setting the wire layer calls ``SETTING_LABEL``.
CODEX_BIN_KEY = "model.codex_bin"
AUTO_HINT = "Switch back to Hermes' own runtime with `/codex-runtime auto` if this persists."


def hermes_hint(kind: FailureKind) -> str:
    """The fix for a failure kind, in Hermes' words (the real config.yaml, commands that work as
    installed)."""
    if kind is FailureKind.CONTEXT_WINDOW:
        return "Compact it with /compress, or start over with /new."
    if kind is FailureKind.BAD_REQUEST:
        return (f"Check {fixes.config_ref('model.default')} / `model.codex_model` and run "
                f"`{fixes.own_command()} doctor`.")
    if kind is FailureKind.TRANSPORT:
        return f"If it keeps happening, run `{fixes.own_command()} doctor`."
    return ""


def setup_hint(source: str) -> str:
    """The Hermes key or command that fixes a set-up failure of ``source``."""
    if source == "codex_binary":
        return (f"Set {fixes.config_ref(CODEX_BIN_KEY)} (or $CODEX_BIN) to the codex "
                f"executable, or install the tested codex: `{fixes.install_codex_command()}`.")
    if source == "codex_home":
        return (f"The codex home is {fixes.config_ref('model.codex_home')}; "
                f"`{fixes.login_command()}` creates it and logs in.")
    if source == "codex_config":
        return f"`{fixes.own_command()} doctor` checks it."
    if source == "app_server":
        return (f"The app-servers are set by {fixes.config_ref('model.codex_app_server')} (and "
                f"its token by `model.codex_app_server_token_file`); `{fixes.own_command()} "
                "doctor` checks them.")
    return ""


def user_facing_error(turn: TurnResult) -> str:
    """The answer Hermes shows for a failed codex turn: what went wrong and the fix."""
    failure = turn.failure
    if failure is None:
        return turn.error or "the codex turn did not complete"
    if failure.kind is FailureKind.AUTH:
        if failure.source == "codex_login":
            return (f"{failure.message}. Run `{fixes.login_command()}` (it logs in the codex "
                    "home the plugin uses), then send your message again.")
        return (f"codex could not authenticate: {failure.message.rstrip('. ')}. Run "
                f"`{fixes.login_command()}` and try again.")
    if failure.kind is FailureKind.USAGE_LIMIT:
        return (f"codex usage limit reached: {failure.message.strip()} Configure "
                f"`fallback_providers` in {config_path()} to continue on another provider, or "
                "switch runtimes with `/codex-runtime auto`.")
    if failure.kind is FailureKind.SETUP:
        # The message names the problem (never "install codex" for a bad timeout); Hermes' key
        # or command for THAT setting is added, once.
        problem = failure.message.replace(INSTALL_HINT, "").strip()  # Hermes' own fix follows
        problem = problem.replace(SETTING_LABEL, CODEX_BIN_KEY)
        return " ".join(p for p in (f"codex could not start: {problem}",
                                    setup_hint(failure.source or "")) if p)
    return " ".join(p for p in (f"Codex app-server turn failed: {failure.describe()}",
                                hermes_hint(failure.kind), AUTO_HINT) if p)


def setup_failed(error: str) -> str:
    """What the user sees when the codex turn could not even be set up."""
    return f"Codex app-server turn failed: {error}. {AUTO_HINT}"
