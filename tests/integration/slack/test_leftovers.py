"""Placeholders in the state store while their answers are written, in the real Bolt app against
the Slack emulator: recorded when posted, moved to the stream that replaces them, dropped once
the answer (or an apology) replaced them. A later process's look apologises for those a
killed process left, once, and touches nothing else. Where the store matters, on both
backends. (A real SIGKILL between two `bot slack` processes: test_slack_process.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import structlog

from adapters.slack.leftovers import LEFTOVER_APOLOGY, LeftoverSweeper, process_owner
from bot.wiring import open_backend
from core.answer.tools import RESPOND_TOOL, SEARCH_TOOL
from core.config import LeftoverSettings, Settings
from core.domain.agent import AnswerProgress, ModelTurn, ToolUse, TurnRequest
from core.domain.conversation import Trace
from core.domain.replies import PendingReply
from core.ports import Backend, PlatformState
from core.search.embedder import CachedEmbedder
from tests.integration.slack.conftest import SlackHarness
from tests.integration.slack.test_slack_app import mention

ANSWER = "Run bot ingest again on the same folder."
# A look that takes everything a gone process left: its owner never beat in these tests.
NOW = LeftoverSettings(heartbeat_s=0.01, owner_silent_s=0.05, max_answer_s=3_600)


class HeldModel:
    """Searches, then starts its answer (streamed, when the adapter streams) and holds it
    until `release` is set: the answer in progress when a process is killed."""

    forced_calls_guaranteed = True

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.writing = asyncio.Event()
        self.rounds = 0

    async def turn(
        self, request: TurnRequest, trace: Trace, on_answer: AnswerProgress | None
    ) -> ModelTurn:
        self.rounds += 1
        if self.rounds == 1:
            return ModelTurn((ToolUse("t1", SEARCH_TOOL, {"query": "re-ingest"}),))
        if on_answer is not None:
            await on_answer(ANSWER)
        self.writing.set()
        await self.release.wait()
        respond = {"answer": ANSWER, "citations": [], "status": "partial"}
        return ModelTurn((ToolUse("t2", RESPOND_TOOL, respond),))

    async def write(self, system: str, history: Any, question: str, trace: Trace) -> str:
        return ""


async def _held(state: PlatformState) -> list[PendingReply]:
    """What a later process would find, whoever owns it (no process beats here)."""
    return await state.abandoned_replies(
        "slack", silent_s=0, older_than_s=NOW.max_answer_s, limit=NOW.limit
    )


def _sweeper(harness: SlackHarness, state: PlatformState) -> LeftoverSweeper:
    """The look of another process started on the same data (a name of its own)."""
    return LeftoverSweeper(state, _client(harness), NOW, process_owner())


def _client(harness: SlackHarness) -> Any:
    return harness.service.bolt.client


@pytest.fixture
async def state_of(
    backend_settings: Settings, embedder: CachedEmbedder
) -> AsyncIterator[Callable[[], Awaitable[PlatformState]]]:
    """The platform state of the backend under test, opened on demand."""
    opened: list[Backend] = []

    async def state() -> PlatformState:
        backend = await open_backend(backend_settings, embedder)
        opened.append(backend)
        return backend.platform_state(60)

    yield state
    for n, backend in enumerate(opened):
        if n == 0:
            await backend.drop()
        await backend.close()


async def _finish(harness: SlackHarness, model: HeldModel, stop: Callable[[], Any]) -> None:
    """The held answer let go and ended before the app stops: nothing of it after the test."""
    model.release.set()
    await harness.until(lambda: not harness.service.bot._in_flight)
    await stop()


def _answered(harness: SlackHarness) -> bool:
    """The final answer (with its blocks) replaced the placeholder."""
    return any(u.get("blocks") for u in harness.emulator.called("chat.update"))


def _apologies(harness: SlackHarness) -> list[dict[str, Any]]:
    return [u for u in harness.emulator.called("chat.update") if u["text"] == LEFTOVER_APOLOGY]


async def test_a_placeholder_is_recorded_while_answering_and_forgotten_once_answered(
    slack_factory, state_of
) -> None:
    """Answered as usual: the record existed meanwhile, and the next start touches nothing."""
    model = HeldModel()
    state = await state_of()
    harness, stop = await slack_factory(model, state, BOT_SLACK__STREAM_API="false")
    try:
        await harness.event(mention("1700000000.004000"), "Ev1")
        await asyncio.wait_for(model.writing.wait(), 30)
        [held] = await _held(state)
        placeholder = harness.emulator.posted_ts[0]
        assert (held.channel, held.message, held.thread) == ("C1", placeholder, "1700000000.004000")
        model.release.set()
        await harness.until(lambda: _answered(harness))
        await harness.until(lambda: not harness.service.bot._in_flight)
        assert await _held(state) == []
        before = list(harness.emulator.calls)
        assert await _sweeper(harness, await state_of()).sweep() == 0
        assert harness.emulator.calls == before  # nothing at all was sent to Slack
    finally:
        await _finish(harness, model, stop)


async def test_an_answer_cut_short_by_a_kill_is_apologised_for_once_by_the_next_start(
    slack_factory, state_of
) -> None:
    """The first app's answer never ends and its process never drains (a kill); another app on
    the same data replaces the placeholder with the apology, once, whatever the looks after."""
    model = HeldModel()
    first = await state_of()
    harness, stop = await slack_factory(model, first, BOT_SLACK__STREAM_API="false")
    try:
        await harness.event(mention("1700000000.005000"), "Ev1")
        await asyncio.wait_for(model.writing.wait(), 30)
        placeholder = harness.emulator.posted_ts[0]
        await asyncio.sleep(NOW.owner_silent_s * 2)  # the killed process never beats again
        sweeper = _sweeper(harness, await state_of())  # the new process, its own connection
        assert await sweeper.sweep() == 1
        assert [(u["ts"], u["blocks"]) for u in _apologies(harness)] == [(placeholder, [])]
        assert await sweeper.sweep() == 0  # once
        assert await _sweeper(harness, await state_of()).sweep() == 0  # and by no other process
        assert len(_apologies(harness)) == 1
        assert not harness.emulator.called("chat.stopStream")  # a placeholder, not a stream
    finally:
        await _finish(harness, model, stop)


async def test_a_stream_that_replaced_the_placeholder_is_stopped_then_apologised_for(
    slack_factory, state_of
) -> None:
    model = HeldModel()
    state = await state_of()
    harness, stop = await slack_factory(model, state, BOT_SLACK__UPDATE_INTERVAL_S="0")
    try:
        await harness.event(mention("1700000000.006000"), "Ev1")
        await asyncio.wait_for(model.writing.wait(), 30)
        await harness.until(lambda: bool(harness.emulator.called("chat.delete")))
        stream_ts = harness.emulator.posted_ts[1]
        [held] = await _held(state)
        assert (held.message, held.streamed) == (stream_ts, True)  # the stream, not the deleted
        await asyncio.sleep(NOW.owner_silent_s * 2)  # the killed process never beats again
        assert await _sweeper(harness, state).sweep() == 1
        names = [name for name, _ in harness.emulator.calls if name.startswith("chat.")]
        assert names[-2:] == ["chat.stopStream", "chat.update"]
        assert harness.emulator.called("chat.stopStream")[-1]["ts"] == stream_ts
        assert [u["ts"] for u in _apologies(harness)] == [stream_ts]
    finally:
        await _finish(harness, model, stop)


async def test_a_live_process_placeholder_is_left_alone(slack_factory, state_of) -> None:
    """Another process still beats: its answer in progress is its own to finish."""
    model = HeldModel()
    state = await state_of()
    harness, stop = await slack_factory(model, state, BOT_SLACK__STREAM_API="false")
    try:
        owner = harness.service.leftovers
        assert owner is not None
        await owner.beat()  # the answering process is alive
        await harness.event(mention("1700000000.007000"), "Ev1")
        await asyncio.wait_for(model.writing.wait(), 30)
        settings = LeftoverSettings(heartbeat_s=1, owner_silent_s=30, max_answer_s=3_600)
        other = LeftoverSweeper(state, _client(harness), settings, process_owner())
        await owner.beat()
        assert await other.sweep() == 0
        assert _apologies(harness) == []
    finally:
        await _finish(harness, model, stop)


class _FailingStore:
    """A platform state whose replies-in-progress calls all fail (a store gone away)."""

    def __init__(self, state: PlatformState) -> None:
        self._state = state

    def __getattr__(self, name: str) -> Any:
        if name in ("hold_reply", "drop_reply", "beat", "abandoned_replies", "claim_reply"):
            return self._fail
        return getattr(self._state, name)

    async def _fail(self, *args: object, **kwargs: object) -> Any:
        raise ConnectionError("the store is gone")


async def test_a_store_that_fails_costs_no_answer_and_no_start(slack_factory, tmp_path) -> None:
    from core.backends.sqlite.platform_state import SqlitePlatformState

    sqlite = SqlitePlatformState(tmp_path / "state.sqlite", 1_000, 60)
    failing: Any = _FailingStore(sqlite)
    model = HeldModel()
    model.release.set()
    harness, stop = await slack_factory(model, failing, BOT_SLACK__STREAM_API="false")
    try:
        with structlog.testing.capture_logs() as logged:
            await harness.event(mention("1700000000.008000"), "Ev1")
            await harness.until(lambda: _answered(harness))
            # The record is dropped after the answer's last edit, as the listener ends.
            await harness.until(lambda: not harness.service.bot._in_flight)
            sweeper = harness.service.leftovers
            assert sweeper is not None
            await sweeper.beat()
            assert await sweeper.sweep() == 0  # logged, not raised
        events = {entry["event"] for entry in logged}
        assert {"reply_not_recorded", "reply_record_not_dropped"} <= events  # the answer went on
        assert {"slack_heartbeat_failed", "slack_leftovers_unreadable"} <= events
        assert ANSWER in str(harness.emulator.called("chat.update")[-1])
    finally:
        await _finish(harness, model, stop)
        await sqlite.close()


class _DropFailsOnce:
    """A platform state whose first `drop_reply` fails (a store unwell for a moment); its
    heartbeats are counted."""

    def __init__(self, state: PlatformState) -> None:
        self._state = state
        self.failed = False
        self.beats = 0

    async def beat(self, owner: str, forget_after_s: float) -> None:
        await self._state.beat(owner, forget_after_s)
        self.beats += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)

    async def drop_reply(self, reply_id: str) -> None:
        if not self.failed:
            self.failed = True
            raise ConnectionError("the store is unwell")
        await self._state.drop_reply(reply_id)


async def test_a_record_whose_drop_failed_never_turns_the_delivered_answer_into_an_apology(
    slack_factory, state_of
) -> None:
    """The answer replaced the placeholder, but its record could not be dropped: the next
    beat drops it, so once the process stops (and beats no more) the next one finds nothing
    and the answer stays."""
    state = await state_of()
    flaky: Any = _DropFailsOnce(state)
    model = HeldModel()
    model.release.set()
    harness, stop = await slack_factory(model, flaky, BOT_SLACK__STREAM_API="false")
    try:
        with structlog.testing.capture_logs() as logged:
            await harness.event(mention("1700000000.009000"), "Ev1")
            await harness.until(lambda: _answered(harness))
            await harness.until(lambda: not harness.service.bot._in_flight)
        assert "reply_record_not_dropped" in {entry["event"] for entry in logged}
        assert len(await _held(state)) == 1  # the record outlived its answer
        owner = harness.service.leftovers
        assert owner is not None
        await owner.beat()  # the process's next heartbeat
        assert await _held(state) == []
        await asyncio.sleep(NOW.owner_silent_s * 2)  # the process restarted: silent since
        assert await _sweeper(harness, await state_of()).sweep() == 0
        assert _apologies(harness) == []
        assert ANSWER in str(harness.emulator.called("chat.update")[-1])
    finally:
        await _finish(harness, model, stop)


async def test_a_record_whose_drop_failed_is_dropped_when_the_process_stops(
    slack_factory, state_of
) -> None:
    """No beat came between the failed drop and the stop: the heartbeat's end drops it, as
    nothing will beat for it after."""
    state = await state_of()
    flaky: Any = _DropFailsOnce(state)
    model = HeldModel()
    model.release.set()
    harness, stop = await slack_factory(model, flaky, BOT_SLACK__STREAM_API="false")
    owner = harness.service.leftovers
    assert owner is not None
    beating = asyncio.create_task(owner.run())  # as `bot slack` runs it while it serves
    try:
        await harness.until(lambda: flaky.beats == 1)  # the start's beat, before the answer
        await harness.event(mention("1700000000.010000"), "Ev1")
        await harness.until(lambda: _answered(harness))
        await harness.until(lambda: not harness.service.bot._in_flight)
        assert flaky.failed
        assert flaky.beats == 1  # the next beat is a heartbeat_s away
        assert len(await _held(state)) == 1
        beating.cancel()  # the process stops, its answers drained
        await asyncio.gather(beating, return_exceptions=True)
        assert await _held(state) == []
    finally:
        beating.cancel()
        await _finish(harness, model, stop)
