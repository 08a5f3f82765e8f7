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
interval of the test gain over no proximity at 3 passages per document (the search before
proximity shipped). Two choices: the best on train, and the best on train among the settings
that show the model no fewer relevant documents in its 8 passages (Shown@8) on any set than
that search did: the docs set's Shown@8 is a guard of the product's tests, and the unrestricted
choice loses there. Needs `bench.relevance_floor`'s indices; about ten minutes.

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
    SEARCH,
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
FINE_LAMBDAS = (0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.1, 0.15, 0.2)
RESCORED = 30  # BM25's first candidates re-scored, against all of them
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
    lexical: Lexical,
    terms: list[Postings],
    pairs: list[Pair],
    weight: float,
    scoring: Scoring,
    rescored: int,
) -> list[Ranked]:
    """BM25's own candidates, the first `rescored` of them re-scored with the pairs' evidence
    and re-sorted (the evidence only adds, so they stay ahead of the rest)."""
    base = lexical.scores(terms, *SHIPPED)
    extra = pair_scores(lexical, pairs, *scoring) * weight
    candidates = lexical.ranked(base)
    first = [Ranked(r.key, r.score + float(extra[lexical.row_of[r.key]])) for r in candidates]
    return sorted(first[:rescored], key=lambda r: -r.score) + candidates[rescored:]


@dataclass(frozen=True)
class Setting:
    kind: str  # "ordered", "unordered", or "none" (no proximity)
    weight: float
    scoring: Scoring
    per_document: int  # the search's max_passages_per_document to show the passages through
    rescored: int  # BM25's first this many candidates re-scored

    @property
    def name(self) -> str:
        if self.kind == "none":
            return f"no proximity, {self.per_document} per document"
        idf, b = self.scoring
        name = f"{self.kind}, idf={idf}, b={b}, λ={self.weight}"
        if self.per_document != BEFORE_PER_DOCUMENT or self.rescored != SEARCH.candidates:
            name += f", {self.per_document} per document, first {self.rescored} re-scored"
        return name


BEFORE_PER_DOCUMENT = 3  # max_passages_per_document before proximity shipped
REFERENCE = Setting("none", 0.0, EXACT, BEFORE_PER_DOCUMENT, SEARCH.candidates)


def grid() -> list[Setting]:
    """First, at the per-document limit of 3 and all 100 candidates: the pair's own idf with
    BM25's length normalisation for both kinds of pair; the variants a search can compute from
    its candidates alone for ordered pairs. Then the cheapest of those (ordered, the terms'
    idfs, no length normalisation) at 2 passages per document, with a finer λ, and re-scoring
    BM25's first 30 candidates against all 100."""
    n = SEARCH.candidates
    exact = [Setting(k, w, EXACT, BEFORE_PER_DOCUMENT, n) for k in KINDS for w in LAMBDAS]
    local = [
        Setting("ordered", w, s, BEFORE_PER_DOCUMENT, n) for s in CANDIDATES_ONLY for w in LAMBDAS
    ]
    cheapest = CANDIDATES_ONLY[-1]
    two = [Setting("none", 0.0, EXACT, 2, n)] + [
        Setting("ordered", w, cheapest, 2, r) for w in FINE_LAMBDAS for r in (n, RESCORED)
    ]
    return [REFERENCE, *exact, *local, *two]


async def main() -> None:
    runs = await prepared()
    pairs = {
        (label, kind): [query_pairs(run.lexical, text, kind) for text in run.data.queries.values()]
        for label, run in runs.items()
        for kind in KINDS
    }

    def rankings(setting: Setting) -> Callable[[str, Run], Lists]:
        def ranked(label: str, run: Run) -> Lists:
            kind = setting.kind
            queries = pairs.get((label, kind), [[]] * len(run.postings))
            return [
                proximity_ranked(
                    run.lexical, terms, pair, setting.weight, setting.scoring, setting.rescored
                )
                for terms, pair in zip(run.postings, queries, strict=True)
            ]

        return ranked

    sweep(
        runs,
        ((s.name, rankings(s), s.per_document) for s in grid()),
        "proximity.json",
        reference=REFERENCE.name,
        keep_shown=True,
    )


if __name__ == "__main__":
    asyncio.run(main())
