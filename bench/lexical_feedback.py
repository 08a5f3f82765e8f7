"""Pseudo-relevance feedback on the lexical side (RM3): would expanding each query with the
terms of BM25's own first passages rank better? (BENCHMARKS.md, "Fusion and the other cheap
levers"; the vector-side feedback is `bench.ranking_experiments`.)

RM3 as Anserini runs it: the first `passages` of the query's own BM25 ranking, each weighted by
its share of their scores, give every term of theirs a weight (its frequency over the passage's
length, column weights included); the `terms` heaviest, leaving out any term in more than a
tenth of the passages, join the query's own terms, which keep `keep` of the weight between them.
BM25 is FTS5's formula at FTS5's constants, over FTS5's own postings (`bench.bm25_params`), and
the ranking is then fused with the vector side as shipped.

The choice is made on SciFact **train**; SciFact test and the docs set only report it, with a
paired bootstrap interval of the test gain. Needs `bench.relevance_floor`'s indices.

    python -m bench.lexical_feedback
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable

from bench.bm25_params import (
    SHIPPED,
    Lexical,
    Lists,
    Postings,
    Run,
    prepared,
    sweep,
)
from core.search.fusion import Ranked

PASSAGES = (3, 5, 10)
TERMS = (5, 10, 20)
KEEP = (0.5, 0.7, 0.85, 1.0)  # 1.0: no expansion, the shipped ranking
MAX_SHARE = 0.1  # of the passages a term may be in and still be an expansion term


class Feedback:
    """RM3 over one index's postings: the expanded query for a first ranking."""

    def __init__(self, lexical: Lexical, max_share: float = MAX_SHARE) -> None:
        self.lexical = lexical
        self.terms_of: dict[int, list[tuple[str, float]]] = defaultdict(list)
        common = max_share * lexical.passages
        for term, (rows, counts) in lexical.postings.items():
            if len(rows) <= common:
                for row, count in zip(rows.tolist(), counts.tolist(), strict=True):
                    self.terms_of[row].append((term, count))

    def expanded(
        self, postings: list[Postings], first: list[Ranked], passages: int, terms: int, keep: float
    ) -> list[Ranked]:
        if keep >= 1 or not first:
            return self.lexical.rank(postings, *SHIPPED)
        top = first[:passages]
        total = sum(r.score for r in top)
        model: dict[str, float] = defaultdict(float)
        for ranked in top:
            row = self.lexical.row_of[ranked.key]
            for term, count in self.terms_of[row]:
                model[term] += ranked.score / total * count / self.lexical.length[row]
        chosen = sorted(model.items(), key=lambda item: (-item[1], item[0]))[:terms]
        mass = sum(weight for _, weight in chosen) or 1.0
        lists = [*postings, *(self.lexical.postings[term] for term, _ in chosen)]
        weights = [keep / len(postings)] * len(postings)
        weights += [(1 - keep) * weight / mass for _, weight in chosen]
        return self.lexical.rank(lists, *SHIPPED, weights)


async def main() -> None:
    runs = await prepared()
    feedback = {id(run.lexical): Feedback(run.lexical) for run in runs.values()}
    firsts = {
        label: [run.lexical.rank(p, *SHIPPED) for p in run.postings] for label, run in runs.items()
    }

    def rankings(passages: int, terms: int, keep: float) -> Callable[[str, Run], Lists]:
        def ranked(label: str, run: Run) -> Lists:
            return [
                feedback[id(run.lexical)].expanded(p, first, passages, terms, keep)
                for p, first in zip(run.postings, firsts[label], strict=True)
            ]

        return ranked

    settings = [(1, 0, 1.0)] + [(p, t, k) for p in PASSAGES for t in TERMS for k in KEEP if k < 1]
    sweep(
        runs,
        (
            (
                "shipped" if keep >= 1 else f"passages={passages}, terms={terms}, keep={keep}",
                rankings(passages, terms, keep),
            )
            for passages, terms, keep in settings
        ),
        "lexical-feedback.json",
    )


if __name__ == "__main__":
    asyncio.run(main())
