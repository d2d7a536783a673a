"""A minimal OpenAI-compatible ``/v1/chat/completions`` server on 127.0.0.1 (streaming), to stand
in for a host's fallback provider in tests and the demo, and for the model of a host's own loop in
the benchmarks. Records every request body. Each answer is the next of ``script`` — a text, or a
:class:`ToolCall` — and ``answer`` once the script is spent."""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A scripted answer that calls one function tool."""

    name: str
    arguments: dict[str, Any]


class ChatCompletionsServer:
    """Answers every chat completion with the next scripted answer, else ``answer`` (with a
    small usage block)."""

    def __init__(self, answer: str = "fallback answered") -> None:
        self.answer = answer
        self.calls: list[dict[str, Any]] = []
        self.script: deque[str | ToolCall] = deque()
        self._ids = itertools.count(1)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                outer.calls.append({"path": self.path, "body": body})
                try:
                    reply = outer.script.popleft()
                except IndexError:
                    reply = outer.answer
                if isinstance(reply, ToolCall):
                    delta: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [
                        {"index": 0, "id": f"call_chat_{next(outer._ids)}", "type": "function",
                         "function": {"name": reply.name,
                                      "arguments": json.dumps(reply.arguments)}}]}
                    finish = "tool_calls"
                else:
                    delta, finish = {"role": "assistant", "content": reply}, "stop"
                chunk = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0,
                         "model": body.get("model"),
                         "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                         "usage": {"prompt_tokens": 7, "completion_tokens": 3,
                                   "total_tokens": 10}}
                data = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        """The ``base_url`` of this provider."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def chat_calls(self) -> list[dict[str, Any]]:
        """The chat-completion requests received."""
        return [c for c in self.calls if c["path"].endswith("/chat/completions")]

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> ChatCompletionsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
