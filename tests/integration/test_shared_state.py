"""Shared state behaves the same on every backend: conversation turns, delivery de-duplication,
bot threads, answers and feedback, run locks, each asker's questions. On Elasticsearch, two
"processes" (two clients of their own) racing for the same claim get exactly one winner."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
import time_machine
from time_machine import Traveller

from bot.wiring import open_backend
from core.backends.elasticsearch.backend import ElasticsearchBackend
from core.config import Settings
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, Citation, Turn
from core.ports import Backend, ConversationStore, PlatformState, RunLocks
from core.search.embedder import CachedEmbedder

TTL_S = 60.0


@dataclass
class Process:
    """What one bot process holds: its own backend (connection) and the stores built on it."""

    backend: Backend
    store: ConversationStore
    state: PlatformState
    locks: RunLocks

    async def close(self) -> None:
        await self.backend.close()


async def _process(settings: Settings, embedder: CachedEmbedder) -> Process:
    backend = await open_backend(settings, embedder)
    return Process(backend, backend.conversations, backend.platform_state(TTL_S), backend.locks)


@pytest.fixture
def clock() -> Iterator[Traveller]:
    """Time stood still at a fixed moment, moved on by `shift`: every process's clock (time.time
    itself is replaced, so what the stores read moves too)."""
    with time_machine.travel(1_800_000_000, tick=False) as moment:
        yield moment


@pytest.fixture
async def two(
    backend_settings: Settings, embedder: CachedEmbedder
) -> AsyncIterator[tuple[Process, Process]]:
    first = await _process(backend_settings, embedder)
    second = await _process(backend_settings, embedder)
    try:
        yield first, second
        await first.backend.drop()
    finally:
        await first.close()
        await second.close()


def _answer(text: str) -> Answer:
    citation = Citation(1, "Guide", "https://x/guide#setup", "quote", True)
    return Answer(text, AnswerStatus.ANSWERED, AnswerMode.AGENT, citations=[citation])


async def test_conversation_turns_are_shared_and_ordered(two: tuple[Process, Process]) -> None:
    a, b = two
    await a.store.append("slack:T1/C1/1.0", Turn("q1", "a1"))
    await b.store.append("slack:T1/C1/1.0", Turn("q2", "a2"))
    await a.store.append("slack:T1/C1/2.0", Turn("other", "thread"))
    assert await b.store.recent("slack:T1/C1/1.0", 10) == [Turn("q1", "a1"), Turn("q2", "a2")]
    assert await a.store.recent("slack:T1/C1/1.0", 1) == [Turn("q2", "a2")]
    assert await a.store.recent("slack:T1/C1/1.0", 0) == []
    assert await a.store.recent("unknown", 5) == []


async def test_concurrent_appends_are_all_kept(two: tuple[Process, Process]) -> None:
    a, b = two
    await asyncio.gather(
        *(
            (a if i % 2 else b).store.append("discord:thread-9", Turn(f"q{i}", f"a{i}"))
            for i in range(20)
        )
    )
    turns = await a.store.recent("discord:thread-9", 100)
    assert sorted(t.question for t in turns) == sorted(f"q{i}" for i in range(20))


async def test_a_delivery_is_handled_once_across_processes(two: tuple[Process, Process]) -> None:
    a, b = two
    results = await asyncio.gather(
        *((a if i % 2 else b).state.first_delivery("event:Ev1", "msg:C1/1.0") for i in range(10))
    )
    assert sorted(results) == [False] * 9 + [True]
    # The same message under another event id (app_mention + message) is still a duplicate.
    assert not await b.state.first_delivery("event:Ev2", "msg:C1/1.0")
    assert await a.state.first_delivery("event:Ev3", "msg:C1/2.0")


async def test_delivery_keys_expire(two: tuple[Process, Process], clock: Traveller) -> None:
    a, b = two
    assert await a.state.first_delivery("event:old")
    assert not await b.state.first_delivery("event:old")
    clock.shift(TTL_S + 1)
    assert await b.state.first_delivery("event:old")
    assert not await a.state.first_delivery("event:old")


async def test_threads_answers_and_feedback(two: tuple[Process, Process]) -> None:
    a, b = two
    assert not await b.state.is_bot_thread("slack:T/C/5.0")
    await a.state.remember_thread("slack:T/C/5.0")
    await a.state.remember_thread("slack:T/C/5.0")  # idempotent
    assert await b.state.is_bot_thread("slack:T/C/5.0")
    answer_id = await a.state.record_answer("slack:T/C/5.0", "how?", _answer("like this [1]"))
    assert await b.state.record_feedback(answer_id, "U1", helpful=True)
    assert await a.state.record_feedback(answer_id, "U2", helpful=False)
    assert await b.state.record_feedback(answer_id, "U1", helpful=False)  # changed their mind
    assert sorted(await a.state.feedback_for(answer_id)) == [("U1", -1), ("U2", -1)]
    assert not await a.state.record_feedback("no-such-answer", "U1", helpful=True)
    assert not await b.state.record_feedback("", "U1", helpful=True)  # a forged button value
    assert await a.state.feedback_for("no-such-answer") == []


async def test_run_locks_exclude_a_second_holder_until_expiry(
    two: tuple[Process, Process], clock: Traveller
) -> None:
    a, b = two
    won = await asyncio.gather(
        a.locks.claim("prune", "clock-a", 30), b.locks.claim("prune", "clock-b", 30)
    )
    assert sorted(won) == [False, True]
    holder, other = ("clock-a", b) if won[0] else ("clock-b", a)
    assert not await other.locks.claim("prune", "clock-x", 30)
    await other.locks.release("prune", "clock-x")  # not the holder: nothing happens
    assert not await other.locks.claim("prune", "clock-x", 30)
    clock.shift(31)  # the holder died without releasing; its claim expires
    assert await other.locks.claim("prune", "clock-x", 30)
    await other.locks.release("prune", "clock-x")
    assert await a.locks.claim("prune", holder, 30)
    assert await a.locks.claim("prune", holder, 30)  # re-entrant for its holder


async def test_an_askers_questions_are_counted_once_across_processes(
    two: tuple[Process, Process], clock: Traveller
) -> None:
    a, b = two
    waits = await asyncio.gather(
        *((a if i % 2 else b).backend.askers.admit("slack:U1", 3, 60) for i in range(8))
    )
    assert sorted(waits) == [0.0] * 3 + [60.0] * 5  # the cap, whichever process was asked
    assert await a.backend.askers.admit("discord:U1", 3, 60) == 0  # another asker
    clock.shift(20)
    assert await b.backend.askers.admit("slack:U1", 3, 60) == pytest.approx(40)
    clock.shift(40)  # the three questions leave the window together
    assert await a.backend.askers.admit("slack:U1", 3, 60) == 0
    assert await b.backend.askers.admit("slack:U1", 1, 60) == pytest.approx(60)


async def test_an_asker_over_a_lowered_cap_waits_until_enough_questions_left(
    two: tuple[Process, Process], clock: Traveller
) -> None:
    """Another process's cap, or this one's before it was lowered, let more questions in than
    the cap now allows: the wait runs until all but cap - 1 of them have left the window."""
    a, b = two
    for _ in range(3):
        assert await a.backend.askers.admit("slack:U2", 3, 60) == 0
        clock.shift(10)
    # Asked at +0, +10 and +20, now +30: with a cap of 1 the newest must leave (at +80), with
    # 2 the one before it (at +70); the oldest's leaving (+60) would free neither.
    assert await b.backend.askers.admit("slack:U2", 1, 60) == pytest.approx(50)
    assert await b.backend.askers.admit("slack:U2", 2, 60) == pytest.approx(40)


async def test_model_facts_are_shared_newest_first_and_age_out(
    two: tuple[Process, Process], clock: Traveller
) -> None:
    a, b = two
    key = "tool_choice http://127.0.0.1:8080/v1 qwen"
    assert await a.backend.facts.get(key, 60) is None
    await a.backend.facts.put(key, "named")
    await b.backend.facts.put(key, "none")
    assert await a.backend.facts.get(key, 60) == "none"
    assert await b.backend.facts.get("tool_choice other", 60) is None
    clock.shift(61)
    assert await b.backend.facts.get(key, 60) is None  # re-learned after the TTL
    assert await b.backend.facts.get(key, 120) == "none"


async def test_a_recorded_answer_can_be_shown_again(two: tuple[Process, Process]) -> None:
    a, b = two
    answer = _answer("Use --prune [1].")
    answer_id = await a.state.record_answer("slack/T1/C1/1.0", "how do I prune?", answer)
    kept = await b.state.recorded_answer(answer_id)
    assert kept is not None
    assert (kept.conversation_key, kept.question) == ("slack/T1/C1/1.0", "how do I prune?")
    assert (kept.answer.text, kept.answer.status) == (answer.text, answer.status)
    assert kept.answer.citations == answer.citations
    assert await b.state.recorded_answer("0" * 32) is None
    assert await b.state.recorded_answer("not-an-id") is None


async def test_a_down_votes_reason_is_kept_newest_first(two: tuple[Process, Process]) -> None:
    a, b = two
    answer_id = await a.state.record_answer("slack/T1/C1/1.0", "q?", _answer("a [1]"))
    assert await a.state.record_feedback_reason(answer_id, "U1", "outdated", "v2 changed it")
    assert await b.state.record_feedback_reason(answer_id, "U1", "wrong", "x" * 5_000)
    assert await b.state.record_feedback_reason(answer_id, "U2", "unclear", "")
    assert not await b.state.record_feedback_reason(answer_id, "U3", "made-up", "")
    assert not await b.state.record_feedback_reason("0" * 32, "U1", "wrong", "")
    reasons = await a.state.feedback_reasons(answer_id)
    assert [(u, r) for u, r, _ in reasons] == [("U1", "wrong"), ("U2", "unclear")]
    assert len(reasons[0][2]) == 1_000  # a note is bounded


async def test_an_asker_with_nothing_in_the_window_is_not_kept(
    backend_settings: Settings, embedder: CachedEmbedder, clock: Traveller
) -> None:
    """Both backends keep about one window's askers: a state file or index that grew with
    every person who ever asked would be a leak."""
    first = await _process(backend_settings, embedder)
    try:
        for n in range(5):
            assert await first.backend.askers.admit(f"slack:U{n}", 2, 60) == 0
        if isinstance(first.backend, ElasticsearchBackend):  # as a cluster does each second
            await first.backend.index.client.indices.refresh(index=first.backend.index.names.askers)
    finally:
        await first.close()
    clock.shift(61)
    later = await _process(backend_settings, embedder)  # a new process purges at once
    try:
        assert await later.backend.askers.admit("slack:U9", 2, 60) == 0
        assert await _askers_kept(later.backend, backend_settings) == 1
        await later.backend.drop()
    finally:
        await later.close()


async def _askers_kept(backend: Backend, settings: Settings) -> int:
    if isinstance(backend, ElasticsearchBackend):
        client, names = backend.index.client, backend.index.names
        async with asyncio.timeout(10):
            while True:  # the purge runs in the background (wait_for_completion=false)
                await client.indices.refresh(index=names.askers)
                kept = (await client.count(index=names.askers))["count"]
                if kept == 1:
                    return 1
                await asyncio.sleep(0.05)
    with contextlib.closing(sqlite3.connect(settings.state_path)) as db:
        return len({asker for (asker,) in db.execute("SELECT asker FROM asked")})
