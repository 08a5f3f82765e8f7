"""Run locks in the embedded SQLite state file: one row per held lock, claimed in one
immediate transaction so two processes on this machine can't both win."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from core.backends.sqlite.state_file import connect_state
from core.sqlite import transaction


class SqliteRunLocks:
    def __init__(self, path: Path, busy_timeout_ms: int) -> None:
        self._lock = threading.Lock()
        self._db = connect_state(path, busy_timeout_ms)

    def _claim(self, name: str, holder: str, ttl_s: float) -> bool:
        now = time.time()
        with self._lock, transaction(self._db):
            row = self._db.execute(
                "SELECT holder, expires_at FROM run_locks WHERE name = ?", (name,)
            ).fetchone()
            free = row is None or row[0] == holder or float(row[1]) <= now
            if free:
                self._db.execute(
                    "INSERT OR REPLACE INTO run_locks (name, holder, expires_at) VALUES (?, ?, ?)",
                    (name, holder, now + ttl_s),
                )
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
