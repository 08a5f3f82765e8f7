"""The OpenAI-compatible path (real httpx against a scripted chat-completions server on
loopback), its search-then-answer fallback, and the extractive answer with no model at all."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.answer.holding import ALSO_QUOTED
from core.answer.openai_compat import OpenAICompatibleModel
from core.answer.tools import RESPOND_TOOL, SEARCH_TOOL
from core.backends.sqlite.index import SqliteIndex
from core.domain.conversation import AnswerMode, AnswerStatus
from tests.fakes.chat_server import ChatServer, Raw, completion
from tests.integration.answers.helpers import (
    cached,
    engine,
    first_sentence,
    local_model,
    question,
    sources_in,
)

SSE = "text/event-stream"


@pytest.fixture
async def agent(chat: ChatServer) -> AsyncIterator[OpenAICompatibleModel]:
    async with httpx.AsyncClient(timeout=5) as http:
        yield local_model(http, chat.url, api_key="sk-local", max_retries=2, retry_max_s=0.05)


def _answer_citing_the_first_source(tool_result: str) -> tuple[int, dict]:
    """The model's `respond` call, saying and quoting the first passage a search gave it (its
    answers are held to the passages, `openai.ground_answers`)."""
    number, passage = next(iter(sources_in(tool_result).items()))
    return completion(
        None,
        (
            RESPOND_TOOL,
            {
                "answer": f"{first_sentence(passage).rstrip('.')} [{number}].",
                "citations": [{"source": number, "quote": first_sentence(passage)}],
                "status": "answered",
            },
        ),
    )


async def test_tool_calls_over_the_wire(settings, index, chat: ChatServer, agent) -> None:
    def respond(body: dict[str, Any]) -> tuple[int, dict]:
        tool_message = body["messages"][-1]
        assert tool_message["role"] == "tool"
        return _answer_citing_the_first_source(tool_message["content"])

    chat.replies = [completion(None, (SEARCH_TOOL, {"query": "base url links"})), respond]
    answer = await engine(settings, index, model=agent).answer(question("citation links?"))
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


async def test_parallel_tool_calls_of_a_whole_reply_are_each_run(
    settings, index, chat: ChatServer, agent
) -> None:
    """OpenAI's non-streamed tool calls carry no `index`: two in one reply are two calls, each
    answered with its own tool message, not one call of both argument strings joined."""

    def respond(body: dict[str, Any]) -> tuple[int, dict]:
        results = [m for m in body["messages"] if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in results] == ["call_0", "call_1"]
        return _answer_citing_the_first_source(results[0]["content"])

    chat.replies = [
        completion(
            None,
            (SEARCH_TOOL, {"query": "base url links"}),
            (SEARCH_TOOL, {"query": "citation links"}),
        ),
        respond,
    ]
    answer = await engine(settings, index, model=agent).answer(question("citation links?"))
    assert len(chat.requests) == 2
    assert answer.mode is AnswerMode.AGENT
    assert answer.status is AnswerStatus.ANSWERED


async def test_model_without_tool_calls_gets_search_then_answer(
    settings, index, chat: ChatServer, agent
) -> None:
    copied: list[str] = []

    def grounded(body: dict[str, Any]) -> tuple[int, dict]:
        assert "tools" not in body
        system = body["messages"][0]["content"]
        copied.append(first_sentence(sources_in(system)[1]))
        return completion(f"{copied[0]} [1] See also [9] and https://evil.example.")

    prose = completion("I can't use tools, here's a guess.")
    chat.replies = [prose, prose, grounded]
    answer = await engine(settings, index, model=agent).answer(
        question("how do I re-ingest changed documents?")
    )
    named, required, _ = chat.requests
    assert named["tool_choice"] == {"type": "function", "function": {"name": SEARCH_TOOL}}
    assert required["tool_choice"] == "required"
    assert answer.mode is AnswerMode.SEARCH_THEN_ANSWER
    assert "guess" not in answer.text
    assert answer.text.startswith(f"{copied[0][:-1]} [1]")
    assert "evil.example" not in answer.text
    assert "[9]" not in answer.text  # only 8 passages were retrieved
    # The sentence with no support is left out, the answer is partial, and the trace says so.
    assert "See also" not in answer.text
    assert "1 of the model's statements are not in the sources: left out" in answer.trace.notes
    assert answer.status is AnswerStatus.PARTIAL
    assert answer.citations[0].number == 1
    assert answer.citations[0].quote == copied[0]  # the passage's own sentence is the quote
    # The top passages it does not cite are quoted after it, as with no model.
    assert ALSO_QUOTED in answer.text
    no_model = await engine(settings, index).answer(
        question("how do I re-ingest changed documents?")
    )
    assert no_model.mode is AnswerMode.EXTRACTIVE
    assert {c.doc_id for c in answer.citations} == {c.doc_id for c in no_model.citations}
    assert all(c.verified for c in answer.citations)


async def test_retries_429_and_5xx_then_succeeds(settings, index, chat: ChatServer, agent):
    chat.replies = [
        (429, {"error": "slow down"}),
        (503, {"error": "busy"}),
        completion(None, (SEARCH_TOOL, {"query": "pdf"})),
        completion(
            None, (RESPOND_TOOL, {"answer": "Not covered.", "citations": [], "status": "not_found"})
        ),
    ]
    answer = await engine(settings, index, model=agent).answer(question("pdf?"))
    assert answer.status is AnswerStatus.NOT_FOUND
    assert len(chat.requests) == 4
    retries = [n for n in answer.trace.notes if "retry" in n]
    assert retries[0].startswith("model server answered HTTP 429; retry 1 of 2 in ")
    assert retries[1].startswith("model server answered HTTP 503; retry 2 of 2 in ")


def _answers(number: int = 1) -> Any:
    """A respond citing the first source, whatever the numbers."""

    def respond(body: dict[str, Any]) -> tuple[int, dict]:
        passage = sources_in(body["messages"][-1]["content"])[number]
        cited = {"source": number, "quote": first_sentence(passage)}
        answer = {"answer": f"{first_sentence(passage)} [{number}]", "citations": [cited]}
        return completion(None, (RESPOND_TOOL, {**answer, "status": "answered"}))

    return respond


async def test_a_server_honouring_the_named_form_is_not_probed_again(
    settings, index, chat: ChatServer, agent
) -> None:
    search = completion(None, (SEARCH_TOOL, {"query": "re-ingest"}))
    chat.replies = [search, _answers(), search, _answers()]
    bot = engine(settings, index, model=agent)
    first = await bot.answer(question("how do I re-ingest?"))
    await bot.answer(question("and prune?", key="slack/T1/C1/2"))
    assert [r["tool_choice"] for r in chat.requests] == [
        {"type": "function", "function": {"name": SEARCH_TOOL}},
        "required",
    ] * 2
    assert "tool calls: the model server honours named" in first.trace.notes
    assert first.mode is AnswerMode.AGENT


async def test_a_server_honouring_only_required_gets_required_from_then_on(
    settings, index, chat: ChatServer, agent
) -> None:
    search = completion(None, (SEARCH_TOOL, {"query": "re-ingest"}))
    chat.replies = [
        completion("Prose, named form ignored."),
        search,
        _answers(),
        search,
        _answers(),
    ]
    bot = engine(settings, index, model=agent)
    first = await bot.answer(question("how do I re-ingest?"))
    second = await bot.answer(question("and prune?", key="slack/T1/C1/2"))
    choices = [r["tool_choice"] for r in chat.requests]
    assert choices == [
        {"type": "function", "function": {"name": SEARCH_TOOL}},
        "required",
        "required",
        "required",
        "required",
    ]
    assert "tool calls: the model server honours required" in first.trace.notes
    assert (first.mode, second.mode) == (AnswerMode.AGENT, AnswerMode.AGENT)


async def test_tool_support_set_in_config_skips_the_probe(settings, index, chat: ChatServer):
    chat.replies = [completion("Run `bot ingest` again.")]
    async with httpx.AsyncClient(timeout=5) as http:
        model = local_model(http, chat.url, tool_support="none")
        answer = await engine(settings, index, model=model).answer(question("re-ingest?"))
    assert len(chat.requests) == 1
    assert "tools" not in chat.requests[0]
    assert answer.mode is not AnswerMode.AGENT


async def test_server_down_gives_a_labelled_extractive_answer(settings, index, chat, agent):
    chat.replies = [(500, {"error": "boom"})] * 3
    answer = await engine(settings, index, model=agent).answer(
        question("what is reciprocal rank fusion?")
    )
    assert answer.mode is AnswerMode.EXTRACTIVE
    assert "HTTP 500" in answer.text
    assert answer.citations


async def test_unreachable_server(settings, index) -> None:
    async with httpx.AsyncClient(timeout=1) as http:
        dead = local_model(http, "http://127.0.0.1:9/v1", max_tokens=64, max_retries=1)
        answer = await engine(settings, index, model=dead, max_rounds=3).answer(
            question("hybrid search?")
        )
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
    answer = await engine(settings, index, model=agent).answer(
        question("how do I re-ingest changed documents?")
    )
    assert answer.mode is AnswerMode.SEARCH_THEN_ANSWER
    assert answer.text.startswith(f"Ingest the folder again [1].\n\n{ALSO_QUOTED}")


INVENTED = "Prune deletes every document older than a week, so run it nightly."


def _respond(answer: str, status: str = "answered", citations: list | None = None) -> Any:
    return completion(
        None, (RESPOND_TOOL, {"answer": answer, "citations": citations or [], "status": status})
    )


async def test_an_answer_before_any_search_is_refused(
    settings, index, chat: ChatServer, agent
) -> None:
    """A server that ignores the named search and a model that answers at once: the answer is
    refused and the search asked for again; the server is not taken to honour the named form."""

    def refused(body: dict[str, Any]) -> tuple[int, dict]:
        assert "Search the knowledge base first" in body["messages"][-1]["content"]
        return completion(None, (SEARCH_TOOL, {"query": "re-ingest"}))

    chat.replies = [_respond(INVENTED), _respond(INVENTED), refused, _answers()]
    answer = await engine(settings, index, model=agent).answer(question("how do I re-ingest?"))
    assert [r["tool_choice"] for r in chat.requests] == [
        {"type": "function", "function": {"name": SEARCH_TOOL}},
        "required",
        "required",  # the search is still what this round needs; the server honours "required"
        "required",
    ]
    assert "tool calls: the model server honours named" not in answer.trace.notes
    assert "tool calls: the model server honours required" in answer.trace.notes
    assert [c.name for c in answer.trace.tool_calls] == [SEARCH_TOOL]
    assert (answer.mode, answer.status) == (AnswerMode.AGENT, AnswerStatus.ANSWERED)
    assert INVENTED not in answer.text
    assert answer.citations[0].verified


async def test_a_model_that_never_searches_gets_the_quoted_passages(
    settings, index, chat: ChatServer, agent
) -> None:
    chat.replies = [_respond(INVENTED)] * 4
    answer = await engine(settings, index, model=agent).answer(question("what does prune do?"))
    assert answer.mode is AnswerMode.EXTRACTIVE
    assert INVENTED not in answer.text
    assert "answered before searching the knowledge base, twice" in answer.text
    assert answer.citations
    assert all(c.verified for c in answer.citations)


async def test_a_tool_answers_unsupported_sentences_are_left_out(
    settings, index, chat: ChatServer, agent
) -> None:
    """`openai.ground_answers`: a sentence without a marker that no passage says is not shown,
    as search-then-answer's would not be; the supported one keeps its passage's quote."""

    def respond(body: dict[str, Any]) -> tuple[int, dict]:
        passage = sources_in(body["messages"][-1]["content"])[1]
        said = first_sentence(passage).rstrip(".")
        return _respond(f"{said} [1]. {INVENTED}", citations=[{"source": 1, "quote": "e"}])

    chat.replies = [completion(None, (SEARCH_TOOL, {"query": "re-ingest"})), respond]
    answer = await engine(settings, index, model=agent).answer(question("how do I re-ingest?"))
    assert (answer.mode, answer.status) == (AnswerMode.AGENT, AnswerStatus.PARTIAL)
    assert INVENTED not in answer.text
    assert "1 of the model's statements are not in the sources: left out" in answer.trace.notes
    first = answer.citations[0]
    assert first.verified
    assert len(first.quote) > 1


@pytest.mark.parametrize(
    ("reply", "status", "intro"),
    [
        (_respond(INVENTED), AnswerStatus.PARTIAL, "could not be matched to the documentation"),
        (_respond("I'm sorry, but I can't help with that."), AnswerStatus.PARTIAL, "could not be"),
        (_respond("Not in the docs.", "not_found"), AnswerStatus.NOT_FOUND, "closest passages"),
    ],
)
async def test_a_tool_answer_that_says_nothing_the_passages_do_shows_them(
    settings, index, chat: ChatServer, agent, reply: Any, status: AnswerStatus, intro: str
) -> None:
    chat.replies = [completion(None, (SEARCH_TOOL, {"query": "prune"})), reply]
    answer = await engine(settings, index, model=agent).answer(question("what does prune do?"))
    assert answer.status is status
    assert intro in answer.text
    assert INVENTED not in answer.text
    assert answer.citations
    assert all(c.verified for c in answer.citations)


@pytest.mark.parametrize(
    "ending",
    ["a stream without its end", "a stream at max_tokens", "a body at max_tokens", "stop"],
)
async def test_a_reply_cut_off_mid_sentence_loses_its_unfinished_end(
    settings, index, chat: ChatServer, agent, ending: str
) -> None:
    """ "The maximum request timeout is [1]": half a claim keeps enough of its sentence's words
    to pass the check, and was shown as answered. A reply the server cut (max_tokens) or
    whose stream just stopped (neither a finish_reason nor `[DONE]`) ends at its last finished
    sentence; one the model finished (`stop`, even without `[DONE]`) is kept whole."""
    halves: list[str] = []

    def cut(body: dict[str, Any]) -> tuple[int, dict] | Raw:
        said = first_sentence(sources_in(body["messages"][0]["content"])[1]).rstrip(".")
        words = said.split()
        halves.append(" ".join(words[: max(len(words) * 3 // 4, 2)]))
        text = f"{said} [1]. {halves[0]} [1]"
        if ending == "a body at max_tokens":
            status, payload = completion(text)
            payload["choices"][0]["finish_reason"] = "length"
            return status, payload
        chunks = [{"choices": [{"delta": {"content": text}}]}]
        if ending != "a stream without its end":
            finish = "length" if ending == "a stream at max_tokens" else "stop"
            chunks.append({"choices": [{"delta": {}, "finish_reason": finish}]})
        return Raw("".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode(), SSE)

    prose = completion("I can't use tools, here's a guess.")
    chat.replies = [prose, prose, cut]
    answer = await engine(settings, index, model=agent).answer(
        question("how do I re-ingest changed documents?")
    )
    assert answer.mode is AnswerMode.SEARCH_THEN_ANSWER
    written = answer.text.split(f"\n\n{ALSO_QUOTED}")[0]
    cut_off = [n for n in answer.trace.notes if n.startswith("the model's reply was cut off")]
    if ending == "stop":
        assert written.endswith(f"{halves[0]} [1]")
        assert not cut_off
    else:
        assert written.endswith(".")
        assert f"{halves[0]} [1]" not in written
        assert len(cut_off) == 1


async def test_an_ungrounded_models_answer_citing_nothing_is_followed_by_the_passages(
    settings, index, chat: ChatServer, agent
) -> None:
    """With `ground_answers: false` the model's sentences stand, but an answer that cites no
    passage still shows the top passages after it: never less than no model."""
    chat.replies = [completion(None, (SEARCH_TOOL, {"query": "prune"})), _respond(INVENTED)]
    ungrounded = settings.model_copy(
        update={"openai": settings.openai.model_copy(update={"ground_answers": False})}
    )
    answer = await engine(ungrounded, index, model=agent).answer(question("what does prune do?"))
    assert answer.mode is AnswerMode.AGENT
    assert answer.status is AnswerStatus.PARTIAL
    assert answer.text.startswith(f"{INVENTED}\n\n{ALSO_QUOTED}")
    assert answer.citations
    assert all(c.verified for c in answer.citations)
    assert "the answer cites no passage: the top passages follow" in answer.trace.notes


async def test_an_empty_reply_to_the_probe_does_not_write_the_server_off(
    settings, index, chat: ChatServer, agent
) -> None:
    """One glitch (an empty 200 to both forced forms) answers this question without tools,
    and the next question probes again instead of skipping tools for the finding's TTL."""
    search = completion(None, (SEARCH_TOOL, {"query": "re-ingest"}))
    chat.replies = [completion(""), completion(""), completion("Ingest it again."), search]
    chat.replies += [_answers()]
    bot = engine(settings, index, model=agent)
    first = await bot.answer(question("how do I re-ingest?"))
    second = await bot.answer(question("and prune?", key="slack/T1/C1/2"))
    assert "the model sent an empty reply to a forced call: not remembered" in first.trace.notes
    assert first.mode is AnswerMode.SEARCH_THEN_ANSWER
    assert second.mode is AnswerMode.AGENT
    assert "tools" in chat.requests[3]


@pytest.mark.parametrize(
    ("pieces", "looped"),
    [
        (["The same sentence comes back again and again. "] * 40, "again and again"),
        # A line said again between others: seen only in the answer decoded from its JSON
        # (escaped, its line breaks are `\\n` and the text has no lines).
        ([f"Run bot ingest again to refresh it all.\\nstep {n}\\n" for n in range(40)], "refresh"),
    ],
)
async def test_an_answer_looping_inside_the_respond_call_is_stopped(
    settings, index, chat: ChatServer, agent, pieces: list[str], looped: str
) -> None:
    """The text's repetition guard never saw the `respond` arguments, where a tool-calling
    model writes its answer: a loop there ran to max_tokens. It is cut, and the turn counts
    as one without an answer (asked again once, then the quoted passages)."""
    pieces = ['{"answer": "', *pieces, '", "citations": [], "status": "answered"}']
    call = {"index": 0, "id": "call_r", "function": {"name": RESPOND_TOOL, "arguments": ""}}
    chunks = [{"choices": [{"delta": {"tool_calls": [call]}}]}]
    chunks += [
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": p}}]}}]}
        for p in pieces
    ]
    events = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    looping = Raw(events.encode(), "text/event-stream")
    chat.replies = [completion(None, (SEARCH_TOOL, {"query": "prune"})), looping, looping]
    answer = await engine(settings, index, model=agent).answer(question("what does prune do?"))
    assert any(n.endswith("(in its answer)") for n in answer.trace.notes)
    assert answer.mode is AnswerMode.EXTRACTIVE
    assert looped not in answer.text
