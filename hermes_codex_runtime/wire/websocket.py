"""The WebSocket transport to a remote ``codex app-server`` endpoint, on the ``websockets``
library (its synchronous client).

Owns what is ours to decide about such an endpoint: parsing and redacting its URL
(:class:`Endpoint`: ``ws://IP:PORT`` as codex listens, ``wss://`` behind a TLS proxy,
``unix://PATH`` — codex's unix socket speaks the same WebSocket protocol, without auth), the
``Authorization: Bearer`` capability token, the limits codex sets (it drops a single frame over
16 MiB, so big messages go out in :data:`FRAME_BYTES` fragments; replies may be tens of MB), and
turning every failure into an :class:`EndpointError` whose ``kind`` says what went wrong and whose
``hint`` says what to do. Framing, the upgrade, ping/pong and the closing handshake are the
library's. One JSON-RPC message is one text message; the connection layer above decodes it.

``websockets`` is imported only when an endpoint is actually opened: a host that runs only local
app-servers never loads it. Messages never contain the token and pass through :func:`redact`.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from hermes_codex_runtime.wire.errors import WireError
from hermes_codex_runtime.wire.redact import redact

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection

__all__ = ["Endpoint", "EndpointError", "WebSocket", "connect_endpoint"]

#: The largest message :meth:`WebSocket.recv` accepts (codex lines can be tens of MB).
MAX_MESSAGE_BYTES = 1 << 30
#: Outgoing messages are split into frames of at most this size. codex (0.163-0.171) drops the
#: connection on a single frame over 16 MiB (its unix listener announces
#: ``x-codex-websocket-max-unfragmented-message-bytes: 16777216``) and on a message over 64 MiB.
FRAME_BYTES = 1 << 20
#: How long closing waits for the server's half of the closing handshake.
CLOSE_TIMEOUT = 1.0
USER_AGENT = "hermes-codex-runtime"
_MAX_ERROR_BODY = 300
_TOKEN_HINT = ("the token must be the contents of the server's --ws-token-file (or match its "
               "--ws-token-sha256)")
_NOT_CODEX = "is the URL a codex app-server websocket listener?"
#: Close codes this client sends when the SERVER broke the protocol (then ``recv`` raises).
_WE_FAILED_IT = frozenset({1002, 1007, 1009})


class EndpointError(WireError):
    """A remote endpoint could not be reached, refused us, or broke the protocol.

    ``kind``: ``'refused' | 'auth' | 'tls' | 'handshake' | 'timeout' | 'closed' | 'bad_url'``;
    ``hint``: what the user can do about it (may be empty).
    """

    def __init__(self, kind: str, message: str, hint: str = "") -> None:
        message, hint = redact(message), redact(hint)
        super().__init__(f"{message} ({hint})" if hint else message)
        self.kind = kind
        self.message = message
        self.hint = hint


_USAGE = "use ws://HOST:PORT, wss://HOST[:PORT][/PATH] or unix:///ABSOLUTE/PATH"


_USAGE = "use ws://HOST:PORT, wss://HOST[:PORT][/PATH] or unix:///ABSOLUTE/PATH"


@dataclass(frozen=True)
class Endpoint:
    """A parsed app-server endpoint URL.

    ``path`` is the HTTP resource path for ``ws``/``wss`` (``"/"`` by default, query included) and
    the socket path for ``unix``; ``host`` and ``port`` are ``None`` for ``unix``.
    """

    url: str
    scheme: str
    host: str | None
    port: int | None
    path: str

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        """Parse ``url``; anything but ``ws://``, ``wss://`` or ``unix://`` raises
        ``EndpointError('bad_url')`` naming what is wrong."""
        if not isinstance(url, str) or not url.strip():
            raise EndpointError("bad_url", "the endpoint URL is empty", _USAGE)
        if url != url.strip() or any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F
                                     for c in url):
            raise EndpointError("bad_url", f"the endpoint URL {_shown(url)} contains spaces or "
                                "control characters", _USAGE)
        scheme, sep, rest = url.partition("://")
        scheme = scheme.lower()
        if not sep:
            raise EndpointError("bad_url", f"the endpoint URL {_shown(url)} has no scheme",
                                _USAGE)
        if scheme == "unix":
            return cls._parse_unix(url, rest)
        if scheme not in ("ws", "wss"):
            raise EndpointError("bad_url", f"unsupported scheme {scheme + '://'!r} in the endpoint "
                                f"URL {_shown(url)}", _USAGE)
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise EndpointError("bad_url", f"the endpoint URL {_shown(url)} is malformed: {exc}",
                                _USAGE) from None
        if parts.username is not None or parts.password is not None:
            raise EndpointError("bad_url", f"the endpoint URL {_shown(url)} carries credentials",
                                "pass the token through the token file, never in the URL")
        host = parts.hostname
        if not host:
            raise EndpointError("bad_url", f"the endpoint URL {_shown(url)} has no host", _USAGE)
        if port is None:
            if scheme == "ws":
                raise EndpointError("bad_url", f"the endpoint URL {_shown(url)} has no port "
                                    "(codex listens on ws://IP:PORT)", _USAGE)
            port = 443
        if port == 0:
            raise EndpointError("bad_url", f"the endpoint URL {_shown(url)} has port 0", _USAGE)
        if parts.fragment:
            raise EndpointError("bad_url", f"the endpoint URL {_shown(url)} has a #fragment",
                                _USAGE)
        path = parts.path or "/"
        if parts.query:
            path = f"{path}?{parts.query}"
        return cls(url=url, scheme=scheme, host=host, port=port, path=path)

    @classmethod
    def _parse_unix(cls, url: str, rest: str) -> Endpoint:
        if not rest:
            raise EndpointError("bad_url", f"the endpoint URL {url!r} names no socket path "
                                "(codex's own default is $CODEX_HOME/app-server-control/"
                                "app-server-control.sock)", _USAGE)
        if not rest.startswith("/"):
            raise EndpointError("bad_url", f"the socket path in {_shown(url)} is not absolute",
                                _USAGE)
        if "?" in rest or "#" in rest:
            raise EndpointError("bad_url", f"the endpoint URL {_shown(url)} has a query or "
                                "fragment (a unix socket path has neither)", _USAGE)
        return cls(url=url, scheme="unix", host=None, port=None, path=rest)

    def redacted(self) -> str:
        """The URL without userinfo and with query values masked, for messages."""
        if self.scheme == "unix":
            return f"unix://{self.path}"
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        default = 443 if self.scheme == "wss" else None
        netloc = host if self.port == default else f"{host}:{self.port}"
        path, _, query = self.path.partition("?")
        if query:
            masked = "&".join(f"{pair.partition('=')[0]}=***" if "=" in pair else pair
                              for pair in query.split("&"))
            path = f"{path}?{masked}"
        return f"{self.scheme}://{netloc}{'' if path == '/' else path}"


def _shown(url: str) -> str:
    """``url`` for an error message before it parsed: userinfo and query dropped, redacted."""
    head, sep, rest = url.partition("://")
    if sep:
        netloc, slash, tail = rest.partition("/")
        netloc = netloc.rpartition("@")[2]
        rest = netloc + slash + tail
    rest = rest.partition("?")[0].partition("#")[0]
    return repr(redact(head + sep + rest))


def _connect_error(exc: BaseException, endpoint: Endpoint, timeout: float) -> EndpointError:
    where = endpoint.redacted()
    if isinstance(exc, ssl.SSLError):
        reason = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or exc
        return EndpointError("tls", f"TLS with {where} failed: {reason}",
                             "check the server certificate, or pass an ssl_context that trusts it")
    if isinstance(exc, socket.timeout | TimeoutError):
        return EndpointError("timeout", f"{where} did not answer within {timeout:g}s",
                             "is the app-server running and reachable?")
    if isinstance(exc, socket.gaierror):
        return EndpointError("refused", f"cannot resolve the host of {where}: {exc.strerror}",
                             "check the host name")
    if isinstance(exc, FileNotFoundError):
        return EndpointError("refused", f"no socket at {endpoint.path}",
                             "is `codex app-server --listen unix://...` running?")
    if isinstance(exc, PermissionError):
        return EndpointError("refused", f"no permission to connect to {where}",
                             "the socket belongs to another user")
    if isinstance(exc, ConnectionRefusedError):
        hint = ("is `codex app-server --listen unix://...` running?" if endpoint.scheme == "unix"
                else "is `codex app-server --listen ws://IP:PORT` running there?")
        return EndpointError("refused", f"connection to {where} refused", hint)
    if isinstance(exc, OSError):
        return EndpointError("refused", f"cannot connect to {where}: "
                             f"{exc.strerror or exc.__class__.__name__}")
    return EndpointError("handshake", f"cannot connect to {where}: {exc}")


def _handshake_error(exc: Exception, where: str, token: str | None,
                     token_file: str | None) -> EndpointError:
    """What a refused or broken upgrade means (the library's handshake exceptions)."""
    from websockets.exceptions import InvalidHeaderValue, InvalidMessage, InvalidStatus

    if isinstance(exc, InvalidStatus):
        response = exc.response
        status_line = f"HTTP/1.1 {response.status_code} {response.reason_phrase}".strip()
        body = " ".join("".join(c if c.isprintable() else " " for c in bytes(
            response.body or b"")[:4096].decode("utf-8", "replace")).split())[:_MAX_ERROR_BODY]
        detail = status_line + (f": {body}" if body else "")
        if response.status_code in (401, 403):
            what = "rejected the token" if token is not None else "requires a token"
            return EndpointError("auth", f"{where} {what} ({detail})", _auth_hint(token_file))
        return EndpointError("handshake", f"{where} refused the websocket upgrade ({detail})",
                             _NOT_CODEX)
    if isinstance(exc, InvalidHeaderValue) and exc.name.lower() == "sec-websocket-accept":
        return EndpointError("handshake", f"{where} answered a wrong Sec-WebSocket-Accept",
                             "a proxy in between may not speak websocket")
    if isinstance(exc, InvalidMessage):
        return EndpointError("handshake", f"{where} did not answer the websocket upgrade with "
                             "HTTP", _NOT_CODEX)
    return EndpointError("handshake", f"{where} refused the websocket upgrade ({exc})",
                         _NOT_CODEX)


class WebSocket:
    """One client connection (text messages in, text messages out), on ``websockets``.

    ``send_text`` is thread-safe; ``recv`` is meant for one reader thread; ``close`` may be called
    from any thread and unblocks a pending ``recv``.
    """

    def __init__(self, conn: ClientConnection, endpoint: Endpoint) -> None:
        self._conn = conn
        self.endpoint = endpoint
        #: Response headers of the upgrade (lower-case names).
        self.headers = {name.lower(): value for name, value in conn.response.headers.raw_items()} \
            if conn.response is not None else {}

    @property
    def closed(self) -> bool:
        """Whether the connection has ended (closed by either side, or lost)."""
        from websockets.protocol import State

        return self._conn.state is State.CLOSED

    @property
    def close_code(self) -> int | None:
        """The close code the peer sent, once it did."""
        return self._conn.close_code

    @property
    def close_reason(self) -> str:
        """The close reason the peer sent, once it did."""
        return self._conn.close_reason or ""

    def send_text(self, data: bytes) -> None:
        """Send ``data`` (UTF-8) as one text message, in frames of at most
        :data:`FRAME_BYTES`. Raises ``EndpointError('closed')`` once the connection is closed."""
        from websockets.exceptions import ConnectionClosed

        try:
            if len(data) <= FRAME_BYTES:
                self._conn.send(data, text=True)
            else:
                self._conn.send(_fragments(data), text=True)
        except ConnectionClosed as exc:
            raise EndpointError("closed", f"the connection to {self.endpoint.redacted()} is "
                                f"closed ({_why(exc)})") from None
        except OSError as exc:
            raise EndpointError("closed", f"sending to {self.endpoint.redacted()} failed: "
                                f"{exc.strerror or exc.__class__.__name__}") from None

    def recv(self) -> bytes | None:
        """The next complete message, or ``None`` once the peer closed (a close frame, EOF or a
        reset) or :meth:`close` was called. Blocks without timeout. A protocol violation by the
        server raises ``EndpointError('closed')`` (the connection is closed by then)."""
        from websockets.exceptions import ConnectionClosed, ConnectionClosedOK

        try:
            return self._conn.recv(decode=False)
        except ConnectionClosedOK:
            return None
        except ConnectionClosed as exc:
            sent = exc.sent
            if exc.rcvd is None and sent is not None and sent.code in _WE_FAILED_IT:
                raise EndpointError("closed", f"{self.endpoint.redacted()} sent a message that "
                                    f"breaks the protocol ({sent.reason}); the connection was "
                                    "closed") from None
            return None

    def close(self) -> None:
        """Idempotent: the closing handshake (bounded by :data:`CLOSE_TIMEOUT`), then the socket
        is closed — which unblocks a ``recv`` in another thread."""
        with contextlib.suppress(Exception):
            self._conn.close()

    def __enter__(self) -> WebSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fragments(data: bytes) -> Iterator[bytes]:
    for start in range(0, len(data), FRAME_BYTES):
        yield data[start:start + FRAME_BYTES]


def _why(exc: Exception) -> str:
    return str(exc) or exc.__class__.__name__


def _auth_hint(token_file: str | None) -> str:
    if token_file:
        return f"check the token in {token_file}: {_TOKEN_HINT}"
    return f"check the websocket token: {_TOKEN_HINT}"


def connect_endpoint(endpoint: Endpoint, *, token: str | None, timeout: float,
                     ssl_context: ssl.SSLContext | None = None,
                     token_file: str | None = None) -> WebSocket:
    """Connect to ``endpoint`` (ws, wss or unix — all speak WebSocket) and upgrade; the whole
    opening (TCP or unix connect, TLS, upgrade) is bounded by ``timeout``. The token is sent as
    ``Authorization: Bearer`` (surrounding whitespace trimmed, as codex trims its token file);
    ``token_file`` only names the token's source in an ``'auth'`` hint. codex's unix listener has
    no auth: a token given for a unix endpoint is still sent (harmless) so a proxy in front of it
    could check it."""
    if token is not None:
        token = token.strip()
    if token is not None and (not token or any(ord(c) < 0x21 or ord(c) == 0x7F for c in token)):
        raise EndpointError("auth", "the websocket token is empty or contains whitespace or "
                            "control characters", _auth_hint(token_file))
    from websockets.exceptions import InvalidHandshake, InvalidURI
    from websockets.sync.client import connect, unix_connect

    headers = {"Authorization": f"Bearer {token}"} if token else None
    where = endpoint.redacted()
    try:
        if endpoint.scheme == "unix":
            conn = unix_connect(endpoint.path, "ws://localhost/", additional_headers=headers,
                                user_agent_header=USER_AGENT, compression=None,
                                open_timeout=timeout, ping_interval=None,
                                close_timeout=CLOSE_TIMEOUT, max_size=MAX_MESSAGE_BYTES)
        else:
            conn = connect(_uri(endpoint), ssl=ssl_context if endpoint.scheme == "wss" else None,
                           additional_headers=headers, user_agent_header=USER_AGENT,
                           compression=None, open_timeout=timeout, ping_interval=None,
                           close_timeout=CLOSE_TIMEOUT, max_size=MAX_MESSAGE_BYTES)
    except (InvalidHandshake, InvalidURI) as exc:
        raise _handshake_error(exc, where, token, token_file) from None
    except (OSError, ValueError, TimeoutError) as exc:
        raise _connect_error(exc, endpoint, timeout) from None
    return WebSocket(conn, endpoint)


def _uri(endpoint: Endpoint) -> str:
    assert endpoint.host is not None
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"{endpoint.scheme}://{host}:{endpoint.port}{endpoint.path}"
