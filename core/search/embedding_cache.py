"""Embeddings kept by content hash, so unchanged text is never embedded twice.

It is its own SQLite file, apart from any index: a fresh index (a benchmark, a reindex) reuses
every vector already computed for the same model and the same text.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from core.sqlite import connect_store, transaction

# SQLite caps host parameters per statement (32766 since 3.32); stay well below it.
_LOOKUP_BATCH = 500
# Several ingests (or an ingest and a bot) may write vectors at once: a writer waits its turn.
_BUSY_TIMEOUT_MS = 10_000


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    def __init__(self, path: Path, model_id: str, dimensions: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._model_id = model_id
        self._dimensions = dimensions
        self._lock = threading.Lock()
        self._db = connect_store(path, _BUSY_TIMEOUT_MS, rebuildable=True)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS embeddings ("
            " model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL,"
            " PRIMARY KEY (model, hash)) WITHOUT ROWID"
        )

    def get_many(self, hashes: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
        found: dict[str, npt.NDArray[np.float32]] = {}
        unique = list(dict.fromkeys(hashes))
        with self._lock:
            for start in range(0, len(unique), _LOOKUP_BATCH):
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
        if not rows:
            return
        with self._lock, transaction(self._db):
            self._db.executemany(
                "INSERT OR REPLACE INTO embeddings (model, hash, vector) VALUES (?, ?, ?)", rows
            )

    def count(self) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT count(*) FROM embeddings WHERE model = ?", (self._model_id,)
            ).fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
