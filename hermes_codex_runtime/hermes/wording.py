"""Every Hermes word the plugin says to a user about a codex turn: the fix for each kind of
failure in Hermes' own terms (its config keys, commands and files), and the way back to Hermes'
own runtime. The layers below speak in host-neutral terms (``protocol.failures`` gives the
codex-level hint, the wire says "the codex binary setting"); the Hermes names are added here.
"""

from __future__ import annotations

from hermes_codex_runtime.protocol import FailureKind
from hermes_codex_runtime.values import TurnResult
from hermes_codex_runtime.wire.binary import SETTING_LABEL

#: Hermes' key for the setting the wire layer calls ``SETTING_LABEL``.
CODEX_BIN_KEY = "model.codex_bin"
AUTO_HINT = "Switch back to Hermes' own runtime with `/codex-runtime auto` if this persists."


#: The fix for a failure kind, in Hermes' words.
HERMES_HINTS: dict[FailureKind, str] = {
    FailureKind.CONTEXT_WINDOW: "Compact it with /compress, or start over with /new.",
    FailureKind.BAD_REQUEST: "Check `model.default` / `model.codex_model` in "
    "~/.hermes/config.yaml and run `hermes-codex-runtime doctor`.",
    FailureKind.TRANSPORT: "If it keeps happening, run `hermes-codex-runtime doctor`.",
}
SETUP_HINTS: dict[str, str] = {
    "codex_binary": "Set `model.codex_bin` in ~/.hermes/config.yaml (or $CODEX_BIN) to the "
    "codex executable, or install it with `pip install 'hermes-codex-runtime[codex]'`.",
    "codex_home": "The codex home setting is `model.codex_home` in ~/.hermes/config.yaml.",
    "codex_config": "`hermes-codex-runtime doctor` checks it.",
    "app_server": "The app-servers are set by `model.codex_app_server` (and its token by "
    "`model.codex_app_server_token_file`) in ~/.hermes/config.yaml; "
    "`hermes-codex-runtime doctor` checks them.",
}


def user_facing_error(turn: TurnResult) -> str:
    """The answer Hermes shows for a failed codex turn: what went wrong and the fix."""
    failure = turn.failure
    if failure is None:
        return turn.error or "the codex turn did not complete"
    if failure.kind is FailureKind.AUTH:
        return f"codex could not authenticate: {failure.message}. Run `codex login` (with the " \
               f"same CODEX_HOME) and try again."
    if failure.kind is FailureKind.USAGE_LIMIT:
        return (f"codex usage limit reached: {failure.message.strip()} Configure "
                "`fallback_providers` in ~/.hermes/config.yaml to continue on another provider, "
                "or switch runtimes with `/codex-runtime auto`.")
    if failure.kind is FailureKind.SETUP:
        # The message names the problem and the fix for THAT setting (never "install codex"
        # for a bad timeout); Hermes' key for it is added.
        extra = SETUP_HINTS.get(failure.source or "", "")
        described = failure.describe().replace(SETTING_LABEL, CODEX_BIN_KEY)
        return " ".join(p for p in (f"codex could not start: {described}", extra) if p)
    extra = HERMES_HINTS.get(failure.kind, "")
    return " ".join(p for p in (f"Codex app-server turn failed: {failure.describe()}", extra,
                                AUTO_HINT) if p)




def setup_failed(error: str) -> str:
    """What the user sees when the codex turn could not even be set up."""
    return f"Codex app-server turn failed: {error}. {AUTO_HINT}"
