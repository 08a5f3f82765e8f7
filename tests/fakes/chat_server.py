"""A local chat-completions server (the remote side of the OpenAI-compatible path) that
replays scripted replies, well-formed or not, and records the requests it received."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Raw:
    """A reply sent exactly as given: a proxy's error page, garbage, an empty body."""

    body: bytes
    content_type: str | None = "application/json"
    status: int = 200
    drip_s: float = 0  # > 0: the body is sent one byte at a time, this far apart


Reply = (
    tuple[int, dict[str, Any]] | Raw | Callable[[dict[str, Any]], tuple[int, dict[str, Any]] | Raw]
)


class ChatServer:
    """A local chat-completions server that replays scripted replies and records requests."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.errors: list[BaseException] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), **body}
                )
                try:
                    reply = outer.replies.pop(0)
                    if callable(reply) and not isinstance(reply, Raw):
                        reply = reply(body)  # a body, or raw bytes (a stream) to send
                    if not isinstance(reply, Raw):
                        status, payload = reply
                        reply = Raw(json.dumps(payload).encode(), status=status)
                except Exception as exc:  # noqa: BLE001 (re-raised by the test)
                    outer.errors.append(exc)
                    reply = Raw(json.dumps({"error": str(exc)}).encode(), status=500)
                self.send_response(reply.status)
                if reply.content_type is not None:
                    self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                try:
                    if not reply.drip_s:
                        self.wfile.write(reply.body)
                    for byte in reply.body if reply.drip_s else b"":
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(reply.drip_s)
                except OSError:  # the client gave up on the body: what some tests want
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def completion(content: str | None = None, *calls: tuple[str, dict[str, Any]]) -> tuple[int, dict]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(calls)
        ]
    return 200, {
        "choices": [{"index": 0, "message": message}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10},
    }
