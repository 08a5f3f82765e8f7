"""The search index interface every backend implements (embedded SQLite, Elasticsearch).

The unit of writing is a whole document: its chunks are replaced together with the checksum that
says which version they came from, and the checksum is written last. That is what makes re-ingest
idempotent and a crashed ingest resumable: a document whose checksum is current is complete.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from core.domain.documents import (
    Chunk,
    DocumentRecord,
    IndexStats,
    SearchFilters,
    SearchHit,
    SearchMode,
)
from core.errors import BotError
from core.search.embedder import Vectors

MAX_K = 10_000


class IndexError_(BotError, RuntimeError):
    """The index can't be opened or used as asked; the message says why and what to do."""


class IndexUnavailable(IndexError_):
    """The index's server can't be reached: not this document's fault, so a batch job stops."""


@dataclass(frozen=True, slots=True)
class DocumentWrite:
    record: DocumentRecord
    chunks: Sequence[Chunk]
    vectors: Vectors


class SearchIndex(Protocol):
    async def write_documents(self, writes: Sequence[DocumentWrite]) -> dict[str, str]:
        """Replace each document's chunks; returns the reason of every document that failed.

        A batch call so that a server backend can send one bulk request for many documents.
        """

    async def replace_document(
        self, record: DocumentRecord, chunks: Sequence[Chunk], vectors: Vectors
    ) -> None:
        """Make `chunks` the document's only chunks and remember its checksum."""

    async def delete_document(self, doc_id: str) -> int:
        """Remove a document and its chunks; returns how many chunks went."""

    async def documents(self) -> dict[str, DocumentRecord]:
        """Every document the index holds, by id."""

    async def search(
        self,
        query: str,
        *,
        k: int,
        mode: SearchMode = SearchMode.HYBRID,
        filters: SearchFilters | None = None,
    ) -> list[SearchHit]:
        """Top-k chunks for `query`, with both sides' ranks and scores kept on each hit."""

    async def stats(self) -> IndexStats: ...

    @property
    def location(self) -> str:
        """Where the chunks live, for messages to the person running the bot (a file, an index
        name; never a URL, which may carry credentials)."""

    async def close(self) -> None: ...


def checked_query(query: str, k: int, max_query_chars: int) -> str:
    """The query as every backend searches it: cut to length; `k` within bounds or an error."""
    if not 1 <= k <= MAX_K:
        raise ValueError(f"k must be between 1 and {MAX_K}, got {k}")
    return query[:max_query_chars]


def check_vectors(chunks: Sequence[Chunk], vectors: Vectors, dimensions: int) -> None:
    if len(chunks) != len(vectors):
        raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
    if len(chunks) and vectors.shape[1] != dimensions:
        raise ValueError(f"vectors have {vectors.shape[1]} dimensions, index expects {dimensions}")
