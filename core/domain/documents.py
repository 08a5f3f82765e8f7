"""The knowledge base's value types, shared by every index backend and the ingest pipeline."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, TypeAlias

# The source label of every learned chunk: no ingest or named source may use it, or its prune
# would delete what the bot learned.
LEARNED_SOURCE = "learned"

# numpy costs a tenth of a second at import: only the type checker needs it here, so naming
# vectors in a signature never loads it (`bot --help` imports this module).
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


class SearchMode(StrEnum):
    BM25 = "bm25"
    VECTOR = "vector"
    HYBRID = "hybrid"


@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrievable passage: what a citation points at.

    `url` is the deep link (with `#anchor` where the source has one) that lands a reader on the
    passage; `title` and `heading` travel with it so a hit is readable without its document.
    """

    chunk_id: str
    doc_id: str
    source: str
    title: str
    heading: str
    url: str
    text: str
    position: int
    learned: bool = False
    keywords: tuple[str, ...] = ()


# The checksum of a document whose write began but never completed. Elasticsearch, which has
# no transaction around a document's chunks, records a new document under it before writing
# any chunk, so that whatever a failed or interrupted write leaves stays in reach of
# `bot remove` and `--prune`; it matches no content, so the next ingest writes it again.
PENDING_CHECKSUM = ""


@dataclass(frozen=True, slots=True)
class DocumentRecord:
    """What the index remembers of a document to decide whether a re-ingest must touch it."""

    doc_id: str
    source: str
    title: str
    url: str
    checksum: str
    chunk_count: int

    @property
    def complete(self) -> bool:
        """False for a document whose write never completed (`PENDING_CHECKSUM`): held, so it
        can be removed, but never taken as indexed, so a sync that finds it unchanged at its
        source still writes it."""
        return self.checksum != PENDING_CHECKSUM


def indexed(records: dict[str, DocumentRecord]) -> set[str]:
    """The documents a connector may call unchanged when its source says so: those whose
    write completed (a pending one must be read and written again)."""
    return {doc_id for doc_id, record in records.items() if record.complete}


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """Restrictions applied on both sides of a hybrid search (before fusion, not after)."""

    sources: tuple[str, ...] = ()
    doc_ids: tuple[str, ...] = ()
    learned: bool | None = None

    def is_empty(self) -> bool:
        return not self.sources and not self.doc_ids and self.learned is None


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A chunk with the evidence for its place: both sides' ranks and scores and the fused score.

    Ranks are 1-based; `None` means the side did not return the chunk in its candidates.
    """

    chunk: Chunk
    score: float
    bm25_rank: int | None = None
    bm25_score: float | None = None
    vector_rank: int | None = None
    vector_score: float | None = None


@dataclass(slots=True)
class IndexStats:
    documents: int = 0
    chunks: int = 0
    learned_chunks: int = 0
    sources: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DocumentWrite:
    record: DocumentRecord
    chunks: Sequence[Chunk]
    vectors: Vectors


Vectors: TypeAlias = "npt.NDArray[np.float32]"


class Outcome(StrEnum):
    ADDED = "added"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    SKIPPED = "skipped"
    FAILED = "failed"
    DELETED = "deleted"


Progress = Callable[[int], None]


def chunk_id(doc_id: str, position: int) -> str:
    return f"{hashlib.sha256(doc_id.encode()).hexdigest()[:20]}-{position:05d}"


def embedding_text(chunk: Chunk) -> str:
    """What the model sees: the passage with its title and heading, which carry its topic."""
    return "\n".join(part for part in (chunk.title, chunk.heading, chunk.text) if part)
