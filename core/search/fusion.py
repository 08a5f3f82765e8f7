"""Reciprocal rank fusion of the BM25 and vector rankings.

Done in our code, not the search engine's: Elasticsearch's own `rrf` retriever needs a paid
licence, and one implementation keeps both backends' results identical in shape and order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Ranked:
    key: str
    score: float


@dataclass(slots=True)
class Fused:
    key: str
    score: float = 0.0
    bm25_rank: int | None = None
    bm25_score: float | None = None
    vector_rank: int | None = None
    vector_score: float | None = None


def reciprocal_rank_fusion(
    bm25: Sequence[Ranked],
    vector: Sequence[Ranked],
    *,
    k: int,
    bm25_weight: float,
    vector_weight: float,
) -> list[Fused]:
    """score(d) = sum over sides of weight / (k + rank); ties keep BM25's order first."""
    fused: dict[str, Fused] = {}
    for rank, item in enumerate(bm25, start=1):
        entry = fused.setdefault(item.key, Fused(item.key))
        entry.bm25_rank, entry.bm25_score = rank, item.score
        entry.score += bm25_weight / (k + rank)
    for rank, item in enumerate(vector, start=1):
        entry = fused.setdefault(item.key, Fused(item.key))
        entry.vector_rank, entry.vector_score = rank, item.score
        entry.score += vector_weight / (k + rank)
    return sorted(fused.values(), key=lambda f: -f.score)
