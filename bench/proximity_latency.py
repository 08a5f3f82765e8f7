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

import asyncio

from bench.common import write_result
from bench.search_latency import comparison, interleaved, opened, queries
from core.backends.sqlite.index import SqliteIndex
from core.domain.documents import SearchMode

MODES = (SearchMode.BM25, SearchMode.HYBRID)


async def main() -> None:
    args, settings, path, embedder = comparison(__doc__)
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
