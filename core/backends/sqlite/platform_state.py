"""State every chat adapter needs beyond conversation turns, kept in the store, not in memory:
which deliveries were already handled, which threads belong to the bot, what was answered, what
users thought of it, and which replies are still in progress.

In the store so that a restart (or a second process) behaves the same: Slack retries an event it
thinks was missed, and a thread the bot answered yesterday must still get follow-ups today.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from core.backends.sqlite.state_file import connect_state
from core.domain.conversation import Answer
from core.domain.feedback import (
    FEEDBACK_REASONS,
    MAX_FEEDBACK_NOTE_CHARS,
    RecordedAnswer,
    recorded_answer,
    votes_by_learned_document,
)
from core.domain.insights import LoggedAnswer, logged_answer
from core.domain.replies import PendingReply
from core.ports import Embedder
from core.search.sketch import answer_row
from core.sqlite import transaction

_JSON_COLUMNS = ("citations", "consulted", "question_sketch")
# `answer_log` reads the window in one page: its callers (the re-check, the feedback export)
# want every entry at once.
_NO_LIMIT = -1  # SQLite's LIMIT -1
_BEFORE_ANY_ROW = -1  # row ids start at 1


class SqlitePlatformState:
    def __init__(
        self,
        path: Path,
        busy_timeout_ms: int,
        dedup_ttl_s: float,
        store_questions: bool = True,
        embedder: Embedder | None = None,
        max_question_chars: int | None = None,
    ) -> None:
        """`store_questions`: false keeps only a hash of each question in the answer log, and
        a sketch of its embedding by `embedder` (`question_sketch`). `max_question_chars`:
        the longest question the log keeps (`answers.max_question_chars`: an adapter records
        even a message refused as too long)."""
        self._ttl = dedup_ttl_s
        self._store_questions = store_questions
        self._embedder = embedder
        self._max_question_chars = max_question_chars
        self._lock = threading.Lock()
        self._db = connect_state(path, busy_timeout_ms)

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

    async def record_answer(
        self,
        conversation_key: str,
        question: str,
        answer: Answer,
        *,
        posted: bool = True,
        channel: str | None = None,
    ) -> str:
        answer_id = uuid.uuid4().hex
        row = await answer_row(
            conversation_key,
            question,
            answer,
            posted=posted,
            channel=channel,
            store_questions=self._store_questions,
            embedder=self._embedder,
            max_question_chars=self._max_question_chars,
        )
        for column in _JSON_COLUMNS:
            row[column] = json.dumps(row[column])
        columns = ["id", "created_at", *row]
        await asyncio.to_thread(
            self._execute,
            f"INSERT INTO answers ({', '.join(columns)})"  # noqa: S608 (our own column names)
            f" VALUES ({', '.join('?' * len(columns))})",
            (answer_id, time.time(), *row.values()),
        )
        return answer_id

    async def move_answer(self, answer_id: str, conversation_key: str) -> None:
        await asyncio.to_thread(
            self._execute,
            "UPDATE answers SET conversation_key = ? WHERE id = ?",
            (conversation_key, answer_id),
        )

    async def answer_log(self, since: float) -> list[LoggedAnswer]:
        start = (since, _BEFORE_ANY_ROW)
        page, _ = await asyncio.to_thread(self._log_page, since, start, _NO_LIMIT)
        return page

    async def answer_log_pages(
        self, since: float, page_size: int
    ) -> AsyncIterator[list[LoggedAnswer]]:
        """Oldest first, each page after the last row of the one before (by time, then row
        id: what the time index orders by), so no page re-reads or sorts the window."""
        after: tuple[float, int] = (since, _BEFORE_ANY_ROW)
        while True:
            page, after = await asyncio.to_thread(self._log_page, since, after, page_size)
            if page:
                yield page
            if len(page) < page_size:
                return

    def _log_page(
        self, since: float, after: tuple[float, int], limit: int
    ) -> tuple[list[LoggedAnswer], tuple[float, int]]:
        with self._lock:
            self._db.row_factory = sqlite3.Row
            try:
                rows = self._db.execute(
                    "SELECT rowid AS row_id, * FROM answers WHERE created_at >= ?"
                    " AND (created_at, rowid) > (?, ?) ORDER BY created_at, rowid LIMIT ?",
                    (since, *after, limit),
                ).fetchall()
                ids = json.dumps([r["id"] for r in rows])
                votes: dict[str, list[int]] = {}
                for answer_id, vote in self._db.execute(
                    "SELECT answer_id, vote FROM feedback"
                    " WHERE answer_id IN (SELECT value FROM json_each(?))",
                    (ids,),
                ):
                    votes.setdefault(answer_id, []).append(int(vote))
                reasons: dict[str, list[str]] = {}
                for answer_id, reason in self._db.execute(
                    "SELECT answer_id, reason FROM feedback_reasons"
                    " WHERE answer_id IN (SELECT value FROM json_each(?))",
                    (ids,),
                ):
                    reasons.setdefault(answer_id, []).append(str(reason))
            finally:
                self._db.row_factory = None
        page = [
            logged_answer(
                r["id"],
                r["created_at"],
                {**dict(r), **{c: json.loads(r[c]) for c in _JSON_COLUMNS}},
                votes.get(r["id"], []),
                reasons.get(r["id"], []),
            )
            for r in rows
        ]
        return page, (rows[-1]["created_at"], rows[-1]["row_id"]) if rows else after

    async def claim_recheck(self, answer_id: str) -> bool:
        return await asyncio.to_thread(self._claim_recheck, answer_id)

    def _claim_recheck(self, answer_id: str) -> bool:
        with self._lock, transaction(self._db):
            claimed = self._db.execute(
                "INSERT OR IGNORE INTO rechecks (answer_id, at) VALUES (?, ?)",
                (answer_id, time.time()),
            ).rowcount
        return claimed == 1

    async def release_recheck(self, answer_id: str) -> None:
        await asyncio.to_thread(
            self._execute, "DELETE FROM rechecks WHERE answer_id = ?", (answer_id,)
        )

    async def expire_answers(self, before: float) -> int:
        return await asyncio.to_thread(self._expire, before)

    def _expire(self, before: float) -> int:
        with self._lock, transaction(self._db):
            for table in ("feedback", "feedback_reasons", "rechecks"):
                self._db.execute(
                    f"DELETE FROM {table} WHERE answer_id IN"  # noqa: S608 (our own table names)
                    " (SELECT id FROM answers WHERE created_at < ?)",
                    (before,),
                )
            return self._db.execute("DELETE FROM answers WHERE created_at < ?", (before,)).rowcount

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
            "SELECT conversation_key, question, answer, status, citations, mode, consulted"
            " FROM answers WHERE id = ?",
            (answer_id,),
        )
        if not rows:
            return None
        key, question, text, status, citations, mode, consulted = (str(v) for v in rows[0])
        return recorded_answer(
            key, question, text, status, json.loads(citations), mode, json.loads(consulted)
        )

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

    async def hold_reply(self, reply: PendingReply) -> None:
        await asyncio.to_thread(
            self._execute,
            "INSERT OR REPLACE INTO pending_replies"
            " (id, platform, channel, message, thread, streamed, owner, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                reply.id,
                reply.platform,
                reply.channel,
                reply.message,
                reply.thread,
                int(reply.streamed),
                reply.owner,
                reply.created_at,
            ),
        )

    async def drop_reply(self, reply_id: str) -> None:
        await asyncio.to_thread(
            self._execute, "DELETE FROM pending_replies WHERE id = ?", (reply_id,)
        )

    async def beat(self, owner: str, forget_after_s: float) -> None:
        await asyncio.to_thread(self._beat, owner, forget_after_s)

    def _beat(self, owner: str, forget_after_s: float) -> None:
        now = time.time()
        with self._lock, transaction(self._db):
            self._db.execute(
                "INSERT OR REPLACE INTO reply_owners (owner, beat_at) VALUES (?, ?)", (owner, now)
            )
            self._db.execute("DELETE FROM reply_owners WHERE beat_at < ?", (now - forget_after_s,))

    async def abandoned_replies(
        self, platform: str, *, silent_s: float, older_than_s: float, limit: int
    ) -> list[PendingReply]:
        now = time.time()
        rows = await asyncio.to_thread(
            self._execute,
            "SELECT id, platform, channel, message, owner, thread, streamed, created_at"
            " FROM pending_replies r WHERE platform = ? AND created_at <= ? AND (created_at < ?"
            " OR NOT EXISTS (SELECT 1 FROM reply_owners o WHERE o.owner = r.owner"
            " AND o.beat_at > ?)) ORDER BY created_at LIMIT ?",
            (platform, now - silent_s, now - older_than_s, now - silent_s, limit),
        )
        return [
            PendingReply(str(i), str(p), str(c), str(m), str(o), str(t), bool(s), float(str(at)))
            for i, p, c, m, o, t, s, at in rows
        ]

    async def claim_reply(self, reply_id: str) -> bool:
        return await asyncio.to_thread(self._claim_reply, reply_id)

    def _claim_reply(self, reply_id: str) -> bool:
        with self._lock, transaction(self._db):
            deleted = self._db.execute(
                "DELETE FROM pending_replies WHERE id = ?", (reply_id,)
            ).rowcount
        return deleted == 1

    async def close(self) -> None:
        with self._lock:
            self._db.close()
