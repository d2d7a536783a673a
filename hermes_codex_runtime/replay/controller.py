"""``hermes-codex-runtime replay serve``: a loopback web controller for replays — browse
sessions, plan and start runs, watch their progress, cancel them, open their reports.

Security model (the seed's, kept):

* It binds **127.0.0.1 only**, on the port the host configured (default 43118); when that port
  is taken it takes a free one.
* Every request must name this server in ``Host`` (``127.0.0.1:PORT`` or ``localhost:PORT``;
  anything else is 421 — a DNS-rebinding page never reaches the API), and every ``/api/`` call
  must come from this server's own page: an exact ``Origin`` match, else 403. There is no
  browser login: same-origin is the boundary, as for any loopback tool.
* A random **control token** lives in the runtime file
  ``<controllers dir>/<session>/controller-server.json`` (0600). Shutdown
  (``POST /api/shutdown``) needs it in ``X-Replay-Control``; ``/health?challenge=C`` proves the
  server holds it (``proof`` = hex HMAC-SHA256(token, C)) without revealing it, so a client that
  read the file can tell this server from an impostor on the same port.
* **Idle exit**: after the idle timeout (default 3600 s) without a page
  heartbeat or API call it exits and removes its runtime file — but never while one of its own
  runs is still going, and the idle clock starts again when that run ends, so a page opened
  right after it finished still finds the controller.
* **Runs are owned** by the controller that started them: it lists, shows, reports and cancels
  only its own (:class:`~.tools.ReplayTools` with ``own_runs_only``).
* The page is static files (no inline script), served with a strict Content-Security-Policy.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from hermes_codex_runtime import __version__
from hermes_codex_runtime.replay.control import ReplayContext, ReplayError
from hermes_codex_runtime.replay.store import ACTIVE, StoreError, alive, check_run_id
from hermes_codex_runtime.replay.tools import ReplayTools, ToolError
from hermes_codex_runtime.wire.files import atomic_write_json

SERVER_NAME = "hermes-codex-replay"
PROTOCOL_VERSION = 1
DEFAULT_PORT = 43118
DEFAULT_IDLE_TIMEOUT = 3600.0
HEARTBEAT_INTERVAL = 15.0
MAX_BODY = 1 * 2**20
CONTROL_HEADER = "X-Replay-Control"
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
            "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
STATIC = {"/": ("controller.html", "text/html; charset=utf-8"),
          "/controller.js": ("controller.js", "text/javascript; charset=utf-8"),
          "/controller.css": ("controller.css", "text/css; charset=utf-8")}
MIME = {"json": "application/json; charset=utf-8", "html": "text/html; charset=utf-8"}


def proof(token: str, challenge: str) -> str:
    """The ``/health`` proof that a server holds ``token``."""
    return hmac.new(token.encode(), challenge.encode(), hashlib.sha256).hexdigest()


class Controller:
    """One controller process: its HTTP server, runtime file, tools and idle clock."""

    def __init__(self, context: ReplayContext, *, port: int = DEFAULT_PORT,
                 idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
                 session_id: str | None = None) -> None:
        if session_id is not None and (not session_id.replace("-", "").isalnum()
                                       or len(session_id) > 64):
            raise ReplayError(f"bad controller session id {session_id!r}")
        self.context = context
        self.session_id = session_id or uuid.uuid4().hex
        self.idle_timeout = idle_timeout
        self.token = secrets.token_hex(32)
        self.tools = ReplayTools(context, controller=self.session_id, own_runs_only=True)
        self.last_activity = time.monotonic()
        self.runtime_dir = context.controllers_dir / self.session_id
        self.server = self._bind(port)
        self.port = int(self.server.server_address[1])
        self._stopped = threading.Event()
        #: This controller's runs that were going when it started (a restarted controller of
        #: the same session waits for them too).
        self._watched = self._own_live_runs()

    def _bind(self, port: int) -> ThreadingHTTPServer:
        handler = _handler_for(self)
        try:
            server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        except OSError:
            server = ThreadingHTTPServer(("127.0.0.1", 0), handler)  # the port is taken
        server.daemon_threads = True
        return server

    @property
    def url(self) -> str:
        """Where the page is."""
        return f"http://127.0.0.1:{self.port}/"

    @property
    def runtime_file(self) -> Path:
        """The file holding the control token (0600)."""
        return self.runtime_dir / "controller-server.json"

    def touch(self) -> None:
        """Reset the idle clock (a heartbeat or an API call)."""
        self.last_activity = time.monotonic()

    def _own_live_runs(self) -> set[str]:
        """The ids of this controller's runs that are still going (a scan of every run)."""
        found = set()
        for run in self.context.store.runs():
            try:
                state = run.state()
            except StoreError:
                continue
            if state.get("controller") == self.session_id and _live(state):
                found.add(run.id)
        return found

    def owns_live_run(self) -> bool:
        """Whether a run of this controller is still going (then it never exits on idle).
        Only the runs it had going when it started and the ones it started since are read."""
        for run_id in sorted(self._watched | self.tools.started):
            try:
                state = self.context.store.run(run_id).state()
            except StoreError:
                state = {}
            if _live(state):
                return True
            self._watched.discard(run_id)
            self.tools.started.discard(run_id)
        return False

    def serve(self) -> int:
        """Run until shut down or idle; returns the exit status."""
        self.runtime_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.runtime_dir, 0o700)
        atomic_write_json(self.runtime_file, {
            "server": SERVER_NAME, "version": __version__, "protocol_version": PROTOCOL_VERSION,
            "controller_session_id": self.session_id, "pid": os.getpid(), "port": self.port,
            "url": self.url, "control_token": self.token, "started_at": time.time()})
        watcher = threading.Thread(target=self._idle_watch, name="replay-controller-idle",
                                   daemon=True)
        watcher.start()
        try:
            self.server.serve_forever(poll_interval=0.1)
        finally:
            self._stopped.set()
            self.server.server_close()
            with contextlib.suppress(OSError):
                self.runtime_file.unlink()
            with contextlib.suppress(OSError):
                self.runtime_dir.rmdir()
        return 0

    def shutdown(self) -> None:
        """Stop serving (from any thread but the server's)."""
        threading.Thread(target=self.server.shutdown, daemon=True).start()

    def _idle_watch(self) -> None:
        tick = min(1.0, max(0.05, self.idle_timeout / 10))
        while not self._stopped.wait(tick):
            if self.owns_live_run():
                self.touch()  # the idle clock starts again when its own run ends
                continue
            if time.monotonic() - self.last_activity < self.idle_timeout:
                continue
            self.server.shutdown()
            return

    def health(self, challenge: str | None) -> dict[str, Any]:
        """``/health``: who this is, and a proof of the token for ``challenge``."""
        body: dict[str, Any] = {"server": SERVER_NAME, "version": __version__,
                                "protocol_version": PROTOCOL_VERSION,
                                "controller_session_id": self.session_id,
                                "active_runs": self.tools.active_runs()}
        if challenge:
            body["proof"] = proof(self.token, challenge)
        return body

    def state(self) -> dict[str, Any]:
        """``/api/state``: what the page shows besides the sessions."""
        return {"controller_session_id": self.session_id, "version": __version__,
                "run_root": str(self.context.store.root),
                "heartbeat_interval_seconds": HEARTBEAT_INTERVAL,
                "recent_runs": self.tools.recent_runs()}


def _live(state: dict[str, Any]) -> bool:
    """Whether a run's state says it is still going (its runner alive, or not started yet)."""
    return state.get("status") in ACTIVE and (state.get("runner") is None
                                              or alive(state.get("runner")))


def _static(name: str) -> bytes:
    return resources.files("hermes_codex_runtime.replay").joinpath("static", name).read_bytes()


def _handler_for(controller: Controller) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "hermes-codex-replay"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        # ---------------------------------------------------------------- checks

        def _own_hosts(self) -> tuple[str, ...]:
            return (f"127.0.0.1:{controller.port}", f"localhost:{controller.port}")

        def _host_ok(self) -> bool:
            if self.headers.get("Host", "") in self._own_hosts():
                return True
            self._send(421, {"error": "this server answers only to its own address"})
            return False

        def _origin_ok(self) -> bool:
            origin = self.headers.get("Origin")
            if origin in tuple(f"http://{h}" for h in self._own_hosts()):
                return True
            self._send(403, {"error": "requests must come from the controller's own page"})
            return False

        # ---------------------------------------------------------------- replies

        def _send(self, status: int, body: Any, *, content_type: str = MIME["json"],
                  headers: dict[str, str] | None = None, csp: str = PAGE_CSP) -> None:
            data = body if isinstance(body, bytes) else json.dumps(
                body, ensure_ascii=False).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("Content-Security-Policy", csp)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _body(self) -> dict[str, Any] | None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY:
                self._send(413, {"error": "request body too large"})
                return None
            raw = self.rfile.read(length) if length else b"{}"
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._send(400, {"error": "the body is not JSON"})
                return None
            if not isinstance(body, dict):
                self._send(400, {"error": "the body must be a JSON object"})
                return None
            return body

        # ---------------------------------------------------------------- GET

        def do_GET(self) -> None:
            if not self._host_ok():
                return
            parts = urlsplit(self.path)
            if parts.path == "/health":
                challenges = parse_qs(parts.query).get("challenge") or []
                challenge = challenges[0] if challenges else None
                self._send(200, controller.health(challenge))
                return
            if parts.path in STATIC:
                name, mime = STATIC[parts.path]
                self._send(200, _static(name), content_type=mime)
                return
            pieces = parts.path.strip("/").split("/")
            if len(pieces) == 3 and pieces[0] == "runs" and pieces[2] in ("report.html",
                                                                          "report.json"):
                self._report(pieces[1], pieces[2].split(".")[1], attachment=False)
                return
            self._send(404, {"error": "not found"})

        def _report(self, run_id: Any, fmt: Any, *, attachment: bool) -> None:
            try:
                check_run_id(run_id)
                artifact = controller.tools.call("get_report", {"run_id": run_id,
                                                                "format": fmt})
            except (ToolError, StoreError) as exc:
                self._send(400, {"error": str(exc)})
                return
            headers = {}
            if attachment:
                headers["Content-Disposition"] = (
                    f'attachment; filename="{artifact["artifact_file_name"]}"')
            content = artifact["artifact_content"]
            # a report page keeps its own policy (it allows its one style block by hash); a
            # second, stricter header policy would block that style
            own = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', content)
            csp = f"{own.group(1)}; frame-ancestors 'none'" if own and artifact[
                "artifact_format"] == "html" else "default-src 'none'; frame-ancestors 'none'"
            self._send(200, content.encode("utf-8"), content_type=MIME[artifact["artifact_format"]],
                       headers=headers, csp=csp)

        # ---------------------------------------------------------------- POST

        def do_POST(self) -> None:
            if not self._host_ok():
                return
            path = urlsplit(self.path).path
            if path == "/api/shutdown":
                given = self.headers.get(CONTROL_HEADER, "")
                if not hmac.compare_digest(given.encode(), controller.token.encode()):
                    self._send(403, {"error": f"{CONTROL_HEADER} does not match"})
                    return
                self._send(200, {"ok": True})
                controller.shutdown()
                return
            if not path.startswith("/api/"):
                self._send(404, {"error": "not found"})
                return
            if not self._origin_ok():
                return
            body = self._body()
            if body is None:
                return
            controller.touch()
            if path == "/api/heartbeat":
                self._send(200, {"ok": True, "controller_session_id": controller.session_id,
                                 "heartbeat_interval_seconds": HEARTBEAT_INTERVAL})
            elif path == "/api/state":
                self._send(200, controller.state())
            elif path == "/api/call":
                try:
                    result = controller.tools.call(body.get("name"), body.get("arguments"))
                except ToolError as exc:
                    self._send(400, {"isError": True, "error": str(exc)})
                    return
                self._send(200, {"isError": False, "result": result})
            elif path == "/api/download":
                self._report(body.get("run_id"), body.get("format"), attachment=True)
            else:
                self._send(404, {"error": "not found"})

    return Handler
