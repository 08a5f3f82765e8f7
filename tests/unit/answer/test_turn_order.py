"""One answer at a time per conversation (`core.answer.turn_order`)."""

from __future__ import annotations

import asyncio

from core.answer.turn_order import ConversationLocks


async def test_the_holder_takes_its_turn_again_and_others_wait() -> None:
    """An adapter holds the turn while it reads a thread back, then the engine takes it in
    the same task: no wait for itself, while another conversation member waits for both."""
    locks = ConversationLocks()
    order: list[str] = []

    async def second() -> None:
        async with locks.held("k"):
            order.append("second")

    async with locks.held("k"):
        waiting = asyncio.create_task(second())
        async with asyncio.timeout(5), locks.held("k"):  # the same task: at once
            order.append("first, again")
        await asyncio.sleep(0.01)
        order.append("first, done")
    await waiting
    assert order == ["first, again", "first, done", "second"]
    assert len(locks) == 0


async def test_a_cancelled_holder_lets_the_next_one_in() -> None:
    locks = ConversationLocks()
    entered = asyncio.Event()

    async def holder() -> None:
        async with locks.held("k"):
            entered.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(holder())
    await entered.wait()
    task.cancel()
    async with asyncio.timeout(5), locks.held("k"):
        pass
    assert len(locks) == 0
