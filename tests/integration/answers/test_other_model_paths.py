"""The OpenAI-compatible path (real httpx against a scripted chat-completions server on
loopback), its search-then-answer fallback, and the extractive answer with no model at all."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.conversation import AnswerMode, AnswerStatus
from core.openai_agent import OpenAICompatibleAgent
from core.sqlite_index import SqliteIndex
from core.tools import RESPOND_TOOL, SEARCH_TOOL
from tests.integration.answers.helpers import (
    cached,
    engine,
    first_sentence,
    question,
    sources_in,
)

Reply = tuple[int, dict[str, Any]] | Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


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
                    status, payload = reply(body) if callable(reply) else reply
                except Exception as exc:  # noqa: BLE001 (re-raised by the test)
                    outer.errors.append(exc)
                    status, payload = 500, {"error": str(exc)}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

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


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    server = ChatServer()
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.server.shutdown()
    if server.errors:
        raise server.errors[0]


@pytest.fixture
async def agent(chat: ChatServer) -> AsyncIterator[OpenAICompatibleAgent]:
    async with httpx.AsyncClient(timeout=5) as http:
        yield OpenAICompatibleAgent(
            http,
            base_url=chat.url,
            model="llama-test",
            api_key="sk-local",
            max_tokens=512,
            max_rounds=4,
            max_retries=2,
            retry_initial_s=0.01,
            retry_max_s=0.05,
        )


async def test_tool_calls_over_the_wire(settings, index, chat: ChatServer, agent) -> None:
    def respond(body: dict[str, Any]) -> tuple[int, dict]:
        tool_message = body["messages"][-1]
        assert tool_message["role"] == "tool"
        number, passage = next(iter(sources_in(tool_message["content"]).items()))
        return completion(
            None,
            (
                RESPOND_TOOL,
                {
                    "answer": f"Use --base-url [{number}].",
                    "citations": [{"source": number, "quote": first_sentence(passage)}],
                    "status": "answered",
                },
            ),
        )

    chat.replies = [completion(None, (SEARCH_TOOL, {"query": "base url links"})), respond]
    answer = await engine(settings, index, openai=agent).answer(question("citation links?"))
    first, second = chat.requests
    assert first["path"] == "/v1/chat/completions"
    assert first["auth"] == "Bearer sk-local"
    assert first["tool_choice"] == {"type": "function", "function": {"name": SEARCH_TOOL}}
    assert second["tool_choice"] == "required"
    assert {t["function"]["name"] for t in first["tools"]} == {SEARCH_TOOL, RESPOND_TOOL}
    assert answer.mode is AnswerMode.AGENT
    assert answer.status is AnswerStatus.ANSWERED
    assert answer.citations[0].verified
    assert answer.trace.usage.input_tokens == 100


async def test_model_without_tool_calls_gets_search_then_answer(
    settings, index, chat: ChatServer, agent
) -> None:
    def grounded(body: dict[str, Any]) -> tuple[int, dict]:
        assert "tools" not in body
        system = body["messages"][0]["content"]
        assert "<source id=" in system  # the passages went into the prompt
        return completion("Ingest the folder again [1]; see also [9] and https://evil.example.")

    chat.replies = [completion("I can't use tools, here's a guess."), grounded]
    answer = await engine(settings, index, openai=agent).answer(
        question("how do I re-ingest changed documents?")
    )
    assert answer.mode is AnswerMode.SEARCH_THEN_ANSWER
    assert "guess" not in answer.text
    assert answer.text.startswith("Ingest the folder again [1]")
    assert "evil.example" not in answer.text
    assert "[9]" not in answer.text  # only 8 passages were retrieved
    assert [c.number for c in answer.citations] == [1]
    assert all(not c.verified for c in answer.citations)  # no quotes on this path


async def test_retries_429_and_5xx_then_succeeds(settings, index, chat: ChatServer, agent):
    chat.replies = [
        (429, {"error": "slow down"}),
        (503, {"error": "busy"}),
        completion(None, (SEARCH_TOOL, {"query": "pdf"})),
        completion(
            None, (RESPOND_TOOL, {"answer": "Not covered.", "citations": [], "status": "not_found"})
        ),
    ]
    answer = await engine(settings, index, openai=agent).answer(question("pdf?"))
    assert answer.status is AnswerStatus.NOT_FOUND
    assert len(chat.requests) == 4


async def test_server_down_gives_a_labelled_extractive_answer(settings, index, chat, agent):
    chat.replies = [(500, {"error": "boom"})] * 3
    answer = await engine(settings, index, openai=agent).answer(
        question("what is reciprocal rank fusion?")
    )
    assert answer.mode is AnswerMode.EXTRACTIVE
    assert "HTTP 500" in answer.text
    assert answer.citations


async def test_unreachable_server(settings, index) -> None:
    async with httpx.AsyncClient(timeout=1) as http:
        dead = OpenAICompatibleAgent(
            http,
            base_url="http://127.0.0.1:9/v1",
            model="m",
            api_key=None,
            max_tokens=64,
            max_rounds=3,
            max_retries=1,
            retry_initial_s=0.01,
            retry_max_s=0.01,
        )
        answer = await engine(settings, index, openai=dead).answer(question("hybrid search?"))
    assert answer.mode is AnswerMode.EXTRACTIVE
    assert "could not be reached" in answer.text


async def test_no_model_means_extractive_labelled_and_linked(settings, index) -> None:
    answer = await engine(settings, index).answer(question("how do I re-ingest documents?"))
    assert answer.mode is AnswerMode.EXTRACTIVE
    assert "No language model is configured" in answer.text
    assert 1 <= len(answer.citations) <= settings.answers.extractive_passages
    assert all(c.verified and c.url.startswith("file://") for c in answer.citations)
    assert len({c.url.split("#")[0] for c in answer.citations}) == len(answer.citations)


async def test_extractive_with_nothing_found(settings, minilm, tmp_path: Path) -> None:
    empty = SqliteIndex(tmp_path / "empty.sqlite", cached(settings, minilm), settings.search)
    answer = await engine(settings, empty).answer(question("anything at all"))
    await empty.close()
    assert answer.status is AnswerStatus.NOT_FOUND
    assert answer.citations == []


async def test_a_server_that_refuses_tools_gets_search_then_answer(
    settings, index, chat: ChatServer, agent
) -> None:
    def grounded(body: dict[str, Any]) -> tuple[int, dict]:
        assert "tools" not in body
        return completion("Ingest the folder again [1].")

    chat.replies = [(400, {"error": "llama3 does not support tools"}), grounded]
    answer = await engine(settings, index, openai=agent).answer(
        question("how do I re-ingest changed documents?")
    )
    assert answer.mode is AnswerMode.SEARCH_THEN_ANSWER
    assert answer.text == "Ingest the folder again [1]."
