"""Redaction of secrets from any text shown to a person, logged, or stored.

Owns :func:`redact` (and :func:`secret_name`, the same judgement for one key). It is applied to
stderr tails and error texts before they leave the wire layer, and by hosts to everything they
show (approval prompts, tool previews, command output). It is deliberately greedy (a false positive
costs a few characters of a log line, a false negative leaks a credential). What it knows:

* private keys (PEM blocks, also inside diffs), API keys and tokens by their shape (OpenAI,
  GitHub, Slack, Google, AWS, JWTs);
* ``Authorization:`` / ``Proxy-Authorization:`` headers (whatever the scheme), bearer/basic
  tokens, cookies;
* credentials in URLs (``scheme://user:password@host``, ``scheme://<long token>@host``);
* passwords on command lines: ``mysql -p<pw>`` (and mysqldump, mariadb…), ``sshpass -p <pw>``,
  ``--password <pw>`` / ``--password=<pw>`` (and ``--api-key``, ``--token``, ``-passin``…),
  ``curl -u user:<pw>`` / ``--user``;
* ``key=value`` / ``"key": "value"`` pairs whose key names a secret.
"""

from __future__ import annotations

import re
from collections.abc import Callable

MASK = "[REDACTED]"
_VALUE = r"[^\s\"'`]+"  # one shell word's worth of value (quotes end it)
#: Key names whose value is a secret (``authorization`` has its own pattern: its value has a
#: scheme word first).
_SECRET_WORDS = (r"api[_-]?key|secret|password|passwd|token|access[_-]?key|refresh[_-]?token|"
                 r"credential|cookie|signature|sshpass|mysql_pwd")
_SECRET_KEY = re.compile(rf"(?i)(?:{_SECRET_WORDS}|authorization)")
_SCHEMES = (r"bearer|basic|token|digest|negotiate|ntlm|apikey|key|hoba|mutual|vapid|"
            r"aws4-hmac-sha256|scram-sha-\d+")


def _header(match: re.Match[str]) -> str:
    scheme = match.group("scheme")
    return f"{match.group('head')}{scheme + ' ' if scheme else ''}{MASK}"


_PATTERNS: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    # Private keys (PEM blocks, also inside a diff whose lines carry +/- prefixes).
    (re.compile(r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----"
                r"|\Z)", re.DOTALL), rf"-----BEGIN \1PRIVATE KEY----- {MASK}"),
    # Authorization headers, whatever the scheme: the whole credential, up to the closing quote
    # when the header is quoted, else up to the line's end.
    (re.compile(rf"(?i)(?P<head>(?P<q>[\"'])?\b(?:proxy-)?authorization[\"']?[ \t]*+[:=][ \t]*+"
                rf"[\"']?)(?![\"']?(?:(?:{_SCHEMES})\s+)?\[REDACTED)(?:(?P<scheme>{_SCHEMES})\s++)?"
                r"(?(q)[^\s\"'][^\"'\n]*|[^\s\"'][^\n]*)"), _header),
    # Bearer/basic tokens elsewhere.
    (re.compile(r"(?i)\b(bearer|basic|token)\s+(?!\[REDACTED)[A-Za-z0-9._~+/=-]{8,}"),
     rf"\1 {MASK}"),
    # OpenAI-style keys: sk-..., sk-proj-..., sess-..., rk-...
    (re.compile(r"\b(?:sk|rk|sess|pk)-[A-Za-z0-9_-]{8,}"), MASK),
    # GitHub, Slack, Google, AWS and JWT-shaped tokens.
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{20,})"), MASK),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), MASK),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{20,}"), MASK),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MASK),
    # Credentials in URLs: scheme://user:password@host (a password may hold '@'; the last one
    # before the host counts), and scheme://<long token>@host.
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@\"'`]+):(?!\[REDACTED)[^\s/\"'`]+@"),
     rf"\1:{MASK}@"),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[A-Za-z0-9_.~%-]{16,}@"), rf"\1{MASK}@"),
    # Passwords on command lines.
    (re.compile(rf"(?i)(\b(?:mysql|mariadb)[\w-]*\b[^\n|;&]*?\s-p)([\"']?)(?!\[REDACTED){_VALUE}"),
     rf"\1\2{MASK}"),
    (re.compile(rf"(?i)(\bsshpass\b[^\n|;&]*?\s-p\s*)([\"']?)(?!\[REDACTED){_VALUE}"),
     rf"\1\2{MASK}"),
    (re.compile(rf"(?i)((?:^|(?<=[\s\"'`(]))--?(?:[\w-]*-)?(?:password|passwd|pass(?:in|out)?|"
                rf"pwd|secret|token|api-?key|auth-token|access-token)(?:\s+|=))([\"']?)"
                rf"(?!-|\[REDACTED){_VALUE}"), rf"\1\2{MASK}"),
    (re.compile(rf"((?:^|(?<=[\s\"'`(]))(?:-u|-U|--user|--proxy-user)(?:\s+|=)?)([\"']?)"
                rf"([^\s:\"'`@/-][^\s:\"'`@/]*):(?!\[REDACTED){_VALUE}"), rf"\1\2\3:{MASK}"),
    # key=value / "key": "value" pairs whose key names a secret.
    (
        re.compile(
            rf"(?i)([\"']?\b[A-Za-z0-9_.-]*(?:{_SECRET_WORDS})[A-Za-z0-9_.-]*[\"']?\s*[:=]\s*)"
            r"([\"']?)(?!(?:bearer|basic|token)\s|\[REDACTED)([^\s\"',;}]{4,})"
        ),
        rf"\1\2{MASK}",
    ),
)


def redact(text: str) -> str:
    """``text`` with private keys, API keys, tokens, passwords and secret-named values masked
    (see the module docstring)."""
    if not text:
        return text
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def secret_name(name: str) -> bool:
    """True when ``name`` (a key, a field, a variable) names a secret."""
    return bool(_SECRET_KEY.search(name))
