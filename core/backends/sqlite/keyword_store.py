"""Learned keywords: what the model saved after a web search, and what each keyword is tied to.

A keyword is one row however many questions produced it; each (learned document, question)
that produced it is an association of its own. Saving is safe when many answers save the same
keyword at once: the keyword is created by exactly one of them, and every association lands,
because associations never overwrite each other (one record each) and counters are updated by
the store itself, not read-modify-write in our code.

Beside the keywords the store keeps each learned document's record (the web sources it was
made from, the question that caused it, when it was created and last used, how often): the
index holds what search needs, this holds what pruning needs to rewrite or drop it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from core.backends.sqlite.state_file import connect_state
from core.domain.insights import question_hash
from core.domain.learned import (
    HASHED_QUESTION,
    LearnedDocument,
    LearnedKeyword,
    sources_from,
    sources_json,
)
from core.sqlite import transaction

_Step = tuple[str, list[tuple[object, ...]]]


class SqliteKeywordStore:
    def __init__(self, path: Path, busy_timeout_ms: int) -> None:
        self._lock = threading.Lock()
        self._db = connect_state(path, busy_timeout_ms)

    def _transaction(self, *steps: _Step) -> None:
        """Every step (a statement and its rows) in one transaction: all land or none."""
        with self._lock, transaction(self._db):
            for sql, rows in steps:
                self._db.executemany(sql, rows)

    async def _write(self, *steps: _Step) -> None:
        await asyncio.to_thread(self._transaction, *steps)

    def _rows(self, where: str, params: tuple[object, ...]) -> list[LearnedKeyword]:
        with self._lock:
            rows = self._db.execute(
                "SELECT k.keyword, count(l.keyword), k.uses, k.created_at, k.last_used_at,"  # noqa: S608 (fixed clauses)
                " max(l.at)"
                f" FROM keywords k LEFT JOIN keyword_links l ON l.keyword = k.keyword {where}"
                " GROUP BY k.keyword ORDER BY k.keyword",
                params,
            ).fetchall()
        return [LearnedKeyword(r[0], int(r[1]), int(r[2]), float(r[3]), r[4], r[5]) for r in rows]

    def _documents(self, where: str = "", params: tuple[object, ...] = ()) -> list[LearnedDocument]:
        with self._lock:
            rows = self._db.execute(
                "SELECT doc_id, question, query, sources, created_at, last_used_at, uses"  # noqa: S608 (fixed clauses)
                f" FROM learned_documents {where} ORDER BY created_at, doc_id",
                params,
            ).fetchall()
            links = self._db.execute(
                f"SELECT DISTINCT doc_id, keyword FROM keyword_links {where} ORDER BY keyword",  # noqa: S608 (fixed clauses)
                params,
            ).fetchall()
        keywords: dict[str, list[str]] = {}
        for doc_id, keyword in links:
            keywords.setdefault(doc_id, []).append(keyword)
        return [
            LearnedDocument(
                doc_id=r[0],
                question=r[1],
                query=r[2],
                sources=sources_from(r[3]),
                created_at=float(r[4]),
                last_used_at=r[5],
                uses=int(r[6]),
                keywords=tuple(keywords.get(r[0], ())),
            )
            for r in rows
        ]

    async def add(self, keyword: str, *, doc_id: str, question: str) -> None:
        now = time.time()
        await self._write(
            (
                "INSERT OR IGNORE INTO keywords (keyword, created_at) VALUES (?, ?)",
                [(keyword, now)],
            ),
            (
                "INSERT OR IGNORE INTO keyword_links (keyword, doc_id, question, at)"
                " VALUES (?, ?, ?, ?)",
                [(keyword, doc_id, question, now)],
            ),
        )

    async def get(self, keyword: str) -> LearnedKeyword | None:
        found = await asyncio.to_thread(self._rows, "WHERE k.keyword = ?", (keyword,))
        return found[0] if found else None

    async def all(self) -> list[LearnedKeyword]:
        return await asyncio.to_thread(self._rows, "", ())

    async def record_use(self, keywords: list[str]) -> None:
        now = time.time()
        await self._write(
            (
                "UPDATE keywords SET uses = uses + 1, last_used_at = ? WHERE keyword = ?",
                [(now, k) for k in keywords],
            )
        )

    async def add_document(self, document: LearnedDocument) -> None:
        d = document
        await self._write(
            (
                "INSERT OR IGNORE INTO learned_documents (doc_id, question, query, sources,"
                " created_at) VALUES (?, ?, ?, ?, ?)",
                [(d.doc_id, d.question, d.query, sources_json(d.sources), d.created_at)],
            )
        )

    async def documents(self) -> list[LearnedDocument]:
        return await asyncio.to_thread(self._documents)

    async def document(self, doc_id: str) -> LearnedDocument | None:
        found = await asyncio.to_thread(self._documents, "WHERE doc_id = ?", (doc_id,))
        return found[0] if found else None

    async def record_document_use(self, doc_ids: list[str]) -> None:
        now = time.time()
        await self._write(
            (
                "UPDATE learned_documents SET uses = uses + 1, last_used_at = ? WHERE doc_id = ?",
                [(now, d) for d in doc_ids],
            )
        )

    async def remove_keywords(self, keywords: list[str], *, saved_before: float) -> None:
        await self._write(
            (
                "DELETE FROM keyword_links WHERE keyword = ? AND at <= ?",
                [(k, saved_before) for k in keywords],
            ),
            (
                "DELETE FROM keywords WHERE keyword = ? AND NOT EXISTS"
                " (SELECT 1 FROM keyword_links l WHERE l.keyword = keywords.keyword)",
                [(k,) for k in keywords],
            ),
        )

    async def remove_document(self, doc_id: str) -> None:
        await self._write(
            ("DELETE FROM keyword_links WHERE doc_id = ?", [(doc_id,)]),
            ("DELETE FROM learned_documents WHERE doc_id = ?", [(doc_id,)]),
        )

    async def forget_questions(self, before: float) -> int:
        return await asyncio.to_thread(self._forget_questions, before)

    def _forget_questions(self, before: float) -> int:
        with self._lock, transaction(self._db):
            documents = self._db.execute(
                "UPDATE learned_documents SET question = ''"
                " WHERE created_at < ? AND question != ''",
                (before,),
            ).rowcount
            links = self._db.execute(
                "SELECT keyword, doc_id, question, at FROM keyword_links"
                " WHERE at < ? AND question != '' AND substr(question, 1, ?) != ?",
                (before, len(HASHED_QUESTION), HASHED_QUESTION),
            ).fetchall()
            self._db.executemany(
                "INSERT OR IGNORE INTO keyword_links (keyword, doc_id, question, at)"
                " VALUES (?, ?, ?, ?)",
                [(k, d, HASHED_QUESTION + question_hash(q), at) for k, d, q, at in links],
            )
            self._db.executemany(
                "DELETE FROM keyword_links WHERE keyword = ? AND doc_id = ? AND question = ?",
                [(k, d, q) for k, d, q, _ in links],
            )
        return documents + len(links)

    async def close(self) -> None:
        with self._lock:
            self._db.close()
