"""The passages a search hands on: at most `per_document` of one document ahead of the others,
the rest held back, not dropped; the order independent of k; documents looked up only as far
down the order as the top k reaches."""

from __future__ import annotations

import random

import pytest

from core.search.fusion import Fused
from core.search.hybrid import limited, limits_documents, top_passages

# Fused order: three passages of the long page A first, then B, A again, C.
ORDER = ["a1", "a2", "a3", "b1", "a4", "c1"]
DOCUMENT = {"a1": "A", "a2": "A", "a3": "A", "a4": "A", "b1": "B", "c1": "C"}


def _keys(k: int, per_document: int, documents: dict[str, str] = DOCUMENT) -> list[str]:
    fused = [Fused(key, score=1.0 - n / 10) for n, key in enumerate(ORDER)]
    return [f.key for f in top_passages(fused, documents, k, per_document)]


def test_a_document_past_its_limit_waits_for_the_others() -> None:
    assert _keys(4, 2) == ["a1", "a2", "b1", "c1"]


def test_what_is_held_back_follows_when_the_others_run_out() -> None:
    assert _keys(6, 2) == ["a1", "a2", "b1", "c1", "a3", "a4"]


def test_zero_is_no_limit() -> None:
    assert _keys(4, 0) == ORDER[:4]


@pytest.mark.parametrize("per_document", [1, 2, 3])
def test_a_shallower_search_is_the_start_of_a_deeper_one(per_document: int) -> None:
    deepest = _keys(len(ORDER), per_document)
    for k in range(1, len(ORDER)):
        assert _keys(k, per_document) == deepest[:k]


def test_a_passage_of_unknown_document_counts_as_its_own() -> None:
    # A chunk deleted between ranking and the document lookup: never merged with another.
    assert _keys(3, 1, {"a1": "A", "a2": "A"}) == ["a1", "a3", "b1"]


@pytest.mark.parametrize(
    ("k", "per_document", "limits"), [(8, 3, True), (3, 3, False), (1, 3, False), (8, 0, False)]
)
def test_no_document_lookup_where_the_limit_cannot_bite(
    k: int, per_document: int, limits: bool
) -> None:
    # A backend that must look documents up (SQLite) skips it when the top k can't change.
    assert limits_documents(k, per_document) is limits
    if not limits:
        assert _keys(k, per_document, {}) == ORDER[:k]


class Lookups:
    """A backend's document lookup that records which keys it was asked for."""

    def __init__(self, documents: dict[str, str]) -> None:
        self.documents = documents
        self.asked: list[str] = []

    def __call__(self, keys: list[str]) -> dict[str, str]:
        self.asked += keys
        return {key: self.documents[key] for key in keys if key in self.documents}


def _fused(keys: list[str]) -> list[Fused]:
    return [Fused(key, score=1.0 - n / (len(keys) + 1)) for n, key in enumerate(keys)]


@pytest.mark.parametrize("seed", range(20))
def test_looking_up_a_prefix_gives_the_order_of_looking_up_all(seed: int) -> None:
    # Long pages and short ones in a random fused order, some chunks deleted meanwhile.
    rng = random.Random(seed)
    documents = {f"p{n}": f"D{rng.randrange(12)}" for n in range(120)}
    keys = list(documents)
    rng.shuffle(keys)
    for deleted in rng.sample(keys, 5):
        del documents[deleted]
    for k in (1, 3, 8, 20, 119, 120, 200):
        for per_document in (0, 1, 2, 3):
            lookups = Lookups(documents)
            assert [f.key for f in limited(_fused(keys), k, per_document, lookups)] == [
                f.key for f in top_passages(_fused(keys), documents, k, per_document)
            ]
            assert len(lookups.asked) == len(set(lookups.asked))  # no key asked twice


def test_documents_are_asked_for_only_as_far_as_the_top_k_reaches() -> None:
    # Eight documents of one passage each, then a long tail: the top 4 are the first 4.
    keys = [f"p{n}" for n in range(200)]
    lookups = Lookups({key: key for key in keys})
    assert [f.key for f in limited(_fused(keys), 4, 2, lookups)] == keys[:4]
    assert lookups.asked == keys[:8]


def test_a_prefix_that_falls_short_is_extended() -> None:
    # One long page fills the first 30 places: the order is looked up further until three
    # other documents are found, and only that far.
    keys = [f"a{n}" for n in range(30)] + [f"b{n}" for n in range(100)]
    documents = {key: key[0] if key.startswith("a") else key for key in keys}
    lookups = Lookups(documents)
    top = limited(_fused(keys), 5, 2, lookups)
    assert [f.key for f in top] == ["a0", "a1", "b0", "b1", "b2"]
    assert len(lookups.asked) < len(keys)
    assert lookups.asked == keys[: len(lookups.asked)]
