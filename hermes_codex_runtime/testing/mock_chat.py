"""A minimal OpenAI-compatible ``/v1/chat/completions`` server on 127.0.0.1 (streaming), to stand
in for a Hermes fallback provider in tests and the demo. Records every request body."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatCompletionsServer:
    """Answers every chat completion with ``answer`` (and a small usage block)."""

    def __init__(self, answer: str = "fallback answered") -> None:
        self.answer = answer
        self.calls: list[dict[str, Any]] = []
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
                chunk = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0,
                         "model": body.get("model"),
                         "choices": [{"index": 0, "delta": {"role": "assistant",
                                                            "content": outer.answer},
                                      "finish_reason": "stop"}],
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
