"""Checks every backend applies to a search and a write the same way: the query's length and
k, and vectors of the embedder's dimensions."""

from __future__ import annotations

from collections.abc import Sequence

from core.domain.documents import (
    Chunk,
    Vectors,
)

MAX_K = 10_000


def checked_query(query: str, k: int, max_query_chars: int) -> str:
    """The query as every backend searches it: cut to length; `k` within bounds or an error."""
    if not 1 <= k <= MAX_K:
        raise ValueError(f"k must be between 1 and {MAX_K}, got {k}")
    return query[:max_query_chars]


def check_vectors(chunks: Sequence[Chunk], vectors: Vectors, dimensions: int) -> None:
    if len(chunks) != len(vectors):
        raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
    if len(chunks) and vectors.shape[1] != dimensions:
        raise ValueError(f"vectors have {vectors.shape[1]} dimensions, index expects {dimensions}")
