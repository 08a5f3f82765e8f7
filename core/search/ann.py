"""An approximate nearest-neighbour graph for vector sides too large to scan.

usearch's HNSW graph over quantised vectors (int8 by default: a quarter of float32's memory):
the graph proposes candidates and the caller re-scores them exactly from its own float vectors,
so the order that reaches fusion is the exact one over those candidates, and only neighbours the
graph misses altogether are lost (recall@100 is what `bench.vector_scale` measures).

The graph is one file with a JSON sidecar naming what it was built for (dimensions, model,
quantisation, connectivity) and what the caller wants to remember with it (the SQLite index
keeps its change-log position there). A file built for anything else is not loaded: it is built
again, never searched with the wrong vectors.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from usearch.index import Index

from core.config import ApproximateVectorSettings
from core.domain.documents import Vectors

log = logging.getLogger(__name__)

_METRIC = "cos"  # our vectors are unit length: cosine and inner product agree, and int8 needs cos


class ApproximateIndex:
    def __init__(self, dimensions: int, model_id: str, settings: ApproximateVectorSettings) -> None:
        self._settings = settings
        self._identity = _identity(dimensions, model_id, settings)
        self._graph = Index(
            ndim=dimensions,
            metric=_METRIC,
            dtype=settings.quantization,
            connectivity=settings.connectivity,
            expansion_add=settings.expansion_add,
            expansion_search=settings.expansion_search,
        )

    @classmethod
    def load(
        cls, path: Path, dimensions: int, model_id: str, settings: ApproximateVectorSettings
    ) -> tuple[ApproximateIndex, dict[str, Any]] | None:
        """The graph saved at `path` and what was saved with it; None when there is none, it
        cannot be read, or it was built for other vectors or settings."""
        meta = cls.saved_meta(path, dimensions, model_id, settings)
        if meta is None:
            return None
        try:
            graph = Index.restore(str(path), view=False)
        except (OSError, ValueError, RuntimeError) as exc:  # usearch: "Not a dense USearch index!"
            log.warning("can't read the vector graph at %s (%s): rebuilding", path, exc)
            return None
        if graph is None or graph.ndim != dimensions:
            return None
        graph.expansion_search = settings.expansion_search  # type: ignore[misc]  # has a setter
        index = cls(dimensions, model_id, settings)
        index._graph = graph
        return index, meta

    @staticmethod
    def saved_meta(
        path: Path, dimensions: int, model_id: str, settings: ApproximateVectorSettings
    ) -> dict[str, Any] | None:
        """What was saved with the graph at `path`, if it was built for these vectors and
        settings; None otherwise (absent, unreadable, or built for something else)."""
        if not path.is_file():  # a sidecar without its graph speaks for nothing
            return None
        try:
            sidecar = json.loads(_sidecar(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("can't read %s (%s): the vector graph will be rebuilt", path, exc)
            return None
        if not isinstance(sidecar, dict) or sidecar.get("identity") != _identity(
            dimensions, model_id, settings
        ):
            return None
        meta = sidecar.get("meta")
        return dict(meta) if isinstance(meta, dict) else None

    def save(self, path: Path, meta: dict[str, Any]) -> None:
        """The graph, then its sidecar, each written whole or not at all (a temporary file
        renamed over the old one). A crash between the two leaves an older sidecar beside a
        newer graph, which callers must treat as the older state (replaying is idempotent)."""
        _replace(path, lambda tmp: self._graph.save(str(tmp)))
        body = json.dumps({"identity": self._identity, "meta": meta})
        _replace(_sidecar(path), lambda tmp: tmp.write_text(body, encoding="utf-8"))

    @staticmethod
    def delete(path: Path) -> None:
        for file in (path, _sidecar(path)):
            file.unlink(missing_ok=True)

    def __len__(self) -> int:
        return len(self._graph)

    def add(self, keys: npt.NDArray[np.int64], vectors: Vectors) -> None:
        """Add keys the graph does not hold (usearch refuses duplicates: remove first)."""
        if len(keys):
            self._graph.add(keys.astype(np.uint64), vectors, threads=self._settings.build_threads)

    def remove(self, keys: npt.NDArray[np.int64]) -> None:
        if len(keys) and len(self._graph):
            self._graph.remove(keys.astype(np.uint64))

    def candidates(self, query: Vectors, count: int) -> npt.NDArray[np.int64]:
        """Keys of about the `count` nearest vectors, nearest first (by the quantised
        vectors: re-score them before trusting the order). One thread: a search is
        sub-millisecond, and the bot's concurrency is across searches."""
        if not len(self._graph):
            return np.empty(0, dtype=np.int64)
        found = self._graph.search(query, min(count, len(self._graph)), threads=1)
        return np.asarray(found.keys, dtype=np.int64)

    @property
    def memory_bytes(self) -> int:
        return int(self._graph.memory_usage)


def _identity(
    dimensions: int, model_id: str, settings: ApproximateVectorSettings
) -> dict[str, object]:
    """What a saved graph must have been built for to be searched with these settings."""
    return {
        "dimensions": dimensions,
        "model": model_id,
        "quantization": settings.quantization,
        "connectivity": settings.connectivity,
    }


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def _replace(path: Path, write: Callable[[Path], object]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
