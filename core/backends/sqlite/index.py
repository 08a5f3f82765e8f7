"""The embedded index: one SQLite file with FTS5 for BM25 and the vectors beside each chunk.

Why this shape:
- WAL mode lets any number of readers search while one writer ingests; each document is written
  in one `BEGIN IMMEDIATE` transaction, so readers see a document either whole or not at all.
- The vector side (`vectors.py`) scans an in-memory matrix exactly while the index is small and
  asks an approximate graph, re-scored exactly, once it is large; either is brought up to date
  only when the `generation` counter, bumped by every write, has moved.
- All SQLite and numpy work runs in worker threads (`asyncio.to_thread`) so a search never blocks
  the event loop that acknowledges platform events; `close` waits for them to leave their
  connections (`in_flight.py`), since closing one in use can crash the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import numpy as np

from core.backends.sqlite.candidates import average_length, lengths, positions, query_tokens
from core.backends.sqlite.fts_query import fts_or_expression, within_postings_budget
from core.backends.sqlite.in_flight import InFlight
from core.backends.sqlite.left_out import FTS5_IDF_FLOOR, left_out_scores
from core.backends.sqlite.proximity import pair_tokens, proximity_scores
from core.backends.sqlite.schema import CHUNK_COLUMNS, SCHEMA_VERSION, schema_names, statements
from core.backends.sqlite.vectors import IDS_PER_QUERY, SqliteVectors, filter_clauses
from core.config import SearchSettings
from core.domain.documents import (
    Chunk,
    DocumentRecord,
    DocumentWrite,
    IndexStats,
    SearchFilters,
    SearchHit,
    SearchMode,
    Vectors,
)
from core.errors import SearchIndexError
from core.ports import Embedder
from core.search.checks import check_vectors
from core.search.fusion import Ranked
from core.search.hybrid import (
    HybridIndex,
    SearchRequest,
    fuse,
    fused_hits,
    limited,
    no_candidates,
)
from core.search.terms import query_terms
from core.sqlite import Integrity, check_integrity, connect_store, transaction

_KEYWORD_SEPARATOR = "\n"
# How long closing waits for the worker threads before interrupting their statements again:
# short, since a thread that missed the first interrupt is otherwise waited for in full.
_INTERRUPT_AGAIN_S = 0.05
_FTS_INTEGRITY_CHECK = "INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')"
# What to do about a damaged index file: it is made again from the sources.
P = ParamSpec("P")
T = TypeVar("T")
IF_DAMAGED = (
    "delete it and ingest again (`bot ingest PATH`, `bot sync NAME`); the embedding cache "
    "makes that quick"
)


class SqliteIndex(HybridIndex):
    def __init__(self, path: Path, embedder: Embedder, settings: SearchSettings) -> None:
        super().__init__(embedder, settings)
        self._path = path
        self._embedder = embedder
        self._settings = settings
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._df_lock = threading.Lock()
        # (generation, chunks, each term's document frequency): counted once per write
        self._df_cache: tuple[int, int, dict[str, int]] = (-1, 0, {})
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._in_flight = InFlight()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._vectors = SqliteVectors(
            path, embedder.dimensions, embedder.model_id, settings, self._reader, self._write_lock
        )
        self._init_schema()

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    @property
    def location(self) -> str:
        """Where the chunks live, for messages: the database file."""
        return str(self._path)

    # -- connections ------------------------------------------------------------------------

    def _open(self, busy_timeout_ms: int) -> sqlite3.Connection:
        return connect_store(self._path, busy_timeout_ms, if_damaged=IF_DAMAGED, rebuildable=True)

    def _connect(self) -> sqlite3.Connection:
        db = self._open(self._settings.busy_timeout_ms)
        # Term proximity's temporary tables in memory, not in a temporary file (4.7 ms against
        # 6.4 ms per search, profiled). Set before any temporary table exists: a change drops them.
        db.execute("PRAGMA temp_store = MEMORY")
        with self._connections_lock:
            self._connections.append(db)
        return db

    def _reader(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = self._connect()
            self._local.db = db
        return db

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction at a time; it bumps `generation` so readers reload vectors."""
        with self._write_lock, transaction(self._reader()) as db:
            yield db
            db.execute(
                "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'"
            )

    def _init_schema(self) -> None:
        """The tables made, or checked: an index made by this version for this embedder is
        only read (nothing written, so a read-only file can be searched); the full-text table
        is opened too, so a damaged one fails here, with its file named, and not first in
        the middle of a search."""
        try:
            if not self._schema_current(self._reader()):
                with self._write() as db:
                    for statement in statements():
                        db.execute(statement)
                    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
                    if "generation" not in meta:  # a new database: an old graph isn't its own
                        self._vectors.forget()
                    for key, value in self._missing_meta(meta).items():
                        db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (key, value))
                    db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('generation', '0')")
            self._reader().execute("SELECT rowid FROM chunks_fts LIMIT 0").fetchall()
        except sqlite3.DatabaseError as exc:
            raise SearchIndexError(f"can't open the index at {self._path}: {exc}") from exc

    def _schema_current(self, db: sqlite3.Connection) -> bool:
        """Every table, index and trigger there, and the meta rows written (as this bot
        wants them, or the index is refused)."""
        present = {row[0] for row in db.execute("SELECT name FROM sqlite_master").fetchall()}
        if not schema_names() <= present:
            return False
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        return not self._missing_meta(meta) and "generation" in meta

    def _missing_meta(self, meta: dict[str, str]) -> dict[str, str]:
        """The meta rows this bot needs that `meta` lacks; an index built for another schema
        or embedder is refused."""
        wanted = {
            "schema_version": SCHEMA_VERSION,
            "embedder": self._embedder.model_id,
            "dimensions": str(self._embedder.dimensions),
        }
        for key, value in wanted.items():
            if key in meta and meta[key] != value:
                raise SearchIndexError(
                    f"{self._path} was built with {key}={meta[key]!r}, but this bot uses "
                    f"{value!r}; delete the file and ingest again"
                )
        return {key: value for key, value in wanted.items() if key not in meta}

    def integrity(self, within_s: float) -> tuple[Integrity, str]:
        """Whether the file is whole, as far as `within_s` seconds of checking can tell
        (`bot doctor`): its pages and b-trees, then FTS5's own check of the full-text index.
        On a connection of its own, which the check may interrupt."""
        db = self._open(busy_timeout_ms=0)
        try:
            return check_integrity(db, within_s, {"full-text index": _FTS_INTEGRITY_CHECK})
        finally:
            db.close()

    # -- writing ----------------------------------------------------------------------------

    def _replace_document(
        self, record: DocumentRecord, chunks: Sequence[Chunk], vectors: Vectors
    ) -> None:
        check_vectors(chunks, vectors, self._embedder.dimensions)
        rows = [
            (
                c.chunk_id,
                c.doc_id,
                c.source,
                c.title,
                c.heading,
                c.url,
                c.text,
                c.position,
                int(c.learned),
                _KEYWORD_SEPARATOR.join(c.keywords),
                np.asarray(v, dtype=np.float32).tobytes(),
            )
            for c, v in zip(chunks, vectors, strict=True)
        ]
        with self._write() as db:
            db.execute("DELETE FROM chunks WHERE doc_id = ?", (record.doc_id,))
            db.executemany(
                "INSERT INTO chunks (chunk_id, doc_id, source, title, heading, url, text,"
                " position, learned, keywords, embedding) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                rows,
            )
            db.execute(
                "INSERT OR REPLACE INTO documents"
                " (doc_id, source, title, url, checksum, chunk_count, updated_at)"
                " VALUES (?,?,?,?,?,?,?)",
                (
                    record.doc_id,
                    record.source,
                    record.title,
                    record.url,
                    record.checksum,
                    len(chunks),
                    time.time(),
                ),
            )

    def _delete_document(self, doc_id: str) -> int:
        with self._write() as db:
            deleted = db.execute("DELETE FROM chunks WHERE doc_id = ?", (doc_id,)).rowcount
            db.execute("DELETE FROM documents WHERE doc_id = ?", (doc_id,))
        return int(deleted)

    async def replace_document(
        self, record: DocumentRecord, chunks: Sequence[Chunk], vectors: Vectors
    ) -> None:
        await self._in_thread(self._replace_document, record, chunks, vectors)

    async def write_documents(self, writes: Sequence[DocumentWrite]) -> dict[str, str]:
        """One transaction per document, so a failure never takes its neighbours with it."""
        failed: dict[str, str] = {}
        for w in writes:
            try:
                await self.replace_document(w.record, w.chunks, w.vectors)
            except (ValueError, sqlite3.Error) as exc:
                failed[w.record.doc_id] = str(exc)
        return failed

    async def delete_document(self, doc_id: str) -> int:
        return await self._in_thread(self._delete_document, doc_id)

    # -- reading ----------------------------------------------------------------------------

    def _documents(self) -> dict[str, DocumentRecord]:
        rows = self._reader().execute(
            "SELECT doc_id, source, title, url, checksum, chunk_count FROM documents"
        )
        return {r[0]: DocumentRecord(*r) for r in rows}

    async def documents(self) -> dict[str, DocumentRecord]:
        return await self._in_thread(self._documents)

    def _stats(self) -> IndexStats:
        db = self._reader()
        stats = IndexStats()
        stats.documents = int(db.execute("SELECT count(*) FROM documents").fetchone()[0])
        for source, count, learned in db.execute(
            "SELECT source, count(*), sum(learned) FROM chunks GROUP BY source"
        ):
            stats.sources[source] = int(count)
            stats.chunks += int(count)
            stats.learned_chunks += int(learned or 0)
        return stats

    async def stats(self) -> IndexStats:
        return await self._in_thread(self._stats)

    def _document_frequencies(self, db: sqlite3.Connection, terms: list[str]) -> dict[str, int]:
        """How many chunks contain each term, cached until the next write."""
        generation = int(
            db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0]
        )
        with self._df_lock:
            if self._df_cache[0] != generation:
                chunks = int(db.execute("SELECT count(*) FROM chunks").fetchone()[0])
                self._df_cache = (generation, chunks, {})
            cache = self._df_cache[2]
            missing = [t for t in terms if t not in cache]
        found = {
            t: int(
                db.execute(
                    "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (f'"{t}"',)
                ).fetchone()[0]
            )
            for t in missing
        }
        with self._df_lock:
            if self._df_cache[0] == generation:
                self._df_cache[2].update(found)
        return {t: cache.get(t, found.get(t, 0)) for t in terms}

    def _idfs(self, db: sqlite3.Connection, terms: list[str]) -> dict[str, float]:
        """Each term's idf as FTS5's bm25() computes it (its floor included)."""
        frequencies = self._document_frequencies(db, terms)
        chunks = self._df_cache[1]
        return {
            t: max(math.log((chunks - n + 0.5) / (n + 0.5)), FTS5_IDF_FLOOR)
            for t, n in frequencies.items()
        }

    def _bm25_side(self, query: str, filters: SearchFilters, limit: int) -> list[Ranked]:
        db = self._reader()
        asked = terms = query_terms(query)
        budget = self._settings.bm25_max_postings
        if terms and budget:
            terms = within_postings_budget(terms, self._document_frequencies(db, terms), budget)
        if not terms:
            return []
        w = self._settings.bm25_columns
        where, params = _filter_sql(filters)
        # Without filters, no join: FTS5 alone ranks more than twice as fast.
        rows = db.execute(
            "SELECT rowid, bm25(chunks_fts, ?, ?, ?, ?) AS s FROM chunks_fts"  # noqa: S608 (fixed SQL fragments, values bound)
            f" WHERE chunks_fts MATCH ? {where} ORDER BY s LIMIT ?",
            (w.title, w.heading, w.text, w.keywords, fts_or_expression(terms), *params, limit),
        ).fetchall()
        # FTS5's bm25() is negative, lower is better; flip it so larger means better everywhere.
        ranked = [(int(r[0]), -float(r[1])) for r in rows]
        return [Ranked(str(row), score) for row, score in self._rescored(db, asked, terms, ranked)]

    def _rescored(
        self,
        db: sqlite3.Connection,
        asked: list[str],
        kept: list[str],
        ranked: list[tuple[int, float]],
    ) -> list[tuple[int, float]]:
        """BM25's first `proximity_candidates` re-scored, in one reading of their tokens: by
        how closely the query's neighbouring words stand in them (`proximity`), and by the
        terms the postings budget left out of the query (`left_out`)."""
        s = self._settings
        proximity = bool(s.proximity_weight) and len(kept) > 1
        left_out = [t for t in asked if t not in kept] if s.rescore_left_out_terms else []
        if not ranked or not (proximity or left_out):
            return ranked
        idf = self._idfs(db, asked)
        tokens = dict(zip(asked, query_tokens(db, asked), strict=True))
        pairs = pair_tokens([(tokens[t], idf[t]) for t in kept]) if proximity else {}
        phrases = [(tokens[t], idf[t]) for t in dict.fromkeys(left_out)]
        wanted = {t for pair in pairs for t in pair} | {t for p, _ in phrases for t in p}
        if not wanted:
            return ranked
        rows = [row for row, _ in ranked[: s.proximity_candidates]]
        at = positions(db, rows, wanted)
        extra = {
            row: s.proximity_weight * score
            for row, score in proximity_scores(
                pairs, at, s.bm25_columns, s.proximity_window
            ).items()
        }
        if phrases:
            again = left_out_scores(
                phrases, at, lengths(db, rows), average_length(db), s.bm25_columns
            )
            for row, score in again.items():
                extra[row] = extra.get(row, 0.0) + score
        return sorted(
            ((row, score + extra.get(row, 0.0)) for row, score in ranked), key=lambda hit: -hit[1]
        )

    async def passages(self, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        return await self._in_thread(self._passages, list(dict.fromkeys(chunk_ids)))

    def _passages(self, chunk_ids: list[str]) -> dict[str, Chunk]:
        found: dict[str, Chunk] = {}
        for start in range(0, len(chunk_ids), IDS_PER_QUERY):
            batch = chunk_ids[start : start + IDS_PER_QUERY]
            marks = ",".join("?" * len(batch))
            rows = self._reader().execute(
                f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE chunk_id IN ({marks})",  # noqa: S608
                batch,
            )
            found.update((c.chunk_id, c) for c in map(_chunk, rows))
        return found

    def _documents_by_id(self, keys: list[str]) -> dict[str, str]:
        """Each candidate's document, for the per-document limit: the key column alone, by
        primary key, in batches well under SQLite's variable limit."""
        db = self._reader()
        ids = [int(key) for key in keys]
        found: dict[str, str] = {}
        for start in range(0, len(ids), IDS_PER_QUERY):
            batch = ids[start : start + IDS_PER_QUERY]
            marks = ",".join("?" * len(batch))
            rows = db.execute(
                f"SELECT id, doc_id FROM chunks WHERE id IN ({marks})",  # noqa: S608 (placeholders)
                batch,
            )
            found.update((str(r[0]), r[1]) for r in rows)
        return found

    def _chunks_by_id(self, ids: list[int]) -> dict[int, Chunk]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self._reader().execute(
            f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE id IN ({marks})",  # noqa: S608 (placeholders)
            ids,
        )
        return {r[0]: _chunk(r) for r in rows}

    async def _run(
        self, r: SearchRequest, vector: asyncio.Future[Vectors] | None
    ) -> list[SearchHit]:
        """Both sides at once, each in a worker thread of its own: the vector side starts when
        the query's embedding is ready, not when the lexical side (ranking meanwhile) is done,
        so a hybrid search costs the slower side rather than both in a row."""

        async def nearest(vector: asyncio.Future[Vectors]) -> list[Ranked]:
            return await self._in_thread(self._vectors.ranked, await vector, r.filters, r.limit)

        bm25, ranked = await asyncio.gather(
            self._in_thread(self._bm25_side, r.query, r.filters, r.limit)
            if r.mode is not SearchMode.VECTOR
            else no_candidates(),
            nearest(vector) if vector is not None else no_candidates(),
        )
        return await self._in_thread(self._fused, r, bm25, ranked)

    def _fused(self, r: SearchRequest, bm25: list[Ranked], vector: list[Ranked]) -> list[SearchHit]:
        per_document = self._settings.max_passages_per_document
        fused = limited(
            fuse(bm25, vector, r, self._settings), r.k, per_document, self._documents_by_id
        )
        chunks = self._chunks_by_id([int(f.key) for f in fused])
        return fused_hits(fused, {str(i): chunk for i, chunk in chunks.items()})

    async def refresh(self) -> None:
        """After a run of writes: the approximate vector graph saved up to date (or dropped
        below its size threshold), so the next search does not replay the run."""
        await self._in_thread(self._vectors.refresh)

    async def rebuild_vectors(self, on_progress: Callable[[int, int], None]) -> int:
        """The vector graph built again from every stored vector (`bot index reindex`)."""
        return await self._in_thread(self._vectors.rebuild, on_progress)

    def vector_side(self) -> str:
        return self._vectors.describe()

    @property
    def graph_path(self) -> Path:
        """The approximate vector graph's file, beside the database."""
        return self._vectors.graph_path

    def vector_plan(self, chunks: int) -> str:
        return self._vectors.plan(chunks)

    async def _in_thread(self, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`work` in a worker thread, known to `close` while it uses a connection."""
        return await asyncio.to_thread(self._in_flight.run, partial(work, *args, **kwargs))

    async def close(self) -> None:
        """Once no worker thread is inside a connection any more (`InFlight`): statements
        still running are interrupted first, so a search cancelled at shutdown ends at once."""
        self._in_flight.close()
        # Again and again until every thread has left: a thread between entering and starting
        # its statement misses an interrupt (SQLite clears it when a first statement starts).
        while True:
            with self._connections_lock:
                for db in self._connections:
                    db.interrupt()
            if await asyncio.to_thread(self._in_flight.wait_idle, _INTERRUPT_AGAIN_S):
                break
        with self._connections_lock:
            for db in self._connections:
                # An interrupt that found no statement stays set, and would interrupt the
                # checkpoint that closing runs, leaving the WAL behind: a statement clears it.
                with contextlib.suppress(sqlite3.Error):
                    db.execute("SELECT 1").fetchall()
                db.close()
            self._connections.clear()


def _filter_sql(filters: SearchFilters) -> tuple[str, list[object]]:
    """The filters as a condition on the FTS table's rowid (a subquery on `chunks`)."""
    clauses, params = filter_clauses(filters)
    if not clauses:
        return "", params
    subquery = f"SELECT id FROM chunks WHERE {' AND '.join(clauses)}"  # noqa: S608 (fixed clauses)
    return f" AND rowid IN ({subquery})", params


def _chunk(row: Sequence[Any]) -> Chunk:
    """A row of `CHUNK_COLUMNS` (its first column, the row id, is not the chunk's)."""
    return Chunk(
        chunk_id=row[1],
        doc_id=row[2],
        source=row[3],
        title=row[4],
        heading=row[5],
        url=row[6],
        text=row[7],
        position=row[8],
        learned=bool(row[9]),
        keywords=tuple(k for k in row[10].split(_KEYWORD_SEPARATOR) if k),
    )
