"""Embeddings kept by content hash, so unchanged text is never embedded twice.

It is its own SQLite file, apart from any index: a fresh index (a benchmark, a reindex) reuses
every vector already computed for the same model and the same text.

Only a saving, never needed: a command never fails because of it. A damaged file is moved
aside (`<name>.corrupt-<time>`, logged) and a new one started; one that can't be opened or
written (a read-only folder) is left alone, logged once, and the command goes on computing
what it would have read.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import numpy.typing as npt

from core.sqlite import DamagedFile, UnusableFile, connect_store, set_aside, transaction

log = logging.getLogger(__name__)

# SQLite caps host parameters per statement (32766 since 3.32); stay well below it.
_LOOKUP_BATCH = 500
# Several ingests (or an ingest and a bot) may write vectors at once: a writer waits its turn.
_BUSY_TIMEOUT_MS = 10_000
# Never shown to the user: a damaged cache is set aside, not reported.
_IF_DAMAGED = "the bot moves it aside and starts a new one"


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    def __init__(self, path: Path, model_id: str, dimensions: int) -> None:
        self._path = path
        self._model_id = model_id
        self._dimensions = dimensions
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        with self._lock, self._kept():
            self._db = self._opened()

    def _opened(self) -> sqlite3.Connection:
        db = connect_store(self._path, _BUSY_TIMEOUT_MS, if_damaged=_IF_DAMAGED, rebuildable=True)
        try:
            db.execute(
                "CREATE TABLE IF NOT EXISTS embeddings ("
                " model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL,"
                " PRIMARY KEY (model, hash)) WITHOUT ROWID"
            )
        except BaseException:
            db.close()
            raise
        return db

    @contextmanager
    def _kept(self) -> Iterator[None]:
        """The block's failure of the file itself ends the block, not the command (callers
        hold the lock). A damaged file is replaced by a new one, once: if that fails too, or
        the file can't be used at all, the cache is off for the rest of the process."""
        try:
            yield
        except DamagedFile as exc:
            self._close()
            if set_aside(self._path, str(exc.__cause__ or exc)) is not None:
                try:
                    self._db = self._opened()
                except UnusableFile as again:
                    self._off(again)
        except UnusableFile as exc:
            self._off(exc)

    def _off(self, exc: UnusableFile) -> None:
        self._close()
        log.warning("embedding cache off, embeddings are computed again as needed: %s", exc)

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def get_many(self, hashes: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        found: dict[str, npt.NDArray[np.float32]] = {}
        unique = list(dict.fromkeys(hashes))
        with self._lock, self._kept():
            for start in range(0, len(unique), _LOOKUP_BATCH):
                if self._db is None:
                    break
                part = unique[start : start + _LOOKUP_BATCH]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT hash, vector FROM embeddings WHERE model = ? AND hash IN ({marks})",  # noqa: S608 (placeholders only)
                    (self._model_id, *part),
                ).fetchall()
                for digest, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape[0] == self._dimensions:
                        found[digest] = vector
        return found

    def put_many(self, items: Iterable[tuple[str, npt.NDArray[np.float32]]]) -> None:
        rows = [
            (self._model_id, digest, np.asarray(vec, dtype=np.float32).tobytes())
            for digest, vec in items
        ]
        with self._lock, self._kept():
            if not rows or self._db is None:
                return
            with transaction(self._db):
                self._db.executemany(
                    "INSERT OR REPLACE INTO embeddings (model, hash, vector) VALUES (?, ?, ?)",
                    rows,
                )

    def count(self) -> int:
        with self._lock, self._kept():
            if self._db is None:
                return 0
            row = self._db.execute(
                "SELECT count(*) FROM embeddings WHERE model = ?", (self._model_id,)
            ).fetchone()
            return int(row[0])
        return 0

    def close(self) -> None:
        with self._lock:
            self._close()
