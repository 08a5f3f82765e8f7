"""What running a hybrid search's two sides at once saves, on the latency bench's index.

The embedded index used to rank the lexical side, then wait for the query's embedding, then
rank the vector side, and to look up the document of every fused candidate for the
per-document limit. It now ranks the vector side as soon as the embedding is ready, beside the
lexical side, and looks documents up only as far down the order as the top k reaches. The
variants here open the same index file: the order before (kept here only, as the baseline),
the sides at once with every document looked up, and the search as shipped. They are measured
turn about in one process (`bench.search_latency.interleaved`), and give the same hits;
then again beside two busy processes, where two cores leave the sides less room to overlap.

    python -m bench.search_sides [--chunks 50000] [--runs 5] [--queries 300]
"""

from __future__ import annotations

import asyncio
import contextlib

from bench.common import write_result
from bench.query_threads import BUSY_PROCESSES, competing_load
from bench.search_latency import comparison, interleaved, opened, queries
from core.backends.sqlite.index import SqliteIndex
from core.domain.documents import SearchHit, SearchMode, Vectors
from core.search.fusion import Ranked
from core.search.hybrid import SearchRequest, fuse, fused_hits, limits_documents, top_passages


class EveryDocument(SqliteIndex):
    """The sides at once, with the document of every fused candidate looked up."""

    def _fused(self, r: SearchRequest, bm25: list[Ranked], vector: list[Ranked]) -> list[SearchHit]:
        fused = fuse(bm25, vector, r, self._settings)
        per_document = self._settings.max_passages_per_document
        wanted = limits_documents(r.k, per_document)
        documents = self._documents_by_id([f.key for f in fused]) if wanted else {}
        top = top_passages(fused, documents, r.k, per_document)
        chunks = self._chunks_by_id([int(f.key) for f in top])
        return fused_hits(top, {str(i): chunk for i, chunk in chunks.items()})


class InARow(EveryDocument):
    """The order before: the lexical side, then the embedding, then the vector side."""

    async def _run(
        self, r: SearchRequest, vector: asyncio.Future[Vectors] | None
    ) -> list[SearchHit]:
        bm25 = (
            await self._in_thread(self._bm25_side, r.query, r.filters, r.limit)
            if r.mode is not SearchMode.VECTOR
            else []
        )
        query = await vector if vector is not None else None

        def both() -> list[SearchHit]:
            nearest = self._vectors.ranked(query, r.filters, r.limit) if query is not None else []
            return self._fused(r, bm25, nearest)

        return await self._in_thread(both)


async def main() -> None:
    args, settings, path, embedder = comparison(__doc__)
    variants = {
        name: kind(path, embedder, settings.search)
        for name, kind in (
            ("in a row, every document", InARow),
            ("at once, every document", EveryDocument),
            ("shipped", SqliteIndex),
        )
    }
    chunks = await opened(variants, embedder, args.chunks, settings)
    texts = queries(args.queries)
    k = settings.search.top_k
    for text in texts:
        found = {
            name: [h.chunk.chunk_id for h in await index.search(text, k=k)]
            for name, index in variants.items()
        }
        if len({tuple(ids) for ids in found.values()}) != 1:
            raise SystemExit(f"the variants disagree on {text!r}: {found}")
    report: dict[str, object] = {"chunks": chunks, "queries": len(texts), "runs": args.runs}
    for load in ("idle", "loaded"):
        print(load, flush=True)
        with competing_load(BUSY_PROCESSES) if load == "loaded" else contextlib.nullcontext():
            report[load] = await interleaved(variants, texts, (SearchMode.HYBRID,), k, args.runs)
    for index in variants.values():
        await index.close()
    print(f"wrote {write_result('search-sides.json', report)}")


if __name__ == "__main__":
    asyncio.run(main())
