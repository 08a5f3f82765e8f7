"""Replies in progress (the placeholders not yet replaced) behave the same on every backend: a
reply is abandoned when its owner went silent or it is older than any answer, never while a
live process owns it; a dropped one is gone; of two processes claiming one, exactly one wins."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from bot.wiring import open_backend
from core.config import Settings
from core.domain.replies import PendingReply
from core.ports import Backend, PlatformState
from core.search.embedder import CachedEmbedder

SILENT_S = 5.0
ANSWER_S = 3_600.0
LIMIT = 10
LIVE, GONE = "host-a:1:aaaa", "host-b:1:bbbb"


@pytest.fixture
async def two(
    backend_settings: Settings, embedder: CachedEmbedder
) -> AsyncIterator[tuple[PlatformState, PlatformState]]:
    """The platform state of two processes, each on a connection of its own."""
    backends: list[Backend] = []
    try:
        for _ in range(2):
            backends.append(await open_backend(backend_settings, embedder))
        yield backends[0].platform_state(60), backends[1].platform_state(60)
        await backends[0].drop()
    finally:
        for backend in backends:
            await backend.close()


def _reply(reply_id: str, owner: str, age_s: float, **fields: object) -> PendingReply:
    return PendingReply(
        reply_id,
        "slack",
        "C1",
        f"1700000000.{reply_id:0>6}",
        owner,
        thread="1700000000.000001",
        created_at=time.time() - age_s,
        **fields,  # type: ignore[arg-type]
    )


async def _abandoned(state: PlatformState, silent_s: float = SILENT_S) -> list[str]:
    found = await state.abandoned_replies(
        "slack", silent_s=silent_s, older_than_s=ANSWER_S, limit=LIMIT
    )
    return [reply.id for reply in found]


async def test_a_live_owners_replies_wait_a_silent_owners_are_abandoned_oldest_first(
    two: tuple[PlatformState, PlatformState],
) -> None:
    first, second = two
    await first.beat(LIVE, forget_after_s=ANSWER_S)
    await first.hold_reply(_reply("1", LIVE, age_s=60))  # being answered
    await first.hold_reply(_reply("2", GONE, age_s=30))  # its process never beat again
    await first.hold_reply(_reply("3", GONE, age_s=90))
    await first.hold_reply(_reply("4", GONE, age_s=1))  # too young to tell
    await first.hold_reply(_reply("5", LIVE, age_s=ANSWER_S + 60))  # no answer runs that long
    assert await _abandoned(second) == ["5", "3", "2"]
    found = await second.abandoned_replies(
        "slack", silent_s=SILENT_S, older_than_s=ANSWER_S, limit=2
    )
    assert [r.id for r in found] == ["5", "3"]  # the limit, oldest first
    assert (
        await second.abandoned_replies(
            "discord", silent_s=SILENT_S, older_than_s=ANSWER_S, limit=LIMIT
        )
        == []
    )


async def test_a_reply_is_kept_whole_and_holding_it_again_moves_it(
    two: tuple[PlatformState, PlatformState],
) -> None:
    first, second = two
    held = _reply("7", GONE, age_s=30)
    await first.hold_reply(held)
    [found] = await second.abandoned_replies(
        "slack", silent_s=SILENT_S, older_than_s=ANSWER_S, limit=LIMIT
    )
    assert (found.channel, found.message, found.thread, found.owner, found.streamed) == (
        "C1",
        held.message,
        "1700000000.000001",
        GONE,
        False,
    )
    assert found.created_at == pytest.approx(held.created_at, abs=0.01)
    # A stream replaced the placeholder: the same reply, its message now the stream's.
    await first.hold_reply(
        PendingReply(
            "7", "slack", "C1", "1700000000.999999", GONE, streamed=True, created_at=held.created_at
        )
    )
    [moved] = await second.abandoned_replies(
        "slack", silent_s=SILENT_S, older_than_s=ANSWER_S, limit=LIMIT
    )
    assert (moved.id, moved.message, moved.streamed) == ("7", "1700000000.999999", True)


async def test_a_dropped_reply_is_never_abandoned(two: tuple[PlatformState, PlatformState]) -> None:
    first, second = two
    await first.hold_reply(_reply("8", GONE, age_s=ANSWER_S * 2))
    await first.drop_reply("8")
    await first.drop_reply("8")  # again: no error
    assert await _abandoned(second) == []
    assert not await second.claim_reply("8")


async def test_an_owner_that_stops_beating_is_gone_after_the_silence(
    two: tuple[PlatformState, PlatformState],
) -> None:
    first, second = two
    silent_s = 0.5
    await first.beat(LIVE, forget_after_s=ANSWER_S)
    await first.hold_reply(_reply("9", LIVE, age_s=30))
    assert await _abandoned(second, silent_s) == []
    await asyncio.sleep(silent_s * 2)  # no beat meanwhile: killed
    assert await _abandoned(second, silent_s) == ["9"]
    await first.beat(LIVE, forget_after_s=ANSWER_S)  # it was only slow
    assert await _abandoned(second, silent_s) == []


async def test_of_two_processes_claiming_a_reply_exactly_one_wins(
    two: tuple[PlatformState, PlatformState],
) -> None:
    first, second = two
    for n in range(5):
        await first.hold_reply(_reply(f"1{n}", GONE, age_s=30))
    for n in range(5):
        wins = await asyncio.gather(first.claim_reply(f"1{n}"), second.claim_reply(f"1{n}"))
        assert sorted(wins) == [False, True]
    assert await _abandoned(first) == []
