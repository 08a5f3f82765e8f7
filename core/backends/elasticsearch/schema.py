"""What the bot creates in Elasticsearch: index names, the chunks template, the state indices.

Chunks live in versioned indices (`<prefix>-chunks-v1`, `-v2`, ...) behind the alias
`<prefix>-chunks`, which is all that searches and writes ever name. A new embedder or mapping
gets a new version, filled while the old one keeps serving, then the alias moves in one atomic
step (`bot index reindex`). Each version records in its mapping's `_meta` which embedder built
its vectors, so a bot configured with another embedder refuses to mix them.

Document records (the checksums that make re-ingest idempotent) are stored in the same index as
their chunks (`kind: document`), so a reindex carries them along and an index version is always
self-consistent.
"""

from __future__ import annotations

import hashlib
from typing import Any

from core.config import ElasticsearchSettings

SCHEMA_VERSION = "1"
CHUNK = "chunk"
DOCUMENT = "document"
# The longest `_id` Elasticsearch accepts is 512 bytes; longer ones are hashed.
_MAX_ID_BYTES = 512
_ANALYZER = "english"


def doc_id_key(value: str) -> str:
    """A stable `_id` for any string key (chunk ids are already short; others may not be)."""
    if len(value.encode()) <= _MAX_ID_BYTES and not value.startswith("_"):
        return value
    return hashlib.sha256(value.encode()).hexdigest()


def hashed_id(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class IndexNames:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.chunks = f"{prefix}-chunks"
        self.template = f"{prefix}-chunks"
        self.conversations = f"{prefix}-conversations"
        self.deliveries = f"{prefix}-deliveries"
        self.threads = f"{prefix}-threads"
        self.answers = f"{prefix}-answers"
        self.feedback = f"{prefix}-feedback"
        self.locks = f"{prefix}-locks"
        self.keywords = f"{prefix}-keywords"
        self.keyword_links = f"{prefix}-keyword-links"
        self.learned = f"{prefix}-learned"

    def version(self, number: int) -> str:
        return f"{self.chunks}-v{number}"

    def version_number(self, index: str) -> int | None:
        head, _, number = index.rpartition("-v")
        return int(number) if head == self.chunks and number.isdigit() else None

    def state_indices(self) -> dict[str, dict[str, Any]]:
        return {
            self.conversations: {
                "key": {"type": "keyword"},
                "turns": {"type": "object", "enabled": False},
                "updated_at": {"type": "date", "format": "epoch_millis"},
            },
            self.deliveries: {
                "key": {"type": "keyword"},
                "seen_at": {"type": "date", "format": "epoch_millis"},
            },
            self.threads: {
                "key": {"type": "keyword"},
                "created_at": {"type": "date", "format": "epoch_millis"},
            },
            self.answers: {
                "conversation_key": {"type": "keyword"},
                "question": {"type": "text", "index": False},
                "answer": {"type": "text", "index": False},
                "status": {"type": "keyword"},
                "citations": {"type": "object", "enabled": False},
                "created_at": {"type": "date", "format": "epoch_millis"},
            },
            self.feedback: {
                "answer_id": {"type": "keyword"},
                "user": {"type": "keyword"},
                "vote": {"type": "byte"},
                "at": {"type": "date", "format": "epoch_millis"},
            },
            self.locks: {
                "name": {"type": "keyword"},
                "holder": {"type": "keyword"},
                "expires_at": {"type": "date", "format": "epoch_millis"},
            },
            self.keywords: {
                "keyword": {"type": "keyword"},
                "uses": {"type": "integer"},
                "created_at": {"type": "date", "format": "epoch_millis"},
                "last_used_at": {"type": "date", "format": "epoch_millis"},
            },
            self.keyword_links: {
                "keyword": {"type": "keyword"},
                "doc_id": {"type": "keyword"},
                "question": {"type": "text", "index": False},
                "at": {"type": "date", "format": "epoch_millis"},
            },
            self.learned: {
                "doc_id": {"type": "keyword"},
                "question": {"type": "text", "index": False},
                "query": {"type": "text", "index": False},
                "sources": {"type": "object", "enabled": False},
                "uses": {"type": "integer"},
                "created_at": {"type": "date", "format": "epoch_millis"},
                "last_used_at": {"type": "date", "format": "epoch_millis"},
            },
        }


def chunk_properties(dimensions: int) -> dict[str, Any]:
    """Field -> mapping of the chunks index; the type of each is checked when the bot opens it."""
    text = {"type": "text", "analyzer": _ANALYZER}
    return {
        "kind": {"type": "keyword"},
        "chunk_id": {"type": "keyword"},
        "doc_id": {"type": "keyword"},
        "source": {"type": "keyword"},
        "title": {**text, "fields": {"raw": {"type": "keyword", "ignore_above": 1024}}},
        "heading": text,
        "text": text,
        "url": {"type": "keyword", "index": False},
        "position": {"type": "integer"},
        "learned": {"type": "boolean"},
        "keywords": {**text, "fields": {"exact": {"type": "keyword", "ignore_above": 256}}},
        "checksum": {"type": "keyword"},
        "created_at": {"type": "date", "format": "epoch_millis"},
        "updated_at": {"type": "date", "format": "epoch_millis"},
        "embedding": {
            "type": "dense_vector",
            "dims": dimensions,
            "index": True,
            "similarity": "cosine",
        },
        "document": {"type": "object", "enabled": False},
    }


def chunks_meta(embedder_id: str, dimensions: int) -> dict[str, str]:
    return {
        "schema_version": SCHEMA_VERSION,
        "embedder": embedder_id,
        "dimensions": str(dimensions),
    }


def chunks_template(
    names: IndexNames, settings: ElasticsearchSettings, embedder_id: str, dimensions: int
) -> dict[str, Any]:
    return {
        "index_patterns": [f"{names.chunks}-v*"],
        "priority": 100,
        "template": {
            "settings": {
                "number_of_shards": settings.number_of_shards,
                "number_of_replicas": settings.number_of_replicas,
            },
            "mappings": {
                "dynamic": "strict",
                "_meta": chunks_meta(embedder_id, dimensions),
                "properties": chunk_properties(dimensions),
            },
        },
        "_meta": {"managed_by": "docbot", "schema_version": SCHEMA_VERSION},
    }


def mapping_conflicts(actual: dict[str, Any], dimensions: int) -> list[str]:
    """Fields of an existing chunks index whose type differs from what this bot writes."""
    expected = chunk_properties(dimensions)
    conflicts: list[str] = []
    for field, spec in expected.items():
        got = actual.get(field)
        if got is None:
            conflicts.append(f"{field} is missing")
            continue
        got_type = got.get("type", "object")
        if got_type != spec["type"]:
            conflicts.append(f"{field} is {got_type}, expected {spec['type']}")
        elif spec["type"] == "dense_vector" and int(got.get("dims", -1)) != dimensions:
            conflicts.append(f"{field} has {got.get('dims')} dimensions, expected {dimensions}")
    return conflicts
