"""Fusion of the BM25 and vector rankings: reciprocal rank fusion, or normalised scores.

Done in our code, not the search engine's: Elasticsearch's own `rrf` retriever needs a paid
licence, and one implementation keeps both backends' results identical in shape and order.

RRF sees only ranks; score fusion also sees how far ahead a side's first hit is of its second,
which is what it measured better on both benchmark sets (BENCHMARKS.md, "Fusion"). Each side's
scores are normalised over that side's own candidate list (z-scores, or min-max), so BM25's
unbounded scale and cosine's narrow one weigh alike; a passage one side did not return gets that
side's lowest normalised score.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

Normalisation = Literal["zscore", "minmax"]


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
    """score(d) = sum over sides of weight / (k + rank)."""
    fused = _both_sides(bm25, vector)
    for entry in fused:
        if entry.bm25_rank is not None:
            entry.score += bm25_weight / (k + entry.bm25_rank)
        if entry.vector_rank is not None:
            entry.score += vector_weight / (k + entry.vector_rank)
    return _ordered(fused)


def score_fusion(
    bm25: Sequence[Ranked],
    vector: Sequence[Ranked],
    *,
    vector_share: float,
    normalisation: Normalisation,
) -> list[Fused]:
    """score(d) = (1 - share) * bm25_norm(d) + share * vector_norm(d), each side normalised
    over its own list; a side that did not return d counts its list's lowest value."""
    bm25_norm, bm25_floor = normalised(bm25, normalisation)
    vector_norm, vector_floor = normalised(vector, normalisation)
    fused = _both_sides(bm25, vector)
    for entry in fused:
        entry.score = (1 - vector_share) * bm25_norm.get(entry.key, bm25_floor) + (
            vector_share * vector_norm.get(entry.key, vector_floor)
        )
    return _ordered(fused)


def normalised(
    side: Sequence[Ranked], normalisation: Normalisation
) -> tuple[dict[str, float], float]:
    """Each key's normalised score on this side, and the side's lowest (0 for an empty side)."""
    values = _NORMALISE[normalisation]([r.score for r in side])
    scores = dict(zip((r.key for r in side), values, strict=True))
    return scores, min(scores.values(), default=0.0)


def _both_sides(bm25: Sequence[Ranked], vector: Sequence[Ranked]) -> list[Fused]:
    """One entry per key with both sides' ranks and raw scores."""
    fused: dict[str, Fused] = {}
    for rank, item in enumerate(bm25, start=1):
        entry = fused.setdefault(item.key, Fused(item.key))
        entry.bm25_rank, entry.bm25_score = rank, item.score
    for rank, item in enumerate(vector, start=1):
        entry = fused.setdefault(item.key, Fused(item.key))
        entry.vector_rank, entry.vector_score = rank, item.score
    return list(fused.values())


def _ordered(fused: list[Fused]) -> list[Fused]:
    """Best score first; ties (common with RRF's equal weights: ranks (1, 3) and (3, 1) sum
    alike) go to the better BM25 rank, then the better vector rank. BM25 first measured better
    than vector first on both benchmark sets, so it is a rule here, not a sort's accident."""
    return sorted(
        fused,
        key=lambda f: (
            -f.score,
            f.bm25_rank if f.bm25_rank is not None else math.inf,
            f.vector_rank if f.vector_rank is not None else math.inf,
        ),
    )


def _zscores(scores: list[float]) -> list[float]:
    if len(scores) < 2:
        return [0.0] * len(scores)
    mean, spread = statistics.fmean(scores), statistics.pstdev(scores)
    return [(x - mean) / spread if spread else 0.0 for x in scores]


def _minmax(scores: list[float]) -> list[float]:
    if not scores:
        return []
    low, high = min(scores), max(scores)
    return [(x - low) / (high - low) if high > low else 1.0 for x in scores]


_NORMALISE: dict[Normalisation, Callable[[list[float]], list[float]]] = {
    "zscore": _zscores,
    "minmax": _minmax,
}
