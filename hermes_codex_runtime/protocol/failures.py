"""Classifying codex failures into kinds a host can act on.

``codexErrorInfo`` (on ``error`` notifications, ``turn.error`` and JSON-RPC errors) is the primary
signal; message text is consulted only for old builds that send none, and stderr only when there is
no primary error at all — so an unrelated 401 line in stderr (plugin prewarm, say) never masks a
different error. Each kind carries the flags the runtime needs (re-login, fail over, retry, retire)
and a fix a person can follow.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class FailureKind(StrEnum):
    """What went wrong, in terms of what to do about it."""

    AUTH = "auth"  # login expired / revoked: run `codex login`
    USAGE_LIMIT = "usage_limit"  # plan quota exhausted: fail over to the host's fallback
    RATE_LIMIT = "rate_limit"  # too many requests: retry later
    CONTEXT_WINDOW = "context_window"  # conversation too long
    OVERLOADED = "overloaded"  # server overloaded: retry with backoff
    SERVICE = "service"  # provider unreachable / 5xx / stream dropped
    POLICY = "policy"  # a safety policy refused the request
    BAD_REQUEST = "bad_request"  # invalid model, parameters or config
    BUDGET = "budget"  # a configured session budget was exhausted
    TRANSPORT = "transport"  # the app-server process died or stopped answering
    TIMEOUT = "timeout"  # the turn ran past its deadline
    SETUP = "setup"  # codex missing, not runnable or too old
    INPUT = "input"  # the host's input could not be sent
    OTHER = "other"


#: Host-neutral hints: no host's config keys or commands. A host phrases its own fix from the
#: failure's kind and ``source`` (a host adapter's wording).
_HINTS: dict[FailureKind, str] = {
    FailureKind.AUTH: "The codex login has expired or was revoked: run `codex login` (with the "
    "same CODEX_HOME) and try again.",
    FailureKind.USAGE_LIMIT: "codex usage limit reached: wait for the reset, or continue on "
    "another provider.",
    FailureKind.RATE_LIMIT: "The model provider is rate limiting requests: wait a moment and "
    "retry.",
    FailureKind.CONTEXT_WINDOW: "The conversation no longer fits the model's context window: "
    "compact it or start a new conversation.",
    FailureKind.OVERLOADED: "The codex service is overloaded: retry in a moment.",
    FailureKind.SERVICE: "codex could not reach the model provider: check the network and the "
    "provider's status, then retry.",
    FailureKind.POLICY: "The request was refused by a safety policy.",
    FailureKind.BAD_REQUEST: "codex rejected the request: check the model name and codex's "
    "configuration.",
    FailureKind.BUDGET: "The session's configured budget is exhausted.",
    FailureKind.TRANSPORT: "The codex app-server process stopped; the next turn starts a fresh "
    "one.",
    FailureKind.TIMEOUT: "The codex turn ran past its time budget and was interrupted; raise "
    "the turn timeout if such turns are expected.",
    FailureKind.SETUP: "",  # the message says what to fix
    FailureKind.INPUT: "The message could not be sent to codex; fix the input and try again.",
    FailureKind.OTHER: "",
}

_RETRYABLE = frozenset({FailureKind.RATE_LIMIT, FailureKind.OVERLOADED, FailureKind.SERVICE})
_RETIRE = frozenset({FailureKind.AUTH, FailureKind.TRANSPORT, FailureKind.TIMEOUT})


@dataclass(frozen=True, slots=True)
class Failure:
    """A classified failure. ``info`` is the raw ``codexErrorInfo`` tag when there was one."""

    kind: FailureKind
    message: str
    info: str | None = None
    http_status: int | None = None
    #: For SETUP failures, what could not be set up: ``codex_binary``, ``codex_home``,
    #: ``codex_config``, ``app_server`` (a remote app-server) or ``settings`` (the host's own
    #: settings); ``codex_login`` for an AUTH failure found before any request was sent.
    source: str | None = None

    @property
    def hint(self) -> str:
        """What the user can do about it."""
        return _HINTS[self.kind]

    @property
    def failover(self) -> bool:
        """True when the same turn should run on the host's fallback provider."""
        return self.kind is FailureKind.USAGE_LIMIT

    @property
    def reauth(self) -> bool:
        """True when the user must log in again."""
        return self.kind is FailureKind.AUTH

    @property
    def retryable(self) -> bool:
        """True when retrying later may succeed without any change."""
        return self.kind in _RETRYABLE

    @property
    def retire_session(self) -> bool:
        """True when the app-server process should be replaced before the next turn (a stale
        token store, a dead or wedged process)."""
        return self.kind in _RETIRE

    def describe(self) -> str:
        """One line for a person: the message, then the fix."""
        if not self.hint:
            return self.message
        return f"{self.message.rstrip('. ')}. {self.hint}" if self.message else self.hint


_INFO_KINDS: dict[str, FailureKind] = {
    "unauthorized": FailureKind.AUTH,
    "usageLimitExceeded": FailureKind.USAGE_LIMIT,
    "rateLimitExceeded": FailureKind.RATE_LIMIT,
    "contextWindowExceeded": FailureKind.CONTEXT_WINDOW,
    "serverOverloaded": FailureKind.OVERLOADED,
    "flexUnavailable": FailureKind.OVERLOADED,
    "policyCapacityUnavailable": FailureKind.OVERLOADED,
    "internalServerError": FailureKind.SERVICE,
    "cyberPolicy": FailureKind.POLICY,
    "misalignmentPolicyViolation": FailureKind.POLICY,
    "tooManyDenials": FailureKind.POLICY,
    "bioPolicy": FailureKind.POLICY,  # codex 0.171
    "inferenceHookDenied": FailureKind.POLICY,  # codex 0.171: a workspace inference hook said no
    "badRequest": FailureKind.BAD_REQUEST,
    "modelNotFound": FailureKind.BAD_REQUEST,
    "sandboxError": FailureKind.OTHER,
    "threadRollbackFailed": FailureKind.OTHER,
    "sessionBudgetExceeded": FailureKind.BUDGET,
    "activeTurnNotSteerable": FailureKind.OTHER,
    "other": FailureKind.OTHER,
}

_HTTP_INFO = frozenset(
    {
        "httpConnectionFailed",
        "responseStreamConnectionFailed",
        "responseStreamDisconnected",
        "responseTooManyFailedAttempts",
    }
)


def _kind_for_status(status: int | None) -> FailureKind:
    if status in (401, 403):
        return FailureKind.AUTH
    if status == 429:
        return FailureKind.RATE_LIMIT
    if status in (400, 404, 422):
        return FailureKind.BAD_REQUEST
    return FailureKind.SERVICE


_TEXT_RULES: tuple[tuple[re.Pattern[str], FailureKind], ...] = (
    (re.compile(r"usage limit|usage_limit_reached|quota exceeded|insufficient_quota", re.I),
     FailureKind.USAGE_LIMIT),
    (re.compile(r"refresh token|access token could not be refreshed|codex login|not logged in|"
                r"\b401\b|unauthori[sz]ed|invalid api key|authentication", re.I),
     FailureKind.AUTH),
    (re.compile(r"rate limit|rate_limit|too many requests|\b429\b", re.I), FailureKind.RATE_LIMIT),
    (re.compile(r"context window|context_length_exceeded|maximum context length", re.I),
     FailureKind.CONTEXT_WINDOW),
    (re.compile(r"overloaded", re.I), FailureKind.OVERLOADED),
)


def _info_tag(info: Any) -> tuple[str | None, int | None]:
    if isinstance(info, str) and info:
        return info, None
    if isinstance(info, dict) and len(info) == 1:
        tag, body = next(iter(info.items()))
        status = body.get("httpStatusCode") if isinstance(body, dict) else None
        return str(tag), status if isinstance(status, int) else None
    return None, None


def known_error_infos() -> frozenset[str]:
    """Every ``codexErrorInfo`` tag this module classifies by name (the rest fall to OTHER)."""
    return frozenset(_INFO_KINDS) | frozenset(_HTTP_INFO)


def classify(
    codex_error_info: Any = None,
    message: str = "",
    *,
    stderr: Iterable[str] = (),
) -> Failure:
    """Classify one failure. ``codex_error_info`` first, then the message text, then (only when
    there is neither) the stderr lines."""
    tag, status = _info_tag(codex_error_info)
    if tag is not None:
        if tag in _HTTP_INFO:
            kind = _kind_for_status(status)
        else:
            kind = _INFO_KINDS.get(tag, FailureKind.OTHER)
        if kind is FailureKind.OTHER and message:
            # "other" from codex says nothing; a recognisable text still beats it.
            kind = _classify_text(message) or FailureKind.OTHER
        return Failure(kind, message, tag, status)
    if message:
        return Failure(_classify_text(message) or FailureKind.OTHER, message)
    lines = [line for line in stderr if line]
    if lines:
        joined = "\n".join(lines[-20:])
        return Failure(_classify_text(joined) or FailureKind.OTHER, lines[-1])
    return Failure(FailureKind.OTHER, "")


def classify_error_notification(params: dict[str, Any]) -> tuple[Failure, bool]:
    """Classify an ``error`` notification's params; also return ``willRetry`` (not terminal)."""
    error = params.get("error")
    error = error if isinstance(error, dict) else {}
    message = str(error.get("message") or "")
    details = error.get("additionalDetails")
    if isinstance(details, str) and details and details not in message:
        message = f"{message} ({details})" if message else details
    failure = classify(error.get("codexErrorInfo"), message)
    return failure, bool(params.get("willRetry"))


def _classify_text(text: str) -> FailureKind | None:
    for pattern, kind in _TEXT_RULES:
        if pattern.search(text):
            return kind
    return None


def invalid_configuration(params: Any) -> str | None:
    """The text of a ``configWarning`` that means codex IGNORED its ``config.toml`` ("Invalid
    configuration; using defaults." + details), else ``None`` (other warnings are advice)."""
    if not isinstance(params, dict):
        return None
    summary = str(params.get("summary") or params.get("message") or "")
    if not summary.lower().startswith("invalid configuration"):
        return None
    details = params.get("details")
    return f"{summary} {details}".strip() if details else summary


def login_missing(account: Any) -> Failure | None:
    """An ``account/read`` reply that says codex needs an OpenAI login and has none: a turn
    would only retry "waiting for network" until its budget ran out, so it fails at once."""
    if not isinstance(account, dict) or not account.get("requiresOpenaiAuth"):
        return None
    if isinstance(account.get("account"), dict):
        return None
    return Failure(FailureKind.AUTH, "codex is not logged in (its model provider needs an "
                   "OpenAI login and its home has none)", "notLoggedIn", source="codex_login")
