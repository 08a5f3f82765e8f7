"""Term proximity on the embedded index's lexical side: BM25's candidates re-scored by how
closely the query's neighbouring words stand in them (BENCHMARKS.md, "Term proximity, shipped").

BM25 scores each query word on its own: a passage naming "vitamin", "D" and "deficiency" in
three unrelated sentences ranks with one that says "vitamin D deficiency". Each pair of
neighbouring query tokens counts where the second stands at most `search.proximity_window`
positions after the first, in one column (the query has lost its stop words, so "effect of
vitamin" still counts for effect-vitamin). The count, column-weighted as FTS5 weighs the
columns, is scored as BM25 scores a term, with the two tokens' idfs summed (as Lucene scores a
phrase) and no length normalisation; `search.proximity_weight` of it joins the candidate's
BM25 score. Only BM25's first `search.proximity_candidates` are re-scored, so the cost does
not grow with the index (re-scoring all 100 candidates ranks the benchmark sets the same).

The candidates' token positions come from `candidates`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from itertools import pairwise

from core.backends.sqlite.candidates import Positions, column_weights
from core.backends.sqlite.left_out import FTS5_K1
from core.config import Bm25Weights


def pair_tokens(terms: Sequence[tuple[Sequence[str], float]]) -> dict[tuple[str, str], float]:
    """The query's pairs of neighbouring tokens, each with the sum of its two terms' idfs;
    `terms`: each term's tokens with the term's idf, in the query's order."""
    tokens = [(token, idf) for term_tokens, idf in terms for token in term_tokens]
    return {(a, b): ia + ib for (a, ia), (b, ib) in pairwise(tokens) if a != b}


def proximity_scores(
    pairs: dict[tuple[str, str], float], at: Positions, columns: Bm25Weights, window: int
) -> dict[int, float]:
    """Each candidate row's pair score (rows without a pair: absent)."""
    weights = column_weights(columns)
    scores: dict[int, float] = defaultdict(float)
    for (first, second), pair_idf in pairs.items():
        counts: dict[int, float] = defaultdict(float)
        seconds = at.get(second, {})
        for (row, column), offsets in at.get(first, {}).items():
            if after := seconds.get((row, column)):
                near = sum(1 for o in offsets for d in range(1, window + 1) if o + d in after)
                counts[row] += weights[column] * near
        for row, count in counts.items():
            if count:
                scores[row] += pair_idf * count * (FTS5_K1 + 1) / (count + FTS5_K1)
    return dict(scores)
