"""A burst of chat questions (`answers.limits`, `core.answer.limits`): one asker over the cap
is told when to ask again (or, unasked, left alone) while others are answered; answers beyond
the model's concurrency wait their turn, then get the quoted passages, never silence; the
terminal's and the evaluations' engine has no limits. In-memory fakes, no network."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import generate_latest

from core.answer.engine import BUSY, AnswerEngine
from core.answer.limits import AskerWindow, BurstLimits, ModelSlots
from core.config import LimitSettings, Settings
from core.config_loader import load_settings
from core.domain.agent import AnswerProgress, ModelTurn, TurnRequest
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, ChannelKind, Question, Trace
from core.metrics import REGISTRY
from tests.conftest import REPO
from tests.fakes.chat_model import ScriptedChatModel, respond_turn, search_turn
from tests.fakes.memory import InMemoryConversationStore, InMemoryIndex, passage

PRUNE = "Prune removes learned keywords that nobody used for ninety days."


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_an_asker_over_the_cap_waits_until_the_oldest_question_leaves_the_window() -> None:
    clock = Clock()
    window = AskerWindow(LimitSettings(per_asker=3, window_s=60), clock)
    for _ in range(3):
        assert window.admit("alice") == 0
        clock.now += 10
    assert window.admit("alice") == pytest.approx(30)  # the first was at 1000, now is 1030
    assert window.admit("bob") == 0  # one asker's burst is not another's
    clock.now += 20
    assert window.admit("alice") == pytest.approx(10)  # refused questions add no wait
    clock.now += 10
    assert window.admit("alice") == 0


def test_no_cap_admits_everything() -> None:
    window = AskerWindow(LimitSettings(per_asker=0), Clock())
    assert all(window.admit("alice") == 0 for _ in range(1_000))


def test_a_flood_of_new_askers_is_remembered_only_up_to_the_bound() -> None:
    clock = Clock()
    window = AskerWindow(LimitSettings(per_asker=1, tracked_askers=2), clock)
    assert window.admit("alice") == 0
    assert window.admit("bob") == 0
    assert window.admit("alice") > 0  # still remembered: alice was seen after bob
    assert window.admit("carol") == 0  # bob, the least recently seen, is forgotten
    assert len(window._asked) == 2
    assert window.admit("bob") == 0


async def test_model_slots_are_taken_in_order_and_a_long_wait_gives_up() -> None:
    slots = ModelSlots(LimitSettings(model_concurrency=1, model_wait_s=5))
    order: list[str] = []
    release = asyncio.Event()

    async def answer(name: str) -> None:
        async with slots.slot() as admitted:
            assert admitted
            order.append(name)
            await release.wait()

    tasks = [asyncio.create_task(answer(n)) for n in ("a", "b", "c")]
    await asyncio.sleep(0.05)
    assert order == ["a"]
    release.set()
    await asyncio.gather(*tasks)
    assert order == ["a", "b", "c"]
    impatient = ModelSlots(LimitSettings(model_concurrency=1, model_wait_s=0.05))
    async with impatient.slot() as first, impatient.slot() as second:
        assert (first, second) == (True, False)
    async with impatient.slot() as again:
        assert again  # the refused wait took no slot, and the first gave its back


class GatedModel(ScriptedChatModel):
    """A scripted model whose turns wait for `gate`: answers in progress, held open."""

    def __init__(self, turns: list[ModelTurn]) -> None:
        super().__init__(turns)
        self.gate = asyncio.Event()
        self.waiting = 0

    async def turn(
        self, request: TurnRequest, trace: Trace, on_answer: AnswerProgress | None = None
    ) -> ModelTurn:
        self.waiting += 1
        await self.gate.wait()
        return await super().turn(request, trace, on_answer)


@pytest.fixture
def settings() -> Settings:
    return load_settings(REPO / "config.yaml", environ={})


def engine(
    settings: Settings, model: ScriptedChatModel | None, *, limited: bool = True, **limits: object
) -> AnswerEngine:
    bounds = settings.answers.limits.model_copy(update=limits)
    return AnswerEngine(
        index=InMemoryIndex([passage("prune", PRUNE)]),
        store=InMemoryConversationStore(),
        settings=settings.answers,
        top_k=5,
        model=model,
        limits=BurstLimits(bounds) if limited else None,
    )


def question(user: str, n: int, *, unasked: bool = False) -> Question:
    kind = ChannelKind.CHANNEL
    return Question(
        "slack", f"slack/T/C/{user}{n}", user, "What does prune remove?", kind, unasked=unasked
    )


def answered_turns(n: int) -> list[ModelTurn]:
    return [
        t for _ in range(n) for t in (search_turn("prune"), respond_turn("Unused [1].", (1, PRUNE)))
    ]


def limited_count(platform: str, limit: str) -> float:
    line = f'docbot_answers_limited_total{{limit="{limit}",platform="{platform}"}}'
    for row in generate_latest(REGISTRY).decode().splitlines():
        if row.startswith(line):
            return float(row.split()[-1])
    return 0.0


async def test_one_asker_over_the_cap_is_told_when_to_ask_again_others_are_answered(
    settings,
) -> None:
    bot = engine(settings, None, per_asker=2)  # no model: quoted passages, quickly
    before = limited_count("slack", "asker")
    answers = [await bot.answer(question("alice", n)) for n in range(3)]
    assert [a.status for a in answers[:2]] == [AnswerStatus.PARTIAL] * 2  # quoted passages
    told = answers[2]
    assert told.status is AnswerStatus.ERROR
    assert "ask again in 60 s" in told.text  # the window is 60 s, and alice's first is fresh
    assert not told.citations
    assert (await bot.answer(question("bob", 0))).status is AnswerStatus.PARTIAL
    unasked = await bot.answer(question("alice", 4, unasked=True))
    assert unasked.withheld  # nobody asked: nothing is posted, not even the wait
    assert limited_count("slack", "asker") == before + 2


async def test_without_limits_one_asker_is_never_capped(settings) -> None:
    bot = engine(settings, None, limited=False, per_asker=1)
    answers = [await bot.answer(question("alice", n)) for n in range(5)]
    assert all(a.status is AnswerStatus.PARTIAL for a in answers)


async def test_answers_beyond_the_models_concurrency_wait_their_turn(settings) -> None:
    model = GatedModel(answered_turns(3))
    bot = engine(settings, model, model_concurrency=1, model_wait_s=10)
    asked = [asyncio.create_task(bot.answer(question(u, 0))) for u in ("a", "b", "c")]
    await asyncio.sleep(0.1)
    assert model.waiting == 1  # one answer is being written; two wait for the model
    model.gate.set()
    answers: list[Answer] = await asyncio.gather(*asked)
    assert all(a.mode is AnswerMode.AGENT for a in answers)
    assert all(a.status is AnswerStatus.ANSWERED for a in answers)
    assert any(n.startswith("waited") and "model slot" in n for n in answers[2].trace.notes)


async def test_an_answer_that_waits_too_long_for_the_model_gets_the_passages(settings) -> None:
    model = GatedModel(answered_turns(1))
    bot = engine(settings, model, model_concurrency=1, model_wait_s=0.1)
    before = limited_count("slack", "model")
    first = asyncio.create_task(bot.answer(question("a", 0)))
    await asyncio.sleep(0.05)
    busy = await bot.answer(question("b", 0))
    assert busy.mode is AnswerMode.EXTRACTIVE
    assert BUSY in busy.text
    assert [c.verified for c in busy.citations] == [True]  # the passage, quoted: not silence
    assert limited_count("slack", "model") == before + 1
    model.gate.set()
    assert (await first).mode is AnswerMode.AGENT
