"""Term proximity on the lexical side: would passages where the query's words stand together
rank better? (BENCHMARKS.md, "Fusion and the other cheap levers".)

BM25 scores each query term on its own, so "vitamin D deficiency" ranks a passage that names
vitamins, D and deficiencies in three unrelated sentences as high as one that says "vitamin D
deficiency". The sequential dependence model (Metzler and Croft, 2005) adds the query's
neighbouring term pairs as evidence; in BM25 form each pair is a pseudo-term, with its own
document frequency and count, scored by the same formula:

- **ordered**: the second term within `ORDERED` positions after the first (the query side has
  dropped its stop words, so "effect of vitamin" is the pair effect-vitamin two positions
  apart);
- **unordered**: the two within `WINDOW` positions of each other, either way round.

A pair's count is column-weighted as the terms' are. Only BM25's own candidates are re-scored,
each by its terms' score plus λ times its pairs' score, and re-sorted: what either backend can
do cheaply (Elasticsearch: a `rescore` with phrase queries; SQLite: the candidates' token
positions). A pair's idf is its own document frequency over the index (exact; a search would
need one more count per pair), or the sum of its two tokens' idfs (as Lucene scores a phrase,
and as a search that reads only its candidates can), with BM25's length normalisation or none.

BM25 is FTS5's formula at FTS5's constants over FTS5's own postings and positions
(`bench.bm25_params`), then fused with the vector side as shipped. The choice is made on
SciFact **train**; SciFact test and the docs set only report it, with a paired bootstrap
interval of the test gain. Needs `bench.relevance_floor`'s indices; a few minutes.

    python -m bench.proximity
"""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from bench.bm25_params import (
    SHIPPED,
    WEIGHTS,
    Lexical,
    Lists,
    Postings,
    Run,
    prepared,
    sweep,
)
from core.search.fusion import Ranked

ORDERED = 3  # positions: the second term 1 to 3 after the first
WINDOW = 8  # positions either way, SDM's #uw8
KINDS = ("ordered", "unordered")
LAMBDAS = (0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
Scoring = tuple[str, float]  # the pair's idf ("pair" or "terms"), BM25's b for the pair
EXACT: Scoring = ("pair", SHIPPED[1])
CANDIDATES_ONLY: tuple[Scoring, ...] = (("terms", SHIPPED[1]), ("terms", 0.0))


def pair_postings(lexical: Lexical, first: str, second: str, kind: str) -> Postings:
    """One query pair as a pseudo-term: its column-weighted count in each passage."""
    near = lexical.at.get(second, {})
    counts: dict[int, float] = defaultdict(float)
    for (row, column), offsets in lexical.at.get(first, {}).items():
        others = near.get((row, column))
        if not others:
            continue
        if kind == "ordered":
            count = sum(1 for o in offsets for d in range(1, ORDERED + 1) if o + d in others)
        else:
            count = sum(1 for o in offsets for p in others if 0 < abs(p - o) <= WINDOW)
        if count:
            counts[row] += WEIGHTS[column] * count
    return np.fromiter(counts, np.int64), np.fromiter(counts.values(), np.float64)


@dataclass
class Pair:
    """One pair of neighbouring query tokens: its postings, and the idf of each token's term."""

    postings: Postings
    token_idfs: tuple[float, float]


def query_pairs(lexical: Lexical, text: str, kind: str) -> list[Pair]:
    """The pairs of neighbouring tokens among the query terms the search keeps, each token
    with its term's idf (a term may be more than one token: `api_key`), as the search has."""
    tokens = [
        (token, term_idf(lexical, term))
        for term in lexical.kept_terms(text)
        for token in lexical.tokens[term]
    ]
    pairs = {(a, b): (ia, ib) for (a, ia), (b, ib) in pairwise(tokens) if a != b}
    return [Pair(pair_postings(lexical, a, b, kind), idfs) for (a, b), idfs in pairs.items()]


def term_idf(lexical: Lexical, term: str) -> float:
    """FTS5's idf of one query term (its floor included)."""
    n = len(lexical.term_postings(term)[0])
    return max(math.log((lexical.passages - n + 0.5) / (n + 0.5)), 1e-6)


def pair_scores(lexical: Lexical, pairs: list[Pair], idf: str, b: float) -> npt.NDArray[np.float64]:
    """BM25 of the pairs as pseudo-terms: with the pair's own idf (its document frequency over
    the index), or with the sum of its two tokens' (as Lucene scores a phrase, and as a search
    that sees only its candidates can); with BM25's length normalisation `b`, or none (0)."""
    if idf == "pair":
        return lexical.scores([p.postings for p in pairs], SHIPPED[0], b)
    k1 = SHIPPED[0]
    score = np.zeros(lexical.size)
    for pair in pairs:
        rows, f = pair.postings
        if len(rows):
            norm = k1 * (1 - b + b * lexical.length[rows] / lexical.average)
            score[rows] += sum(pair.token_idfs) * f * (k1 + 1) / (f + norm)
    return score


def proximity_ranked(
    lexical: Lexical, terms: list[Postings], pairs: list[Pair], weight: float, scoring: Scoring
) -> list[Ranked]:
    """BM25's own candidates, re-scored with the pairs' evidence and re-sorted."""
    base = lexical.scores(terms, *SHIPPED)
    extra = pair_scores(lexical, pairs, *scoring) * weight
    candidates = lexical.ranked(base)
    rescored = [Ranked(r.key, r.score + float(extra[lexical.row_of[r.key]])) for r in candidates]
    return sorted(rescored, key=lambda r: -r.score)


def grid() -> list[tuple[str, float, Scoring]]:
    """The pair's own idf with BM25's length normalisation for both kinds of pair; the
    variants a search can compute from its candidates alone for ordered pairs."""
    shipped = [("none", 0.0, EXACT)]
    exact = [(kind, w, EXACT) for kind in KINDS for w in LAMBDAS]
    local = [("ordered", w, s) for s in CANDIDATES_ONLY for w in LAMBDAS]
    return shipped + exact + local


async def main() -> None:
    runs = await prepared()
    pairs = {
        (label, kind): [query_pairs(run.lexical, text, kind) for text in run.data.queries.values()]
        for label, run in runs.items()
        for kind in KINDS
    }

    def rankings(kind: str, weight: float, scoring: Scoring) -> Callable[[str, Run], Lists]:
        def ranked(label: str, run: Run) -> Lists:
            queries = pairs.get((label, kind), [[]] * len(run.postings))
            return [
                proximity_ranked(run.lexical, terms, pair, weight, scoring)
                for terms, pair in zip(run.postings, queries, strict=True)
            ]

        return ranked

    sweep(
        runs,
        (
            (
                "shipped" if kind == "none" else f"{kind}, idf={idf}, b={b}, λ={weight}",
                rankings(kind, weight, (idf, b)),
            )
            for kind, weight, (idf, b) in grid()
        ),
        "proximity.json",
    )


if __name__ == "__main__":
    asyncio.run(main())
