"""The terms the postings budget left out of the BM25 query, scored back on its candidates.

`search.bm25_max_postings` bounds a search's work by leaving out the query's commonest terms.
The budget is a count, so it leaves out more as the index grows: on SciFact copied to 50,000
passages the shipped 10,000 leaves out what 2,126 does on SciFact itself (BENCHMARKS.md, "The
postings budget at 50,000 passages"). Those terms still carry ranking signal among the
passages the rarer terms found ("vitamin D *deficiency*"). So BM25's first candidates get their
left-out terms' BM25 back, by FTS5's own formula (fts5_aux.c: each term's idf, its
column-weighted count, the row's length against the average): their score is then what
`bm25()` would give them over every term. Passages that only the left-out terms match are
still not found: that is what the budget saves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from core.backends.sqlite.candidates import Positions, column_weights
from core.config import Bm25Weights

FTS5_K1 = 1.2  # FTS5's bm25() constants (fts5_aux.c)
FTS5_B = 0.75
FTS5_IDF_FLOOR = 1e-6  # the floor under a term's idf (a term in over half the rows)


def left_out_scores(
    phrases: Sequence[tuple[Sequence[str], float]],
    at: Positions,
    lengths: Mapping[int, int],
    average: float,
    columns: Bm25Weights,
) -> dict[int, float]:
    """Each row's BM25 for the `phrases` (a term's tokens, with the term's idf), over the rows
    in `lengths`; rows where none occurs are absent."""
    weights = column_weights(columns)
    scores: dict[int, float] = {}
    for tokens, idf in phrases:
        counts = _phrase_counts(tokens, at, weights)
        for row, count in counts.items():
            if count and row in lengths and average:
                norm = FTS5_K1 * (1 - FTS5_B + FTS5_B * lengths[row] / average)
                scores[row] = scores.get(row, 0.0) + idf * count * (FTS5_K1 + 1) / (count + norm)
    return scores


def _phrase_counts(
    tokens: Sequence[str], at: Positions, weights: Sequence[float]
) -> dict[int, float]:
    """Each row's column-weighted count of the phrase: its tokens at consecutive offsets in one
    column (a one-token term: each of its occurrences), as FTS5 counts a quoted phrase."""
    if not tokens:
        return {}
    counts: dict[int, float] = {}
    for (row, column), offsets in at.get(tokens[0], {}).items():
        following = [at.get(token, {}).get((row, column), set()) for token in tokens[1:]]
        hits = sum(
            1 for o in offsets if all(o + n in others for n, others in enumerate(following, 1))
        )
        if hits:
            counts[row] = counts.get(row, 0.0) + weights[column] * hits
    return counts
