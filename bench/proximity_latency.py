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

from bench.common import REPO, bench_settings, write_result
from bench.search_latency import interleaved, opened, queries, query_embedder
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
    limit_blas_threads(settings.search.blas_threads)
    embedder = query_embedder(settings, settings.embeddings.query_threads)
    variants = {
        f"proximity {w}": SqliteIndex(
            path, embedder, settings.search.model_copy(update={"proximity_weight": w})
        )
        for w in (0.0, settings.search.proximity_weight)  # off, and as shipped
    }
    chunks = await opened(variants, embedder, args.chunks, settings)
    texts = queries(args.queries)
    report: dict[str, object] = {"chunks": chunks, "queries": len(texts), "runs": args.runs}
    report |= await interleaved(variants, texts, MODES, settings.search.top_k, args.runs)
    for index in variants.values():
        await index.close()
    print(f"wrote {write_result('proximity-latency.json', report)}")


if __name__ == "__main__":
    asyncio.run(main())
