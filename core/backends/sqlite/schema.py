"""The embedded index's tables: chunks with an FTS5 mirror over title, heading, text and
keywords, documents with their checksums, vectors, a generation counter readers watch, and the
log of chunks whose vectors changed, which keeps the approximate vector graph current
(`vectors.py`)."""

from __future__ import annotations

import re
import sqlite3

SCHEMA_VERSION = "1"


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    title TEXT NOT NULL,
    url TEXT NOT NULL,
    checksum TEXT NOT NULL,
    chunk_count INTEGER NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    chunk_id TEXT NOT NULL UNIQUE,
    doc_id TEXT NOT NULL,
    source TEXT NOT NULL,
    title TEXT NOT NULL,
    heading TEXT NOT NULL,
    url TEXT NOT NULL,
    text TEXT NOT NULL,
    position INTEGER NOT NULL,
    learned INTEGER NOT NULL DEFAULT 0,
    keywords TEXT NOT NULL DEFAULT '',
    embedding BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_doc ON chunks (doc_id);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5 (
    title, heading, text, keywords,
    content = 'chunks', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, title, heading, text, keywords)
    VALUES (new.id, new.title, new.heading, new.text, new.keywords);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, title, heading, text, keywords)
    VALUES ('delete', old.id, old.title, old.heading, old.text, old.keywords);
END;
CREATE TABLE IF NOT EXISTS vector_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS chunks_vector_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO vector_log (id) VALUES (new.id);
END;
CREATE TRIGGER IF NOT EXISTS chunks_vector_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO vector_log (id) VALUES (old.id);
END;
CREATE TRIGGER IF NOT EXISTS chunks_vector_au AFTER UPDATE OF embedding ON chunks BEGIN
    INSERT INTO vector_log (id) VALUES (new.id);
END;
CREATE TRIGGER IF NOT EXISTS chunks_au AFTER UPDATE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, title, heading, text, keywords)
    VALUES ('delete', old.id, old.title, old.heading, old.text, old.keywords);
    INSERT INTO chunks_fts (rowid, title, heading, text, keywords)
    VALUES (new.id, new.title, new.heading, new.text, new.keywords);
END;
"""


# The full-text index's tokenizer (Porter stems over Unicode words, accents folded), read from
# the schema: anything that must see the index's own tokens (term proximity) uses it too.
TOKENIZER = re.search(r"tokenize = '([^']+)'", _SCHEMA)[1]  # type: ignore[index]
CHUNK_COLUMNS = (
    "id, chunk_id, doc_id, source, title, heading, url, text, position, learned, keywords"
)


def statements() -> list[str]:
    """The schema split into statements (executescript would commit our open transaction)."""
    statements: list[str] = []
    buffer = ""
    for line in _SCHEMA.strip().splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    return statements


def schema_names() -> set[str]:
    """The name of every table, index and trigger the schema makes."""
    return set(re.findall(r"IF NOT EXISTS (\w+)", _SCHEMA))
