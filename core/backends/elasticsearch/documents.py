"""Chunks as Elasticsearch documents and back: the fields stored, the ids (deterministic, so a
re-ingest overwrites instead of duplicating), and a bulk item's failure in words."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from core.backends.elasticsearch.connection import described
from core.backends.elasticsearch.schema import (
    CHUNK,
    DOCUMENT,
    hashed_id,
)
from core.domain.documents import (
    Chunk,
    DocumentRecord,
)


def now_millis() -> int:
    return int(time.time() * 1000)


def chunk_from_source(source: dict[str, Any]) -> Chunk:
    return Chunk(
        chunk_id=str(source["chunk_id"]),
        doc_id=str(source["doc_id"]),
        source=str(source["source"]),
        title=str(source.get("title", "")),
        heading=str(source.get("heading", "")),
        url=str(source.get("url", "")),
        text=str(source.get("text", "")),
        position=int(source.get("position", 0)),
        learned=bool(source.get("learned", False)),
        keywords=tuple(str(k) for k in source.get("keywords") or ()),
    )


def chunk_source(chunk: Chunk, vector: Sequence[float], now: int) -> dict[str, Any]:
    return {
        "kind": CHUNK,
        **{f: getattr(chunk, f) for f in SOURCE_FIELDS if f != "keywords"},
        "keywords": list(chunk.keywords),
        "created_at": now,
        "updated_at": now,
        "embedding": [float(x) for x in vector],
    }


def record_id(doc_id: str) -> str:
    return f"document-{hashed_id(doc_id)}"


def item_reason(item: dict[str, Any]) -> str:
    """Why the cluster refused one bulk item, as one bounded line that never quotes the
    document (a parse failure's reason previews the field's value)."""
    error = item.get("error")
    if isinstance(error, dict):
        return described(str(error.get("type", "error")), str(error.get("reason", "")))
    return f"status {item.get('status')}: {described('', str(error))}"


SOURCE_FIELDS = [
    "chunk_id",
    "doc_id",
    "source",
    "title",
    "heading",
    "url",
    "text",
    "position",
    "learned",
    "keywords",
]


def record_source(record: DocumentRecord, chunk_count: int, now: int) -> dict[str, Any]:
    """A document's record: its checksum says which version its chunks are (written last)."""
    return {
        "kind": DOCUMENT,
        "doc_id": record.doc_id,
        "source": record.source,
        "checksum": record.checksum,
        "updated_at": now,
        "document": {**asdict(record), "chunk_count": chunk_count},
    }
