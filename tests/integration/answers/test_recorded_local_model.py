"""What a real local model server did, replayed: llama.cpp's `llama-server` with
Qwen2.5-Coder-0.5B, recorded answering this bot (`tests/data/recordings/`). The stand-in
streams each recorded reply as that server did and ignores the `tool_choice` object as it did;
the bot must answer no worse than with no model at all."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.answer.openai_compat import OpenAICompatibleModel
from core.answer.tools import SEARCH_TOOL
from core.backends.sqlite.index import SqliteIndex
from core.backends.sqlite.model_facts import SqliteModelFacts
from core.config import Settings
from core.domain.conversation import Answer, AnswerMode, AnswerStatus
from tests.fakes.llama_server import LlamaServer, Recorded, Request
from tests.integration.answers.helpers import engine, local_model, question

RECORDED = Recorded()
REINGEST = "How do I re-ingest changed documents?"
OLLAMA = "How do I point the bot at an OpenAI-compatible server such as Ollama?"
CHECKS = "How are citations checked before an answer is shown?"
TEAMS = "Does the bot support Microsoft Teams?"
MARKERS_ONLY = next(r["content"] for r in RECORDED.rows if r["content"] == "[1] [2]")
LOOP = max(
    (r for r in RECORDED.rows if not r["tools"]), key=lambda r: r["usage"]["completion_tokens"]
)


def replaying(plain_reply: str | None = None) -> Any:
    """The recorded replies; `plain_reply` instead of the recorded search-then-answer one."""

    def model(request: Request) -> str:
        if request.tools or plain_reply is None:
            return (
                RECORDED(request)
                if request.question in RECORDED.questions()
                else (RECORDED.reply(REINGEST, tools=True))
            )
        return plain_reply

    return model


@pytest.fixture
def llama() -> Iterator[LlamaServer]:
    server = LlamaServer(replaying()).start()
    yield server
    server.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


def model_on(
    http: httpx.AsyncClient, server: LlamaServer, facts: SqliteModelFacts | None = None
) -> OpenAICompatibleModel:
    # The shipped limits for a local server, not the tests' short ones.
    return local_model(http, server.url, facts=facts, max_tokens=2048, probe_max_tokens=256)


async def test_an_ignored_tool_choice_is_found_out_once_and_remembered(
    settings: Settings, index: SqliteIndex, llama: LlamaServer, http, tmp_path: Path
) -> None:
    facts = SqliteModelFacts(tmp_path / "state.sqlite", 1_000)
    bot = engine(settings, index, model=model_on(http, llama, facts))
    first = await bot.answer(question(REINGEST))
    named, required, plain = llama.requests
    assert named["tool_choice"] == {"type": "function", "function": {"name": SEARCH_TOOL}}
    assert llama.log == ["type must be string, but is object"]
    assert required["tool_choice"] == "required"
    # The recorded reply to the forced search ran 537 tokens: the probe stops at its bound.
    assert named["max_tokens"] == 256
    assert llama.tokens_sent[0] == 256
    assert "tools" not in plain
    assert first.mode is AnswerMode.SEARCH_THEN_ANSWER
    assert "tool calls: the model server honours none" in first.trace.notes

    await bot.answer(question(OLLAMA, key="slack/T1/C1/2"))
    assert "tools" not in llama.requests[3]  # straight to search-then-answer
    assert len(llama.requests) == 4

    # Another process, same state store: it knows without asking.
    other = engine(settings, index, model=model_on(http, llama, facts))
    answer = await other.answer(question(CHECKS, key="slack/T1/C1/3"))
    assert "tools" not in llama.requests[4]
    assert len(llama.requests) == 5
    assert "tool calls: none (remembered)" in answer.trace.notes
    await facts.close()


async def test_prose_without_markers_keeps_its_sources(settings, index, llama, http) -> None:
    answer = await engine(settings, index, model=model_on(http, llama)).answer(question(REINGEST))
    assert RECORDED.reply(REINGEST, tools=False).count("[") == 0  # the recording has no marker
    assert answer.mode is AnswerMode.SEARCH_THEN_ANSWER
    assert answer.status is AnswerStatus.ANSWERED
    assert answer.citations
    assert all(c.verified for c in answer.citations)
    assert "[1]" in answer.text
    assert "Skip unchanged documents" in answer.text


async def test_an_answer_of_markers_alone_is_a_failed_turn(settings, index, http) -> None:
    server = LlamaServer(replaying(MARKERS_ONLY)).start()
    try:
        answer = await engine(settings, index, model=model_on(http, server)).answer(
            question(REINGEST)
        )
    finally:
        server.stop()
    assert answer.mode is AnswerMode.EXTRACTIVE
    assert "gave no usable answer (the model returned only citation markers)" in answer.text
    assert answer.citations
    assert all(c.verified for c in answer.citations)


async def test_entities_copied_from_escaped_passages_are_decoded_then_defused(
    settings, index, llama, http
) -> None:
    assert "&lt;!channel&gt;" in RECORDED.reply(CHECKS, tools=False)
    answer = await engine(settings, index, model=model_on(http, llama)).answer(question(CHECKS))
    assert answer.status is AnswerStatus.ANSWERED
    assert "&lt;" not in answer.text
    assert "&gt;" not in answer.text
    assert "<!channel>" not in answer.text
    assert "mass mentions" in answer.text
    assert all(c.verified for c in answer.citations)


async def test_a_looping_reply_is_cut_and_its_stream_closed(settings, index, http) -> None:
    server = LlamaServer(replaying(LOOP["content"])).start()
    try:
        answer = await engine(settings, index, model=model_on(http, server)).answer(
            question(REINGEST)
        )
    finally:
        server.stop()
    streamed = server.requests[-1]
    assert streamed["stream"] is True
    # The recorded loop ran 1,226 tokens; reading stopped at its third repeated line.
    assert server.tokens_sent[-1] < 200
    assert "stopped the model's reply: it repeated a line 3 times" in answer.trace.notes
    assert answer.text.count("Average Cost per Request Routing") < 3


async def test_a_confident_claim_no_source_makes_is_not_an_answer(
    settings, index, llama, http
) -> None:
    assert RECORDED.reply(TEAMS, tools=False) == "Yes, the bot supports Microsoft Teams."
    answer: Answer = await engine(settings, index, model=model_on(http, llama)).answer(
        question(TEAMS)
    )
    assert answer.status is not AnswerStatus.ANSWERED
    assert "supports Microsoft Teams" not in answer.text
    assert answer.mode is AnswerMode.EXTRACTIVE
    assert "could not be matched to the documentation" in answer.text
    assert answer.citations
