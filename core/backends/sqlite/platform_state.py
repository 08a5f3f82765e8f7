"""State every chat adapter needs beyond conversation turns, kept in the store, not in memory:
which deliveries were already handled, which threads belong to the bot, what was answered, and
what users thought of it.

In the store so that a restart (or a second process) behaves the same: Slack retries an event it
thinks was missed, and a thread the bot answered yesterday must still get follow-ups today.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from pathlib import Path

from core.domain.conversation import Answer
from core.domain.feedback import (
    FEEDBACK_REASONS,
    MAX_FEEDBACK_NOTE_CHARS,
    RecordedAnswer,
    citations_json,
    recorded_answer,
    votes_by_learned_document,
)
from core.sqlite import connect_store, transaction

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS deliveries (key TEXT PRIMARY KEY, seen_at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS bot_threads (key TEXT PRIMARY KEY, created_at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS answers (id TEXT PRIMARY KEY, conversation_key TEXT NOT NULL,"
    " question TEXT NOT NULL, answer TEXT NOT NULL, status TEXT NOT NULL,"
    " citations TEXT NOT NULL, created_at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS feedback (answer_id TEXT NOT NULL, user TEXT NOT NULL,"
    " vote INTEGER NOT NULL, at REAL NOT NULL, PRIMARY KEY (answer_id, user))",
    "CREATE TABLE IF NOT EXISTS feedback_reasons (answer_id TEXT NOT NULL, user TEXT NOT NULL,"
    " reason TEXT NOT NULL, note TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (answer_id, user))",
)


class SqlitePlatformState:
    def __init__(self, path: Path, busy_timeout_ms: int, dedup_ttl_s: float) -> None:
        self._ttl = dedup_ttl_s
        self._lock = threading.Lock()
        self._db = connect_store(path, busy_timeout_ms)
        for statement in _SCHEMA:
            self._db.execute(statement)

    def _first_delivery(self, keys: tuple[str, ...]) -> bool:
        now = time.time()
        with self._lock, transaction(self._db):
            self._db.execute("DELETE FROM deliveries WHERE seen_at < ?", (now - self._ttl,))
            marks = ",".join("?" * len(keys))
            seen = self._db.execute(
                f"SELECT 1 FROM deliveries WHERE key IN ({marks}) LIMIT 1",  # noqa: S608 (placeholders)
                keys,
            ).fetchone()
            if seen is None:
                self._db.executemany(
                    "INSERT INTO deliveries (key, seen_at) VALUES (?, ?)",
                    [(k, now) for k in keys],
                )
        return seen is None

    async def first_delivery(self, *keys: str) -> bool:
        return await asyncio.to_thread(self._first_delivery, keys)

    def _execute(self, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    async def remember_thread(self, key: str) -> None:
        await asyncio.to_thread(
            self._execute,
            "INSERT OR IGNORE INTO bot_threads (key, created_at) VALUES (?, ?)",
            (key, time.time()),
        )

    async def is_bot_thread(self, key: str) -> bool:
        rows = await asyncio.to_thread(
            self._execute, "SELECT 1 FROM bot_threads WHERE key = ?", (key,)
        )
        return bool(rows)

    async def record_answer(self, conversation_key: str, question: str, answer: Answer) -> str:
        answer_id = uuid.uuid4().hex
        citations = json.dumps(citations_json(answer))
        await asyncio.to_thread(
            self._execute,
            "INSERT INTO answers (id, conversation_key, question, answer, status, citations,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                answer_id,
                conversation_key,
                question,
                answer.text,
                answer.status.value,
                citations,
                time.time(),
            ),
        )
        return answer_id

    async def record_feedback(self, answer_id: str, user: str, helpful: bool) -> bool:
        known = await asyncio.to_thread(
            self._execute, "SELECT 1 FROM answers WHERE id = ?", (answer_id,)
        )
        if not known:
            return False
        await asyncio.to_thread(
            self._execute,
            "INSERT OR REPLACE INTO feedback (answer_id, user, vote, at) VALUES (?, ?, ?, ?)",
            (answer_id, user, 1 if helpful else -1, time.time()),
        )
        return True

    async def recorded_answer(self, answer_id: str) -> RecordedAnswer | None:
        rows = await asyncio.to_thread(
            self._execute,
            "SELECT conversation_key, question, answer, status, citations FROM answers"
            " WHERE id = ?",
            (answer_id,),
        )
        if not rows:
            return None
        key, question, text, status, citations = (str(v) for v in rows[0])
        return recorded_answer(key, question, text, status, json.loads(citations))

    async def record_feedback_reason(
        self, answer_id: str, user: str, reason: str, note: str
    ) -> bool:
        known = await asyncio.to_thread(
            self._execute, "SELECT 1 FROM answers WHERE id = ?", (answer_id,)
        )
        if not known or reason not in FEEDBACK_REASONS:
            return False
        await asyncio.to_thread(
            self._execute,
            "INSERT OR REPLACE INTO feedback_reasons (answer_id, user, reason, note, at)"
            " VALUES (?, ?, ?, ?, ?)",
            (answer_id, user, reason, note[:MAX_FEEDBACK_NOTE_CHARS], time.time()),
        )
        return True

    async def feedback_reasons(self, answer_id: str) -> list[tuple[str, str, str]]:
        rows = await asyncio.to_thread(
            self._execute,
            "SELECT user, reason, note FROM feedback_reasons WHERE answer_id = ? ORDER BY user",
            (answer_id,),
        )
        return [(str(u), str(r), str(n)) for u, r, n in rows]

    async def feedback_for(self, answer_id: str) -> list[tuple[str, int]]:
        rows = await asyncio.to_thread(
            self._execute, "SELECT user, vote FROM feedback WHERE answer_id = ?", (answer_id,)
        )
        return [(str(u), int(str(v))) for u, v in rows]

    async def learned_votes(self) -> dict[str, int]:
        rows = await asyncio.to_thread(
            self._execute,
            "SELECT a.citations, sum(f.vote) FROM answers a JOIN feedback f ON f.answer_id = a.id"
            " GROUP BY a.id",
            (),
        )
        return votes_by_learned_document((json.loads(str(c)), int(str(n))) for c, n in rows)

    async def close(self) -> None:
        with self._lock:
            self._db.close()
