"""Hostile and broken model endpoints: whatever arrives instead of a well-formed reply, the user
gets the extractive answer (the best passages, quoted and linked) with a short reason, the
failure is one log line, and no byte of the body reaches the answer, the trace or the log.

Claude is the real `anthropic` SDK against the scripted fake (each case a raw HTTP response);
the OpenAI-compatible path is real httpx against a local chat-completions server.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog

from core.answer.claude import ClaudeModel
from core.answer.openai_compat import OpenAICompatibleModel
from core.answer.tools import RESPOND_TOOL, SEARCH_TOOL
from core.backends.sqlite.index import SqliteIndex
from core.config import Settings
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, ChannelKind
from tests.fakes.anthropic_api import (
    FakeMessagesAPI,
    encode_events,
    message,
    reply,
    sse,
    stream_events,
    tool_use,
)
from tests.fakes.chat_server import ChatServer, Raw, completion
from tests.integration.answers.helpers import cached, engine, local_model, question

# In every hostile body: it must never reach the answer, the trace or the log.
MARKER = "BODY-MARKER-5d1e"
QUESTION = "how do I re-ingest changed documents?"
MAX_TOKENS = 1024
# What ClaudeModel allows a reply of MAX_TOKENS (the fixed part plus 512 bytes per token).
REPLY_LIMIT = 65_536 + MAX_TOKENS * 512
DEADLINE_S = 0.5  # the client's timeout in the stalled-stream cases


def agent(api: FakeMessagesAPI, timeout: float | None = None) -> ClaudeModel:
    return ClaudeModel(
        api.client(max_retries=0, timeout=timeout),
        model="claude-test",
        max_tokens=MAX_TOKENS,
    )


def respond_events() -> list[dict[str, Any]]:
    """The events of a well-formed `respond` turn, for a case to cut or corrupt."""
    return stream_events(
        message(tool_use(RESPOND_TOOL, answer="Run it again.", citations=[], status="answered"))
    )


def event(kind: str, data: str) -> bytes:
    return f"event: {kind}\ndata: {data}\n\n".encode()


PREFIX = encode_events(respond_events()[:2])  # message_start, content_block_start (tool_use)
OPEN_TOOL_INPUT = {
    "type": "content_block_delta",
    "index": 0,
    "delta": {"type": "input_json_delta", "partial_json": '{"answer": "' + MARKER},
}


async def endless(chunk: bytes, sent: list[int], pause_s: float = 0) -> AsyncIterator[bytes]:
    """A body that never ends: the stream's start, then `chunk` again and again."""
    yield PREFIX
    while True:
        sent[0] += len(chunk)
        yield chunk
        await asyncio.sleep(pause_s)


async def stalled() -> AsyncIterator[bytes]:
    yield PREFIX
    await asyncio.sleep(3600)
    yield b""


Case = tuple[Callable[[], Any], str]
CLAUDE_CASES: dict[str, Case] = {
    "html-from-a-proxy": (
        lambda: reply(f"<html><h1>502 {MARKER}</h1></html>".encode(), "text/html; charset=utf-8"),
        "Claude sent text/html (HTTP 200), not an event stream",
    ),
    "json-error-object": (
        lambda: reply(
            json.dumps(
                {"type": "error", "error": {"type": "api_error", "message": MARKER}}
            ).encode(),
            "application/json",
        ),
        "Claude sent application/json (HTTP 200), not an event stream",
    ),
    "json-message-not-streamed": (
        lambda: reply(
            json.dumps(message(tool_use(RESPOND_TOOL, answer=MARKER))).encode(), "application/json"
        ),
        "Claude sent application/json (HTTP 200), not an event stream",
    ),
    "empty-body-no-content-type": (
        lambda: reply(b"", None),
        "Claude sent no recognisable content type (HTTP 200), not an event stream",
    ),
    "hostile-content-type": (
        lambda: reply(b"x", f"text/html <a href=https://evil.example>{MARKER}</a>"),
        "Claude sent no recognisable content type (HTTP 200), not an event stream",
    ),
    "empty-event-stream": (
        lambda: reply(b""),
        "Claude sent a stream that ended before its message was complete",
    ),
    "json-in-an-event-stream": (
        lambda: reply(json.dumps({"error": MARKER}).encode()),
        "Claude sent a stream that ended before its message was complete",
    ),
    "garbage-bytes": (
        lambda: reply(b"\xff\xfe\x00" + MARKER.encode() + b"\n\n" * 3),
        "Claude sent a stream that could not be read (UnicodeDecodeError)",
    ),
    "truncated-mid-stream": (
        lambda: reply(encode_events(respond_events()[:5])),
        "Claude sent a stream that ended before its message was complete",
    ),
    "no-message-stop": (
        lambda: reply(encode_events(respond_events()[:-1])),
        "Claude sent a stream that ended before its message was complete",
    ),
    "invalid-json-in-an-event": (
        lambda: reply(PREFIX + event("content_block_delta", "{" + MARKER)),
        "Claude sent a stream that could not be read (JSONDecodeError)",
    ),
    "delta-for-a-block-never-started": (
        lambda: reply(
            PREFIX
            + encode_events(
                [{**OPEN_TOOL_INPUT, "index": 7}, *respond_events()[-3:]],
            )
        ),
        "Claude sent a stream that could not be read (IndexError)",
    ),
    "events-before-message-start": (
        lambda: reply(encode_events(respond_events()[1:])),
        "Claude sent a stream that ended before its message was complete",
    ),
    "only-unknown-events": (
        lambda: reply(event("zork", json.dumps({"type": "zork", "x": MARKER})) * 3),
        "Claude sent a stream that ended before its message was complete",
    ),
    "tool-input-never-completes": (
        lambda: reply(
            PREFIX
            + encode_events([OPEN_TOOL_INPUT, *respond_events()[-3:]])  # block stop .. message stop
        ),
        "Claude sent a tool call that is not complete",
    ),
    "tool-input-cut-at-max-tokens": (
        lambda: reply(
            PREFIX
            + encode_events(
                [
                    OPEN_TOOL_INPUT,
                    {"type": "content_block_stop", "index": 0},
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
                        "usage": {"output_tokens": MAX_TOKENS},
                    },
                    {"type": "message_stop"},
                ]
            )
        ),
        "Claude sent a tool call that is not complete (it stopped at max_tokens)",
    ),
    "tool-input-not-an-object": (
        lambda: reply(
            PREFIX
            + encode_events(
                [
                    {
                        **OPEN_TOOL_INPUT,
                        "delta": {**OPEN_TOOL_INPUT["delta"], "partial_json": "[1]"},
                    },
                    *respond_events()[-3:],
                ]
            )
        ),
        "Claude sent a tool call that is not complete",
    ),
    "error-event-in-the-stream": (
        lambda: reply(
            PREFIX
            + event(
                "error",
                json.dumps(
                    {"type": "error", "error": {"type": "overloaded_error", "message": MARKER}}
                ),
            )
        ),
        "Claude's stream reported an error (overloaded_error)",
    ),
}


def assert_extractive_fallback(answer: Answer, note: str, logs: list[dict[str, Any]]) -> None:
    """The user got quoted, linked passages with the reason; the failure is one log line."""
    assert answer.mode is AnswerMode.EXTRACTIVE
    assert answer.status is AnswerStatus.PARTIAL
    assert answer.text.startswith(f"_The language model is unavailable right now ({note}).")
    assert answer.citations
    assert all(c.verified and "ingesting.md" in c.url for c in answer.citations[:1])
    assert note in answer.trace.notes
    failures = [e for e in logs if e["event"] == "model_unavailable"]
    assert failures == [{"event": "model_unavailable", "reason": note, "log_level": "warning"}]
    everything = answer.text + repr(answer.trace.notes) + repr(logs)
    assert MARKER not in everything
    assert "evil.example" not in everything


@pytest.mark.parametrize(("step", "note"), CLAUDE_CASES.values(), ids=CLAUDE_CASES.keys())
async def test_claude_hostile_reply_gives_the_extractive_answer(
    settings: Settings, index: SqliteIndex, step: Callable[[], Any], note: str
) -> None:
    api = FakeMessagesAPI([step()])
    with structlog.testing.capture_logs() as logs:
        answer = await engine(settings, index, model=agent(api)).answer(question(QUESTION))
    api.check()
    assert len(api.requests) == 1
    assert_extractive_fallback(answer, note, logs)


async def test_claude_hostile_reply_after_a_search_still_falls_back(settings, index) -> None:
    """The second turn is the broken one: the passages the first search found are not lost."""
    api = FakeMessagesAPI(
        [
            message(tool_use(SEARCH_TOOL, query="re-ingest")),
            reply(b"<html>" + MARKER.encode() + b"</html>", "text/html"),
        ]
    )
    with structlog.testing.capture_logs() as logs:
        answer = await engine(settings, index, model=agent(api)).answer(question(QUESTION))
    assert_extractive_fallback(
        answer, "Claude sent text/html (HTTP 200), not an event stream", logs
    )


async def test_claude_endless_stream_is_cut_at_its_byte_budget(settings, index) -> None:
    sent = [0]
    chunk = event("ping", '{"type": "ping"}') * 64  # pings: the SDK shows us no event at all
    api = FakeMessagesAPI([reply(endless(chunk, sent))])
    started = time.monotonic()
    with structlog.testing.capture_logs() as logs:
        answer = await engine(settings, index, model=agent(api)).answer(question(QUESTION))
    assert time.monotonic() - started < 10
    assert REPLY_LIMIT - len(chunk) <= sent[0] + len(PREFIX) <= REPLY_LIMIT + len(chunk)
    assert_extractive_fallback(
        answer, f"Claude sent a reply longer than {REPLY_LIMIT:,} bytes", logs
    )


async def test_claude_endless_line_is_cut_before_it_is_buffered(settings, index) -> None:
    """One SSE line that never ends: the decoder would hold all of it in memory."""
    sent = [0]
    chunk = b"x" * 65_536
    api = FakeMessagesAPI([reply(endless(chunk, sent))])
    with structlog.testing.capture_logs() as logs:
        answer = await engine(settings, index, model=agent(api)).answer(question(QUESTION))
    assert sent[0] <= REPLY_LIMIT + len(chunk)
    assert_extractive_fallback(
        answer, f"Claude sent a reply longer than {REPLY_LIMIT:,} bytes", logs
    )


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(lambda: stalled(), id="stalled-after-the-start"),
        pytest.param(
            lambda: endless(event("ping", '{"type": "ping"}'), [0], pause_s=0.05),
            id="dripping-pings",
        ),
    ],
)
async def test_claude_stalled_stream_ends_at_the_timeout(settings, index, body) -> None:
    """httpx's timeout bounds each read, not the reply: a drip would never trip it."""
    api = FakeMessagesAPI([reply(body())])
    started = time.monotonic()
    with structlog.testing.capture_logs() as logs:
        answer = await engine(settings, index, model=agent(api, timeout=DEADLINE_S)).answer(
            question(QUESTION)
        )
    assert DEADLINE_S <= time.monotonic() - started < DEADLINE_S + 5
    assert_extractive_fallback(
        answer, f"Claude's reply did not finish within {DEADLINE_S:g}s", logs
    )


async def test_claude_unknown_events_in_a_good_stream_are_ignored(settings, index) -> None:
    """New event types are the API's to add: a stream that is otherwise whole still answers."""
    events = stream_events(
        message(tool_use(RESPOND_TOOL, answer="Not covered.", citations=[], status="not_found"))
    )
    unknown = {"type": "future_event", "detail": {"x": 1}}
    body = encode_events([events[0], unknown, *events[1:-1], unknown, events[-1]])
    api = FakeMessagesAPI([message(tool_use(SEARCH_TOOL, query="prune")), reply(body)])
    answer = await engine(settings, index, model=agent(api)).answer(question("what is prune?"))
    assert answer.mode is AnswerMode.AGENT
    assert answer.status is AnswerStatus.NOT_FOUND
    assert answer.text == "Not covered."


async def test_a_good_stream_still_answers(settings, index) -> None:
    """The checks refuse nothing a real stream sends (the fake's streams are the API's)."""
    api = FakeMessagesAPI(
        [
            message(tool_use(SEARCH_TOOL, query="prune")),
            reply(
                sse(message(tool_use(RESPOND_TOOL, answer="No.", citations=[], status="not_found")))
            ),
        ]
    )
    answer = await engine(settings, index, model=agent(api)).answer(question("what is prune?"))
    assert (answer.mode, answer.text) == (AnswerMode.AGENT, "No.")


# -- the OpenAI-compatible path ------------------------------------------------------------


def chat_body(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


def with_call(arguments: object) -> Raw:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": SEARCH_TOOL, "arguments": arguments},
    }
    return Raw(chat_body(choices=[{"message": {"role": "assistant", "tool_calls": [call]}}]))


OPENAI_CASES: dict[str, tuple[Raw, str]] = {
    "html-from-a-proxy": (
        Raw(f"<html>{MARKER}</html>".encode(), "text/html"),
        "the model server sent text/html (HTTP 200), not a chat completion",
    ),
    "garbage": (
        Raw(b"\xff\xfe" + MARKER.encode(), "application/octet-stream"),
        "the model server sent application/octet-stream (HTTP 200), not a chat completion",
    ),
    "empty-body": (
        Raw(b"", None),
        "the model server sent no recognisable content type (HTTP 200), not a chat completion",
    ),
    "empty-json-body": (
        Raw(b""),
        "the model server sent a malformed chat completion (the body: Invalid JSON: EOF while "
        "parsing a value at line 1 column 0)",
    ),
    "no-choices": (
        Raw(chat_body(choices=[], detail=MARKER)),
        "the model server sent a malformed chat completion (choices: List should have at "
        "least 1 item after validation, not 0)",
    ),
    "missing-message": (
        Raw(chat_body(choices=[{"index": 0, "text": MARKER}])),
        "the model server sent a malformed chat completion (choices.0.message: Field required)",
    ),
    "message-not-an-object": (
        Raw(chat_body(choices=[{"message": MARKER}])),
        "the model server sent a malformed chat completion (choices.0.message: Input should "
        "be an object)",
    ),
    "tool-calls-not-a-list": (
        Raw(chat_body(choices=[{"message": {"tool_calls": MARKER}}])),
        "the model server sent a malformed chat completion (choices.0.message.tool_calls: "
        "Input should be a valid array)",
    ),
    "invalid-json-arguments": (
        with_call('{"query": "' + MARKER),
        "the model server sent tool call arguments that are not JSON",
    ),
    "arguments-not-an-object": (
        with_call(json.dumps([MARKER])),
        "the model server sent tool call arguments that are not JSON",
    ),
    "usage-of-the-wrong-type": (
        Raw(chat_body(choices=[{"message": {"content": None}}], usage=MARKER)),
        "the model server sent a malformed chat completion (usage: Input should be an object)",
    ),
}


def local_agent(http: httpx.AsyncClient, chat: ChatServer) -> OpenAICompatibleModel:
    return local_model(http, chat.url, local_timeout_s=http.timeout.read)


@pytest.fixture
async def openai_agent(chat: ChatServer) -> AsyncIterator[OpenAICompatibleModel]:
    async with httpx.AsyncClient(timeout=5) as http:
        yield local_agent(http, chat)


@pytest.mark.parametrize(("raw", "note"), OPENAI_CASES.values(), ids=OPENAI_CASES.keys())
async def test_openai_hostile_reply_gives_the_extractive_answer(
    settings,
    index,
    chat: ChatServer,
    openai_agent,
    raw: Raw,
    note: str,
) -> None:
    chat.replies = [raw]
    with structlog.testing.capture_logs() as logs:
        answer = await engine(settings, index, model=openai_agent).answer(question(QUESTION))
    assert len(chat.requests) == 1
    assert_extractive_fallback(answer, note, logs)


async def test_openai_huge_body_is_not_read_past_its_bound(
    settings, index, chat: ChatServer, openai_agent
) -> None:
    chat.replies = [Raw(b'{"choices": [{"message": {"content": "' + b"x" * (17 << 20) + b'"}}]}')]
    with structlog.testing.capture_logs() as logs:
        answer = await engine(settings, index, model=openai_agent).answer(question(QUESTION))
    assert_extractive_fallback(
        answer, "the model server sent a response longer than 16,777,216 bytes", logs
    )


async def test_openai_dripping_body_ends_at_the_timeout(settings, index, chat: ChatServer) -> None:
    """httpx's timeout bounds each read; a byte every 50 ms would never trip it, so the whole
    reply has its own deadline (`local_timeout_s` for a server on loopback)."""
    body = chat_body(choices=[{"message": {"content": "x" * 200}}])  # 10 s at 50 ms a byte
    chat.replies = [Raw(body, drip_s=0.05)]
    started = time.monotonic()
    async with httpx.AsyncClient(timeout=DEADLINE_S) as http:
        slow = local_agent(http, chat)
        with structlog.testing.capture_logs() as logs:
            answer = await engine(settings, index, model=slow).answer(question(QUESTION))
    assert time.monotonic() - started < DEADLINE_S + 5
    assert_extractive_fallback(
        answer, f"the model server did not finish its reply within {DEADLINE_S:g}s", logs
    )


async def test_openai_hostile_reply_in_search_then_answer(
    settings,
    index,
    chat: ChatServer,
    openai_agent,
) -> None:
    """The no-tools path: plain text to a forced tool call, then an HTML page."""
    chat.replies = [completion("I can't use tools."), Raw(MARKER.encode(), "text/html")]
    with structlog.testing.capture_logs() as logs:
        answer = await engine(settings, index, model=openai_agent).answer(question(QUESTION))
    assert_extractive_fallback(
        answer, "the model server sent text/html (HTTP 200), not a chat completion", logs
    )


# -- an empty index ------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["none", "claude"])
async def test_an_empty_index_says_so_where_it_is_and_what_to_do(
    settings, minilm, tmp_path: Path, model: str
) -> None:
    path = tmp_path / "empty.sqlite"
    empty = SqliteIndex(path, cached(settings, minilm), settings.search)
    api = FakeMessagesAPI(
        [
            message(tool_use(SEARCH_TOOL, query="anything")),
            message(tool_use(RESPOND_TOOL, answer="Nothing.", citations=[], status="not_found")),
        ]
    )
    claude = agent(api) if model == "claude" else None
    bot = engine(settings, empty, model=claude)
    in_terminal = replace(question("anything at all"), channel_kind=ChannelKind.TERMINAL)
    answer = await bot.answer(in_terminal)
    assert answer.status is AnswerStatus.NOT_FOUND
    assert answer.text == (
        f"The knowledge base is empty: nothing has been ingested into {path} yet. "
        "Run `bot ingest PATH` (a folder, a file or a URL) to add documents, then ask again."
    )
    assert answer.citations == []
    assert "the index holds no passages" in answer.trace.notes
    # In a chat the server's paths are not the asker's business: the owners are.
    in_chat = await bot.answer(question("anything at all", key="slack/T1/C1/2"))
    await empty.close()
    assert in_chat.status is AnswerStatus.NOT_FOUND
    assert str(path) not in in_chat.text
    assert in_chat.text.startswith("The knowledge base is empty: no documents have been added")


async def test_nothing_found_in_a_full_index_is_not_called_empty(settings, index) -> None:
    api = FakeMessagesAPI(
        [
            message(tool_use(SEARCH_TOOL, query="zebra migration")),
            message(
                tool_use(RESPOND_TOOL, answer="Not covered.", citations=[], status="not_found")
            ),
        ]
    )
    answer = await engine(settings, index, model=agent(api)).answer(question("zebras?"))
    # The search found passages (none relevant): the model's own not-found stands.
    assert answer.text == "Not covered."
    assert "the index holds no passages" not in answer.trace.notes


SSE = "text/event-stream"


@pytest.mark.parametrize(
    ("raw", "note"),
    [
        (
            Raw(b"data: {not json " + MARKER.encode() + b"\n\n", SSE),
            "the model server sent a malformed chat completion (the body: Invalid JSON: key "
            "must be a string at line 1 column 2)",
        ),
        (
            Raw(b'data: {"choices": [{"delta": {"content": "' + b"x" * (17 << 20), SSE),
            "the model server sent a response longer than 16,777,216 bytes",
        ),
    ],
    ids=["garbage-event", "one-endless-line"],
)
async def test_openai_hostile_stream_gives_the_extractive_answer(
    settings, index, chat: ChatServer, openai_agent, raw: Raw, note: str
) -> None:
    chat.replies = [raw]
    with structlog.testing.capture_logs() as logs:
        answer = await engine(settings, index, model=openai_agent).answer(question(QUESTION))
    assert_extractive_fallback(answer, note, logs)
