"""A run lock is released whatever ends its block: also a cancellation, and a second one that
lands while the release is under way (the event loop closing after a stopping clock)."""

from __future__ import annotations

import asyncio

import pytest

from core.run_locks import run_lock, uninterrupted


class SlowReleaseLocks:
    """Run locks whose release waits on the event loop, as a remote store's does: a
    cancellation landing while it waits would cut it short."""

    def __init__(self) -> None:
        self.holders: dict[str, str] = {}
        self.releasing = asyncio.Event()
        self.release_may_end = asyncio.Event()

    async def claim(self, name: str, holder: str, ttl_s: float) -> bool:
        return self.holders.setdefault(name, holder) == holder

    async def release(self, name: str, holder: str) -> None:
        self.releasing.set()
        await self.release_may_end.wait()
        if self.holders.get(name) == holder:
            del self.holders[name]

    async def held(self, name: str) -> tuple[str, float] | None:
        return (self.holders[name], 0.0) if name in self.holders else None

    async def close(self) -> None:
        return None


async def test_a_lock_is_released_even_when_its_release_is_cancelled() -> None:
    locks = SlowReleaseLocks()
    inside = asyncio.Event()

    async def sync() -> None:
        async with run_lock(locks, "sync-slow", 3_600):
            inside.set()
            await asyncio.sleep(3_600)

    task = asyncio.create_task(sync())
    await inside.wait()
    task.cancel()  # the clock stops the sync
    await locks.releasing.wait()
    task.cancel()  # and the loop closes while the lock is being released
    locks.release_may_end.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await locks.held("sync-slow") is None


async def test_uninterrupted_gives_the_result_and_raises_the_work_s_own_errors() -> None:
    async def three() -> int:
        return 3

    async def broken() -> None:
        raise OSError("disk gone")

    assert await uninterrupted(three()) == 3
    with pytest.raises(OSError, match="disk gone"):
        await uninterrupted(broken())
