"""The embedded index's vector side: an exact scan while the index is small, an approximate
graph once it is large (`search.approximate`).

Exact: every chunk's vector in one in-memory matrix, reloaded when the index's `generation`
counter (bumped by every write) has moved. For tens of thousands of chunks a product with the
query takes a few milliseconds and never misses a neighbour.

Approximate: the matrix grows by 1.5 KB per chunk and its scan linearly with it, so from
`min_chunks` on an HNSW graph of int8 vectors (`core.search.ann`) proposes candidates and
their float vectors, read from SQLite by row id, re-score them exactly. The graph lives in a file
beside the database. Keeping it true to the database, whichever process wrote:
- triggers append the row id of each inserted, deleted or re-embedded chunk to `vector_log`,
  in the writer's own transaction;
- a process brings its graph up to date by re-reading the current vector of every id logged
  since the position its graph reflects (absent: removed). That is idempotent, so a reused row
  id, a crash between the database's commit and the graph's save, or a replay from an older
  position all end in the same graph;
- the graph is saved with its position, and the log trimmed up to it, under SQLite's write lock,
  so two savers never race and no process finds the log trimmed past a saved graph.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from core.config import SearchSettings
from core.domain.documents import SearchFilters, Vectors
from core.search.ann import ApproximateIndex
from core.search.fusion import Ranked
from core.sqlite import InaccessibleFile, transaction

log = logging.getLogger(__name__)

EXACT_SCAN = "exact scan"  # the vector side below the approximate one's threshold, or without it
IDS_PER_QUERY = 500  # ids bound per statement: well under SQLite's variable limit
_LOG_HEAD = "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'vector_log'), 0)"

Progress = Callable[[int, int], None]


@dataclass(slots=True)
class _ExactTable:
    """The in-memory copy of every chunk's vector, with the columns filters need."""

    ids: npt.NDArray[np.int64]
    matrix: npt.NDArray[np.float32]
    doc_ids: npt.NDArray[np.object_]
    sources: npt.NDArray[np.object_]
    learned: npt.NDArray[np.bool_]


@dataclass(slots=True)
class _Graph:
    index: ApproximateIndex
    position: int  # the last `vector_log` entry the graph reflects
    unsaved: int = 0  # log entries applied since the file was saved


class SqliteVectors:
    def __init__(
        self,
        database: Path,
        dimensions: int,
        model_id: str,
        settings: SearchSettings,
        reader: Callable[[], sqlite3.Connection],
        write_lock: threading.Lock,
    ) -> None:
        self.graph_path = database.with_name(database.name + ".vectors")
        self._dimensions = dimensions
        self._model_id = model_id
        self._settings = settings.approximate
        self._reader = reader
        self._write_lock = write_lock
        self._lock = threading.Lock()
        self._generation = -1
        self._exact: _ExactTable | None = None
        self._graph: _Graph | None = None

    # -- searching --------------------------------------------------------------------------

    def ranked(self, query: Vectors, filters: SearchFilters, limit: int) -> list[Ranked]:
        """The `limit` nearest chunks that pass `filters`, by exact cosine, nearest first."""
        with self._lock:
            self._current()
            exact, graph = self._exact, self._graph
            candidates = None
            if graph is not None:
                factor = 1 if filters.is_empty() else self._settings.filtered_rescore_factor
                count = max(self._settings.rescore, limit) * factor
                candidates = graph.index.candidates(query, count)
        if exact is not None:
            return _scan(exact, query, filters, limit)
        if candidates is None or not len(candidates):
            return []
        ranked = _top(self._rows(filters, candidates.tolist()), query, limit)
        if len(ranked) < limit and not filters.is_empty():
            # The filter kept too few of the graph's candidates: scan what it allows.
            ranked = _top(self._rows(filters, None), query, limit)
        return ranked

    def _rows(self, filters: SearchFilters, ids: list[int] | None) -> list[tuple[int, bytes]]:
        """(id, vector) of the chunks that pass `filters`, among `ids` when given (read in
        batches of bound ids)."""
        where, params = filter_clauses(filters)
        sql = "SELECT id, embedding FROM chunks"
        if ids is None:
            return self._reader().execute(_where(sql, where), params).fetchall()
        rows: list[tuple[int, bytes]] = []
        for start in range(0, len(ids), IDS_PER_QUERY):
            batch = ids[start : start + IDS_PER_QUERY]
            clauses = [*where, f"id IN ({','.join('?' * len(batch))})"]
            rows += self._reader().execute(_where(sql, clauses), [*params, *batch]).fetchall()
        return rows

    # -- keeping up with the database -------------------------------------------------------

    def _current(self) -> None:
        """The exact table or the graph as of the database's current generation.

        The chunk count that picks between them comes from whichever is current (a caught-up
        graph holds exactly the stored chunks), not from `count(*)`, which reads the whole
        table: a third of a second at a million chunks, after every write."""
        db = self._reader()
        db.execute("BEGIN")  # one snapshot: generation, chunk count and log agree
        try:
            generation = _generation(db)
            if generation == self._generation:
                return
            if self._graph is not None:
                self._graph = self._caught_up(db, self._graph)
                chunks = len(self._graph.index)
            elif self._exact is not None:
                self._exact = _load_exact(db, self._dimensions)
                chunks = len(self._exact.ids)
            else:
                chunks = _count(db)
            if self._approximate(chunks) and self._graph is None:
                self._exact, self._graph = None, self._caught_up(db, None)
            elif not self._approximate(chunks) and self._exact is None:
                self._graph, self._exact = None, _load_exact(db, self._dimensions)
            self._generation = generation
        finally:
            db.execute("COMMIT")
        if self._graph is not None and self._graph.unsaved >= self._settings.save_after_changes:
            self._save(self._graph)

    def _approximate(self, chunks: int) -> bool:
        return self._settings.enabled and chunks >= self._settings.min_chunks

    def _caught_up(
        self, db: sqlite3.Connection, graph: _Graph | None, progress: Progress | None = None
    ) -> _Graph:
        head = int(db.execute(_LOG_HEAD).fetchone()[0])
        oldest = db.execute("SELECT min(seq) FROM vector_log").fetchone()[0]
        start = head + 1 if oldest is None else int(oldest)
        if graph is None or graph.position < start - 1:  # none yet, or the log moved past it
            graph = self._loaded()
        if graph is None or graph.position < start - 1:
            return self._built(db, head, progress)
        changed = [
            r[0]
            for r in db.execute(
                "SELECT DISTINCT id FROM vector_log WHERE seq > ? AND seq <= ?",
                (graph.position, head),
            )
        ]
        if changed:  # each changed id: out, then back in with its current vector if it has one
            graph.index.remove(np.array(changed, dtype=np.int64))
            self._add(graph, self._rows(SearchFilters(), changed))
            graph.unsaved += len(changed)
        graph.position = head
        return graph

    def _loaded(self) -> _Graph | None:
        found = ApproximateIndex.load(
            self.graph_path, self._dimensions, self._model_id, self._settings
        )
        if found is None:
            return None
        index, meta = found
        return _Graph(index, int(meta.get("position", -1)))

    def _built(self, db: sqlite3.Connection, head: int, progress: Progress | None) -> _Graph:
        total = _count(db)
        log.info("building the vector graph of %d chunks at %s", total, self.graph_path)
        graph = _Graph(
            ApproximateIndex(self._dimensions, self._model_id, self._settings), head, total
        )
        done = 0
        cursor = db.execute("SELECT id, embedding FROM chunks ORDER BY id")
        while rows := cursor.fetchmany(self._settings.build_batch):
            self._add(graph, rows)
            done += len(rows)
            if progress is not None:
                progress(done, total)
        return graph

    def _add(self, graph: _Graph, rows: list[tuple[int, bytes]]) -> None:
        if rows:
            ids, matrix = _matrix(rows, self._dimensions)
            graph.index.add(ids, matrix)

    def _save(self, graph: _Graph) -> None:
        """Save the graph and trim the log up to it, unless a newer graph is saved already.

        A graph that cannot be saved (a full disk, a read-only folder or file) fails nothing:
        it is derived data, this process keeps it in memory, the log is kept for the others,
        and the next save tries again."""
        try:
            with self._write_lock, transaction(self._reader()) as db:
                saved = self._saved_position()
                if saved is not None and saved >= graph.position:
                    graph.unsaved = 0
                    return
                try:
                    graph.index.save(self.graph_path, {"position": graph.position})
                except (OSError, RuntimeError) as exc:  # usearch reports I/O errors as these
                    log.warning("can't save the vector graph at %s: %s", self.graph_path, exc)
                    return
                db.execute("DELETE FROM vector_log WHERE seq <= ?", (graph.position,))
                graph.unsaved = 0
        except InaccessibleFile as exc:  # the database can't be written: nor its log trimmed
            log.warning("can't save the vector graph at %s: %s", self.graph_path, exc)

    def _saved_position(self) -> int | None:
        meta = ApproximateIndex.saved_meta(
            self.graph_path, self._dimensions, self._model_id, self._settings
        )
        return None if meta is None else int(meta.get("position", -1))

    # -- after a write run, and the rebuild command -----------------------------------------

    def refresh(self) -> None:
        """After a run of writes: bring the graph file up to date (so the next process to
        search loads it instead of replaying the run), or, below `min_chunks`, drop the graph
        and the log, which nobody needs."""
        with self._lock:
            db = self._reader()
            db.execute("BEGIN")
            try:
                graph = self._caught_up(db, self._graph) if self._approximate(_count(db)) else None
                self._generation = -1  # the next search re-reads the generation
            finally:
                db.execute("COMMIT")
            self._graph = graph
            if graph is not None:
                if graph.unsaved or not self.graph_path.exists():
                    self._save(graph)
                return
        with self._write_lock, transaction(self._reader()) as db:
            db.execute("DELETE FROM vector_log")
        ApproximateIndex.delete(self.graph_path)

    def rebuild(self, progress: Progress | None = None) -> int:
        """A new graph from every stored vector, saved; returns how many it holds."""
        with self._lock:
            db = self._reader()
            db.execute("BEGIN")
            try:
                graph = self._built(db, int(db.execute(_LOG_HEAD).fetchone()[0]), progress)
            finally:
                db.execute("COMMIT")
            ApproximateIndex.delete(self.graph_path)  # else a newer saved position would win
            self._save(graph)
            self._graph, self._exact, self._generation = graph, None, -1
            return len(graph.index)

    def forget(self) -> None:
        """A new database: a graph left beside it by an earlier one (deleted, damaged) holds
        that one's row ids, and its saved position could pass for this one's."""
        try:
            ApproximateIndex.delete(self.graph_path)
        except OSError as exc:  # not a file: nothing a load would take for a graph either
            log.warning("can't remove the vector graph at %s: %s", self.graph_path, exc)

    def plan(self, chunks: int) -> str:
        """Which vector side an index of `chunks` chunks searches with, read from the settings
        and the saved file alone (nothing is loaded), for `bot doctor`."""
        if not self._approximate(chunks):
            why = "off" if not self._settings.enabled else f"below {self._settings.min_chunks}"
            return f"{EXACT_SCAN} (search.approximate {why})"
        if self._saved_position() is None:
            return (
                f"graph of {self._settings.quantization} vectors, not saved yet at "
                f"{self.graph_path}: the next ingest or search builds it "
                "(`bot index rebuild-vectors` now)"
            )
        mb = self.graph_path.stat().st_size / 1e6
        return f"graph of {self._settings.quantization} vectors in {self.graph_path} ({mb:.0f} MB)"

    def describe(self) -> str:
        """Which vector side this process searches with now, for `bot index` messages."""
        with self._lock:
            if self._graph is not None:
                mb = self._graph.index.memory_bytes / 1e6
                return f"approximate ({len(self._graph.index)} vectors, {mb:.0f} MB in memory)"
            return EXACT_SCAN


def filter_clauses(filters: SearchFilters) -> tuple[list[str], list[object]]:
    """SQL conditions on `chunks` for the filters, with their bound values."""
    clauses: list[str] = []
    params: list[object] = []
    if filters.sources:
        clauses.append(f"source IN ({','.join('?' * len(filters.sources))})")
        params.extend(filters.sources)
    if filters.doc_ids:
        clauses.append(f"doc_id IN ({','.join('?' * len(filters.doc_ids))})")
        params.extend(filters.doc_ids)
    if filters.learned is not None:
        clauses.append("learned = ?")
        params.append(int(filters.learned))
    return clauses, params


def _where(sql: str, clauses: list[str]) -> str:
    return f"{sql} WHERE {' AND '.join(clauses)}" if clauses else sql


def _count(db: sqlite3.Connection) -> int:
    return int(db.execute("SELECT count(*) FROM chunks").fetchone()[0])


def _generation(db: sqlite3.Connection) -> int:
    return int(db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])


def _matrix(
    rows: list[tuple[int, bytes]], dimensions: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
    return ids, matrix.reshape(len(rows), dimensions)


def _top(rows: list[tuple[int, bytes]], query: Vectors, limit: int) -> list[Ranked]:
    if not rows:
        return []
    ids, matrix = _matrix(rows, len(query))
    scores = matrix @ query
    return _best(ids, scores, limit)


def _best(ids: npt.NDArray[np.int64], scores: npt.NDArray[np.float32], limit: int) -> list[Ranked]:
    limit = min(limit, len(scores))
    top = np.argpartition(-scores, limit - 1)[:limit]
    top = top[np.argsort(-scores[top], kind="stable")]
    return [Ranked(str(ids[i]), float(scores[i])) for i in top if scores[i] > -np.inf]


def _load_exact(db: sqlite3.Connection, dimensions: int) -> _ExactTable:
    rows = db.execute(
        "SELECT id, doc_id, source, learned, embedding FROM chunks ORDER BY id"
    ).fetchall()
    matrix = np.frombuffer(b"".join(r[4] for r in rows), dtype=np.float32)
    return _ExactTable(
        ids=np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)),
        matrix=matrix.reshape(len(rows), dimensions),
        doc_ids=np.array([r[1] for r in rows], dtype=object),
        sources=np.array([r[2] for r in rows], dtype=object),
        learned=np.fromiter((bool(r[3]) for r in rows), dtype=np.bool_, count=len(rows)),
    )


def _scan(table: _ExactTable, query: Vectors, filters: SearchFilters, limit: int) -> list[Ranked]:
    if not len(table.ids):
        return []
    scores = table.matrix @ query
    if not filters.is_empty():
        mask = np.ones(len(table.ids), dtype=np.bool_)
        if filters.sources:
            mask &= np.isin(table.sources, filters.sources)
        if filters.doc_ids:
            mask &= np.isin(table.doc_ids, filters.doc_ids)
        if filters.learned is not None:
            mask &= table.learned == filters.learned
        scores = np.where(mask, scores, -np.inf)
    return _best(table.ids, scores, limit)
