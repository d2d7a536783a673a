"""A minimal RFC 6455 WebSocket client for remote ``codex app-server`` endpoints (stdlib only).

Owns the byte-level transport to an app-server that was started with ``--listen ws://IP:PORT``
(or behind a TLS proxy, ``wss://``) or ``--listen unix://PATH``: parsing and redacting endpoint
URLs (:class:`Endpoint`), the HTTP upgrade (random ``Sec-WebSocket-Key``, verified
``Sec-WebSocket-Accept``, ``Authorization: Bearer`` capability token), and message framing
(masking, 7/16/64-bit lengths, fragmentation, ping/pong, close). It knows nothing of JSON-RPC: one
JSON-RPC message is one text message; the connection layer above decodes it.

codex's unix socket speaks the same WebSocket protocol (an HTTP upgrade over the socket, no auth),
not newline-delimited JSON, so one class serves every scheme; :func:`connect_endpoint` is the
factory the connection layer calls.

Every failure is an :class:`EndpointError` whose ``kind`` says what went wrong and whose ``hint``
says what to do. Messages never contain the token and pass through :func:`redact`.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass
from typing import NoReturn
from urllib.parse import urlsplit

from hermes_codex_runtime.wire.errors import WireError
from hermes_codex_runtime.wire.redact import redact

__all__ = ["Endpoint", "EndpointError", "WebSocket", "connect_endpoint"]

#: The kinds of :class:`EndpointError`.
KINDS = ("refused", "auth", "tls", "handshake", "timeout", "closed", "bad_url")

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_OP_CONT, _OP_TEXT, _OP_BINARY, _OP_CLOSE, _OP_PING, _OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_CLOSE_NORMAL, _CLOSE_PROTOCOL, _CLOSE_TOO_BIG = 1000, 1002, 1009
#: The largest message :meth:`WebSocket.recv` accepts (codex lines can be tens of MB).
MAX_MESSAGE_BYTES = 1 << 30
#: Outgoing messages are split into frames of at most this size. codex (0.163-0.171) drops the
#: connection on a single frame over 16 MiB (its unix listener announces
#: ``x-codex-websocket-max-unfragmented-message-bytes: 16777216``) and on a message over 64 MiB.
FRAME_BYTES = 1 << 20
_MAX_HEADER_BYTES = 64 * 1024
_MAX_ERROR_BODY = 4096
_RECV_CHUNK = 1 << 20
_TOKEN_HINT = ("the token must be the contents of the server's --ws-token-file (or match its "
               "--ws-token-sha256)")


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

    @property
    def host_header(self) -> str:
        """The ``Host`` header value of the upgrade request."""
        if self.scheme == "unix" or self.host is None:
            return "localhost"
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "wss" else 80
        return host if self.port == default else f"{host}:{self.port}"


def _shown(url: str) -> str:
    """``url`` for an error message before it parsed: userinfo and query dropped, redacted."""
    head, sep, rest = url.partition("://")
    if sep:
        netloc, slash, tail = rest.partition("/")
        netloc = netloc.rpartition("@")[2]
        rest = netloc + slash + tail
    rest = rest.partition("?")[0].partition("#")[0]
    return repr(redact(head + sep + rest))


def _mask(key: bytes, data: bytes | memoryview) -> bytes:
    """``data`` XOR the 4-byte ``key`` repeated (one big-integer XOR, fast for MBs)."""
    size = len(data)
    if not size:
        return b""
    keystream = (key * (size // 4 + 1))[:size]
    return (int.from_bytes(data, "little") ^ int.from_bytes(keystream, "little")).to_bytes(
        size, "little")


def _frame(opcode: int, payload: bytes | memoryview, *, fin: bool = True) -> bytes:
    """One masked client frame."""
    size = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    if size < 126:
        head += bytes([0x80 | size])
    elif size < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", size)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", size)
    key = os.urandom(4)
    return head + key + _mask(key, payload)


def accept_key(key: str) -> str:
    """The ``Sec-WebSocket-Accept`` a server must answer to ``key``."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + _GUID).digest()).decode("ascii")


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


class WebSocket:
    """One client WebSocket connection (text messages in, text messages out).

    ``send_text`` is thread-safe; ``recv`` is meant for one reader thread; ``close`` may be called
    from any thread and unblocks a pending ``recv``.
    """

    def __init__(self, sock: socket.socket, endpoint: Endpoint, buffered: bytes = b"") -> None:
        self._sock = sock
        self.endpoint = endpoint
        self._buffer = bytearray(buffered)
        self._send_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._close_sent = False
        self._closed = False
        self._eof = False
        #: The close code and reason the peer sent, once it did.
        self.close_code: int | None = None
        self.close_reason = ""
        #: Response headers of the upgrade (lower-case names).
        self.headers: dict[str, str] = {}

    # -- connecting -------------------------------------------------------------------------

    @classmethod
    def connect(cls, endpoint: Endpoint, *, token: str | None = None, timeout: float = 10.0,
                ssl_context: ssl.SSLContext | None = None,
                token_file: str | None = None) -> WebSocket:
        """Connect and upgrade. Connecting (and the TLS handshake) is bounded by ``timeout``, and
        so is the whole HTTP upgrade; after it the socket blocks without timeout. The token is
        sent as ``Authorization: Bearer`` (surrounding whitespace trimmed, as codex trims its
        token file); ``token_file`` (optional) only names the token's source in an ``'auth'``
        hint."""
        if token is not None:
            token = token.strip()  # codex trims its token file too
        if token is not None and (not token or any(ord(c) < 0x21 or ord(c) == 0x7F
                                                   for c in token)):
            raise EndpointError("auth", "the websocket token is empty or contains whitespace or "
                                "control characters", _auth_hint(token_file))
        sock = cls._open_socket(endpoint, timeout, ssl_context)
        try:
            ws = cls._handshake(sock, endpoint, token, timeout, token_file)
        except BaseException:
            _quiet_close(sock)
            raise
        sock.settimeout(None)
        return ws

    @staticmethod
    def _open_socket(endpoint: Endpoint, timeout: float,
                     ssl_context: ssl.SSLContext | None) -> socket.socket:
        sock: socket.socket | None = None
        try:
            if endpoint.scheme == "unix":
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(timeout)
                sock.connect(endpoint.path)
            else:
                assert endpoint.host is not None and endpoint.port is not None
                sock = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if endpoint.scheme == "wss":
                    context = ssl_context or ssl.create_default_context()
                    sock = context.wrap_socket(sock, server_hostname=endpoint.host)
            return sock
        except (OSError, ValueError) as exc:
            if sock is not None:
                _quiet_close(sock)
            raise _connect_error(exc, endpoint, timeout) from None

    @classmethod
    def _handshake(cls, sock: socket.socket, endpoint: Endpoint, token: str | None,
                   timeout: float, token_file: str | None) -> WebSocket:
        where = endpoint.redacted()
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        lines = [f"GET {endpoint.path} HTTP/1.1", f"Host: {endpoint.host_header}",
                 "Upgrade: websocket", "Connection: Upgrade", f"Sec-WebSocket-Key: {key}",
                 "Sec-WebSocket-Version: 13", "User-Agent: hermes-codex-runtime"]
        if token is not None:
            lines.append(f"Authorization: Bearer {token}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")
        try:
            sock.sendall(request)
            head, rest = _read_head(sock, where, time.monotonic() + timeout)
        except ssl.SSLError as exc:
            raise _connect_error(exc, endpoint, timeout) from None
        except TimeoutError:
            raise EndpointError("timeout", f"{where} did not answer the websocket upgrade within "
                                f"{timeout:g}s", "is it a codex app-server listener?") from None
        except OSError as exc:
            raise EndpointError("handshake", f"{where} closed the connection during the "
                                f"websocket upgrade: {exc.strerror or exc}") from None
        status_line, headers = _parse_head(head, where)
        parts = status_line.split(" ", 2)
        code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        if code != 101:
            body = _read_error_body(sock, headers, rest)
            detail = f"{status_line}" + (f": {body}" if body else "")
            if code in (401, 403):
                what = "rejected the token" if token is not None else "requires a token"
                raise EndpointError("auth", f"{where} {what} ({detail})", _auth_hint(token_file))
            raise EndpointError("handshake", f"{where} refused the websocket upgrade ({detail})",
                                "is the URL a codex app-server websocket listener?")
        if headers.get("upgrade", "").lower() != "websocket" or "upgrade" not in [
                t.strip().lower() for t in headers.get("connection", "").split(",")]:
            raise EndpointError("handshake", f"{where} answered 101 without a websocket upgrade")
        if headers.get("sec-websocket-accept", "") != accept_key(key):
            raise EndpointError("handshake", f"{where} answered a wrong Sec-WebSocket-Accept",
                                "a proxy in between may not speak websocket")
        ws = cls(sock, endpoint, rest)
        ws.headers = headers
        return ws

    # -- sending ----------------------------------------------------------------------------

    def send_text(self, data: bytes) -> None:
        """Send ``data`` (UTF-8) as one text message, in masked frames of at most
        :data:`FRAME_BYTES`. Thread-safe. Raises ``EndpointError('closed')`` once closed (by
        :meth:`close`, or once :meth:`recv` saw the peer go)."""
        view = memoryview(data)
        frames = [_frame(_OP_TEXT if start == 0 else _OP_CONT,
                         view[start:start + FRAME_BYTES],
                         fin=start + FRAME_BYTES >= len(view))
                  for start in range(0, max(len(view), 1), FRAME_BYTES)]
        with self._send_lock:
            if self._closed or self._close_sent or self._eof:
                raise EndpointError("closed", f"the connection to {self.endpoint.redacted()} "
                                    "is closed")
            try:
                for frame in frames:
                    self._sock.sendall(frame)
            except OSError as exc:
                raise EndpointError("closed", f"sending to {self.endpoint.redacted()} failed: "
                                    f"{exc.strerror or exc.__class__.__name__}") from None

    def _send_control(self, opcode: int, payload: bytes) -> None:
        with self._send_lock:
            if self._closed or self._close_sent:
                return
            if opcode == _OP_CLOSE:
                self._close_sent = True
            with contextlib.suppress(OSError):
                self._sock.sendall(_frame(opcode, payload))

    # -- receiving --------------------------------------------------------------------------

    def recv(self) -> bytes | None:
        """The next complete text or binary message, or ``None`` once the peer closed (a close
        frame, EOF or a reset) or :meth:`close` was called. Blocks without timeout. Pings are
        answered, pongs ignored. A protocol violation by the server raises
        ``EndpointError('closed')`` after closing the connection."""
        message: bytearray | None = None
        while not self._eof:
            try:
                frame = self._read_frame(len(message) if message is not None else 0)
            except OSError:
                frame = None
            if frame is None:
                self._eof = True
                break
            fin, opcode, payload = frame
            if opcode == _OP_PING:
                self._send_control(_OP_PONG, bytes(payload))
            elif opcode == _OP_PONG:
                pass
            elif opcode == _OP_CLOSE:
                self._peer_closed(payload)
            elif opcode == _OP_CONT:
                if message is None:
                    self._fail(_CLOSE_PROTOCOL, "a continuation frame without a message")
                message += payload
                if fin:
                    return bytes(message)
            else:
                if message is not None:
                    self._fail(_CLOSE_PROTOCOL, "a new message inside a fragmented one")
                if fin:
                    return bytes(payload)
                message = payload
        return None

    def _read_frame(self, have: int) -> tuple[bool, int, bytearray] | None:
        """One frame ``(fin, opcode, payload)``, or ``None`` at EOF. ``have``: the bytes of
        the message being assembled (for the size limit)."""
        header = self._read_exact(2)
        if header is None:
            return None
        first, second = header[0], header[1]
        fin, opcode = bool(first & 0x80), first & 0x0F
        if first & 0x70:
            self._fail(_CLOSE_PROTOCOL, "a frame with reserved bits set")
        if second & 0x80:
            self._fail(_CLOSE_PROTOCOL, "a masked frame (servers must not mask)")
        if opcode >= 0x8 and (not fin or second & 0x7F > 125):
            self._fail(_CLOSE_PROTOCOL, "a fragmented or oversized control frame")
        if opcode not in (_OP_CONT, _OP_TEXT, _OP_BINARY, _OP_CLOSE, _OP_PING, _OP_PONG):
            self._fail(_CLOSE_PROTOCOL, f"an unknown opcode {opcode:#x}")
        size = second & 0x7F
        if size >= 126:
            raw = self._read_exact(2 if size == 126 else 8)
            if raw is None:
                return None
            size = struct.unpack("!H" if len(raw) == 2 else "!Q", raw)[0]
            if size >> 63:
                self._fail(_CLOSE_PROTOCOL, "a frame length with the top bit set")
        if have + size > MAX_MESSAGE_BYTES:
            self._fail(_CLOSE_TOO_BIG, f"a message over {MAX_MESSAGE_BYTES} bytes")
        payload = self._read_exact(size)
        if payload is None:
            return None
        return fin, opcode, payload

    def _read_exact(self, size: int) -> bytearray | None:
        """``size`` bytes (buffered first), or ``None`` at EOF."""
        if len(self._buffer) >= size:
            out = self._buffer[:size]
            del self._buffer[:size]
            return out
        out = bytearray(size)
        view = memoryview(out)
        got = len(self._buffer)
        view[:got] = self._buffer
        self._buffer.clear()
        while got < size:
            n = self._sock.recv_into(view[got:], min(size - got, _RECV_CHUNK))
            if n == 0:
                return None
            got += n
        return out

    def _peer_closed(self, payload: bytes | bytearray) -> None:
        self._eof = True
        if len(payload) >= 2:
            self.close_code = struct.unpack("!H", payload[:2])[0]
            self.close_reason = bytes(payload[2:]).decode("utf-8", "replace")
        echo = bytes(payload[:2]) if len(payload) >= 2 else b""
        self._send_control(_OP_CLOSE, echo)

    def _fail(self, code: int, what: str) -> NoReturn:
        self._eof = True
        self._send_control(_OP_CLOSE, struct.pack("!H", code))
        self.close()
        raise EndpointError("closed", f"{self.endpoint.redacted()} sent {what}; "
                            "the connection was closed")

    # -- closing ----------------------------------------------------------------------------

    def close(self) -> None:
        """Idempotent: send a close frame if possible, then shut the socket down (which
        unblocks a ``recv`` in another thread) and close it."""
        with self._state_lock:
            if self._closed:
                return
            # a sender stuck in a full buffer holds the lock: skip the close frame then
            if self._send_lock.acquire(timeout=1.0):
                try:
                    if not self._close_sent:
                        self._close_sent = True
                        frame = _frame(_OP_CLOSE, struct.pack("!H", _CLOSE_NORMAL))
                        try:
                            if isinstance(self._sock, ssl.SSLSocket):
                                self._sock.sendall(frame)
                            else:
                                self._sock.send(frame, socket.MSG_DONTWAIT)
                        except OSError:
                            pass
                finally:
                    self._send_lock.release()
            self._closed = True
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            _quiet_close(self._sock)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> WebSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _auth_hint(token_file: str | None) -> str:
    if token_file:
        return f"check the token in {token_file}: {_TOKEN_HINT}"
    return f"check the websocket token: {_TOKEN_HINT}"


def _quiet_close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()


def _read_head(sock: socket.socket, where: str, deadline: float) -> tuple[bytes, bytes]:
    """The HTTP response head (up to the blank line) and whatever followed it, read before
    ``deadline`` (a server trickling bytes cannot stretch the handshake)."""
    data = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        sock.settimeout(remaining)
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            return bytes(data[:end]), bytes(data[end + 4:])
        if len(data) > _MAX_HEADER_BYTES:
            raise EndpointError("handshake", f"{where} sent an HTTP response head over "
                                f"{_MAX_HEADER_BYTES} bytes")
        chunk = sock.recv(65536)
        if not chunk:
            if data:
                start = bytes(data[:80]).decode("latin-1")
                raise EndpointError("handshake", f"{where} did not answer the websocket upgrade "
                                    f"with HTTP (it sent {start!r})",
                                    "is the URL a codex app-server websocket listener?")
            raise EndpointError("handshake", f"{where} closed the connection without answering "
                                "the websocket upgrade",
                                "is the URL a codex app-server websocket listener?")
        data += chunk


def _parse_head(head: bytes, where: str) -> tuple[str, dict[str, str]]:
    text = head.decode("latin-1")
    status_line, *lines = text.split("\r\n")
    if not status_line.startswith("HTTP/"):
        raise EndpointError("handshake", f"{where} did not answer the websocket upgrade with "
                            f"HTTP (it sent {status_line[:80]!r})",
                            "is the URL a codex app-server websocket listener?")
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return status_line.strip(), headers


def _read_error_body(sock: socket.socket, headers: dict[str, str], rest: bytes) -> str:
    """A short, printable excerpt of a refused upgrade's body (best effort, bounded)."""
    body = bytearray(rest)
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        length = 0
    want = min(length, _MAX_ERROR_BODY)
    try:
        while len(body) < want:
            chunk = sock.recv(want - len(body))
            if not chunk:
                break
            body += chunk
    except OSError:
        pass
    text = bytes(body[:_MAX_ERROR_BODY]).decode("utf-8", "replace")
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())[:300]


def connect_endpoint(endpoint: Endpoint, *, token: str | None, timeout: float,
                     ssl_context: ssl.SSLContext | None = None,
                     token_file: str | None = None) -> WebSocket:
    """Connect to ``endpoint`` (ws, wss or unix — all speak WebSocket) and return an object with
    ``send_text``, ``recv`` and ``close``. codex's unix listener has no auth: a token given for a
    unix endpoint is still sent (harmless) so a proxy in front of it could check it."""
    return WebSocket.connect(endpoint, token=token, timeout=timeout, ssl_context=ssl_context,
                             token_file=token_file)
