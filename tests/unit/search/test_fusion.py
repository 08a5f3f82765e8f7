from __future__ import annotations

import pytest

from core.search.fusion import Ranked, reciprocal_rank_fusion


def test_rrf_rewards_agreement_and_keeps_both_sides() -> None:
    bm25 = [Ranked("a", 9.0), Ranked("b", 5.0), Ranked("c", 1.0)]
    vector = [Ranked("b", 0.9), Ranked("d", 0.8), Ranked("a", 0.1)]
    fused = reciprocal_rank_fusion(bm25, vector, k=60, bm25_weight=1.0, vector_weight=1.0)
    assert [f.key for f in fused][:2] == ["b", "a"]  # b: ranks 2+1 beats a: ranks 1+3
    b = fused[0]
    assert (b.bm25_rank, b.vector_rank) == (2, 1)
    assert b.bm25_score == 5.0
    assert b.vector_score == 0.9
    assert b.score == pytest.approx(1 / 62 + 1 / 61)
    d = next(f for f in fused if f.key == "d")
    assert d.bm25_rank is None
    assert d.bm25_score is None


def test_weights_shift_the_order() -> None:
    bm25 = [Ranked("a", 1.0)]
    vector = [Ranked("b", 1.0)]
    fused = reciprocal_rank_fusion(bm25, vector, k=60, bm25_weight=1.0, vector_weight=2.0)
    assert [f.key for f in fused] == ["b", "a"]
