"""The k1/b bench's own BM25 (`bench.bm25_params`), small: on an index made with the product's
schema it must score as FTS5's `bm25()` does at FTS5's constants, phrases and column weights
included, or the bench's sweep would measure its own scorer instead of k1 and b."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bench.bm25_params import SHIPPED, WEIGHTS, Lexical
from bench.lexical_feedback import Feedback
from bench.proximity import EXACT, pair_postings, proximity_ranked, query_pairs
from core.backends.sqlite.schema import statements

PASSAGES = [
    ("Rate limits", "Tiers", "Requests per minute depend on the usage tier of the organisation."),
    ("Streaming", "Events", "Streaming responses send server-sent events as tokens arrive."),
    ("Rate limits", "", "A 429 error means the rate limit was reached; retry after a pause."),
    ("Batches", "Limits", "Batch requests are not counted against the per-minute rate limit."),
    ("Tool use", "", "Tools are described with a JSON schema; the model calls them by name."),
    ("Errors", "Overloaded", "A 529 error means the API is overloaded; retry with backoff."),
    ("Api_key", "Headers", "Send the api_key header; an API key belongs to one workspace."),
    ("Workspaces", "", "Each key of the API is kept in a workspace; rotate the key yearly."),
]
QUERIES = [
    "what happens when I hit the rate limit",
    "streaming events",
    "retry after an overloaded error",
    "rate-limit per minute",
    "where does the api_key go",  # one term, two FTS5 tokens: a phrase
    "json schema for tools",
]


@pytest.fixture
def index(tmp_path: Path) -> Path:
    path = tmp_path / "index.sqlite"
    with sqlite3.connect(path) as db:
        for statement in statements():
            db.execute(statement)
        db.executemany(
            "INSERT INTO chunks (chunk_id, doc_id, source, title, heading, url, text, position,"
            " embedding) VALUES (?, ?, 'docs', ?, ?, '', ?, 0, x'')",
            [(f"c{n}", f"d{n}", *passage) for n, passage in enumerate(PASSAGES)],
        )
    return path


def test_it_ranks_as_the_search_does_at_fts5s_constants(index: Path) -> None:
    lexical = Lexical(index)
    for query in QUERIES:
        ours = [r.key for r in lexical.rank(lexical.query(query), *SHIPPED)]
        assert ours, query
        assert ours == lexical.fts5(query), query


@pytest.mark.parametrize(
    ("query", "match", "found"),
    [
        ("rate limit", '"rate" OR "limit"', 3),
        # "api_key" is the phrase "api key" to FTS5: where the two are apart, it isn't there.
        ("api_key header", '"api_key" OR "header"', 1),
    ],
)
def test_its_scores_are_fts5s_bm25(index: Path, query: str, match: str, found: int) -> None:
    lexical = Lexical(index)
    ours = {r.key: r.score for r in lexical.rank(lexical.query(query), *SHIPPED)}
    with sqlite3.connect(index) as db:
        real = db.execute(
            "SELECT chunk_id, -bm25(chunks_fts, ?, ?, ?, ?) FROM chunks_fts"
            " JOIN chunks ON chunks.id = chunks_fts.rowid WHERE chunks_fts MATCH ?",
            (*WEIGHTS.values(), match),
        ).fetchall()
    assert len(real) == len(ours) == found
    assert ours == {key: pytest.approx(score) for key, score in real}


def test_other_constants_change_the_scores(index: Path) -> None:
    lexical = Lexical(index)
    postings = lexical.query("rate limit error")
    shipped = {r.key: r.score for r in lexical.rank(postings, *SHIPPED)}
    flatter = {r.key: r.score for r in lexical.rank(postings, 1.2, 0.0)}
    assert shipped.keys() == flatter.keys()
    assert shipped != flatter


def test_term_weights_scale_each_terms_share(index: Path) -> None:
    lexical = Lexical(index)
    postings = lexical.query("streaming json")
    plain = {r.key: r.score for r in lexical.rank(postings, *SHIPPED)}
    weighted = {r.key: r.score for r in lexical.rank(postings, *SHIPPED, [2.0, 0.5])}
    assert plain.keys() == weighted.keys() == {"c1", "c4"}
    assert weighted == {"c1": pytest.approx(2 * plain["c1"]), "c4": pytest.approx(plain["c4"] / 2)}


def test_feedback_adds_the_first_passages_terms(index: Path) -> None:
    """The lexical-feedback bench (`bench.lexical_feedback`): with no weight left for expansion
    it is the plain ranking; with some, a passage sharing no query term but the first
    passage's rarer terms comes in behind the passages that match the query."""
    lexical = Lexical(index)
    feedback = Feedback(lexical, max_share=0.3)  # of 8 passages, terms in at most 2
    postings = lexical.query("overloaded")
    first = lexical.rank(postings, *SHIPPED)
    assert [r.key for r in first] == ["c5"]
    assert feedback.expanded(postings, first, 1, 10, 1.0) == first
    expanded = [r.key for r in feedback.expanded(postings, first, 1, 10, 0.5)]
    assert expanded[0] == "c5"
    assert "c2" in expanded  # "a 429 error ...; retry after a pause": shares "error", "retry"
    common_only = Feedback(lexical, max_share=0.1).expanded(postings, first, 1, 10, 0.5)
    assert [r.key for r in common_only] == ["c5"]  # every term is in more than 0.8 passages


def test_proximity_pairs_count_neighbouring_terms_in_order_or_either_way(index: Path) -> None:
    """The proximity bench (`bench.proximity`): "rate limit" stands in that order in c2's and
    c3's text and in c0's and c2's title; "limit rate" never does, but is near either way."""
    lexical = Lexical(index)
    lexical.tokenise(["rate", "limit"])

    def rows(first: str, second: str, kind: str) -> dict[str, float]:
        found, counts = pair_postings(lexical, first, second, kind)
        return {lexical.chunk_of[int(r)]: float(c) for r, c in zip(found, counts, strict=True)}

    title, text = WEIGHTS["title"], WEIGHTS["text"]
    ordered = rows("rate", "limit", "ordered")
    assert ordered == {"c0": title, "c2": title + text, "c3": text}
    assert rows("limit", "rate", "ordered") == {}
    assert rows("limit", "rate", "unordered") == rows("rate", "limit", "unordered") == ordered


def test_proximity_rescores_only_the_passages_holding_a_pair(index: Path) -> None:
    """c2 says "rate limit was reached; retry": its "limit" is three positions before
    "retry"; the other passages with either word hold only one of them."""
    lexical = Lexical(index)
    terms = lexical.query("limit retry")
    pairs = query_pairs(lexical, "limit retry", "ordered")
    plain = {r.key: r.score for r in lexical.rank(terms, *SHIPPED)}
    unmoved = proximity_ranked(lexical, terms, pairs, 0.0, EXACT, 100)
    assert {r.key: r.score for r in unmoved} == plain
    boosted = {r.key: r.score for r in proximity_ranked(lexical, terms, pairs, 0.5, EXACT, 100)}
    assert boosted.keys() == plain.keys() == {"c0", "c2", "c3", "c5"}
    assert boosted["c2"] > plain["c2"]
    assert {k: s for k, s in boosted.items() if k != "c2"} == {
        k: s for k, s in plain.items() if k != "c2"
    }
    assert list(boosted) == sorted(boosted, key=lambda k: -boosted[k])
    # Only BM25's first candidates are re-scored: c2 (BM25's first) among them gains.
    first = list(plain).index("c2") + 1
    none = proximity_ranked(lexical, terms, pairs, 0.5, EXACT, first - 1)
    assert [(r.key, r.score) for r in none] == list(plain.items())
    reaching = {r.key: r.score for r in proximity_ranked(lexical, terms, pairs, 0.5, EXACT, first)}
    assert reaching == boosted
