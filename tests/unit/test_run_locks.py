"""A run lock is released whatever ends its block: also a cancellation, and a second one that
lands while the release is under way (the event loop closing after a stopping clock)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import structlog

from core.backends.sqlite.run_locks import SqliteRunLocks
from core.run_locks import RENEWALS_PER_TTL, run_lock, uninterrupted


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


async def test_a_held_lock_is_renewed_and_lapses_once_its_holder_stops(tmp_path: Path) -> None:
    """The TTL had to outlast the longest run (six hours), so an ingest killed in a container
    (another host name: its process can't be checked) blocked every other for six hours. The
    holder now renews its claim while it runs, and a lock nobody renews lapses within a TTL."""
    ttl = 0.4
    locks = SqliteRunLocks(tmp_path / "state.sqlite", 5_000)
    try:
        async with run_lock(locks, "ingest", ttl):
            for _ in range(2 * RENEWALS_PER_TTL):  # twice the TTL, held all along
                await asyncio.sleep(ttl / RENEWALS_PER_TTL)
                assert not await locks.claim("ingest", "container-b:7", ttl)
        assert await locks.claim("ingest", "container-a:6425", ttl)  # then killed: no renewal
        assert not await locks.claim("ingest", "container-b:7", ttl)
        await asyncio.sleep(ttl * 1.2)
        assert await locks.claim("ingest", "container-b:7", ttl)
    finally:
        await locks.close()


async def test_a_renewal_the_store_fails_leaves_the_run_going() -> None:
    """A failing store costs a renewal, said in the log, not the run that holds the lock."""

    class FailingRenewals(SlowReleaseLocks):
        def __init__(self) -> None:
            super().__init__()
            self.release_may_end.set()
            self.claims = 0

        async def claim(self, name: str, holder: str, ttl_s: float) -> bool:
            self.claims += 1
            if self.claims > 1:
                raise OSError("the state file's disk is gone")
            return await super().claim(name, holder, ttl_s)

    locks = FailingRenewals()
    with structlog.testing.capture_logs() as logs:
        async with run_lock(locks, "ingest", 0.2):
            await asyncio.sleep(0.3)
    assert locks.claims >= 2
    assert {
        "event": "run_lock_not_renewed",
        "lock": "ingest",
        "error": "OSError",
        "log_level": "warning",
    } in logs
    assert not locks.holders  # released at the end all the same


async def test_a_renewal_under_way_at_the_end_is_waited_for_before_the_release() -> None:
    """Cancelled mid-renewal, the store's thread went on and wrote the claim again after the
    release: the lock stayed held, by a run that had ended, for a whole TTL."""

    class ThreadedRenewals(SlowReleaseLocks):
        def __init__(self) -> None:
            super().__init__()
            self.release_may_end.set()
            self.renewing = asyncio.Event()

        async def claim(self, name: str, holder: str, ttl_s: float) -> bool:
            if name not in self.holders:
                return await super().claim(name, holder, ttl_s)
            self.renewing.set()

            def write() -> bool:  # as SQLite's claim runs: in a thread, past any cancel
                time.sleep(0.2)
                self.holders[name] = holder
                return True

            return await asyncio.to_thread(write)

    locks = ThreadedRenewals()
    async with run_lock(locks, "ingest", 0.2):
        await locks.renewing.wait()  # the block ends while a renewal is being written
    await asyncio.sleep(0.4)
    assert locks.holders == {}
