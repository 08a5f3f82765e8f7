"""A burst of chat questions (`answers.limits`, `core.answer.limits`): one asker over the cap
is told when to ask again (or, unasked, left alone) while others are answered; answers beyond
the model's concurrency wait their turn, then get the quoted passages, never silence; the
terminal's and the evaluations' engine has no limits. In-memory fakes for the index and the
model, the real SQLite count of each asker's questions; no network."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import structlog
import time_machine
from prometheus_client import generate_latest

from core.answer.engine import BUSY, AnswerEngine
from core.answer.limits import BurstLimits, ModelSlots
from core.backends.sqlite.asker_windows import SqliteAskerWindows
from core.config import LimitSettings, Settings
from core.config_loader import load_settings
from core.domain.agent import AnswerProgress, ModelTurn, TurnRequest
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, ChannelKind, Question, Trace
from core.metrics import REGISTRY
from core.ports import AskerWindows
from tests.conftest import REPO
from tests.fakes.chat_model import ScriptedChatModel, respond_turn, search_turn
from tests.fakes.memory import InMemoryConversationStore, InMemoryIndex, passage

PRUNE = "Prune removes learned keywords that nobody used for ninety days."


@pytest.fixture
async def askers(tmp_path: Path) -> AsyncIterator[SqliteAskerWindows]:
    store = SqliteAskerWindows(tmp_path / "state.sqlite", 1_000)
    yield store
    await store.close()


async def test_an_asker_over_the_cap_waits_until_the_oldest_question_leaves_the_window(
    askers: SqliteAskerWindows,
) -> None:
    limits = BurstLimits(LimitSettings(per_asker=3, window_s=60), askers)
    with time_machine.travel(1_800_000_000, tick=False) as clock:
        for _ in range(3):
            assert await limits.asker_wait("slack:alice") == 0
            clock.shift(10)
        assert await limits.asker_wait("slack:alice") == pytest.approx(30)  # first at +0, now +30
        assert await limits.asker_wait("slack:bob") == 0  # one asker's burst is not another's
        clock.shift(20)
        assert await limits.asker_wait("slack:alice") == pytest.approx(10)  # refusals add no wait
        clock.shift(10)
        assert await limits.asker_wait("slack:alice") == 0


async def test_a_question_stamped_ahead_of_this_clock_holds_no_one_longer_than_the_window(
    askers: SqliteAskerWindows,
) -> None:
    limits = BurstLimits(LimitSettings(per_asker=1, window_s=60), askers)
    with time_machine.travel(1_800_000_300, tick=False):  # another host's clock, 5 min ahead
        assert await limits.asker_wait("slack:alice") == 0
    with time_machine.travel(1_800_000_000, tick=False):
        assert await limits.asker_wait("slack:alice") == pytest.approx(60)  # not 360


async def test_no_cap_admits_everything_without_counting(tmp_path: Path) -> None:
    closed = SqliteAskerWindows(tmp_path / "state.sqlite", 1_000)
    await closed.close()  # any count would fail: none is asked for
    limits = BurstLimits(LimitSettings(per_asker=0), closed)
    assert all([await limits.asker_wait("slack:alice") == 0 for _ in range(1_000)])


async def test_a_count_that_fails_admits_the_question_and_says_so(tmp_path: Path) -> None:
    closed = SqliteAskerWindows(tmp_path / "state.sqlite", 1_000)
    await closed.close()
    limits = BurstLimits(LimitSettings(per_asker=1), closed)
    with structlog.testing.capture_logs() as logs:
        assert [await limits.asker_wait("slack:alice") for _ in range(3)] == [0, 0, 0]
    assert [e["event"] for e in logs] == ["asker_count_failed"] * 3
    assert "can't count questions in" in logs[0]["error"]


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


HELD_S = 0.2  # how long the first answer holds the model: over the engine's noted wait (0.1 s)


async def _writing(model: GatedModel) -> None:
    """Until the model is writing an answer (the asker's count, in a worker thread, came first)."""
    async with asyncio.timeout(10):
        while not model.waiting:
            await asyncio.sleep(0.01)


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
    settings: Settings,
    model: ScriptedChatModel | None,
    askers: AskerWindows,
    *,
    limited: bool = True,
    **limits: object,
) -> AnswerEngine:
    bounds = settings.answers.limits.model_copy(update=limits)
    return AnswerEngine(
        index=InMemoryIndex([passage("prune", PRUNE)]),
        store=InMemoryConversationStore(),
        settings=settings.answers,
        top_k=5,
        model=model,
        limits=BurstLimits(bounds, askers) if limited else None,
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


def answers_count(platform: str, status: str) -> float:
    labels = (f'platform="{platform}"', f'status="{status}"')
    rows = generate_latest(REGISTRY).decode().splitlines()
    return sum(
        float(row.split()[-1])
        for row in rows
        if row.startswith("docbot_answers_total{") and all(label in row for label in labels)
    )


def limited_count(platform: str, limit: str) -> float:
    line = f'docbot_answers_limited_total{{limit="{limit}",platform="{platform}"}}'
    for row in generate_latest(REGISTRY).decode().splitlines():
        if row.startswith(line):
            return float(row.split()[-1])
    return 0.0


async def test_one_asker_over_the_cap_is_told_when_to_ask_again_others_are_answered(
    settings, askers
) -> None:
    bot = engine(settings, None, askers, per_asker=2)  # no model: quoted passages, quickly
    before = limited_count("slack", "asker")
    answers = [await bot.answer(question("alice", n)) for n in range(3)]
    assert [a.status for a in answers[:2]] == [AnswerStatus.PARTIAL] * 2  # quoted passages
    told = answers[2]
    assert told.status is AnswerStatus.ERROR
    assert "ask again in 60 s" in told.text  # the window is 60 s, and alice's first is fresh
    assert not told.citations
    assert (await bot.answer(question("bob", 0))).status is AnswerStatus.PARTIAL
    errors = answers_count("slack", "error")
    unasked = await bot.answer(question("alice", 4, unasked=True))
    assert unasked.withheld  # nobody asked: nothing is posted, not even the wait
    assert unasked.status is AnswerStatus.ERROR  # never searched: no gap in the docs
    assert limited_count("slack", "asker") == before + 2
    assert answers_count("slack", "error") == errors  # nor an error of the bot's in /metrics


class SlowAskers:
    """A count that takes its time (a cluster's round trips, a busy state file)."""

    async def admit(self, asker: str, cap: int, window_s: float) -> float:
        await asyncio.sleep(0.3)
        return 0.0

    async def close(self) -> None:
        """Nothing held."""


async def test_the_askers_count_is_not_noted_as_a_wait_for_the_previous_answer(settings) -> None:
    bot = engine(settings, None, SlowAskers(), per_asker=2)
    answer = await bot.answer(question("alice", 0))
    assert answer.status is AnswerStatus.PARTIAL
    assert not [n for n in answer.trace.notes if "previous answer" in n]


async def test_without_limits_one_asker_is_never_capped(settings, askers) -> None:
    bot = engine(settings, None, askers, limited=False, per_asker=1)
    answers = [await bot.answer(question("alice", n)) for n in range(5)]
    assert all(a.status is AnswerStatus.PARTIAL for a in answers)


async def test_answers_beyond_the_models_concurrency_wait_their_turn(settings, askers) -> None:
    model = GatedModel(answered_turns(3))
    bot = engine(settings, model, askers, model_concurrency=1, model_wait_s=10)
    asked = [asyncio.create_task(bot.answer(question(u, 0))) for u in ("a", "b", "c")]
    await _writing(model)
    await asyncio.sleep(HELD_S)
    assert model.waiting == 1  # one answer is being written; two wait for the model
    model.gate.set()
    answers: list[Answer] = await asyncio.gather(*asked)
    assert all(a.mode is AnswerMode.AGENT for a in answers)
    assert all(a.status is AnswerStatus.ANSWERED for a in answers)
    # Which of them queued first is the worker threads' (the asker counts) to say; the two
    # that queued waited at least HELD_S, and their traces say so.
    waited = [a for a in answers if any("for a model slot" in n for n in a.trace.notes)]
    assert len(waited) == 2


async def test_an_answer_that_waits_too_long_for_the_model_gets_the_passages(
    settings, askers
) -> None:
    model = GatedModel(answered_turns(1))
    bot = engine(settings, model, askers, model_concurrency=1, model_wait_s=0.1)
    before = limited_count("slack", "model")
    first = asyncio.create_task(bot.answer(question("a", 0)))
    await _writing(model)
    busy = await bot.answer(question("b", 0))
    assert busy.mode is AnswerMode.EXTRACTIVE
    assert BUSY in busy.text
    assert [c.verified for c in busy.citations] == [True]  # the passage, quoted: not silence
    assert limited_count("slack", "model") == before + 1
    model.gate.set()
    assert (await first).mode is AnswerMode.AGENT
