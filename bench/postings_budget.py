"""BM25's postings budget (`search.bm25_max_postings`): what a smaller one buys in latency at
50,000 passages, and what it costs in ranking at that size. (BENCHMARKS.md, "The postings
budget at 50,000 passages".)

When a query's terms match more (passage, term) pairs than the budget, the lexical side leaves
out the commonest terms until they fit. The budget is a count, so it bites harder as the index
grows: a term in 2% of the passages has 212 postings in SciFact's 10,629 and 1,000 in 50,000.
The latency bench's index is SciFact copied to 50,000 passages, every term's postings about
4.7 times SciFact's, so budget B there leaves out the terms that budget B × 10,629 / 50,000
leaves out on SciFact itself. The ranking rows therefore show each budget twice: as set, on
the evaluation sets' own small indices, and scaled to what it does once a corpus of the same
kind has grown to 50,000 passages (each set's budget × its passages / 50,000).

Ranking: the real search (`bot eval retrieval`'s figures; hybrid and BM25) on
`bench.relevance_floor`'s indices, SciFact train, SciFact test and the docs set. Latency: the
latency bench's 50,000-passage index, the budgets taking turns query by query
(`bench.search_latency.interleaved`), p50 / p95 medians over the runs.

    python -m bench.postings_budget [--budgets 10000 7500 5000] [--runs 5] [--queries 300]
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass
from typing import Any

from bench.common import REPO, SHARED_EVAL, bench_settings, write_result
from bench.ranking_experiments import train_split
from bench.relevance_floor import CACHE, open_index
from bench.search_latency import interleaved, opened, queries, query_embedder
from core.backends.sqlite.index import SqliteIndex
from core.domain.documents import SearchMode
from core.evaluation.retrieval import Dataset, evaluate, load_dataset
from core.ports import Embedder
from core.search.threads import limit_blas_threads

FLOOR_ROOT = REPO / ".bot" / "bench" / "floor"
LATENCY_CHUNKS = 50_000
MODES = [SearchMode.HYBRID, SearchMode.BM25]
RESCORE = (False, True)  # the left-out terms scored back on the first candidates, or not


def variant(budget: int, rescore: bool) -> str:
    return f"budget {budget}, left-out terms {'re-scored' if rescore else 'left out'}"


@dataclass
class Sets:
    """The evaluation sets, read once: each by label with its corpus, each corpus's passages,
    and the query embedder every ranking shares."""

    data: dict[str, tuple[str, Dataset]]
    passages: dict[str, int]
    embedder: Embedder


async def evaluation_sets() -> Sets:
    scifact, docs = SHARED_EVAL / "scifact", SHARED_EVAL / "anthropic_docs_qa"
    data = {
        "scifact train": ("scifact", train_split(scifact)),
        "scifact test": ("scifact", load_dataset(scifact)),
        "docs QA": ("anthropic_docs_qa", load_dataset(docs)),
    }
    settings = bench_settings(FLOOR_ROOT, BOT_EMBEDDINGS__CACHE_PATH=str(CACHE))
    embedder = query_embedder(settings, settings.embeddings.query_threads)
    passages = {}
    for corpus in dict.fromkeys(corpus for corpus, _ in data.values()):
        index = await open_index(corpus, FLOOR_ROOT, embedder)
        passages[corpus] = (await index.stats()).chunks
        await index.close()
    return Sets(data, passages, embedder)


async def ranking(
    sets: Sets, budget: int, rescore: bool, shown: int, grown_to: int | None
) -> dict[str, dict[str, float]]:
    """Each evaluation set's figures with the lexical side held to `budget` (0: none), or,
    with `grown_to`, to what `budget` leaves out once the set's corpus has that many passages;
    `rescore`: the left-out terms scored back on the first candidates."""
    figures: dict[str, dict[str, float]] = {}
    for label, (corpus, data) in sets.data.items():
        held = max(1, round(budget * sets.passages[corpus] / grown_to)) if grown_to else budget
        index = await open_index(
            corpus,
            FLOOR_ROOT,
            sets.embedder,
            BOT_SEARCH__BM25_MAX_POSTINGS=str(held),
            BOT_SEARCH__RESCORE_LEFT_OUT_TERMS=str(rescore).lower(),
        )
        try:
            hybrid, bm25 = await evaluate(index, data, MODES, shown=shown, deep=False)
        finally:
            await index.close()
        figures[label] = {
            "budget held to": held,
            "hybrid nDCG@10": hybrid.metrics["ndcg@10"],
            "hybrid MRR@10": hybrid.metrics["mrr@10"],
            f"hybrid shown@{shown}": hybrid.metrics[f"shown@{shown}"],
            "bm25 nDCG@10": bm25.metrics["ndcg@10"],
        }
        print(f"{label}, budget {held}, re-scored {rescore}: {figures[label]}", flush=True)
    return figures


async def latency(budgets: list[int], runs: int, texts: int) -> tuple[int, dict[str, object]]:
    settings = bench_settings(REPO / ".bot")  # the latency bench's own embedding cache
    limit_blas_threads(settings.search.blas_threads)
    embedder = query_embedder(settings, settings.embeddings.query_threads)
    path = REPO / ".bot" / "bench" / f"latency-{LATENCY_CHUNKS}.sqlite"
    variants = {
        variant(b, rescore): SqliteIndex(
            path,
            embedder,
            settings.search.model_copy(
                update={"bm25_max_postings": b, "rescore_left_out_terms": rescore}
            ),
        )
        for b in budgets
        for rescore in RESCORE
    }
    try:
        chunks = await opened(variants, embedder, LATENCY_CHUNKS, settings)
        report = await interleaved(variants, queries(texts), MODES, settings.search.top_k, runs)
    finally:
        for index in variants.values():
            await index.close()
    return chunks, report


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--budgets", type=int, nargs="+", default=[10_000, 7_500, 5_000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    settings = bench_settings(REPO / ".bot")
    shown = settings.search.top_k
    chunks, timings = await latency(args.budgets, args.runs, args.queries)
    sets = await evaluation_sets()
    rows: dict[str, Any] = {"no budget": await ranking(sets, 0, False, shown, None)}
    for budget in args.budgets:
        for rescore in RESCORE:
            name = variant(budget, rescore)
            rows[f"{name}, as set"] = await ranking(sets, budget, rescore, shown, None)
            grown = await ranking(sets, budget, rescore, shown, chunks)
            rows[f"{name}, at {chunks:,} passages"] = grown
    report: dict[str, object] = {
        "latency": {"chunks": chunks, "queries": args.queries, "runs": args.runs, **timings},
        "ranking": rows,
        "shipped": settings.search.bm25_max_postings,
    }
    print(f"wrote {write_result('postings-budget.json', report)}")


if __name__ == "__main__":
    asyncio.run(main())
