"""A mock model provider on 127.0.0.1 that speaks the OpenAI Responses API (HTTP + SSE).

The real ``codex`` binary talks to it as a custom ``model_provider`` (see
:mod:`hermes_codex_runtime.offline.codex_home`), so tests, the demo and the benchmarks run real
codex turns with no network and no credentials. Each ``POST /v1/responses`` takes the next
:class:`Reply` from the script (or the default reply when the script is empty) and every request
body is recorded, so a test can assert what reached the model.

Replies: :func:`text` (streamed in N deltas), :func:`exec_command` (optionally asking for
escalation, which makes codex request approval), :func:`apply_patch` (freeform), :func:`tool_call`
(any function tool, e.g. an MCP tool), :func:`usage_limit` / :func:`rate_limit` (HTTP 429),
:func:`server_error` (HTTP 500), :func:`failed` (SSE ``response.failed``); any reply can be slowed
with ``delay`` (before the first byte) and ``delta_delay`` (between deltas).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage reported in ``response.completed`` (``input`` INCLUDES ``cached``)."""

    input: int = 100
    cached: int = 0
    output: int = 10
    reasoning: int = 0
    reported_total: int | None = None  # a provider total that is not input + output

    @property
    def total(self) -> int:
        """The total the provider reports (input + output unless ``reported_total`` is set)."""
        return self.reported_total if self.reported_total is not None else self.input + self.output

    def to_json(self) -> JsonObject:
        """The ``usage`` object of a Responses API ``response``."""
        return {
            "input_tokens": self.input,
            "input_tokens_details": {"cached_tokens": self.cached},
            "output_tokens": self.output,
            "output_tokens_details": {"reasoning_tokens": self.reasoning},
            "total_tokens": self.total,
        }


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer to one ``POST /v1/responses``."""

    kind: str  # "text" | "items" | "http_error" | "failed"
    text: str = ""
    deltas: int = 1
    items: tuple[JsonObject, ...] = ()
    status: int = 200
    error: JsonObject | None = None
    usage: Usage = field(default_factory=Usage)
    delay: float = 0.0
    delta_delay: float = 0.0
    reasoning: str = ""


ReplySource = Reply | Callable[[JsonObject], Reply]


def text(message: str, *, deltas: int = 1, usage: Usage | None = None, delay: float = 0.0,
         delta_delay: float = 0.0, reasoning: str = "") -> Reply:
    """An assistant message streamed in ``deltas`` pieces (at least one)."""
    return Reply("text", text=message, deltas=max(1, deltas), usage=usage or Usage(),
                 delay=delay, delta_delay=delta_delay, reasoning=reasoning)


_call_ids = itertools.count(1)


def _call_id(given: str | None) -> str:
    return given or f"call_mock_{next(_call_ids)}"


def exec_command(cmd: str, *, escalated: bool = False,
                 justification: str = "The user asked for it.", call_id: str | None = None,
                 workdir: str | None = None, usage: Usage | None = None,
                 login: bool = False) -> Reply:
    """A call of codex's shell tool ``exec_command``. ``escalated`` asks to run outside the
    sandbox, which makes codex request approval under ``on-request``. ``login`` defaults to
    False: a login shell runs the machine's profile (pyenv's rehash takes a lock file that a
    killed command can leave behind, stalling every later login shell for a minute)."""
    arguments: JsonObject = {"cmd": cmd, "login": login}
    if workdir:
        arguments["workdir"] = workdir
    if escalated:
        arguments["sandbox_permissions"] = "require_escalated"
        arguments["justification"] = justification
    return tool_call("exec_command", arguments, call_id=call_id, usage=usage)


def tool_call(name: str, arguments: JsonObject, *, namespace: str | None = None,
              call_id: str | None = None, usage: Usage | None = None) -> Reply:
    """A function tool call; MCP tools pass ``namespace="mcp__<server>"``."""
    item: JsonObject = {
        "type": "function_call",
        "id": f"fc_{next(_call_ids)}",
        "call_id": _call_id(call_id),
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }
    if namespace:
        item["namespace"] = namespace
    return Reply("items", items=(item,), usage=usage or Usage())


def said_before(message: str, reply: Reply) -> Reply:
    """``reply`` (a tool call) preceded, in the same response, by an assistant message — the
    model's commentary before it acts."""
    if reply.kind != "items":
        raise ValueError("said_before needs a tool-call reply")
    item: JsonObject = {"type": "message", "id": f"msg_said_{next(_call_ids)}",
                        "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": message, "annotations": []}]}
    return Reply("items", items=(item, *reply.items), usage=reply.usage)


def apply_patch(patch: str, *, call_id: str | None = None, usage: Usage | None = None) -> Reply:
    """A freeform ``apply_patch`` call (``*** Begin Patch`` … ``*** End Patch``)."""
    item: JsonObject = {
        "type": "custom_tool_call",
        "id": f"ctc_{next(_call_ids)}",
        "call_id": _call_id(call_id),
        "name": "apply_patch",
        "input": patch,
        "status": "completed",
    }
    return Reply("items", items=(item,), usage=usage or Usage())


def add_file_patch(path: str, lines: Iterable[str]) -> str:
    """The patch text that creates ``path`` with ``lines``."""
    body = "".join(f"+{line}\n" for line in lines)
    return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"


def usage_limit(message: str = "You've hit your usage limit.") -> Reply:
    """HTTP 429 ``usage_limit_reached`` — codex reports ``usageLimitExceeded``."""
    return Reply("http_error", status=429, error={
        "error": {"type": "usage_limit_reached", "message": message, "plan_type": "plus",
                  "resets_in_seconds": 3600}})


def rate_limit(message: str = "Rate limit reached.") -> Reply:
    """HTTP 429 ``rate_limit_exceeded``."""
    return Reply("http_error", status=429, error={
        "error": {"type": "rate_limit_exceeded", "code": "rate_limit_exceeded",
                  "message": message}})


def server_error(message: str = "The server had an error.") -> Reply:
    """HTTP 500 — codex reports ``internalServerError``."""
    return Reply("http_error", status=500, error={
        "error": {"type": "server_error", "message": message}})


def unauthorized(message: str = "Your authentication token has expired.") -> Reply:
    """HTTP 401."""
    return Reply("http_error", status=401, error={
        "error": {"type": "invalid_request_error", "code": "token_expired", "message": message}})


def failed(message: str = "The model failed.", code: str = "server_error") -> Reply:
    """An SSE ``response.failed`` event."""
    return Reply("failed", error={"code": code, "message": message})


def _instance_of(schema: Any, depth: int = 0) -> Any:
    """A small valid instance of a JSON schema (enough for ``outputSchema`` replies)."""
    if not isinstance(schema, dict) or depth > 8:
        return None
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        options = schema["enum"]
        return "allow" if "allow" in options else options[0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _instance_of(schema[key][0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {name: _instance_of(sub, depth + 1) for name, sub in props.items()}
    if kind == "array":
        return []
    if kind == "string":
        return "ok"
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    return None


class MockResponsesProvider:
    """A Responses API server on 127.0.0.1 driven by a script of :class:`Reply` values.

    >>> with MockResponsesProvider() as provider:
    ...     provider.enqueue(text("hello", deltas=3))
    ...     # point codex at provider.base_url
    """

    def __init__(self, script: Iterable[ReplySource] = (),
                 default: ReplySource | None = None, *,
                 required_key: str | None = None) -> None:
        self._script: deque[ReplySource] = deque(script)
        #: When set, a request without ``Authorization: Bearer <required_key>`` gets HTTP 401
        #: (a provider credential that did not reach codex shows as a failed turn).
        self.required_key = required_key
        self.refused_unauthenticated = 0
        self._default: ReplySource = default or text("ok")
        self._lock = threading.Lock()
        self.requests: list[JsonObject] = []
        self.unexpected: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._response_ids = itertools.count(1)

    # -------------------------------------------------------------- control

    def start(self) -> MockResponsesProvider:
        """Bind an ephemeral port on 127.0.0.1 and serve in a daemon thread."""
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="mock-responses", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    def __enter__(self) -> MockResponsesProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port."""
        if self._server is None:
            raise RuntimeError("the mock provider is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """What codex's ``model_providers.<name>.base_url`` should be."""
        return f"http://127.0.0.1:{self.port}/v1"

    def enqueue(self, *replies: ReplySource) -> None:
        """Append replies to the script, in order."""
        with self._lock:
            self._script.extend(replies)

    def set_default(self, reply: ReplySource) -> None:
        """The reply used when the script is empty."""
        with self._lock:
            self._default = reply

    def pending(self) -> int:
        """How many scripted replies are still unused."""
        with self._lock:
            return len(self._script)

    def clear(self) -> None:
        """Forget the script and the recorded requests."""
        with self._lock:
            self._script.clear()
            self.requests.clear()

    # -------------------------------------------------------------- inspection

    def request_texts(self, index: int = -1) -> list[tuple[str, str]]:
        """``(role, text)`` of every message in the ``input`` of request ``index``."""
        with self._lock:
            body = self.requests[index]
        out: list[tuple[str, str]] = []
        for item in body.get("input", []):
            if not isinstance(item, dict) or item.get("type", "message") != "message":
                continue
            content = item.get("content")
            if isinstance(content, str):
                out.append((str(item.get("role")), content))
                continue
            for part in content or []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    out.append((str(item.get("role")), part["text"]))
        return out

    def saw_text(self, needle: str, *, role: str | None = None) -> bool:
        """True when any recorded request carried ``needle`` in a message (of ``role``)."""
        for index in range(len(self.requests)):
            for msg_role, msg_text in self.request_texts(index):
                if needle in msg_text and (role is None or msg_role == role):
                    return True
        return False

    # -------------------------------------------------------------- serving

    def _next_reply(self, body: JsonObject) -> Reply:
        with self._lock:
            self.requests.append(body)
            source = self._script.popleft() if self._script else self._default
        reply = source(body) if callable(source) else source
        return reply

    def _response_object(self, status: str, output: list[JsonObject],
                         usage: Usage | None) -> JsonObject:
        response: JsonObject = {
            "id": f"resp_mock_{next(self._response_ids)}",
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "model": "mock-model",
            "output": output,
        }
        if usage is not None:
            response["usage"] = usage.to_json()
        return response


def _sse(event: str, data: JsonObject) -> bytes:
    payload = dict(data)
    payload.setdefault("type", event)
    return f"event: {event}\ndata: {json.dumps(payload)}\n\n".encode()


def _make_handler(provider: MockResponsesProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # silence stdlib logging
            return

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [{"id": "mock-model",
                                                             "object": "model"}]})
                return
            provider.unexpected.append(f"GET {self.path}")
            self._json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if not self.path.rstrip("/").endswith("/responses"):
                provider.unexpected.append(f"POST {self.path}")
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(raw.decode("utf-8") or "{}")
            except ValueError:
                provider.unexpected.append("POST /responses with a body that is not JSON")
                self._json(400, {"error": {"message": "body is not JSON"}})
                return
            if provider.required_key is not None and self.headers.get(
                    "Authorization") != f"Bearer {provider.required_key}":
                provider.refused_unauthenticated += 1
                self._json(401, {"error": {"type": "invalid_request_error",
                                           "code": "invalid_api_key",
                                           "message": "Incorrect API key provided."}})
                return
            reply = provider._next_reply(body)
            if reply.delay:
                time.sleep(reply.delay)
            if reply.kind == "http_error":
                self._json(reply.status, reply.error or {})
                return
            try:
                self._stream(body, reply)
            except (BrokenPipeError, ConnectionResetError):
                return

        def _json(self, status: int, payload: JsonObject) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = True

        def _emit(self, event: str, data: JsonObject) -> None:
            self.wfile.write(_sse(event, data))
            self.wfile.flush()

        def _stream(self, body: JsonObject, reply: Reply) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            created = provider._response_object("in_progress", [], None)
            self._emit("response.created", {"response": created})
            if reply.kind == "failed":
                failed_response = provider._response_object("failed", [], None)
                failed_response["error"] = reply.error
                self._emit("response.failed", {"response": failed_response})
                return
            output: list[JsonObject] = []
            index = 0
            if reply.reasoning:
                output.append(self._reasoning(index, reply.reasoning))
                index += 1
            if reply.kind == "text":
                message = reply.text
                fmt = ((body.get("text") or {}).get("format") or {})
                if fmt.get("type") == "json_schema" and not message:
                    message = json.dumps(_instance_of(fmt.get("schema")))
                output.append(self._message(index, message, reply))
            else:
                for item in reply.items:
                    if item.get("type") == "message":  # its text streams, as a model's does
                        output.append(self._message(index, item["content"][0]["text"], reply))
                        index += 1
                        continue
                    self._emit("response.output_item.added",
                               {"output_index": index, "item": item})
                    self._emit("response.output_item.done", {"output_index": index, "item": item})
                    output.append(item)
                    index += 1
            done = provider._response_object("completed", output, reply.usage)
            self._emit("response.completed", {"response": done})

        def _reasoning(self, index: int, summary: str) -> JsonObject:
            item: JsonObject = {"type": "reasoning", "id": f"rs_mock_{index}",
                                "summary": [{"type": "summary_text", "text": summary}]}
            self._emit("response.output_item.added", {"output_index": index, "item": item})
            self._emit("response.output_item.done", {"output_index": index, "item": item})
            return item

        def _message(self, index: int, message: str, reply: Reply) -> JsonObject:
            item_id = f"msg_mock_{next(provider._response_ids)}"
            self._emit("response.output_item.added", {
                "output_index": index,
                "item": {"type": "message", "id": item_id, "role": "assistant",
                         "status": "in_progress", "content": []}})
            pieces = _split(message, reply.deltas)
            for piece in pieces:
                if reply.delta_delay:
                    time.sleep(reply.delta_delay)
                self._emit("response.output_text.delta", {
                    "item_id": item_id, "output_index": index, "content_index": 0,
                    "delta": piece})
            item = {"type": "message", "id": item_id, "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": message, "annotations": []}]}
            self._emit("response.output_item.done", {"output_index": index, "item": item})
            return item

    return Handler


def _split(message: str, pieces: int) -> list[str]:
    if pieces <= 1 or len(message) <= 1:
        return [message]
    pieces = min(pieces, len(message))
    size, extra = divmod(len(message), pieces)
    out: list[str] = []
    start = 0
    for i in range(pieces):
        end = start + size + (1 if i < extra else 0)
        out.append(message[start:end])
        start = end
    return out
