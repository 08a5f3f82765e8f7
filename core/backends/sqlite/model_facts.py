"""Model facts in the embedded SQLite state file: one row per key, the newest value wins."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from core.backends.sqlite.state_file import connect_state


class SqliteModelFacts:
    def __init__(self, path: Path, busy_timeout_ms: int) -> None:
        self._lock = threading.Lock()
        self._db = connect_state(path, busy_timeout_ms)

    def _get(self, key: str, max_age_s: float) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT value FROM model_facts WHERE key = ? AND updated_at >= ?",
                (key, time.time() - max_age_s),
            ).fetchone()
        return None if row is None else str(row[0])

    def _put(self, key: str, value: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO model_facts (key, value, updated_at) VALUES (?, ?, ?)",
                (key, value, time.time()),
            )

    async def get(self, key: str, max_age_s: float) -> str | None:
        return await asyncio.to_thread(self._get, key, max_age_s)

    async def put(self, key: str, value: str) -> None:
        await asyncio.to_thread(self._put, key, value)

    async def close(self) -> None:
        with self._lock:
            self._db.close()
