"""Each asker's recent questions in the embedded SQLite state file: one row per question,
counted and added in one immediate transaction, so every bot process on this machine draws on
one count and two questions at once can't both take the last place."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

from core.backends.sqlite.state_file import connect_state
from core.errors import SearchIndexError
from core.sqlite import transaction


class SqliteAskerWindows:
    def __init__(self, path: Path, busy_timeout_ms: int) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._db = connect_state(path, busy_timeout_ms)

    def _admit(self, asker: str, cap: int, window_s: float) -> float:
        try:
            return self._count(asker, cap, window_s)
        except sqlite3.Error as exc:  # busy past the timeout, a full disk: the caller decides
            raise SearchIndexError(f"can't count questions in {self._path}: {exc}") from exc

    def _count(self, asker: str, cap: int, window_s: float) -> float:
        now = time.time()  # the same in every process, as a monotonic clock is not
        with self._lock, transaction(self._db):
            # Everyone's questions older than the window go, so the table holds one window.
            self._db.execute("DELETE FROM asked WHERE at <= ?", (now - window_s,))
            (count,) = self._db.execute(
                "SELECT count(*) FROM asked WHERE asker = ?", (asker,)
            ).fetchone()
            if count >= cap:
                # Free again once all but cap - 1 have left the window (more than the cap may
                # be there: another process's cap, or this one's before it was lowered).
                (freeing,) = self._db.execute(
                    "SELECT at FROM asked WHERE asker = ? ORDER BY at LIMIT 1 OFFSET ?",
                    (asker, count - cap),
                ).fetchone()
                return float(freeing) + window_s - now
            self._db.execute("INSERT INTO asked (asker, at) VALUES (?, ?)", (asker, now))
        return 0.0

    async def admit(self, asker: str, cap: int, window_s: float) -> float:
        return await asyncio.to_thread(self._admit, asker, cap, window_s)

    async def close(self) -> None:
        with self._lock:
            self._db.close()
