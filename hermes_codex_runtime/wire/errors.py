"""The wire layer's error tree.

Every failure the wire layer can raise derives from :class:`WireError`, so the session layer can
catch the whole family in one place and turn it into a classified turn result. Messages are meant
for people: each one says what went wrong and, where there is one, the fix.
"""

from __future__ import annotations

from typing import Any


class WireError(Exception):
    """Base class of everything the wire layer raises."""


class TransportClosed(WireError):
    """The app-server process is gone: its stdout closed, a write failed, or the connection was
    closed. Pending requests fail with this at once (not after their timeout)."""


class RequestTimeout(WireError, TimeoutError):
    """A request got no reply within its own timeout."""

    def __init__(self, method: str, timeout: float) -> None:
        super().__init__(f"codex app-server did not answer {method!r} within {timeout:g}s")
        self.method = method
        self.timeout = timeout


class ServerError(WireError):
    """The app-server answered a request with a JSON-RPC error object."""

    def __init__(self, method: str, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"codex app-server rejected {method!r} ({code}): {message}")
        self.method = method
        self.code = code
        self.message = message
        self.data = data


class CodexBinaryError(WireError):
    """The codex binary is missing, not runnable, or too old. ``fix`` tells the user what to do."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem} {fix}")
        self.problem = problem
        self.fix = fix


class CodexHomeError(CodexBinaryError):
    """The codex home the user named does not exist (it is never created silently)."""


class CodexConfigError(CodexBinaryError):
    """codex ignored its ``config.toml`` and would run on its defaults — another provider than
    the one the user chose, so nothing is sent."""
