"""The lexical side alone: SQLite FTS5 (as the index runs it: column weights, the postings
budget) against an in-memory sparse BM25 (bm25s) over the same passages, at several sizes.

A first measurement for issue 18's item 2, to choose by the numbers before building anything:
time per query (top 100 candidates, as the hybrid search asks each side), and the in-memory
index's build time and memory. The passages are the latency bench's (SciFact copied to size);
bm25s indexes title, heading and text as one field (it has no column weights), with English
stop words and no stemming. Needs `pip install -e '.[bench]'`.

    python -m bench.lexical [--sizes 10000 50000 200000] [--runs 5] [--queries 200]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sqlite3
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.common import REPO, bench_settings, percentile, write_result
from bench.search_latency import build, queries, query_embedder
from core.backends.sqlite.index import SqliteIndex
from core.domain.documents import SearchFilters

CANDIDATES = 100  # what the hybrid search asks each side for (search.candidates)
KIB_PER_MIB = 1024


def _passages(path: str) -> list[str]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT title, heading, text FROM chunks ORDER BY id").fetchall()
    return [" ".join(r) for r in rows]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / KIB_PER_MIB


def _timed(side: Callable[[str], object], texts: list[str]) -> tuple[float, float]:
    latencies = []
    for text in texts:
        started = time.perf_counter()
        side(text)
        latencies.append((time.perf_counter() - started) * 1000)
    return statistics.median(latencies), percentile(latencies, 95)


async def one_size(size: int, texts: list[str], runs: int) -> dict[str, Any]:
    import bm25s

    settings = bench_settings(REPO / ".bot")
    path = REPO / ".bot" / "bench" / f"latency-{size}.sqlite"
    embedder = query_embedder(settings)
    index = SqliteIndex(path, embedder, settings.search)
    if (have := (await index.stats()).chunks) < size:
        await build(index, embedder, size - have, settings)
    passages = _passages(str(path))
    rss_before = _peak_rss_mb()
    started = time.perf_counter()
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(passages, stopwords="en", show_progress=False), show_progress=False
    )
    build_s = time.perf_counter() - started
    no_filters = SearchFilters()

    def fts5(text: str) -> object:
        return index._bm25_side(text, no_filters, CANDIDATES)

    def sparse(text: str) -> object:
        query = bm25s.tokenize([text], stopwords="en", show_progress=False)
        return retriever.retrieve(query, k=CANDIDATES, show_progress=False, n_threads=1)

    sides = {"fts5": fts5, "bm25s": sparse}
    for side in sides.values():
        side(texts[0])  # warm: FTS5's pages, bm25s's arrays
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for run in range(runs):
        for name in list(sides)[run % 2 :] + list(sides)[: run % 2]:
            figures[name].append(_timed(sides[name], texts))
    await index.close()
    result: dict[str, Any] = {
        "passages": len(passages),
        "bm25s_build_s": round(build_s, 2),
        "bm25s_peak_rss_growth_mb": round(_peak_rss_mb() - rss_before, 1),
    }
    for name, pairs in figures.items():
        result[name] = {
            "p50_ms_median": round(statistics.median(p for p, _ in pairs), 2),
            "p95_ms_median": round(statistics.median(q for _, q in pairs), 2),
        }
    print(f"{size}: {result}", flush=True)
    return result


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 200_000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    texts = queries(args.queries)
    results = {str(size): await one_size(size, texts, args.runs) for size in args.sizes}
    print(f"wrote {write_result('lexical.json', {'candidates': CANDIDATES, 'sizes': results})}")


if __name__ == "__main__":
    asyncio.run(main())
