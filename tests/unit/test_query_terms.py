from __future__ import annotations

import sqlite3

import pytest

from core.query_terms import fts_match_expression, query_terms


def test_stop_words_dropped_and_terms_deduplicated() -> None:
    assert query_terms("How do I set the rate limit? The RATE limit!", 64) == [
        "set",
        "rate",
        "limit",
    ]


def test_only_stop_words_gives_no_expression() -> None:
    assert fts_match_expression("what is the", 64) is None
    assert fts_match_expression("   ", 64) is None


@pytest.mark.parametrize(
    "text",
    [
        'he said "quote',
        "NEAR(a b) OR title:x AND NOT y*",
        "col:value ^start -minus +plus (paren",
        "emoji 🚀 and ümlaut and 中文",
        "'; DROP TABLE chunks; --",
    ],
)
def test_hostile_queries_are_valid_fts5(text: str) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    db.execute("INSERT INTO t VALUES ('a document about near title value start minus')")
    expression = fts_match_expression(text, 64)
    assert expression is not None
    db.execute("SELECT * FROM t WHERE t MATCH ?", (expression,)).fetchall()


def test_term_cap() -> None:
    assert len(query_terms(" ".join(f"w{i}" for i in range(500)), 64)) == 64
