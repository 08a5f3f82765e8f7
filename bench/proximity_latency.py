"""What term proximity (`search.proximity_weight`) costs a search, on the latency bench's index.

The same index file is opened twice, proximity off and on at the shipped weight, and the two
are measured turn about in one process: each query is searched on one, then on the other, so a
busy moment of the machine falls on both.
BM25 alone shows the re-scoring's own cost; hybrid what a search pays, where the lexical side
runs beside the query's embedding. The index is `bench.search_latency`'s (built by it, or here
if missing: a few minutes from the embedding cache).

    python -m bench.proximity_latency [--chunks 50000] [--runs 5] [--queries 300]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from bench.common import REPO, bench_settings, percentile, write_result
from bench.search_latency import build, queries, query_embedder
from core.backends.sqlite.index import SqliteIndex
from core.domain.documents import SearchMode
from core.search.threads import limit_blas_threads

MODES = (SearchMode.BM25, SearchMode.HYBRID)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()

    settings = bench_settings(REPO / ".bot")  # share the main embedding cache
    path = REPO / ".bot" / "bench" / f"latency-{args.chunks}.sqlite"
    weights = (0.0, settings.search.proximity_weight)  # off, and as shipped
    limit_blas_threads(settings.search.blas_threads)
    embedder = query_embedder(settings, settings.embeddings.query_threads)
    indexes = {
        w: SqliteIndex(path, embedder, settings.search.model_copy(update={"proximity_weight": w}))
        for w in weights
    }
    first = indexes[weights[0]]
    stats = await first.stats()
    if stats.chunks < args.chunks:
        await build(first, embedder, args.chunks - stats.chunks, settings)
        await first.refresh()
        stats = await first.stats()
    texts = queries(args.queries)
    for index in indexes.values():
        await index.search(texts[0], k=settings.search.top_k)  # loads the vectors
    runs: dict[tuple[float, SearchMode], dict[str, list[float]]] = {
        (w, m): {"p50": [], "p95": []} for w in weights for m in MODES
    }
    for run in range(args.runs):
        for mode in MODES:
            latencies: dict[float, list[float]] = {w: [] for w in weights}
            for n, text in enumerate(texts):
                # Off and on for each query, first one then the other: a busy moment of the
                # machine, or a cache one search warms, falls on both alike.
                for weight in weights if n % 2 else weights[::-1]:
                    started = time.perf_counter()
                    await indexes[weight].search(text, k=settings.search.top_k, mode=mode)
                    latencies[weight].append((time.perf_counter() - started) * 1000)
            for weight, figures in latencies.items():
                runs[(weight, mode)]["p50"].append(statistics.median(figures))
                runs[(weight, mode)]["p95"].append(percentile(figures, 95))
        print(f"run {run + 1} of {args.runs} done", flush=True)
    report: dict[str, object] = {"chunks": stats.chunks, "queries": len(texts), "runs": args.runs}
    for (weight, mode), figures in runs.items():
        p50, p95 = statistics.median(figures["p50"]), statistics.median(figures["p95"])
        report[f"{mode.value}, proximity {weight}"] = {
            "p50_ms_median": round(p50, 2),
            "p95_ms_median": round(p95, 2),
            "p95_ms_runs": [round(x, 2) for x in figures["p95"]],
        }
        print(f"{mode.value:>6}, proximity {weight}: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    for index in indexes.values():
        await index.close()
    print(f"wrote {write_result('proximity-latency.json', report)}")


if __name__ == "__main__":
    asyncio.run(main())
