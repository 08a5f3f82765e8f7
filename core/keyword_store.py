"""Learned keywords: what the model saved after a web search, and what each keyword is tied to.

A keyword is one row however many questions produced it; each (learned document, question)
that produced it is an association of its own. Saving is safe when many answers save the same
keyword at once: the keyword is created by exactly one of them, and every association lands,
because associations never overwrite each other (one record each) and counters are updated by
the store itself, not read-modify-write in our code.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from core.sqlite_connection import connect_store

MIN_KEYWORD_CHARS = 2
MAX_KEYWORD_CHARS = 50
_SPACES = re.compile(r"\s+")


class InvalidKeyword(ValueError):
    """The message says what to change, so a model can correct its call."""


def normalise_keyword(raw: str) -> str:
    """Trimmed, case-folded, single-spaced; refused when too short, too long or with controls."""
    if any(unicodedata.category(ch) == "Cc" and ch not in " \t\n" for ch in raw):
        raise InvalidKeyword(f"keyword {raw!r} contains control characters; remove them")
    keyword = _SPACES.sub(" ", raw).strip().casefold()
    if not keyword:
        raise InvalidKeyword("a keyword can't be empty")
    if not MIN_KEYWORD_CHARS <= len(keyword) <= MAX_KEYWORD_CHARS:
        raise InvalidKeyword(
            f"keyword {keyword!r} has {len(keyword)} characters; use "
            f"{MIN_KEYWORD_CHARS} to {MAX_KEYWORD_CHARS} (a specific term, not a sentence)"
        )
    return keyword


@dataclass(frozen=True, slots=True)
class LearnedKeyword:
    keyword: str
    associations: int
    uses: int
    created_at: float
    last_used_at: float | None


class KeywordStore(Protocol):
    async def add(self, keyword: str, *, doc_id: str, question: str) -> None:
        """Save `keyword` (already normalised) for a learned document and the question."""

    async def get(self, keyword: str) -> LearnedKeyword | None: ...

    async def all(self) -> list[LearnedKeyword]: ...

    async def record_use(self, keywords: list[str]) -> None:
        """One more use of each keyword, now (its learned knowledge was cited)."""

    async def close(self) -> None: ...


class SqliteKeywordStore:
    def __init__(self, path: Path, busy_timeout_ms: int) -> None:
        self._lock = threading.Lock()
        self._db = connect_store(path, busy_timeout_ms)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS keywords (keyword TEXT PRIMARY KEY,"
            " created_at REAL NOT NULL, last_used_at REAL, uses INTEGER NOT NULL DEFAULT 0)"
        )
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS keyword_links (keyword TEXT NOT NULL, doc_id TEXT NOT NULL,"
            " question TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (keyword, doc_id, question))"
        )

    def _add(self, keyword: str, doc_id: str, question: str) -> None:
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "INSERT OR IGNORE INTO keywords (keyword, created_at) VALUES (?, ?)",
                    (keyword, now),
                )
                self._db.execute(
                    "INSERT OR IGNORE INTO keyword_links (keyword, doc_id, question, at)"
                    " VALUES (?, ?, ?, ?)",
                    (keyword, doc_id, question, now),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def _rows(self, where: str, params: tuple[object, ...]) -> list[LearnedKeyword]:
        with self._lock:
            rows = self._db.execute(
                "SELECT k.keyword, count(l.keyword), k.uses, k.created_at, k.last_used_at"  # noqa: S608 (fixed clauses)
                f" FROM keywords k LEFT JOIN keyword_links l ON l.keyword = k.keyword {where}"
                " GROUP BY k.keyword ORDER BY k.keyword",
                params,
            ).fetchall()
        return [LearnedKeyword(r[0], int(r[1]), int(r[2]), float(r[3]), r[4]) for r in rows]

    def _record_use(self, keywords: list[str]) -> None:
        now = time.time()
        with self._lock:
            self._db.executemany(
                "UPDATE keywords SET uses = uses + 1, last_used_at = ? WHERE keyword = ?",
                [(now, k) for k in keywords],
            )

    async def add(self, keyword: str, *, doc_id: str, question: str) -> None:
        await asyncio.to_thread(self._add, keyword, doc_id, question)

    async def get(self, keyword: str) -> LearnedKeyword | None:
        found = await asyncio.to_thread(self._rows, "WHERE k.keyword = ?", (keyword,))
        return found[0] if found else None

    async def all(self) -> list[LearnedKeyword]:
        return await asyncio.to_thread(self._rows, "", ())

    async def record_use(self, keywords: list[str]) -> None:
        await asyncio.to_thread(self._record_use, keywords)

    async def close(self) -> None:
        with self._lock:
            self._db.close()
