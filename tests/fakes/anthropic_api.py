"""A scripted stand-in for the Anthropic Messages API, for the real `anthropic` SDK.

The SDK talks to it through httpx2's MockTransport, so everything above the socket is real:
request building, headers, retries, error mapping, response parsing. Each scripted step is a
Messages API response body, an (HTTP status, body) pair, a whole HTTP response (`reply`: what a
broken proxy or a hostile endpoint might send), an exception to raise, or a function of the
request body returning one of those.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar

import anthropic
import httpx2

from tests.integration.answers.helpers import first_sentence

Step = (
    dict[str, Any]
    | tuple[int, dict[str, Any]]
    | httpx2.Response
    | Exception
    | Callable[[dict[str, Any]], Any]
)
_ids = itertools.count(1)


def tool_use(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{next(_ids):04d}", "name": name, "input": tool_input}


def respond_quoting(answer: str, cited: dict[int, str], status: str = "answered") -> dict[str, Any]:
    """A `respond` turn: `answer` followed by a marker for each cited source, each cited with
    the first sentence of its text as the quote (as a model would copy it)."""
    markers = "".join(f"[{n}]" for n in cited)
    return message(
        tool_use(
            "respond",
            answer=f"{answer} {markers}.",
            citations=[{"source": n, "quote": first_sentence(t)} for n, t in cited.items()],
            status=status,
        )
    )


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def message(*blocks: dict[str, Any]) -> dict[str, Any]:
    uses = any(b["type"] == "tool_use" for b in blocks)
    return {
        "id": f"msg_{next(_ids):04d}",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": list(blocks),
        "stop_reason": "tool_use" if uses else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 120,
            "output_tokens": 30,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 900,
        },
    }


JSON_PIECE = 24  # characters of tool input JSON per input_json_delta event


def sse(msg: dict[str, Any]) -> bytes:
    """A Messages API response replayed as the server-sent events of a streamed response."""
    return encode_events(stream_events(msg))


def encode_events(events: list[dict[str, Any]]) -> bytes:
    """Events on the wire: each named by its type, its data one line of JSON."""
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def stream_events(msg: dict[str, Any]) -> list[dict[str, Any]]:
    """The events the API streams for `msg`, in order, for a test to cut or corrupt."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                **msg,
                "content": [],
                "stop_reason": None,
                "usage": {**msg["usage"], "output_tokens": 1},
            },
        },
    ]
    for index, block in enumerate(msg["content"]):
        if block["type"] == "text":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                }
            )
            if block["text"]:
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": block["text"]},
                    }
                )
        else:
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "input": {}},
                }
            )
            raw = json.dumps(block["input"])
            for start in range(0, len(raw), JSON_PIECE):
                events.append(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {
                            "type": "input_json_delta",
                            "partial_json": raw[start : start + JSON_PIECE],
                        },
                    }
                )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": msg["usage"]["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return events


def reply(
    body: bytes | AsyncIterator[bytes],
    content_type: str | None = "text/event-stream",
    status: int = 200,
) -> httpx2.Response:
    """A scripted step that is exactly this HTTP response, whatever the request asked for: an
    error page, a stream cut short, a body that arrives slowly or never ends."""
    headers = {"content-type": content_type} if content_type is not None else {}
    return httpx2.Response(status, content=body, headers=headers)


def overloaded() -> tuple[int, dict[str, Any]]:
    return 529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


class FakeMessagesAPI:
    """Failures inside a scripted step (a test's assertion) would reach the SDK as a connection
    error and be retried or hidden; they are kept in `errors` and re-raised by `check()`."""

    instances: ClassVar[list[FakeMessagesAPI]] = []

    def __init__(self, steps: list[Step]) -> None:
        self.steps = list(steps)
        self.requests: list[dict[str, Any]] = []
        self.errors: list[BaseException] = []
        FakeMessagesAPI.instances.append(self)

    def check(self) -> None:
        if self.errors:
            raise self.errors[0]

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/messages"
        credentials = request.headers.get("x-api-key") or request.headers.get("authorization")
        assert credentials in ("test-key", "Bearer test-key")
        body = json.loads(request.content)
        self.requests.append(body)
        if not self.steps:
            raise AssertionError("the fake API was called more often than scripted")
        step = self.steps.pop(0)
        if callable(step) and not isinstance(step, Exception):
            try:
                step = step(body)
            except Exception as exc:
                self.errors.append(exc)
                raise
        if isinstance(step, Exception):
            raise step
        if isinstance(step, httpx2.Response):
            return step
        status, payload = step if isinstance(step, tuple) else (200, step)
        if status >= 400:
            return httpx2.Response(status, json=payload, headers={"retry-after-ms": "5"})
        if body.get("stream"):
            return httpx2.Response(
                200, content=sse(payload), headers={"content-type": "text/event-stream"}
            )
        return httpx2.Response(status, json=payload)

    def client(
        self, max_retries: int = 2, timeout: float | None = None
    ) -> anthropic.AsyncAnthropic:
        transport = httpx2.MockTransport(self.handler)
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        return anthropic.AsyncAnthropic(
            api_key="test-key",
            base_url="http://anthropic.test",
            http_client=httpx2.AsyncClient(transport=transport),
            max_retries=max_retries,
            **extra,
        )


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of the latest user message that has any."""
    for msg in reversed(body["messages"]):
        content = msg["content"]
        if msg["role"] == "user" and isinstance(content, list):
            results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            if results:
                return results
    return []
