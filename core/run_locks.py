"""Run locks: a job claims its run before doing it, so a second scheduler or a second
`bot index reindex` started by mistake does nothing instead of doing the work twice.

A lock expires (`ttl_s`) so a holder that died without releasing does not block forever. A
`run_lock` holder renews its claim while it runs (its sign of life), so the TTL need not outlast
the run: a holder killed anywhere (another container, another host) frees the lock within one
TTL, and one on this machine whose process is gone is taken over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import TypeVar

import structlog

from core.errors import RunLockHeld
from core.ports import RunLocks

T = TypeVar("T")
log = structlog.get_logger(__name__)

# A held lock is renewed this many times per TTL: a renewal that fails or comes late still
# leaves three more before the claim could lapse.
RENEWALS_PER_TTL = 4


@asynccontextmanager
async def run_lock(locks: RunLocks, name: str, ttl_s: float) -> AsyncIterator[None]:
    """Hold `name` for the block, released on the way out whatever happens (an error, Ctrl-C),
    so a retry never waits for the expiry; raises `RunLockHeld` when another process has it."""
    holder = f"{socket.gethostname()}:{os.getpid()}"
    if not await locks.claim(name, holder, ttl_s) and not await _take_over_from_the_dead(
        locks, name, holder, ttl_s
    ):
        held = await locks.held(name)
        if held is None:  # released meanwhile
            raise RunLockHeld(f"another {name} was running; try again")
        # The claim holds its last renewal, not the run's start: said as such.
        who, renewed, lapses = held[0], _when(held[1] - ttl_s), _when(held[1])
        raise RunLockHeld(
            f"another {name} is running (by {who}, last renewed {renewed}); try again when it "
            f"has finished (if it was killed, its lock lapses by {lapses})"
        )
    done = asyncio.Event()
    renewing = asyncio.create_task(_renew(locks, name, holder, ttl_s, done))
    try:
        yield
    finally:
        # Stopped between renewals, never cancelled inside one: a claim cancelled while its
        # store's thread still runs could land after the release, and hold the lock for a TTL.
        done.set()
        await uninterrupted(renewing)
        await uninterrupted(locks.release(name, holder))


async def _renew(
    locks: RunLocks, name: str, holder: str, ttl_s: float, done: asyncio.Event
) -> None:
    """The holder's sign of life: its claim renewed every `ttl_s / RENEWALS_PER_TTL` until
    `done`. A store that fails a renewal is tried again at the next; a claim found taken (this
    process stalled past its TTL) is said, and no longer renewed."""
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), ttl_s / RENEWALS_PER_TTL)
        if done.is_set():
            return
        try:
            if not await locks.claim(name, holder, ttl_s):
                log.warning("run_lock_lost", lock=name)
                return
        except Exception as exc:  # noqa: BLE001 (the run goes on; the next renewal may work)
            log.warning("run_lock_not_renewed", lock=name, error=type(exc).__name__)


async def uninterrupted(work: Awaitable[T]) -> T:
    """`work` awaited to its end even when the task awaiting it is cancelled meanwhile; the
    cancellation is raised once it is done. A release in a `finally` often runs because the
    task was cancelled (a stopping clock, Ctrl-C), and a second cancellation (the event loop
    closing) must not cut it short: the lock would then be held for its whole TTL, and another
    host can't tell that its holder is gone."""
    task = asyncio.ensure_future(work)
    interrupted = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            interrupted = True  # or `work` itself was cancelled: `result()` raises that below
    result = task.result()
    if interrupted:
        raise asyncio.CancelledError
    return result


async def _take_over_from_the_dead(locks: RunLocks, name: str, holder: str, ttl_s: float) -> bool:
    """Claim `name` from a holder on this machine whose process is gone.

    A killed ingest can't release its lock, and waiting out the TTL would block the very
    re-run that resumes it. Only a holder on this host can be judged: another machine's
    process is alive as far as we can tell, and its lock lapses once it stops renewing it."""
    held = await locks.held(name)
    if held is None:  # released since our claim was refused
        return await locks.claim(name, holder, ttl_s)
    host, _, pid = held[0].rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or _alive(int(pid)):
        return False
    await locks.release(name, held[0])
    return await locks.claim(name, holder, ttl_s)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's process
        return True
    return True


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# The run lock a reindex holds, so two started at once don't both build a version.
REINDEX_LOCK = "reindex"
