"""Earlier turns of each conversation, so a follow-up is understood without repeating context.

Kept by us, not fetched from the platform: Slack allows non-Marketplace apps one
`conversations.replies` call a minute, and a restart must not make the bot forget a thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from core.backends.sqlite.state_file import connect_state
from core.domain.conversation import Turn
from core.sqlite import transaction


class SqliteConversationStore:
    def __init__(self, path: Path, busy_timeout_ms: int) -> None:
        self._lock = threading.Lock()
        self._db = connect_state(path, busy_timeout_ms)

    def _recent(self, key: str, limit: int) -> list[Turn]:
        with self._lock:
            rows = self._db.execute(
                "SELECT question, answer FROM turns WHERE key = ? ORDER BY id DESC LIMIT ?",
                (key, limit),
            ).fetchall()
        return [Turn(q, a) for q, a in reversed(rows)]

    def _append(self, key: str, turn: Turn) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO turns (key, question, answer, created_at) VALUES (?, ?, ?, ?)",
                (key, turn.question, turn.answer, time.time()),
            )

    async def recent(self, key: str, limit: int) -> list[Turn]:
        if limit <= 0:
            return []
        return await asyncio.to_thread(self._recent, key, limit)

    async def append(self, key: str, turn: Turn) -> None:
        await asyncio.to_thread(self._append, key, turn)

    async def expire(self, before: float) -> int:
        return await asyncio.to_thread(self._expire, before)

    def _expire(self, before: float) -> int:
        """Whole conversations: one still going keeps its earlier turns for its follow-ups."""
        with self._lock, transaction(self._db):
            stale = self._db.execute(
                "SELECT key FROM turns GROUP BY key HAVING max(created_at) < ?", (before,)
            ).fetchall()
            self._db.executemany("DELETE FROM turns WHERE key = ?", stale)
        return len(stale)

    async def close(self) -> None:
        with self._lock:
            self._db.close()
