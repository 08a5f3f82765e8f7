"""In-memory stand-ins for the index and the conversation store: the engine's rules run against
them in milliseconds, with no model files, no SQLite and no cluster."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from core.domain.conversation import Turn
from core.domain.documents import (
    Chunk,
    DocumentRecord,
    DocumentWrite,
    IndexStats,
    Progress,
    SearchFilters,
    SearchHit,
    SearchMode,
    Vectors,
)
from core.domain.web import WebResult, WebSource

_WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text)}


class InMemoryIndex:
    """A `SearchIndex` ranking passages by how many of the query's words they share (ties in
    insertion order), so a test can predict exactly which passages a query finds."""

    def __init__(self, chunks: Sequence[Chunk] = ()) -> None:
        self.chunks: list[Chunk] = list(chunks)
        self.records: dict[str, DocumentRecord] = {}
        self.queries: list[str] = []

    async def write_documents(self, writes: Sequence[DocumentWrite]) -> dict[str, str]:
        for write in writes:
            await self.replace_document(write.record, write.chunks, write.vectors)
        return {}

    async def replace_document(
        self,
        record: DocumentRecord,
        chunks: Sequence[Chunk],
        vectors: Vectors,
    ) -> None:
        await self.delete_document(record.doc_id)
        self.chunks.extend(chunks)
        self.records[record.doc_id] = record

    async def delete_document(self, doc_id: str) -> int:
        before = len(self.chunks)
        self.chunks = [c for c in self.chunks if c.doc_id != doc_id]
        self.records.pop(doc_id, None)
        return before - len(self.chunks)

    async def documents(self) -> dict[str, DocumentRecord]:
        return dict(self.records)

    async def search(
        self,
        query: str,
        *,
        k: int,
        mode: SearchMode = SearchMode.HYBRID,
        filters: SearchFilters | None = None,
    ) -> list[SearchHit]:
        self.queries.append(query)
        wanted = _words(query)
        scored = [
            (len(wanted & _words(f"{c.title} {c.heading} {c.text}")), n, c)
            for n, c in enumerate(self.chunks)
            if filters is None or not filters.sources or c.source in filters.sources
        ]
        ranked = sorted((s for s in scored if s[0]), key=lambda s: (-s[0], s[1]))[:k]
        return [
            SearchHit(chunk=c, score=float(score), bm25_rank=rank, bm25_score=float(score))
            for rank, (score, _, c) in enumerate(ranked, start=1)
        ]

    async def stats(self) -> IndexStats:
        return IndexStats(documents=len({c.doc_id for c in self.chunks}), chunks=len(self.chunks))

    async def refresh(self) -> None:
        """Nothing derived to bring up to date."""

    @property
    def location(self) -> str:
        return "memory"

    async def close(self) -> None:
        """Nothing to release."""


class InMemoryConversationStore:
    def __init__(self) -> None:
        self.turns: dict[str, list[Turn]] = {}

    async def recent(self, key: str, limit: int) -> list[Turn]:
        return self.turns.get(key, [])[-limit:] if limit > 0 else []

    async def append(self, key: str, turn: Turn) -> None:
        self.turns.setdefault(key, []).append(turn)

    async def close(self) -> None:
        """Nothing to release."""


def passage(doc: str, text: str, *, title: str | None = None, position: int = 0) -> Chunk:
    """A knowledge-base passage with a deep link, as an ingest would make it."""
    return Chunk(
        chunk_id=f"{doc}-{position:05d}",
        doc_id=f"https://docs.example.com/{doc}",
        source="docs",
        title=title or doc.title(),
        heading="",
        url=f"https://docs.example.com/{doc}#p{position}",
        text=text,
        position=position,
    )


class ConstantEmbedder:
    """An `Embedder` giving every text the same vector (learning writes need vectors)."""

    model_id, dimensions = "fake", 4

    async def embed_documents(
        self, texts: Sequence[str], progress: Progress | None = None
    ) -> Vectors:
        return np.ones((len(texts), self.dimensions), dtype=np.float32) / 2

    async def embed_query(self, text: str) -> Vectors:
        return np.ones(self.dimensions, dtype=np.float32) / 2


class OnePageWeb:
    """A `WebSearch` whose every answer is one page."""

    PAGE = WebSource("https://web.example/widgets", "Widgets", "Widgets are configured in YAML.")

    async def search(self, query: str) -> WebResult:
        return WebResult(query, (self.PAGE,))

    async def close(self) -> None:
        """Nothing to release."""
