"""The answer engine's rules, on in-memory fakes at its ports: which tool each round must call,
one retry then an error, the round limit, the keywords obligation after a web search, and the
fallbacks (search-then-answer, extractive). No model files, no database, no network."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from core.answer import holding
from core.answer.engine import INDEX_UNAVAILABLE, AnswerEngine
from core.answer.grounding import ground
from core.answer.holding import ALSO_QUOTED
from core.answer.prompts import RETRY_NUDGE
from core.answer.search_then_answer import SearchThenAnswer
from core.answer.tools import RESPOND_TOOL, SAVE_KEYWORDS_TOOL, SEARCH_TOOL
from core.answer.web_research import WebLearning
from core.backends.sqlite.keyword_store import SqliteKeywordStore
from core.config import ResolvedPolicy, Settings
from core.config_loader import load_settings
from core.domain.agent import ModelTurn, ToolResults
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, ChannelKind, Question
from core.domain.documents import SearchFilters, SearchHit, SearchMode
from core.errors import ModelUnavailable
from core.learning.knowledge import LearnedKnowledge
from core.metrics import REGISTRY
from core.sqlite import DamagedFile
from tests.conftest import REPO
from tests.fakes.chat_model import (
    ScriptedChatModel,
    keywords_turn,
    raw_turn,
    respond_turn,
    search_turn,
    text_turn,
    web_turn,
)
from tests.fakes.memory import (
    ConstantEmbedder,
    InMemoryConversationStore,
    InMemoryIndex,
    OnePageWeb,
    passage,
)

PRUNE = "Prune removes learned keywords that nobody used for ninety days."
INVITE = "Invite the bot to a channel with /invite @docbot before mentioning it."


@pytest.fixture
def settings() -> Settings:
    return load_settings(REPO / "config.yaml", environ={})


@pytest.fixture
def index() -> InMemoryIndex:
    return InMemoryIndex([passage("prune", PRUNE), passage("invite", INVITE, position=1)])


def engine(
    settings: Settings,
    index: InMemoryIndex,
    model: ScriptedChatModel | None,
    *,
    web: WebLearning | None = None,
    policies: Callable[[str], ResolvedPolicy] | None = None,
    ground_tool_answers: bool = False,
    **answers: object,
) -> AnswerEngine:
    answer_settings = settings.answers.model_copy(update=answers)
    return AnswerEngine(
        ground_tool_answers=ground_tool_answers,
        index=index,
        store=InMemoryConversationStore(),
        settings=answer_settings,
        top_k=5,
        model=model,
        fallback=SearchThenAnswer(model, answer_settings) if model else None,
        knowledge=web.knowledge if web else None,
        web=web,
        policies=policies,
    )


async def ask(bot: AnswerEngine, text: str = "What does prune remove?") -> Answer:
    return await bot.answer(Question("test", "test/1", "u1", text, ChannelKind.DIRECT))


async def test_round_one_must_search_and_a_cited_answer_is_verified(settings, index) -> None:
    model = ScriptedChatModel(
        [
            search_turn("prune keywords"),
            respond_turn("Prune drops unused keywords [1].", (1, PRUNE)),
        ]
    )
    answer = await ask(engine(settings, index, model))
    assert [r.required for r in model.requests] == [SEARCH_TOOL, None]
    assert index.queries == ["prune keywords"]  # the model's own query, not the question
    assert answer.status is AnswerStatus.ANSWERED
    assert answer.mode is AnswerMode.AGENT
    assert [(c.url, c.verified) for c in answer.citations] == [(index.chunks[0].url, True)]


async def test_the_last_allowed_round_must_respond(settings, index) -> None:
    model = ScriptedChatModel(
        [
            search_turn("prune"),
            search_turn("keywords"),
            respond_turn("Unused ones [1].", (1, PRUNE)),
        ]
    )
    answer = await ask(engine(settings, index, model, max_rounds=3))
    assert [r.required for r in model.requests] == [SEARCH_TOOL, None, RESPOND_TOOL]
    assert answer.status is AnswerStatus.ANSWERED


async def test_plain_text_is_asked_again_once_then_accepted(settings, index) -> None:
    model = ScriptedChatModel(
        [
            search_turn("prune"),
            text_turn("It removes keywords."),
            respond_turn("Unused [1].", (1, PRUNE)),
        ]
    )
    answer = await ask(engine(settings, index, model))
    retry = model.requests[2]
    assert retry.transcript[-1] == RETRY_NUDGE
    assert retry.required == RESPOND_TOOL  # after a failure the answer is forced
    assert answer.status is AnswerStatus.ANSWERED


async def test_plain_text_twice_gets_quoted_passages_never_a_guess(settings, index) -> None:
    model = ScriptedChatModel([search_turn("prune"), text_turn("one"), text_turn("two")])
    answer = await ask(engine(settings, index, model))
    assert answer.mode is AnswerMode.EXTRACTIVE
    assert "gave no usable answer" in answer.text
    assert answer.citations
    assert all(c.verified for c in answer.citations)
    assert "one" not in answer.text.split("\n")[0]
    assert "two" not in answer.text.split("\n")[0]


async def test_a_model_that_only_searches_stops_at_the_round_limit(settings, index) -> None:
    model = ScriptedChatModel([search_turn(f"prune {n}") for n in range(10)])
    answer = await ask(engine(settings, index, model, max_rounds=3))
    assert answer.mode is AnswerMode.EXTRACTIVE
    assert "no answer within 3 rounds" in answer.text
    assert len(model.requests) <= 3 + 1


async def test_an_invalid_respond_is_refused_with_the_reason_then_fixed(settings, index) -> None:
    model = ScriptedChatModel(
        [
            search_turn("prune"),
            raw_turn(RESPOND_TOOL, {"citations": [], "status": "answered"}),  # no answer
            respond_turn("Unused ones [1].", (1, PRUNE)),
        ]
    )
    answer = await ask(engine(settings, index, model))
    results = model.requests[2].transcript[-1]
    assert isinstance(results, ToolResults)
    [(use, result)] = results.results
    assert (use.name, result.is_error) == (RESPOND_TOOL, True)
    assert "answer" in result.content
    assert answer.status is AnswerStatus.ANSWERED


async def test_a_made_up_tool_name_is_never_a_metrics_label(settings, index) -> None:
    """The model's text picks a tool's name; the public metrics name only our tools."""
    invented = "U0ALICE asked: how do I reset the prod-db password hunter2"
    model = ScriptedChatModel(
        [
            search_turn("prune"),
            raw_turn(invented, {"query": "prune"}),
            respond_turn("Prune drops unused keywords [1].", (1, PRUNE)),
        ]
    )
    before = REGISTRY.get_sample_value("docbot_tool_calls_total", {"tool": "unknown"}) or 0.0
    await ask(engine(settings, index, model))
    exposed = generate_latest(REGISTRY).decode()
    assert "hunter2" not in exposed
    after = REGISTRY.get_sample_value("docbot_tool_calls_total", {"tool": "unknown"})
    assert after == before + 1


async def test_a_model_that_ignores_tools_falls_back_to_search_then_answer(settings, index) -> None:
    model = ScriptedChatModel(
        [text_turn("I think prune removes things.")],
        forced_calls_guaranteed=False,
        written="Prune removes unused learned keywords [1].",
    )
    answer = await ask(engine(settings, index, model))
    assert answer.mode is AnswerMode.SEARCH_THEN_ANSWER
    assert len(model.requests) == 1  # no second tool round for a model that can't use tools
    assert index.queries == ["What does prune remove?"]  # we searched with the question
    assert PRUNE in model.writes[0]  # the passages went into the prompt
    assert [c.url for c in answer.citations] == [index.chunks[0].url]


async def test_an_unavailable_model_gives_quoted_passages_and_the_reason(settings, index) -> None:
    model = ScriptedChatModel([ModelUnavailable("Claude could not be reached")])
    answer = await ask(engine(settings, index, model))
    assert answer.mode is AnswerMode.EXTRACTIVE
    assert "Claude could not be reached" in answer.text
    assert PRUNE.split(".")[0] in answer.text


class DamagedIndex(InMemoryIndex):
    async def search(self, query: str, **_: Any) -> list[SearchHit]:
        raise DamagedFile(DAMAGED, Path("index.sqlite"), 11)


DAMAGED = "index.sqlite is damaged (malformed): delete it and ingest again"


@pytest.mark.parametrize(
    ("kind", "said"),
    [(ChannelKind.TERMINAL, DAMAGED), (ChannelKind.CHANNEL, INDEX_UNAVAILABLE)],
)
async def test_an_unusable_index_is_explained_to_whoever_can_fix_it(
    settings, kind: ChannelKind, said: str
) -> None:
    """In the terminal the reader runs the bot: the index's own error says what to do. In a
    chat the asker can't fix the server: the answer says the knowledge base can't be reached."""
    bot = engine(settings, DamagedIndex(), None)
    answer = await bot.answer(Question("test", "test/1", "u1", "What does prune remove?", kind))
    assert answer.status is AnswerStatus.ERROR
    assert answer.text == said
    assert DAMAGED in answer.trace.notes


async def test_no_model_gives_an_extractive_answer(settings, index) -> None:
    answer = await ask(engine(settings, index, None))
    assert answer.mode is AnswerMode.EXTRACTIVE
    assert [c.url for c in answer.citations][:1] == [index.chunks[0].url]


async def test_after_a_web_search_keywords_are_saved_before_the_answer(
    settings, index, tmp_path: Path
) -> None:
    web_settings = settings.web_search.model_copy(update={"enabled": True})
    knowledge = LearnedKnowledge(
        index,
        ConstantEmbedder(),
        SqliteKeywordStore(tmp_path / "s.db", 1_000),
        max_keywords_per_document=settings.keywords.max_per_document,
    )
    web = WebLearning(OnePageWeb(), knowledge, web_settings, settings.keywords.derived_max)
    quote = OnePageWeb.PAGE.text
    model = ScriptedChatModel(
        [
            search_turn("widgets"),
            web_turn("widgets configuration"),
            respond_turn("In YAML [1].", (1, quote)),  # too early: keywords first
            keywords_turn("widgets configuration"),
            respond_turn("In YAML [1].", (1, quote)),
        ]
    )
    answer = await ask(engine(settings, index, model, web=web), "How are widgets configured?")
    assert model.requests[2].required == SAVE_KEYWORDS_TOOL
    refused = model.requests[3].transcript[-1]
    assert isinstance(refused, ToolResults)
    assert refused.results[0][1].is_error  # the early respond was turned back
    assert answer.status is AnswerStatus.ANSWERED
    assert [c.url for c in answer.citations] == [OnePageWeb.PAGE.url]
    assert await knowledge.store.get("widgets configuration") is not None


async def test_a_very_long_supported_answer_is_cut_at_a_line_not_refused(settings) -> None:
    long_passage = "\n".join(
        f"Setting number {n} controls the behaviour of component {n} in the pipeline."
        for n in range(400)
    )
    written = "\n".join(
        f"- Setting number {n} controls the behaviour of component {n} [1]." for n in range(400)
    )
    model = ScriptedChatModel([text_turn("prose")], forced_calls_guaranteed=False, written=written)
    index = InMemoryIndex([passage("settings", long_passage)])
    answer = await ask(engine(settings, index, model), "What does each setting control?")
    assert answer.mode is AnswerMode.SEARCH_THEN_ANSWER
    assert "the answer was cut to 12,000 characters" in answer.trace.notes
    # The model's part, cut; then the passage it cites, quoted as the answer with no model.
    written_part, quoted_part = answer.text.split(f"\n\n{ALSO_QUOTED}\n\n")
    assert len(written_part) <= 12_000
    assert written_part.endswith("[1].")
    assert quoted_part.startswith("**Settings** [1]\n> Setting number 0 controls")


@pytest.mark.parametrize(
    ("asked", "said", "claim"),
    [
        (
            "How often does Slack retry an event?",
            "Slack retries an event three times.",
            "Slack retries an event once [1].",  # a count in words: no figure to compare
        ),
        (
            "Where are debug logs enabled?",
            "Set BOT_DEBUG=1 to enable debug logs in staging only.",
            "Set BOT_DEBUG=1 to enable debug logs in production [1].",  # one word swapped
        ),
    ],
)
async def test_a_claim_the_sentence_check_lets_through_stands_beside_its_passage(
    settings, asked: str, said: str, claim: str
) -> None:
    """The sentence check compares words, not meaning: a weak model's claim of the passage's
    own words with one swapped for a word the check can't tell is wrong (a count in words, a
    place) passes it, and its verified marker kept the passage it cites from being quoted.
    It is quoted now, under that marker, as the answer with no model quotes it: the claim is
    read beside the words that contradict it, never shown with less than no model."""
    model = ScriptedChatModel([text_turn("prose")], forced_calls_guaranteed=False, written=claim)
    index = InMemoryIndex([passage("limits", said)])
    answer = await ask(engine(settings, index, model), asked)
    assert answer.mode is AnswerMode.SEARCH_THEN_ANSWER
    assert answer.text.startswith(claim)  # kept: the check can't tell
    assert f"{ALSO_QUOTED}\n\n**Limits** [1]\n> {said}" in answer.text
    assert [c.number for c in answer.citations] == [1]  # one passage, one marker
    no_model = await ask(engine(settings, index, None), asked)
    assert f"> {said}" in no_model.text


async def test_a_reply_of_megabytes_is_cut_before_it_is_checked(settings, monkeypatch) -> None:
    """The sentence check runs on the event loop: a 2 MB reply from a server that ignores
    `max_tokens` stalled every other answer's acknowledgement for seconds while it was checked
    whole, to be cut to the answer's 12,000 characters afterwards."""
    checked: list[int] = []

    def measured(text: str, *args: Any) -> Any:
        checked.append(len(text))
        return ground(text, *args)

    monkeypatch.setattr(holding, "ground", measured)
    sentence = "Setting number 7 controls the behaviour of component 7 in the pipeline [1]."
    written = "\n".join([sentence] * 30_000)  # 2.3 MB
    model = ScriptedChatModel([text_turn("prose")], forced_calls_guaranteed=False, written=written)
    index = InMemoryIndex([passage("settings", sentence.removesuffix(" [1]."))])
    answer = await ask(engine(settings, index, model), "What does setting 7 control?")
    assert checked
    assert max(checked) <= 12_000
    assert answer.text.startswith(sentence)
    assert "the answer was cut to 12,000 characters" in answer.trace.notes


class _SlowSearcher(ScriptedChatModel):
    """A model that takes its time over every turn, and only ever searches again."""

    async def turn(self, request: Any, trace: Any, on_answer: Any) -> Any:
        await asyncio.sleep(0.15)
        return await super().turn(request, trace, on_answer)


async def test_a_model_slower_than_the_deadline_gives_way_to_the_passages(settings, index) -> None:
    """Each turn had its timeout, none the answer as a whole: a slow local model searching
    round after round kept the asker waiting for all of them (half an hour at 300 s each)."""
    model = _SlowSearcher([search_turn(f"prune {n}") for n in range(10)])
    started = asyncio.get_running_loop().time()
    answer = await ask(engine(settings, index, model, deadline_s=0.4))
    assert asyncio.get_running_loop().time() - started < 2
    assert len(model.requests) < 5  # stopped on the way, not after max_rounds
    assert answer.mode is AnswerMode.EXTRACTIVE
    assert answer.text.startswith("_The language model took longer than 0.4 s to answer.")
    assert "no answer within answers.deadline_s (0.4 s)" in answer.trace.notes
    assert PRUNE[:40] in answer.text


@pytest.mark.parametrize("grounded", [True, False])
async def test_the_passages_quoted_after_a_tool_answer_are_the_questions_own(
    settings, index, grounded: bool
) -> None:
    """A weak model's own query can miss what the question asks (it searched "invite" about
    pruning), and the passages quoted after its answer came from that search: the answer with
    no model quotes the question's own passage, this one did not."""
    model = ScriptedChatModel([search_turn("invite channel"), respond_turn("Use /invite.")])
    bot = engine(settings, index, model, ground_tool_answers=grounded)
    answer = await ask(bot, "What does prune remove?")
    assert answer.mode is (AnswerMode.EXTRACTIVE if grounded else AnswerMode.AGENT)
    assert PRUNE in answer.text
    assert any(c.quote == PRUNE and c.verified for c in answer.citations)
    assert index.queries == ["invite channel", "What does prune remove?"]


async def test_a_long_reply_without_line_breaks_is_cut_at_a_finished_sentence(settings) -> None:
    """Cut at 12,000 characters wherever that fell, the claim cut in two was shown, cited:
    "Answers are posted in the channel only w [1]"."""
    sentence = "Answers are posted in the channel only when the question is answered [1]. "
    written = sentence * (12_000 // len(sentence) + 1)  # one line, past the cut
    model = ScriptedChatModel([text_turn("prose")], forced_calls_guaranteed=False, written=written)
    index = InMemoryIndex([passage("posting", sentence.strip().removesuffix(" [1]."))])
    answer = await ask(engine(settings, index, model), "When are answers posted?")
    assert "the answer was cut to 12,000 characters" in answer.trace.notes
    assert answer.text.split(f"\n\n{ALSO_QUOTED}")[0].endswith("is answered [1].")


async def test_search_then_answer_decodes_the_models_entities_once(settings) -> None:
    """A model writing about HTML entities: `&amp;amp;` in its reply is the text `&amp;` (one
    decoding, as the prompt escaped it once), never a bare `&`."""
    entity = "Write &amp; in HTML for a literal ampersand in attribute values."
    model = ScriptedChatModel(
        [text_turn("no tools here")],
        forced_calls_guaranteed=False,
        written="Write &amp;amp; in HTML for a literal ampersand in attribute values [1].",
    )
    answer = await ask(
        engine(settings, InMemoryIndex([passage("entities", entity)]), model),
        "How do I write an ampersand in HTML?",
    )
    assert answer.mode is AnswerMode.SEARCH_THEN_ANSWER
    assert answer.citations
    assert "Write &amp; in HTML" in answer.text


class CosineIndex(InMemoryIndex):
    """The in-memory index with a vector side `cosine` close to every query. Its hybrid hits
    carry no cosine, as when the fusion ranks BM25-only passages first or a server fuses: the
    floor must ask the vector side itself."""

    def __init__(self, cosine: float) -> None:
        super().__init__([passage("prune", PRUNE)])
        self.cosine = cosine
        self.vector_searches: list[SearchFilters | None] = []

    async def search(self, query: str, **options: Any) -> list[SearchHit]:
        hits = await super().search(query, **options)
        if options.get("mode") is not SearchMode.VECTOR:
            return hits
        self.vector_searches.append(options.get("filters"))
        return [replace(h, vector_score=self.cosine) for h in hits]


def unasked(text: str = "What does prune remove?") -> Question:
    return Question("slack", "slack/T1/C1/1.0", "u1", text, ChannelKind.THREAD, unasked=True)


def answering_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        [search_turn("prune"), respond_turn("Prune drops unused keywords [1].", (1, PRUNE))]
    )


async def test_an_unasked_question_far_from_every_passage_never_reaches_the_model(
    settings,
) -> None:
    index, model = CosineIndex(0.12), answering_model()
    bot = engine(settings, index, model, policies=settings.policy)
    answer = await bot.answer(unasked())
    assert model.requests == []
    assert answer.status is AnswerStatus.NOT_FOUND
    assert not answer.grounded
    assert index.queries == ["What does prune remove?"]  # one search, with the question
    assert "closest passage: cosine 0.120" in answer.trace.notes


async def test_the_relevance_floor_lets_close_questions_through_and_asked_ones_always(
    settings,
) -> None:
    close, model = CosineIndex(0.55), answering_model()
    answer = await engine(settings, close, model, policies=settings.policy).answer(unasked())
    assert answer.status is AnswerStatus.ANSWERED
    assert len(model.requests) == 2

    far, model = CosineIndex(0.12), answering_model()
    asked = replace(unasked(), unasked=False)
    answer = await engine(settings, far, model, policies=settings.policy).answer(asked)
    assert answer.status is AnswerStatus.ANSWERED  # a mention is answered, however far


async def test_a_floor_of_zero_or_no_vector_scores_leaves_the_decision_to_the_answer(
    settings,
) -> None:
    off = load_settings(REPO / "config.yaml", environ={"BOT_CHANNELS__DEFAULT__MIN_RELEVANCE": "0"})
    far, model = CosineIndex(0.12), answering_model()
    answer = await engine(off, far, model, policies=off.policy).answer(unasked())
    assert answer.status is AnswerStatus.ANSWERED
    # A search without a vector side (a server-fused one) gives the floor nothing to go on.
    model = answering_model()
    plain = InMemoryIndex([passage("prune", PRUNE)])
    answer = await engine(settings, plain, model, policies=settings.policy).answer(unasked())
    assert answer.status is AnswerStatus.ANSWERED
    assert "no vector side: the relevance floor was not applied" in answer.trace.notes


async def test_an_unasked_question_nothing_matches_is_not_found_without_a_model_call(
    settings,
) -> None:
    index, model = CosineIndex(0.9), answering_model()
    answer = await engine(settings, index, model, policies=settings.policy).answer(
        unasked("zebra quokka")
    )
    assert model.requests == []
    assert answer.status is AnswerStatus.NOT_FOUND


async def test_the_floor_asks_the_vector_side_within_the_channels_sources(settings) -> None:
    scoped = load_settings(
        REPO / "config.yaml",
        environ={"BOT_CHANNELS__POLICIES": '{"slack/T1/C1": {"sources": ["docs"]}}'},
    )
    index, model = CosineIndex(0.12), answering_model()
    answer = await engine(scoped, index, model, policies=scoped.policy).answer(unasked())
    assert answer.withheld
    assert model.requests == []
    assert index.vector_searches == [SearchFilters(sources=("docs",))]


async def test_follow_ups_in_one_conversation_are_answered_in_order(settings, index) -> None:
    """A follow-up sent while the answer before it is being written waits for it: then it has
    that turn in its history, and the turns are stored in the order they were asked."""
    released = asyncio.Event()

    class SlowFirstAnswer(ScriptedChatModel):
        async def turn(self, request, trace, on_answer):  # type: ignore[no-untyped-def]
            reply = await super().turn(request, trace, on_answer)
            if request.question == "What does prune remove?" and not request.transcript:
                await released.wait()
            return reply

    model = SlowFirstAnswer(
        [
            search_turn("prune"),
            respond_turn("Unused keywords [1].", (1, PRUNE)),
            search_turn("invite"),
            respond_turn("Invite it first [1].", (1, INVITE)),
        ]
    )
    bot = engine(settings, index, model)
    first = asyncio.create_task(ask(bot, "What does prune remove?"))
    await asyncio.sleep(0.01)
    second = asyncio.create_task(ask(bot, "And how do I invite the bot?"))
    await asyncio.sleep(0.2)  # the second waits this long, at least
    assert [r.question for r in model.requests] == ["What does prune remove?"]
    released.set()
    answers = await asyncio.gather(first, second)
    assert [a.status for a in answers] == [AnswerStatus.ANSWERED, AnswerStatus.ANSWERED]
    asked_second = [r for r in model.requests if r.question.startswith("And how")]
    assert [t.question for t in asked_second[0].history] == ["What does prune remove?"]
    stored = await bot._store.recent("test/1", 10)
    assert [t.question for t in stored] == [
        "What does prune remove?",
        "And how do I invite the bot?",
    ]
    assert len(bot._in_order) == 0  # no lock is kept once nobody waits
    (waited,) = [n for n in answers[1].trace.notes if n.startswith("waited ")]
    assert waited.endswith(" s for the conversation's previous answer")
    seconds = float(waited.split()[1])
    assert seconds >= 0.2
    assert answers[1].trace.total_seconds < seconds  # the wait is not the answer's own time


async def test_an_answer_sent_with_its_search_does_not_use_up_the_retry(settings, index) -> None:
    """A turn that searches and answers at once: the answer, written before the results, is
    refused, but not counted as the model's one failed turn; a later slip is still forgiven."""
    search_and_answer = ModelTurn((*search_turn("prune").uses, *respond_turn("A guess.").uses))
    model = ScriptedChatModel(
        [
            search_and_answer,
            respond_turn("[1]"),  # markers alone: the one failed turn
            respond_turn("Unused keywords [1].", (1, PRUNE)),
        ],
        forced_calls_guaranteed=False,
    )
    answer = await ask(engine(settings, index, model))
    assert (answer.mode, answer.status) == (AnswerMode.AGENT, AnswerStatus.ANSWERED)
    assert "A guess" not in answer.text
    refused = model.requests[1].transcript[-1]
    assert isinstance(refused, ToolResults)
    assert "Answer once you have read the search results" in str(refused)
