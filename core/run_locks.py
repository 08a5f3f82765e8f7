"""Run locks: a job claims its run before doing it, so a second scheduler or a second
`bot index reindex` started by mistake does nothing instead of doing the work twice.

A lock expires (`ttl_s`) so a holder that died without releasing does not block forever; a
`run_lock` holder on this machine whose process is gone is taken over at once.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from core.errors import BotError
from core.sqlite import connect_store


class RunLocks(Protocol):
    async def claim(self, name: str, holder: str, ttl_s: float) -> bool:
        """True when `holder` now holds `name` (it was free, expired, or already its own)."""

    async def release(self, name: str, holder: str) -> None:
        """Free `name` if `holder` still holds it; someone else's claim is left alone."""

    async def held(self, name: str) -> tuple[str, float] | None:
        """Who holds `name` and when that claim expires (epoch seconds); None when it is free.
        For the message a refused caller shows: "running since ..., by host:pid"."""

    async def close(self) -> None: ...


class SqliteRunLocks:
    def __init__(self, path: Path, busy_timeout_ms: int) -> None:
        self._lock = threading.Lock()
        self._db = connect_store(path, busy_timeout_ms)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS run_locks (name TEXT PRIMARY KEY, holder TEXT NOT NULL,"
            " expires_at REAL NOT NULL)"
        )

    def _claim(self, name: str, holder: str, ttl_s: float) -> bool:
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(
                    "SELECT holder, expires_at FROM run_locks WHERE name = ?", (name,)
                ).fetchone()
                free = row is None or row[0] == holder or float(row[1]) <= now
                if free:
                    self._db.execute(
                        "INSERT OR REPLACE INTO run_locks (name, holder, expires_at)"
                        " VALUES (?, ?, ?)",
                        (name, holder, now + ttl_s),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return free

    def _release(self, name: str, holder: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM run_locks WHERE name = ? AND holder = ?", (name, holder))

    def _held(self, name: str) -> tuple[str, float] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT holder, expires_at FROM run_locks WHERE name = ? AND expires_at > ?",
                (name, time.time()),
            ).fetchone()
        return None if row is None else (str(row[0]), float(row[1]))

    async def claim(self, name: str, holder: str, ttl_s: float) -> bool:
        return await asyncio.to_thread(self._claim, name, holder, ttl_s)

    async def held(self, name: str) -> tuple[str, float] | None:
        return await asyncio.to_thread(self._held, name)

    async def release(self, name: str, holder: str) -> None:
        await asyncio.to_thread(self._release, name, holder)

    async def close(self) -> None:
        with self._lock:
            self._db.close()


class RunLockHeld(BotError):
    """Someone else holds the run lock; the message says who, since when, and what to do."""


@asynccontextmanager
async def run_lock(locks: RunLocks, name: str, ttl_s: float) -> AsyncIterator[None]:
    """Hold `name` for the block, released on the way out whatever happens (an error, Ctrl-C),
    so a retry never waits for the expiry; raises `RunLockHeld` when another process has it."""
    holder = f"{socket.gethostname()}:{os.getpid()}"
    if not await locks.claim(name, holder, ttl_s) and not await _take_over_from_the_dead(
        locks, name, holder, ttl_s
    ):
        held = await locks.held(name)
        who, since = ("?", "?") if held is None else (held[0], _when(held[1] - ttl_s))
        raise RunLockHeld(
            f"another {name} is running (since {since}, by {who}); try again when it has finished"
        )
    try:
        yield
    finally:
        await locks.release(name, holder)


async def _take_over_from_the_dead(locks: RunLocks, name: str, holder: str, ttl_s: float) -> bool:
    """Claim `name` from a holder on this machine whose process is gone.

    A killed ingest can't release its lock, and waiting out the TTL (hours) would block the
    very re-run that resumes it. Only a holder on this host can be judged: another machine's
    process is alive as far as we can tell, and its lock waits for release or expiry."""
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
