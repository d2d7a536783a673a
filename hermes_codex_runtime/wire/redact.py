"""Redaction of secrets from any text shown to a person, logged, or stored.

Owns one function, :func:`redact`. It is applied to stderr tails and error texts before they leave
the wire layer; it is deliberately greedy (a false positive costs a few characters of a log line, a
false negative leaks a credential).
"""

from __future__ import annotations

import re

_MASK = "[REDACTED]"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Private keys (PEM blocks, also inside a diff whose lines carry +/- prefixes).
    (re.compile(r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----"
                r"|\Z)", re.DOTALL), rf"-----BEGIN \1PRIVATE KEY----- {_MASK}"),
    # Authorization headers and bearer tokens.
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {_MASK}"),
    # OpenAI-style keys: sk-..., sk-proj-..., sess-..., rk-...
    (re.compile(r"\b(?:sk|rk|sess|pk)-[A-Za-z0-9_-]{8,}"), _MASK),
    # GitHub, Slack, Google, AWS and JWT-shaped tokens.
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{20,})"), _MASK),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), _MASK),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{20,}"), _MASK),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), _MASK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), _MASK),
    # Passwords in URLs: scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+):[^@\s/]+@"), rf"\1:{_MASK}@"),
    # key=value / "key": "value" pairs whose key names a secret.
    (
        re.compile(
            r"(?i)([\"']?\b[A-Za-z0-9_.-]*(?:api[_-]?key|secret|password|passwd|token|"
            r"access[_-]?key|refresh[_-]?token|authorization)[A-Za-z0-9_.-]*[\"']?\s*[:=]\s*)"
            r"([\"']?)(?!(?:bearer|basic|token)\s|\[REDACTED)([^\s\"',;}]{4,})"
        ),
        rf"\1\2{_MASK}",
    ),
)


def redact(text: str) -> str:
    """``text`` with API keys, bearer tokens, URL passwords and secret-named values masked."""
    if not text:
        return text
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text
