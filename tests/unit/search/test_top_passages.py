"""The passages a search hands on: at most `per_document` of one document ahead of the others,
the rest held back, not dropped; the order independent of k."""

from __future__ import annotations

import pytest

from core.search.fusion import Fused
from core.search.hybrid import limits_documents, top_passages

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
