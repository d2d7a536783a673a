"""How whatever goes wrong while a session starts its thread, starts a turn or compacts becomes
a classified :class:`~hermes_codex_runtime.protocol.Failure`: one function,
:func:`failure_from`, instead of an except-ladder at each call site.

The stage decides what a failure means: a refusal while the thread starts leaves the session
unusable (retire), a refused ``turn/start`` does not (the next turn may go through), and codex's
``codexErrorInfo`` is read from a refused ``turn/start``'s data.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from hermes_codex_runtime.protocol import Failure, FailureKind, classify
from hermes_codex_runtime.wire import (
    CodexBinaryError,
    CodexConfigError,
    CodexHomeError,
    RequestTimeout,
    ServerError,
    TransportClosed,
    WireError,
    redact,
)
from hermes_codex_runtime.wire.websocket import EndpointError


class LoginMissing(WireError):
    """The app-server's model provider needs an OpenAI login and its codex home has none."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class Stage(Enum):
    """What the session was doing when it failed."""

    START = "start"  # spawning or connecting, and starting or resuming the thread
    TURN = "turn"  # asking codex to start the turn
    COMPACT = "compact"  # asking codex to compact the thread


def transport_failure(message: str, stderr: Sequence[str]) -> Failure:
    """The app-server went away (or stopped answering): ``message`` and codex's last stderr
    lines. A stale login that killed it is an AUTH failure (the user must log in again)."""
    tail = list(stderr)
    primary = classify(None, "", stderr=tail)
    kind = FailureKind.AUTH if primary.kind is FailureKind.AUTH else FailureKind.TRANSPORT
    detail = redact(message)
    if tail:
        detail += "\ncodex stderr (last lines):\n" + "\n".join(tail)
    return Failure(kind, detail)


def failure_from(exc: Exception, stage: Stage,
                 stderr: Sequence[str] = ()) -> tuple[Failure, bool | None]:
    """``exc`` as a failure, and whether the session must be replaced (``None``: as the
    failure's kind says). ``exc`` is a :class:`WireError`, or at :attr:`Stage.START` also a
    ``ValueError``/``OSError`` from bad settings."""
    if isinstance(exc, LoginMissing):
        return exc.failure, True
    if isinstance(exc, ServerError):
        info = exc.data if stage is Stage.TURN and isinstance(exc.data, dict | str) else None
        return classify(info, exc.message), stage is Stage.START
    if isinstance(exc, CodexBinaryError):
        source = "codex_config" if isinstance(exc, CodexConfigError) else \
            "codex_home" if isinstance(exc, CodexHomeError) else "codex_binary"
        return Failure(FailureKind.SETUP, str(exc), source=source), True
    if isinstance(exc, EndpointError):
        text = str(exc) if not exc.hint or exc.hint in str(exc) else f"{exc} {exc.hint}"
        return Failure(FailureKind.SETUP, redact(text), source="app_server"), True
    if isinstance(exc, RequestTimeout) and stage is not Stage.COMPACT:
        return Failure(FailureKind.TRANSPORT, str(exc)), True
    if isinstance(exc, TransportClosed) or (stage is not Stage.START
                                            and isinstance(exc, WireError)):
        message = f"codex app-server failed to start: {exc}" if stage is Stage.START \
            else str(exc)
        return transport_failure(message, stderr), None
    return Failure(FailureKind.SETUP, redact(str(exc))), True
