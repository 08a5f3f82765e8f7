"""The hybrid search both backends run: one checked request (query length, k), the query's
embedding started at once so the lexical side runs while the model does, both sides fused by
our code (score fusion or RRF), the top k taken with the per-document limit, and fused keys
mapped to hits. A backend brings only its two ranked sides and its chunk lookup."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.config import SearchSettings
from core.domain.documents import Chunk, SearchFilters, SearchHit, SearchMode, Vectors
from core.ports import Embedder
from core.search.checks import checked_query
from core.search.fusion import Fused, Ranked, reciprocal_rank_fusion, score_fusion


@dataclass(frozen=True, slots=True)
class SearchRequest:
    query: str
    k: int
    mode: SearchMode
    filters: SearchFilters
    limit: int  # candidates per side

    @property
    def wants_vector(self) -> bool:
        return self.mode is not SearchMode.BM25


def search_request(
    query: str,
    *,
    k: int,
    mode: SearchMode,
    filters: SearchFilters | None,
    settings: SearchSettings,
) -> SearchRequest | None:
    """The request as every backend runs it; None for a query with nothing to search."""
    query = checked_query(query, k, settings.max_query_chars)
    if not query.strip():
        return None
    limit = max(settings.candidates, k)
    return SearchRequest(query, k, mode, filters or SearchFilters(), limit)


_FIRST_LOOK = 2  # times k: how far down the fused order the per-document limit looks first


async def no_candidates() -> list[Any]:
    """A side that does not run, for `asyncio.gather` beside one that does."""
    return []


def fuse(
    bm25: Sequence[Ranked], vector: Sequence[Ranked], request: SearchRequest, s: SearchSettings
) -> list[Fused]:
    """Every candidate of both sides, best first, by the configured fusion; a one-sided mode
    ranks by its side alone (RRF over one list keeps its order)."""
    if request.mode is not SearchMode.HYBRID:
        fused = reciprocal_rank_fusion(bm25, vector, k=s.rrf_k, bm25_weight=1, vector_weight=1)
    elif s.fusion == "rrf":
        fused = reciprocal_rank_fusion(
            bm25, vector, k=s.rrf_k, bm25_weight=s.bm25_weight, vector_weight=s.vector_weight
        )
    else:
        fused = score_fusion(bm25, vector, vector_share=s.vector_share, normalisation=s.fusion)
    return fused


def limits_documents(k: int, per_document: int) -> bool:
    """Whether the per-document limit can change the top k: not when it is off, nor when k
    passages cannot exceed it (a k=1 search asks for no documents)."""
    return 0 < per_document < k


def limited(
    fused: Sequence[Fused],
    k: int,
    per_document: int,
    documents_of: Callable[[list[str]], Mapping[str, str]],
) -> list[Fused]:
    """`top_passages`, asking the backend for candidates' documents only where the limit can
    change the top k, and then only as far down the order as the top k reaches: a prefix of
    `_FIRST_LOOK` times k, doubled while it falls short. SQLite looks each candidate up: 1.2 ms
    for a hybrid search's 200 against 0.2 ms for 16, and on the latency bench's index every
    top 8 was found among the first 16 (BENCHMARKS.md, "Both sides at once")."""
    if not limits_documents(k, per_document):
        return list(fused[:k])
    documents: dict[str, str] = {}
    looked = 0
    while True:
        reach = min(max(looked * 2, k * _FIRST_LOOK), len(fused))
        documents.update(documents_of([f.key for f in fused[looked:reach]]))
        looked = reach
        first, held = _let_through(fused[:looked], documents, k, per_document)
        if len(first) == k or looked == len(fused):
            return (first + held)[:k]


def top_passages(
    fused: Sequence[Fused], document_of: Mapping[str, str], k: int, per_document: int
) -> list[Fused]:
    """The first k of the fused order, with at most `per_document` passages of one document
    ahead of every other document's candidates (0: no limit); the passages held back follow,
    in order, when the others run out. A document's first passage never moves, so documents
    rank as they did; what changes is that one long page no longer fills the whole answer's
    material (on the docs set the top 8 passages held 0.811 of the relevant documents without
    the limit, 0.843 with 3). The order does not depend on k: a deeper search extends it."""
    if not limits_documents(k, per_document):
        return list(fused[:k])
    first, held = _let_through(fused, document_of, k, per_document)
    return (first + held)[:k]


def _let_through(
    fused: Sequence[Fused], document_of: Mapping[str, str], k: int, per_document: int
) -> tuple[list[Fused], list[Fused]]:
    """The passages let through, up to k, and those held back on the way (a passage of no
    known document counts as its own: a chunk deleted after ranking is never merged)."""
    taken: dict[str, int] = {}
    first: list[Fused] = []
    held: list[Fused] = []
    for entry in fused:
        document = document_of.get(entry.key, entry.key)
        taken[document] = taken.get(document, 0) + 1
        (first if taken[document] <= per_document else held).append(entry)
        if len(first) == k:
            break
    return first, held


def fused_hits(fused: Sequence[Fused], chunks: Mapping[str, Chunk]) -> list[SearchHit]:
    """Each fused key as a hit with both sides' ranks and scores; a key with no chunk (deleted
    by a writer between ranking and fetching) is left out."""
    return [
        SearchHit(
            chunk=chunks[f.key],
            score=f.score,
            bm25_rank=f.bm25_rank,
            bm25_score=f.bm25_score,
            vector_rank=f.vector_rank,
            vector_score=f.vector_score,
        )
        for f in fused
        if f.key in chunks
    ]


class HybridIndex(ABC):
    """The `search` of every backend: the checked request, then the backend's own two sides
    (`_run`). A backend brings only how it ranks and fetches."""

    def __init__(self, embedder: Embedder, settings: SearchSettings) -> None:
        self._query_embedder = embedder
        self._query_settings = settings

    async def search(
        self,
        query: str,
        *,
        k: int,
        mode: SearchMode = SearchMode.HYBRID,
        filters: SearchFilters | None = None,
    ) -> list[SearchHit]:
        """Top-k chunks for `query`, with both sides' ranks and scores kept on each hit.

        The query's embedding (milliseconds of model time in a worker thread) is started before
        the backend runs, so a backend can rank the lexical side meanwhile instead of after."""
        request = search_request(
            query, k=k, mode=mode, filters=filters, settings=self._query_settings
        )
        if request is None:
            return []
        if not request.wants_vector:
            return await self._run(request, None)
        vector = asyncio.ensure_future(self._query_embedder.embed_query(request.query))
        try:
            return await self._run(request, vector)
        finally:
            if not vector.done():  # the backend failed before it needed the vector
                vector.cancel()
            elif not vector.cancelled():
                vector.exception()  # retrieved: an unused failure is not logged as lost

    @abstractmethod
    async def _run(
        self, request: SearchRequest, vector: asyncio.Future[Vectors] | None
    ) -> list[SearchHit]:
        """Both sides of a checked request, fused into hits. `vector` is the query's embedding
        under way (None when no vector side runs): await it only once the vector side needs it;
        awaiting it again gives the same vector."""
