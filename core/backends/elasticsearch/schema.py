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


_KEYWORD = {"type": "keyword"}
_MILLIS = {"type": "date", "format": "epoch_millis"}
_COUNT = {"type": "integer"}
_KEPT_TEXT = {"type": "text", "index": False}
_KEPT_OBJECT = {"type": "object", "enabled": False}


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
        self.feedback_reasons = f"{prefix}-feedback-reasons"
        self.locks = f"{prefix}-locks"
        self.keywords = f"{prefix}-keywords"
        self.keyword_links = f"{prefix}-keyword-links"
        self.learned = f"{prefix}-learned"
        self.facts = f"{prefix}-model-facts"
        self.rechecks = f"{prefix}-rechecks"
        self.pending_replies = f"{prefix}-pending-replies"
        self.reply_owners = f"{prefix}-reply-owners"
        self.askers = f"{prefix}-askers"

    def version(self, number: int) -> str:
        return f"{self.chunks}-v{number}"

    def version_number(self, index: str) -> int | None:
        head, _, number = index.rpartition("-v")
        return int(number) if head == self.chunks and number.isdigit() else None

    def state_indices(self) -> dict[str, dict[str, Any]]:
        """Each state index's fields: what is looked up is a keyword, what is only kept
        (texts, turns, citations) is stored unindexed, every time is epoch milliseconds."""
        return {
            self.conversations: {"key": _KEYWORD, "turns": _KEPT_OBJECT, "updated_at": _MILLIS},
            self.deliveries: {"key": _KEYWORD, "seen_at": _MILLIS},
            self.threads: {"key": _KEYWORD, "created_at": _MILLIS},
            self.answers: {
                "conversation_key": _KEYWORD,
                "question": _KEPT_TEXT,
                "answer": _KEPT_TEXT,
                "status": _KEYWORD,
                "citations": _KEPT_OBJECT,
                "created_at": _MILLIS,
                # The answer log (`bot report`); added to an older index when it opens.
                "platform": _KEYWORD,
                "channel": _KEYWORD,
                "question_hash": _KEYWORD,
                "mode": _KEYWORD,
                "posted": {"type": "boolean"},
                "model": _KEYWORD,
                "input_tokens": _COUNT,
                "output_tokens": _COUNT,
                "total_s": {"type": "float"},
                "model_s": {"type": "float"},
                "consulted": _KEPT_OBJECT,
                "question_sketch": _KEPT_OBJECT,
            },
            self.feedback: {
                "answer_id": _KEYWORD,
                "user": _KEYWORD,
                "vote": {"type": "byte"},
                "at": _MILLIS,
            },
            self.locks: {"name": _KEYWORD, "holder": _KEYWORD, "expires_at": _MILLIS},
            self.keywords: {
                "keyword": _KEYWORD,
                "uses": _COUNT,
                "created_at": _MILLIS,
                "last_used_at": _MILLIS,
            },
            self.keyword_links: {
                "keyword": _KEYWORD,
                "doc_id": _KEYWORD,
                "question": _KEPT_TEXT,
                "at": _MILLIS,
            },
            self.learned: {
                "doc_id": _KEYWORD,
                "question": _KEPT_TEXT,
                "query": _KEPT_TEXT,
                "sources": _KEPT_OBJECT,
                "uses": _COUNT,
                "created_at": _MILLIS,
                "last_used_at": _MILLIS,
            },
            self.facts: {"key": _KEYWORD, "value": _KEYWORD, "updated_at": _MILLIS},
            self.rechecks: {"answer_id": _KEYWORD, "at": _MILLIS},
            self.feedback_reasons: {
                "answer_id": _KEYWORD,
                "user": _KEYWORD,
                "reason": _KEYWORD,
                "note": _KEPT_TEXT,
                "at": _MILLIS,
            },
            self.pending_replies: {
                "platform": _KEYWORD,
                "channel": _KEYWORD,
                "message": _KEYWORD,
                "thread": _KEYWORD,
                "streamed": {"type": "boolean"},
                "owner": _KEYWORD,
                "created_at": _MILLIS,
            },
            self.reply_owners: {"owner": _KEYWORD, "beat_at": _MILLIS},
            self.askers: {"asker": _KEYWORD, "asked": _KEPT_OBJECT, "updated_at": _MILLIS},
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
