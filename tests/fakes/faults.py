"""Wrappers that inject one fault into a real part: a search that fails once, a slow first read,
an embedder of other dimensions, progress that stops the cluster mid-ingest."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import numpy as np

from core.domain.documents import (
    Outcome,
    SearchFilters,
    SearchHit,
    SearchMode,
    Vectors,
)
from core.ports import SearchIndex
from core.search.embedder import CachedEmbedder
from tests.fakes.elasticsearch_emulator import NoidaServer


class _StoreFault:
    """A keyword store passed through but for what a subclass overrides."""

    def __init__(self, store: object) -> None:
        self._store = store

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)


class StaleFirstRead(_StoreFault):
    """A keyword store whose first `document` read is slow: it returns what it read before
    another process saved more keywords, the window in which a writer's view goes stale."""

    def __init__(self, store: object, delay_s: float) -> None:
        super().__init__(store)
        self._delay_s = delay_s
        self._slowed = False

    async def document(self, doc_id: str) -> object:
        found = await self._store.document(doc_id)  # type: ignore[attr-defined]
        if not self._slowed:
            self._slowed = True
            await asyncio.sleep(self._delay_s)
        return found


class SavesBetweenReads(_StoreFault):
    """A keyword store on which another process saves a new keyword of the document after
    each of this process's reads of it, `times` times: a burst of answers elsewhere learning
    the same pages while this process syncs them."""

    def __init__(self, store: object, doc_id: str, times: int) -> None:
        super().__init__(store)
        self._doc_id = doc_id
        self._left = times

    async def document(self, doc_id: str) -> object:
        found = await self._store.document(doc_id)  # type: ignore[attr-defined]
        if doc_id == self._doc_id and self._left > 0:
            self._left -= 1
            await self._store.add(  # type: ignore[attr-defined]
                f"elsewhere {self._left}", doc_id=doc_id, question="q"
            )
        return found


class SaveDuringPrune(_StoreFault):
    """A keyword store on which another process saves, once, between a prune's read of the
    documents and its read of the keywords: the web process does not wait for the clock."""

    def __init__(self, store: object, save: Callable[[], Awaitable[object]]) -> None:
        super().__init__(store)
        self._save: Callable[[], Awaitable[object]] | None = save

    async def all(self) -> object:
        if self._save is not None:
            save, self._save = self._save, None
            await save()
        return await self._store.all()  # type: ignore[attr-defined]


class HalfEmbedder:
    """Another embedder (fewer dimensions): the first half of MiniLM's vector, renormalised."""

    def __init__(self, inner: CachedEmbedder) -> None:
        self._inner = inner
        self.model_id = "minilm-first-half"
        self.dimensions = inner.dimensions // 2
        self.computed = 0

    def _half(self, vectors: Vectors) -> Vectors:
        half = vectors[:, : self.dimensions] if vectors.ndim == 2 else vectors[: self.dimensions]
        norms = np.linalg.norm(half, axis=-1, keepdims=True)
        return (half / norms).astype(np.float32)

    async def embed_documents(self, texts: list[str]) -> Vectors:
        self.computed += len(texts)
        return self._half(await self._inner.embed_documents(texts))

    async def embed_query(self, text: str) -> Vectors:
        return self._half(await self._inner.embed_query(text))


class StopAfter:
    """Progress that kills the cluster once `n` documents are through."""

    def __init__(self, server: NoidaServer, n: int) -> None:
        self.server, self.n, self.done = server, n, 0

    def discovering(self, where: str) -> None:
        pass

    def start(self, total: int) -> None:
        pass

    def advance(self, display: str, outcome: Outcome) -> None:
        self.done += 1
        if self.done == self.n:
            self.server.stop(graceful=True)


class FailsFirstSearch:
    """The index on a bad day: the first search fails, later ones work."""

    def __init__(self, inner: SearchIndex) -> None:
        self.inner, self.calls = inner, 0

    async def search(
        self,
        query: str,
        *,
        k: int,
        mode: SearchMode = SearchMode.HYBRID,
        filters: SearchFilters | None = None,
    ) -> list[SearchHit]:
        self.calls += 1
        if self.calls == 1:
            raise OSError("disk I/O error")
        return await self.inner.search(query, k=k, mode=mode, filters=filters)


class ForeignEmbedder:
    """Only the identity of another embedding model: an index built with one refuses it."""

    model_id = "some-other-model"
    dimensions = 384


class RefusingEmbedder:
    """An embedding service that fails, while `down`, for any batch holding `marker` (a
    hosted embedder's 503 on one document's group): that document fails, the others of the
    run are written."""

    def __init__(self, inner: CachedEmbedder, marker: str) -> None:
        self._inner = inner
        self._marker = marker
        self.down = True
        self.model_id = inner.model_id
        self.dimensions = inner.dimensions

    async def embed_documents(self, texts: list[str]) -> Vectors:
        if self.down and any(self._marker in text for text in texts):
            raise RuntimeError("embedding service answered 503")
        return await self._inner.embed_documents(texts)

    async def embed_query(self, text: str) -> Vectors:
        return await self._inner.embed_query(text)
