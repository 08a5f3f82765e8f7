from __future__ import annotations

import sqlite3

import pytest

from core.backends.sqlite.fts_query import fts_or_expression, within_postings_budget
from core.search.terms import query_terms


def _expression(text: str, max_terms: int) -> str | None:
    terms = query_terms(text, max_terms)
    return fts_or_expression(terms) if terms else None


def test_stop_words_dropped_and_terms_deduplicated() -> None:
    assert query_terms("How do I set the rate limit? The RATE limit!", 64) == [
        "set",
        "rate",
        "limit",
    ]


def test_only_stop_words_gives_no_expression() -> None:
    assert _expression("what is the", 64) is None
    assert _expression("   ", 64) is None


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
    expression = fts_or_expression(query_terms(text, 64)) if query_terms(text, 64) else None
    assert expression is not None
    db.execute("SELECT * FROM t WHERE t MATCH ?", (expression,)).fetchall()


def test_term_cap() -> None:
    assert len(query_terms(" ".join(f"w{i}" for i in range(500)), 64)) == 64


def test_postings_budget_drops_the_commonest_terms_first() -> None:
    terms = ["protein", "cell", "apoptosis", "unseen"]
    frequency = {"protein": 900, "cell": 5_000, "apoptosis": 40, "unseen": 0}
    assert within_postings_budget(terms, frequency, 1_000) == ["protein", "apoptosis"]
    assert within_postings_budget(terms, frequency, 10_000) == ["protein", "cell", "apoptosis"]
    # The rarest term is kept even when it alone is over the budget.
    assert within_postings_budget(["cell"], frequency, 10) == ["cell"]
    assert within_postings_budget(["unseen"], frequency, 10) == []
