"""The WebSocket transport (``wire/websocket.py``, on ``websockets``) against the real
``codex app-server`` listeners
(``--listen ws://IP:PORT`` and ``--listen unix://PATH``), plus framing cases against a tiny
in-test server. Every codex process is started here and killed by PID at teardown; every wait is
bounded."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import queue
import re
import secrets
import shutil
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hermes_codex_runtime.wire import probe_version, spawn_environment
from hermes_codex_runtime.wire import websocket as ws_module
from hermes_codex_runtime.wire.binary import format_version
from hermes_codex_runtime.wire.proctree import reap, snapshot_descendants
from hermes_codex_runtime.wire.websocket import (
    Endpoint,
    EndpointError,
    WebSocket,
    connect_endpoint,
)

START_TIMEOUT = 30.0
REPLY_TIMEOUT = 30.0
_BANNER = re.compile(r"listening on: (ws://127\.0\.0\.1:\d+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


# ---------------------------------------------------------------------------------------------
# a real codex app-server on a listener


class Listener:
    """One ``codex app-server --listen ...`` process; its stderr is drained into ``stderr``."""

    def __init__(self, codex_binary, codex_home: Path, listen: str, extra: list[str]) -> None:
        env = spawn_environment(codex_home=str(codex_home),
                                path_prepend=codex_binary.path_prepend)
        from hermes_codex_runtime.offline.codex_home import OFFLINE_OVERRIDES

        self.argv = [codex_binary.path, "app-server", *OFFLINE_OVERRIDES, "--listen", listen,
                     *extra]
        self.stderr_lines: list[str] = []
        self._banner: queue.Queue[str] = queue.Queue()
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.argv, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = _ANSI.sub("", raw.decode("utf-8", "replace"))
            self.stderr_lines.append(line)
            match = _BANNER.search(line)
            if match:
                self._banner.put(match.group(1))

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    def ws_url(self) -> str:
        """The bound ``ws://`` address codex prints on stderr (bounded wait)."""
        try:
            return self._banner.get(timeout=START_TIMEOUT)
        except queue.Empty:
            pytest.fail(f"codex printed no listening address in {START_TIMEOUT}s:\n{self.stderr}")

    def wait_for_socket(self, path: Path) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"codex exited ({self.proc.returncode}):\n{self.stderr}")
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(path))
                return
            except OSError:
                time.sleep(0.01)
            finally:
                probe.close()
        pytest.fail(f"no socket at {path} after {START_TIMEOUT}s:\n{self.stderr}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            children = snapshot_descendants(self.proc.pid)
            self.proc.terminate()  # SIGTERM: a unix listener removes its socket and symlink
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
            reap(children)
        else:
            self.proc.wait(timeout=10)
        self._drain.join(timeout=5)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture
def listener(codex_binary, codex_home):
    """Factory: ``listener(listen_url, *extra_args)`` → a running :class:`Listener`."""
    started: list[Listener] = []

    def start(listen: str, *extra: str, home: Path | None = None) -> Listener:
        proc = Listener(codex_binary, home or codex_home, listen, list(extra))
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()


@pytest.fixture
def token_file(tmp_path):
    token = "tok-" + secrets.token_hex(16)
    path = tmp_path / "ws-token"
    path.write_text(token + "\n")  # codex trims the trailing newline
    path.chmod(0o600)
    return token, path


@pytest.fixture
def ws_server(listener, token_file):
    """A capability-token ws listener on a free port: ``(url, token, token_path, listener)``."""
    token, path = token_file
    proc = listener("ws://127.0.0.1:0", "--ws-auth", "capability-token",
                    "--ws-token-file", str(path))
    return proc.ws_url(), token, path, proc


@pytest.fixture
def sockets():
    """Every client socket a test opens is closed at teardown."""
    opened: list[WebSocket] = []
    yield opened
    for ws in opened:
        ws.close()


class Reader:
    """All messages of one client, read by a background thread (so no test can block forever
    in ``recv``); ``None`` marks the end of the connection."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.messages: queue.Queue[bytes | BaseException | None] = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while True:
                message = self.ws.recv()
                self.messages.put(message)
                if message is None:
                    return
        except BaseException as exc:
            self.messages.put(exc)

    def next(self, timeout: float = REPLY_TIMEOUT) -> bytes | BaseException | None:
        try:
            return self.messages.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"nothing arrived within {timeout}s")

    def reply(self, request_id: int, timeout: float = REPLY_TIMEOUT) -> dict:
        """The reply to ``request_id`` (notifications in between are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.next(max(0.01, deadline - time.monotonic()))
            assert isinstance(message, bytes), f"connection ended: {message!r}"
            decoded = json.loads(message)
            if decoded.get("id") == request_id and "method" not in decoded:
                return decoded


def client(url: str, sockets: list[WebSocket], token: str | None = None, **kw) -> WebSocket:
    ws = connect_endpoint(Endpoint.parse(url), token=token, timeout=kw.pop("timeout", 10.0), **kw)
    sockets.append(ws)
    return ws


def send(ws: WebSocket, message: dict) -> None:
    ws.send_text(json.dumps(message).encode())


def initialize(ws: WebSocket, reader: Reader, request_id: int = 1) -> dict:
    send(ws, {"id": request_id, "method": "initialize",
              "params": {"clientInfo": {"name": "hermes-ws-test", "title": "t", "version": "0"},
                         "capabilities": {}}})
    reply = reader.reply(request_id)
    send(ws, {"method": "initialized"})
    return reply


# ---------------------------------------------------------------------------------------------
# ws:// listener


def test_right_token_connects_and_initializes(ws_server, sockets, codex_binary, codex_home):
    url, token, _path, _proc = ws_server
    ws = client(url, sockets, token=token)
    reader = Reader(ws)
    result = initialize(ws, reader)["result"]
    version = format_version(probe_version(codex_binary))
    assert result["userAgent"].startswith(f"hermes-ws-test/{version} ")
    assert result["codexHome"] == str(codex_home)
    send(ws, {"id": 2, "method": "thread/list", "params": {}})
    assert "data" in reader.reply(2)["result"]


def test_a_wrong_token_is_an_auth_error_that_never_shows_the_token(ws_server):
    url, token, path, _proc = ws_server
    wrong = "wrong-" + secrets.token_hex(16)
    with pytest.raises(EndpointError) as caught:
        connect_endpoint(Endpoint.parse(url), token=wrong, timeout=10, token_file=str(path))
    error = caught.value
    assert error.kind == "auth"
    assert "401" in str(error) and "invalid websocket bearer token" in str(error)
    assert str(path) in error.hint
    for secret in (wrong, token):
        assert secret not in str(error) and secret not in error.hint and secret not in repr(error)


def test_no_token_is_an_auth_error(ws_server):
    url, _token, _path, _proc = ws_server
    with pytest.raises(EndpointError) as caught:
        connect_endpoint(Endpoint.parse(url), token=None, timeout=10)
    assert caught.value.kind == "auth"
    assert "missing websocket bearer token" in str(caught.value)


def test_a_port_nobody_listens_on_is_refused_quickly():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    port = holder.getsockname()[1]
    holder.close()
    started = time.monotonic()
    with pytest.raises(EndpointError) as caught:
        connect_endpoint(Endpoint.parse(f"ws://127.0.0.1:{port}"), token="x" * 20, timeout=10)
    assert caught.value.kind == "refused"
    assert time.monotonic() - started < 2.0


def test_each_client_is_its_own_session(ws_server, sockets):
    url, token, _path, _proc = ws_server
    first, second = client(url, sockets, token=token), client(url, sockets, token=token)
    first_reader, second_reader = Reader(first), Reader(second)
    initialize(first, first_reader)
    send(second, {"id": 5, "method": "thread/list", "params": {}})
    assert second_reader.reply(5)["error"]["message"] == "Not initialized"
    initialize(second, second_reader, request_id=6)
    send(first, {"id": 7, "method": "thread/list", "params": {}})
    send(second, {"id": 7, "method": "thread/list", "params": {}})
    assert "result" in first_reader.reply(7) and "result" in second_reader.reply(7)


def test_one_json_rpc_message_per_text_frame(ws_server, sockets):
    """Two messages in one frame are dropped by codex (it logs a deserialize error)."""
    url, token, _path, proc = ws_server
    ws = client(url, sockets, token=token)
    reader = Reader(ws)
    initialize(ws, reader)
    ws.send_text(b'{"id":10,"method":"thread/list","params":{}}\n'
                 b'{"id":11,"method":"thread/list","params":{}}')
    send(ws, {"id": 12, "method": "thread/list", "params": {}})
    seen = []
    while True:
        message = reader.next()
        assert isinstance(message, bytes)
        decoded = json.loads(message)
        seen.append(decoded.get("id"))
        if decoded.get("id") == 12:
            break
    assert 10 not in seen and 11 not in seen
    assert "Failed to deserialize JSONRPCMessage" in proc.stderr


def test_big_messages_both_ways(ws_server, sockets, tmp_path):
    url, token, _path, _proc = ws_server
    ws = client(url, sockets, token=token)
    reader = Reader(ws)
    initialize(ws, reader)
    # codex -> client: a 20 MiB reply in ONE frame (64-bit length)
    blob = os.urandom(15 * 1024 * 1024)
    (tmp_path / "big.bin").write_bytes(blob)
    send(ws, {"id": 2, "method": "fs/readFile", "params": {"path": str(tmp_path / "big.bin")}})
    data = reader.reply(2, timeout=60)["result"]["dataBase64"]
    assert len(data) == 20 * 1024 * 1024 and base64.b64decode(data) == blob
    # client -> codex: a 2 MiB+ message, sent fragmented (codex refuses single frames > 16 MiB)
    small = os.urandom(1536 * 1024)
    target = tmp_path / "written.bin"
    send(ws, {"id": 3, "method": "fs/writeFile",
              "params": {"path": str(target), "dataBase64": base64.b64encode(small).decode()}})
    assert reader.reply(3, timeout=60)["result"] == {}
    assert target.read_bytes() == small


def test_a_killed_server_ends_a_waiting_recv(ws_server, sockets):
    url, token, _path, proc = ws_server
    ws = client(url, sockets, token=token)
    reader = Reader(ws)
    initialize(ws, reader)
    time.sleep(0.2)
    while not reader.messages.empty():  # start-up notifications
        reader.messages.get_nowait()
    killed = time.monotonic()
    proc.proc.kill()
    assert reader.next(timeout=10) is None  # EOF: codex sends no close frame when it dies
    assert time.monotonic() - killed < 5
    reader.thread.join(timeout=5)
    with pytest.raises(EndpointError) as caught:
        send(ws, {"id": 9, "method": "thread/list", "params": {}})
    assert caught.value.kind == "closed"


def test_close_unblocks_a_reader_and_the_server_stays_up(ws_server, sockets):
    url, token, _path, proc = ws_server
    ws = client(url, sockets, token=token)
    reader = Reader(ws)
    initialize(ws, reader)
    time.sleep(0.1)
    ws.close()
    ws.close()  # idempotent
    deadline = time.monotonic() + 5
    while (message := reader.next(timeout=max(0.01, deadline - time.monotonic()))) is not None:
        assert isinstance(message, bytes)
    with pytest.raises(EndpointError) as caught:
        ws.send_text(b"{}")
    assert caught.value.kind == "closed"
    again = client(url, sockets, token=token)
    initialize(again, Reader(again))
    assert proc.proc.poll() is None


def test_the_listener_prints_its_address_and_accepts_at_once(ws_server):
    url, _token, _path, proc = ws_server
    assert time.monotonic() - proc.started < START_TIMEOUT
    port = int(url.rsplit(":", 1)[1])
    deadline = time.monotonic() + 10  # the banner's later lines may still be on their way
    while f"readyz: http://127.0.0.1:{port}/readyz" not in proc.stderr:
        assert time.monotonic() < deadline, proc.stderr
        time.sleep(0.02)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as probe:
        probe.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert probe.recv(100).startswith(b"HTTP/1.1 200")


# ---------------------------------------------------------------------------------------------
# unix:// listener: the same websocket protocol over the socket, no auth


def test_unix_listener_speaks_websocket_without_auth(listener, tmp_path, sockets, token_file):
    path = tmp_path / "codex.sock"
    # --ws-auth is accepted but not applied to the unix listener
    proc = listener(f"unix://{path}", "--ws-auth", "capability-token",
                    "--ws-token-file", str(token_file[1]))
    proc.wait_for_socket(path)
    assert path.is_symlink()  # → /tmp/codex-daemon-<uid>/<sha256 of the path> (mode 0600)
    ws = client(f"unix://{path}", sockets, token=None)
    assert ws.headers["x-codex-websocket-max-unfragmented-message-bytes"] == "16777216"
    reader = Reader(ws)
    assert initialize(ws, reader)["result"]["userAgent"].startswith("hermes-ws-test/")
    send(ws, {"id": 2, "method": "thread/list", "params": {}})
    assert "result" in reader.reply(2)
    # a newline-delimited JSON client gets nothing but EOF
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.settimeout(10)
        raw.connect(str(path))
        raw.sendall(b'{"id":1,"method":"initialize","params":{"clientInfo":'
                    b'{"name":"x","title":"x","version":"0"},"capabilities":{}}}\n')
        assert raw.recv(1024) == b""


def test_unix_without_a_path_listens_in_codex_home(listener, codex_binary, mock_provider,
                                                   sockets):
    from hermes_codex_runtime.offline.codex_home import prepare_codex_home

    # a unix socket path has at most 107 bytes: pytest's own tmp paths can be longer
    short = Path(tempfile.mkdtemp(prefix="cx-", dir="/tmp"))
    try:
        home = prepare_codex_home(short / "h", mock_provider.base_url,
                                  codex_bin=codex_binary.path)
        proc = listener("unix://", home=home)
        path = home / "app-server-control" / "app-server-control.sock"
        proc.wait_for_socket(path)
        ws = client(f"unix://{path}", sockets)
        assert "result" in initialize(ws, Reader(ws))
        proc.kill()
    finally:
        shutil.rmtree(short, ignore_errors=True)
    with pytest.raises(EndpointError) as caught:
        Endpoint.parse("unix://")
    assert caught.value.kind == "bad_url" and "app-server-control.sock" in str(caught.value)


def test_a_missing_unix_socket_is_refused(tmp_path):
    with pytest.raises(EndpointError) as caught:
        connect_endpoint(Endpoint.parse(f"unix://{tmp_path}/nothing.sock"), token=None,
                         timeout=5)
    assert caught.value.kind == "refused"


# ---------------------------------------------------------------------------------------------
# Endpoint.parse


@pytest.mark.parametrize(("url", "scheme", "host", "port", "path"), [
    ("ws://127.0.0.1:4500", "ws", "127.0.0.1", 4500, "/"),
    ("WS://127.0.0.1:4500/", "ws", "127.0.0.1", 4500, "/"),
    ("ws://[::1]:4500/rpc", "ws", "::1", 4500, "/rpc"),
    ("wss://codex.example.com/app", "wss", "codex.example.com", 443, "/app"),
    ("wss://codex.example.com:8443/a?b=c", "wss", "codex.example.com", 8443, "/a?b=c"),
    ("unix:///run/codex.sock", "unix", None, None, "/run/codex.sock"),
])
def test_endpoint_parse_good(url, scheme, host, port, path):
    endpoint = Endpoint.parse(url)
    assert (endpoint.url, endpoint.scheme, endpoint.host, endpoint.port, endpoint.path) == (
        url, scheme, host, port, path)


@pytest.mark.parametrize("url", [
    "", "   ", "http://127.0.0.1:4500", "https://h/x", "127.0.0.1:4500", "ws://127.0.0.1",
    "ws://127.0.0.1:notaport", "ws://127.0.0.1:70000", "ws://127.0.0.1:0", "ws://:4500",
    " ws://127.0.0.1:4500", "ws://127.0.0.1:4500/a b", "ws://user:pw-secret-99@h:1",
    "ws://h:1/#frag", "unix://", "unix://relative.sock", "unix:///tmp/x.sock?y=1", "stdio://",
])
def test_endpoint_parse_bad(url):
    with pytest.raises(EndpointError) as caught:
        Endpoint.parse(url)
    assert caught.value.kind == "bad_url"
    assert "pw-secret-99" not in str(caught.value)


def test_endpoint_redacted():
    assert Endpoint.parse("wss://h/p?token=abc&x").redacted() == "wss://h/p?token=***&x"
    assert Endpoint.parse("ws://127.0.0.1:4500").redacted() == "ws://127.0.0.1:4500"
    assert Endpoint.parse("ws://[::1]:1/").redacted() == "ws://[::1]:1"
    assert Endpoint.parse("unix:///run/c.sock").redacted() == "unix:///run/c.sock"


# ---------------------------------------------------------------------------------------------
# framing, against a tiny in-test websocket server


RFC6455_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def accept_key(key: str) -> str:
    """The ``Sec-WebSocket-Accept`` RFC 6455 (section 4.2.2) has a server answer to ``key``."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + RFC6455_GUID).digest()).decode()


def read_exact(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def read_client_frame(conn: socket.socket) -> tuple[bool, int, bytes]:
    first, second = read_exact(conn, 2)
    assert second & 0x80, "client frames must be masked"
    size = second & 0x7F
    if size == 126:
        size = struct.unpack("!H", read_exact(conn, 2))[0]
    elif size == 127:
        size = struct.unpack("!Q", read_exact(conn, 8))[0]
    key = read_exact(conn, 4)
    masked = read_exact(conn, size)
    payload = bytes(b ^ key[i % 4] for i, b in enumerate(masked)) if size < 4096 else \
        (int.from_bytes(masked, "big") ^ int.from_bytes((key * (size // 4 + 1))[:size], "big")
         ).to_bytes(size, "big")
    return bool(first & 0x80), first & 0x0F, payload


def server_frame(opcode: int, payload: bytes, *, fin: bool = True, rsv: int = 0,
                 mask: bool = False) -> bytes:
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    size = len(payload)
    bit = 0x80 if mask else 0
    if size < 126:
        head += bytes([bit | size])
    elif size < 65536:
        head += bytes([bit | 126]) + struct.pack("!H", size)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", size)
    if mask:
        key = b"\x01\x02\x03\x04"
        return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return head + payload


def upgrade(conn: socket.socket, *, accept: str | None = None) -> dict[str, str]:
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = conn.recv(4096)
        if not chunk:
            raise EOFError
        head += chunk
    lines = head.split(b"\r\n\r\n")[0].decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    headers[":request"] = lines[0]
    conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade"
                  f"\r\nSec-WebSocket-Accept: {accept or accept_key(headers['sec-websocket-key'])}"
                  "\r\n\r\n").encode())
    return headers


class ScriptResult:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: object = None
        self.error: BaseException | None = None

    def value(self, timeout: float = 20.0):
        assert self.done.wait(timeout), "the in-test server script did not finish"
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def local_server():
    """Factory: ``local_server(script)`` runs ``script(conn)`` for ONE accepted connection in a
    thread and returns ``(port, result)``; ``result.value()`` waits for the script's return
    value (and re-raises what it raised)."""
    servers: list[tuple[socket.socket, threading.Thread]] = []

    def start(script: Callable[[socket.socket], object]) -> tuple[int, ScriptResult]:
        listening = socket.socket()
        listening.bind(("127.0.0.1", 0))
        listening.listen(1)
        listening.settimeout(20)
        result = ScriptResult()

        def run() -> None:
            try:
                conn, _ = listening.accept()
            except OSError as exc:
                result.error = exc
                result.done.set()
                return
            with conn:
                conn.settimeout(20)
                try:
                    result.result = script(conn)
                except BaseException as exc:
                    result.error = exc
                finally:
                    result.done.set()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        servers.append((listening, thread))
        return listening.getsockname()[1], result

    yield start
    for listening, thread in servers:
        thread.join(timeout=20)
        listening.close()
        assert not thread.is_alive()


def local_client(port: int, sockets: list[WebSocket], **kw) -> WebSocket:
    return client(f"ws://127.0.0.1:{port}", sockets, **kw)


def test_handshake_request_and_masked_frames(local_server, sockets, monkeypatch):
    monkeypatch.setattr(ws_module, "FRAME_BYTES", 1000)

    def script(conn):
        headers = upgrade(conn)
        frames = [read_client_frame(conn)]
        while not frames[-1][0]:  # up to the message's final frame
            frames.append(read_client_frame(conn))
        small = read_client_frame(conn)
        conn.sendall(server_frame(1, b"done"))
        return headers, frames, small

    port, result = local_server(script)
    ws = local_client(port, sockets, token="  the-token-123456\n")
    ws.send_text(b"a" * 2500)
    ws.send_text(b"")
    assert Reader(ws).next(10) == b"done"
    headers, frames, small = result.value()
    assert headers[":request"] == "GET / HTTP/1.1"
    assert headers["authorization"] == "Bearer the-token-123456"
    assert headers["host"] == f"127.0.0.1:{port}" and headers["sec-websocket-version"] == "13"
    assert len(base64.b64decode(headers["sec-websocket-key"])) == 16
    # one text message in continuation frames, none over the frame limit (codex drops the
    # connection on a single frame over 16 MiB)
    assert frames[0][1] == 1 and all(op == 0 for _, op, _ in frames[1:])
    assert all(len(p) <= 1000 for _, _, p in frames) and len(frames) >= 3
    assert b"".join(p for _, _, p in frames) == b"a" * 2500
    assert small == (True, 1, b"")


def test_fragments_pings_and_all_length_forms(local_server, sockets):
    big = os.urandom(3 * 1024 * 1024)

    def script(conn):
        upgrade(conn)
        conn.sendall(server_frame(1, b"x" * 125) + server_frame(1, b"y" * 126)
                     + server_frame(2, b"z" * 70000))
        conn.sendall(server_frame(1, b"frag-", fin=False) + server_frame(9, b"ping!")
                     + server_frame(0, b"men", fin=False) + server_frame(10, b"unsolicited")
                     + server_frame(0, b"ted"))
        pong = read_client_frame(conn)
        echoed, fin = b"", False
        while not fin:
            fin, _opcode, payload = read_client_frame(conn)
            echoed += payload
        conn.sendall(server_frame(1, echoed))
        conn.sendall(server_frame(8, struct.pack("!H", 1001) + b"going away"))
        return pong, read_client_frame(conn)

    port, result = local_server(script)
    ws = local_client(port, sockets)
    reader = Reader(ws)
    assert reader.next(10) == b"x" * 125
    assert reader.next(10) == b"y" * 126
    assert reader.next(10) == b"z" * 70000
    assert reader.next(10) == b"frag-mented"
    ws.send_text(big)
    assert reader.next(30) == big
    assert reader.next(10) is None
    assert (ws.close_code, ws.close_reason) == (1001, "going away")
    reader.thread.join(10)
    pong, close_echo = result.value()
    assert pong == (True, 10, b"ping!")
    assert close_echo[:2] == (True, 8) and close_echo[2][:2] == struct.pack("!H", 1001)


@pytest.mark.parametrize(("frame", "what"), [
    (server_frame(1, b"hello", mask=True), "mask"),
    (server_frame(1, b"hello", rsv=0x40), "reserved"),
    (server_frame(3, b"hello"), "opcode"),
    (server_frame(9, b"p", fin=False), "control"),
    (server_frame(0, b"orphan"), "continuation"),
])
def test_bad_server_frames_close_the_connection(local_server, sockets, frame, what):
    def script(conn):
        upgrade(conn)
        conn.sendall(frame)
        return read_client_frame(conn)

    port, result = local_server(script)
    ws = local_client(port, sockets)
    message = Reader(ws).next(10)
    assert isinstance(message, EndpointError) and message.kind == "closed"
    assert what in str(message)
    fin, opcode, payload = result.value()  # the client's close: 1002, protocol error
    assert (fin, opcode, payload[:2]) == (True, 8, struct.pack("!H", 1002))


def test_eof_mid_frame_ends_recv(local_server, sockets):
    def script(conn):
        upgrade(conn)
        conn.sendall(server_frame(1, b"complete") + server_frame(1, b"x" * 1000)[:500])

    port, _result = local_server(script)
    reader = Reader(local_client(port, sockets))
    assert reader.next(10) == b"complete"
    assert reader.next(10) is None


def test_frames_right_after_the_upgrade_are_kept(local_server, sockets):
    def script(conn):
        head = b""
        while b"\r\n\r\n" not in head:
            head += conn.recv(4096)
        key = re.search(rb"Sec-WebSocket-Key: (\S+)", head).group(1).decode()
        conn.sendall(f"HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nConnection: upgrade\r\n"
                     f"Sec-WebSocket-Accept: {accept_key(key)}\r\n\r\n".encode()
                     + server_frame(1, b"early"))

    port, _result = local_server(script)
    assert Reader(local_client(port, sockets)).next(10) == b"early"


def http_answer(text: bytes) -> Callable[[socket.socket], None]:
    def script(conn):
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(4096)
        conn.sendall(text)
        time.sleep(0.5)
    return script


@pytest.mark.parametrize(("answer", "kind", "needle"), [
    (b"HTTP/1.1 403 Forbidden\r\nContent-Length: 6\r\n\r\nno way", "auth", "403 Forbidden"),
    (b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops", "handshake",
     "HTTP/1.1 500 Internal Server Error: oops"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "handshake", "HTTP/1.1 200 OK"),
    (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "handshake", "did not answer the websocket upgrade"),
    (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
     b"Sec-WebSocket-Accept: d3Jvbmc=\r\n\r\n", "handshake", "Sec-WebSocket-Accept"),
])
def test_refused_upgrades(local_server, answer, kind, needle):
    port, _result = local_server(http_answer(answer))
    token = "secret-" + secrets.token_hex(12)
    with pytest.raises(EndpointError) as caught:
        connect_endpoint(Endpoint.parse(f"ws://127.0.0.1:{port}"), token=token, timeout=10)
    assert caught.value.kind == kind
    assert needle in str(caught.value)
    assert token not in str(caught.value)


def test_a_silent_server_times_out_the_handshake(local_server):
    stop = threading.Event()
    port, _result = local_server(lambda conn: stop.wait(10))
    started = time.monotonic()
    try:
        with pytest.raises(EndpointError) as caught:
            connect_endpoint(Endpoint.parse(f"ws://127.0.0.1:{port}"), token=None, timeout=0.5)
    finally:
        stop.set()
    assert caught.value.kind == "timeout"
    assert time.monotonic() - started < 3


def test_tls_failure_is_tls(local_server):
    def plain_http(conn):
        conn.recv(4096)  # the ClientHello
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        time.sleep(0.5)

    port, _result = local_server(plain_http)
    with pytest.raises(EndpointError) as caught:
        connect_endpoint(Endpoint.parse(f"wss://127.0.0.1:{port}"), token="t" * 20, timeout=5,
                         ssl_context=ssl.create_default_context())
    assert caught.value.kind == "tls"
    assert "TLS with wss://127.0.0.1" in str(caught.value)


def test_only_the_rfc6455_accept_for_the_clients_own_key_completes_the_upgrade(local_server,
                                                                              sockets):
    # RFC 6455's own example, to be sure the test server computes what the RFC says
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    port, _result = local_server(lambda conn: (upgrade(conn), conn.sendall(
        server_frame(1, b"accepted")), time.sleep(0.5)))
    assert Reader(local_client(port, sockets)).next(10) == b"accepted"
    # the RFC's example accept belongs to another key: a replayed answer is refused
    port, _result = local_server(lambda conn: (upgrade(conn,
                                                       accept="s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
                                               time.sleep(0.5)))
    with pytest.raises(EndpointError) as caught:
        local_client(port, sockets)
    assert caught.value.kind == "handshake" and "Sec-WebSocket-Accept" in str(caught.value)


def test_the_websocket_library_loads_only_when_an_endpoint_is_opened():
    """A host on local app-servers never imports ``websockets``."""
    import subprocess
    import sys

    code = ("import sys\n"
            "import hermes_codex_runtime.runtime, hermes_codex_runtime.hermes.turn.run\n"
            "from hermes_codex_runtime.pool import ServerPool, Placement, EndpointSpec\n"
            "before = 'websockets' in sys.modules\n"
            "from hermes_codex_runtime.wire.websocket import Endpoint, EndpointError, "
            "connect_endpoint\n"
            "try:\n"
            "    connect_endpoint(Endpoint.parse('unix:///nonexistent/codex.sock'), token=None, "
            "timeout=2)\n"
            "except EndpointError as exc:\n"
            "    assert exc.kind == 'refused', exc\n"
            "print(before, 'websockets' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True"]
