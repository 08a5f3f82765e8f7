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

A pair's count is column-weighted as the terms' are. The pair score joins the terms' with a
weight λ in one of two ways:

- **rescore**: only BM25's own candidates are re-scored and re-sorted, which is what either
  backend could do cheaply (Elasticsearch: a `rescore` with a `match_phrase` query and a slop;
  SQLite: a `NEAR` query over the candidates' rowids);
- **full**: every passage holding a pair can enter the candidates.

BM25 is FTS5's formula at FTS5's constants over FTS5's own postings and positions
(`bench.bm25_params`), then fused with the vector side as shipped. The choice is made on
SciFact **train**; SciFact test and the docs set only report it, with a paired bootstrap
interval of the test gain. Needs `bench.relevance_floor`'s indices; a few minutes.

    python -m bench.proximity
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from itertools import pairwise
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.bm25_params import (
    SHIPPED,
    WEIGHTS,
    Lexical,
    Postings,
    hybrid_figures,
    hybrid_per_query,
    paired_gain,
    prepared,
)
from bench.common import write_result
from core.search.fusion import Ranked

ORDERED = 3  # positions: the second term 1 to 3 after the first
WINDOW = 8  # positions either way, SDM's #uw8
KINDS = ("ordered", "unordered")
LAMBDAS = (0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
MODES = ("rescore", "full")


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


def query_pairs(lexical: Lexical, text: str, kind: str) -> list[Postings]:
    """The pairs of neighbouring tokens among the query terms the search keeps."""
    tokens = [token for term in lexical.kept_terms(text) for token in lexical.tokens[term]]
    pairs = dict.fromkeys((a, b) for a, b in pairwise(tokens) if a != b)
    return [pair_postings(lexical, a, b, kind) for a, b in pairs]


def proximity_ranked(
    lexical: Lexical, terms: list[Postings], pairs: list[Postings], weight: float, mode: str
) -> list[Ranked]:
    base = lexical.scores(terms, *SHIPPED)
    extra = lexical.scores(pairs, *SHIPPED) * weight
    if mode == "full":
        return lexical.ranked(base + extra)
    candidates = lexical.ranked(base)
    rescored = [Ranked(r.key, r.score + float(extra[lexical.row_of[r.key]])) for r in candidates]
    return sorted(rescored, key=lambda r: -r.score)


def grid() -> list[tuple[str, float, str]]:
    shipped = [("none", 0.0, "rescore")]
    return shipped + [(k, w, m) for k in KINDS for w in LAMBDAS for m in MODES]


async def main() -> None:
    runs = await prepared()
    pairs = {
        (label, kind): [query_pairs(run.lexical, text, kind) for text in run.data.queries.values()]
        for label, run in runs.items()
        for kind in KINDS
    }
    result: dict[str, Any] = {"grid": {}}
    per_query: dict[str, npt.NDArray[np.float64]] = {}
    for kind, weight, mode in grid():
        name = "shipped" if kind == "none" else f"{kind}, λ={weight}, {mode}"
        row = {}
        for label, run in runs.items():
            lists = [
                proximity_ranked(run.lexical, terms, pair, weight, mode)
                for terms, pair in zip(
                    run.postings, pairs.get((label, kind), [[]] * len(run.postings)), strict=True
                )
            ]
            row[label] = hybrid_figures(run, lists)
            if label == "scifact test":
                per_query[name] = hybrid_per_query(run, lists)
        result["grid"][name] = row
        print(f"{name}:", row, flush=True)
    chosen = max(result["grid"], key=lambda n: result["grid"][n]["scifact train"]["hybrid nDCG@10"])
    result["chosen on train"] = chosen
    result["scifact test gain over the shipped"] = paired_gain(
        per_query[chosen], per_query["shipped"]
    )
    print("chosen on train:", chosen, result["scifact test gain over the shipped"])
    print(write_result("proximity.json", result))


if __name__ == "__main__":
    asyncio.run(main())
