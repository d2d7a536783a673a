"""A real headless Chromium for tests, driven over the Chrome DevTools Protocol through the
project's WebSocket transport (``websockets``). Not Playwright: its Python package bundles a Node
driver pinned to its own Chromium build, and Debian's ``chromium`` (another major version) is
outside what that driver promises to drive; the few CDP calls the page tests need are here.

:class:`Browser` starts Debian's ``chromium`` (``HCR_CHROMIUM`` overrides the path) with the
flags that keep it off the network (no background networking, component updates, sync or QUIC)
in a throwaway profile, and ends it by process group. :class:`Page` navigates, evaluates
JavaScript, waits for conditions (every wait bounded), takes screenshots, and collects what the
page reported as errors — console errors, uncaught exceptions and Content-Security-Policy
violations — so a test can assert there were none.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from hermes_codex_runtime.wire.websocket import Endpoint, WebSocket, connect_endpoint

FLAGS = ("--headless=new", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--no-default-browser-check", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-extensions",
         "--disable-default-apps", "--metrics-recording-only", "--mute-audio",
         "--remote-allow-origins=*", "--remote-debugging-port=0",
         "--window-size=1280,900")


class BrowserError(RuntimeError):
    """Chromium could not be started or did not answer."""


def find_chromium() -> str | None:
    """The Chromium executable, or ``None``."""
    configured = os.environ.get("HCR_CHROMIUM")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Page:
    """One tab, over its DevTools WebSocket."""

    def __init__(self, ws: WebSocket) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._replies: dict[int, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, name="cdp-reader", daemon=True)
        self._reader.start()
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")

    def _read(self) -> None:
        while True:
            data = self._ws.recv()
            if data is None:
                with self._cond:
                    self._cond.notify_all()
                return
            message = json.loads(data)
            with self._cond:
                if "id" in message:
                    self._replies[message["id"]] = message
                else:
                    self.events.append(message)
                self._cond.notify_all()

    def send(self, method: str, params: dict[str, Any] | None = None,
             timeout: float = 30.0) -> dict[str, Any]:
        """Call a DevTools method; its result (``BrowserError`` on an error or no answer)."""
        message_id = next(self._ids)
        with self._lock:
            self._ws.send_text(json.dumps({"id": message_id, "method": method,
                                           "params": params or {}}).encode())
        deadline = time.monotonic() + timeout
        with self._cond:
            while message_id not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or self._ws.closed:
                    raise BrowserError(f"{method}: no answer within {timeout:g} s")
                self._cond.wait(left)
            reply = self._replies.pop(message_id)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return dict(reply.get("result") or {})

    def navigate(self, url: str, timeout: float = 30.0) -> None:
        """Open ``url`` and wait for its load event."""
        with self._cond:
            seen = len(self.events)
        self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + timeout
        with self._cond:
            while not any(e.get("method") == "Page.loadEventFired"
                          for e in self.events[seen:]):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BrowserError(f"{url} did not load within {timeout:g} s")
                self._cond.wait(left)

    def evaluate(self, expression: str, timeout: float = 30.0) -> Any:
        """The value of a JavaScript expression (promises awaited)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                "returnByValue": True}, timeout=timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = (details.get("exception") or {}).get("description") or details.get("text")
            raise BrowserError(f"JavaScript error: {text}")
        return (result.get("result") or {}).get("value")

    def wait_for(self, expression: str, timeout: float = 30.0, what: str = "") -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out after {timeout:g} s waiting for "
                                   f"{what or expression}")
            time.sleep(0.1)

    def click(self, selector: str) -> None:
        """Click the element ``selector`` names (it must exist)."""
        found = self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                              f" if (!e) return false; e.click(); return true; }})()")
        if not found:
            raise BrowserError(f"no element {selector}")

    def type(self, selector: str, text: str) -> None:
        """Set an input's value as typing would (an ``input`` event is fired)."""
        self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                      f" e.value = {json.dumps(text)};"
                      f" e.dispatchEvent(new Event('input', {{bubbles: true}})); }})()")

    def screenshot(self, path: str | os.PathLike[str], width: int = 1280,
                   height: int = 900) -> Path:
        """A PNG of the whole page."""
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                         "deviceScaleFactor": 1,
                                                         "mobile": False})
        shot = self.send("Page.captureScreenshot", {"format": "png",
                                                    "captureBeyondViewport": True})
        target = Path(path)
        target.write_bytes(base64.b64decode(shot["data"]))
        return target

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions and CSP violations the page reported."""
        out = []
        with self._cond:
            events = list(self.events)
        for event in events:
            method, params = event.get("method"), event.get("params") or {}
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails") or {}
                out.append(f"exception: {details.get('text')} "
                           f"{(details.get('exception') or {}).get('description', '')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error",
                                                                                "assert"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description")))
                                                  for a in params.get("args") or []))
            elif method == "Log.entryAdded":
                entry = params.get("entry") or {}
                if entry.get("level") == "error" or "Content Security Policy" in str(
                        entry.get("text")):
                    out.append(f"log ({entry.get('source')}): {entry.get('text')}")
        return out


class Browser:
    """A headless Chromium process with one page."""

    def __init__(self, executable: str | None = None, *, timeout: float = 30.0) -> None:
        path = executable or find_chromium()
        if not path:
            raise BrowserError("Chromium is not installed (Debian: apt-get install chromium; "
                               "or set HCR_CHROMIUM)")
        self.profile = Path(tempfile.mkdtemp(prefix="hcr-chromium-"))
        flags = list(FLAGS)
        if os.geteuid() == 0:
            flags.append("--no-sandbox")  # Chromium refuses its sandbox as root
        self._log = open(self.profile / "chromium.log", "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen([path, *flags, f"--user-data-dir={self.profile}",
                                      "about:blank"], stdin=subprocess.DEVNULL,
                                     stdout=self._log, stderr=self._log, start_new_session=True)
        try:
            self.port = self._devtools_port(timeout)
            self.page = self._attach(timeout)
        except BaseException:
            self.close()
            raise

    def _devtools_port(self, timeout: float) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BrowserError(f"Chromium exited ({self.proc.returncode}): "
                                   f"{(self.profile / 'chromium.log').read_text()[-1500:]}")
            with contextlib.suppress(OSError, ValueError, IndexError):
                return int(marker.read_text().splitlines()[0])
            time.sleep(0.05)
        raise BrowserError(f"Chromium did not open its DevTools port within {timeout:g} s")

    def _attach(self, timeout: float) -> Page:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list",
                                            timeout=5) as reply:
                    targets = json.load(reply)
                page = next(t for t in targets if t.get("type") == "page")
                break
            except (OSError, StopIteration, ValueError):
                if time.monotonic() > deadline:
                    raise BrowserError("Chromium has no page to attach to") from None
                time.sleep(0.1)
        ws = connect_endpoint(Endpoint.parse(page["webSocketDebuggerUrl"]), token=None,
                              timeout=timeout)
        return Page(ws)

    def close(self) -> None:
        """End Chromium (its whole process group) and remove the profile."""
        page = getattr(self, "page", None)
        if page is not None:
            with contextlib.suppress(Exception):
                page._ws.close()
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # helpers left in the group
        self._log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
