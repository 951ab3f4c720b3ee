"""A small OpenAI-compatible chat and embeddings server on loopback, scripted by the test.

LLM providers cannot be reached from test machines; this stands in for one at the HTTP
level, so the production litellm code path runs unchanged.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    # Text, or a function of the request body giving the text (to answer about what was sent).
    content: str | Callable[[dict], str] = ""
    status: int = 200
    delay: float = 0.0


def hashed_embedding(text: str, dim: int) -> list[float]:
    """A deterministic bag-of-words vector: texts sharing words point the same way."""
    vector = [0.0] * dim
    for word in text.lower().split():
        digest = hashlib.sha256(word.encode()).digest()
        vector[int.from_bytes(digest[:4], "big") % dim] += 1.0 if digest[4] % 2 else -1.0
    return vector


@dataclass
class FakeLLM:
    dim: int = 384
    replies: deque = field(default_factory=deque)
    requests: list = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def api_base(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def start(self) -> "FakeLLM":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                fake.requests.append({"path": self.path, "body": body})
                if self.path.endswith("/embeddings"):
                    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    self._send(200, {
                        "object": "list", "model": body.get("model", "test"),
                        "data": [{"object": "embedding", "index": i, "embedding": hashed_embedding(text, fake.dim)}
                                 for i, text in enumerate(inputs)],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1},
                    })
                    return
                reply = fake.replies.popleft() if fake.replies else Reply(status=500, content="no reply scripted")
                time.sleep(reply.delay)
                if reply.status != 200:
                    self._send(reply.status, {"error": {"message": reply.content, "type": "server_error"}})
                    return
                self._send(200, {
                    "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "test"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": reply.content(body)
                                             if callable(reply.content) else reply.content}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                })

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client stopped waiting (a timeout test)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
