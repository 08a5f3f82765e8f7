"""The search index interface every backend implements (embedded SQLite now, Elasticsearch next).

The unit of writing is a whole document: its chunks are replaced in one step, together with the
checksum that says which version they came from. That is what makes re-ingest idempotent and a
crashed ingest resumable: a document is either fully in at its new checksum or untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from core.embedder import Vectors
from core.models import Chunk, DocumentRecord, IndexStats, SearchFilters, SearchHit, SearchMode


class IndexError_(RuntimeError):
    """The index can't be opened or used as asked; the message says why and what to do."""


class SearchIndex(Protocol):
    async def replace_document(
        self, record: DocumentRecord, chunks: Sequence[Chunk], vectors: Vectors
    ) -> None:
        """Atomically make `chunks` the document's only chunks and remember its checksum."""

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

    async def close(self) -> None: ...
