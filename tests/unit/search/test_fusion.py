from __future__ import annotations

import pytest

from core.search.fusion import Ranked, reciprocal_rank_fusion, score_fusion


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


def test_rrf_ties_go_to_the_better_bm25_rank_then_the_better_vector_rank() -> None:
    bm25 = [Ranked("a", 3.0), Ranked("x", 2.0), Ranked("b", 1.0)]
    vector = [Ranked("b", 0.9), Ranked("y", 0.8), Ranked("a", 0.7)]
    fused = reciprocal_rank_fusion(bm25, vector, k=60, bm25_weight=1.0, vector_weight=1.0)
    assert fused[0].score == fused[1].score  # ranks (1, 3) and (3, 1)
    assert [f.key for f in fused] == ["a", "b", "x", "y"]  # x (bm25 #2) before y (vector #2)


def test_score_fusion_sees_how_far_ahead_a_side_is() -> None:
    """RRF gives a and b the same score (ranks 1+2 and 2+1); the vector side says a and b are
    close while BM25 says a is far ahead, so score fusion puts a first by a clear margin."""
    bm25 = [Ranked("a", 12.0), Ranked("b", 3.0), Ranked("c", 2.0)]
    vector = [Ranked("b", 0.62), Ranked("a", 0.61), Ranked("c", 0.20)]
    rrf = reciprocal_rank_fusion(bm25, vector, k=60, bm25_weight=1.0, vector_weight=1.0)
    assert rrf[0].score == rrf[1].score
    fused = score_fusion(bm25, vector, vector_share=0.5, normalisation="minmax")
    a, b, c = fused
    assert [a.key, b.key, c.key] == ["a", "b", "c"]
    assert a.score == pytest.approx(0.5 * 1.0 + 0.5 * (0.41 / 0.42))
    assert b.score == pytest.approx(0.5 * (1.0 / 10.0) + 0.5 * 1.0)
    assert (a.bm25_rank, a.vector_rank, a.bm25_score, a.vector_score) == (1, 2, 12.0, 0.61)


@pytest.mark.parametrize("normalisation", ["minmax", "zscore"])
def test_score_fusion_gives_a_missing_side_its_lowest_value(normalisation: str) -> None:
    bm25 = [Ranked("a", 5.0), Ranked("b", 4.0), Ranked("c", 1.0)]
    vector = [Ranked("d", 0.9), Ranked("a", 0.5), Ranked("c", 0.1)]
    fused = {
        f.key: f
        for f in score_fusion(bm25, vector, vector_share=0.5, normalisation=normalisation)  # type: ignore[arg-type]
    }
    # b has no vector score: it counts the vector list's lowest, c's; so b and c differ only
    # by BM25, and d (no BM25) and c differ only by the vector side.
    assert fused["b"].vector_rank is None
    assert fused["b"].score > fused["c"].score
    assert fused["d"].bm25_rank is None
    assert fused["d"].score > fused["c"].score
    bm25_norm = _normalised([5.0, 4.0, 1.0], normalisation)
    vector_norm = _normalised([0.9, 0.5, 0.1], normalisation)
    assert fused["b"].score - fused["c"].score == pytest.approx(0.5 * (bm25_norm[1] - bm25_norm[2]))
    assert fused["d"].score - fused["c"].score == pytest.approx(
        0.5 * (vector_norm[0] - vector_norm[2])
    )


def _normalised(scores: list[float], how: str) -> list[float]:
    if how == "minmax":
        return [(x - min(scores)) / (max(scores) - min(scores)) for x in scores]
    mean = sum(scores) / len(scores)
    spread = (sum((x - mean) ** 2 for x in scores) / len(scores)) ** 0.5
    return [(x - mean) / spread for x in scores]


def test_score_fusion_on_one_short_side_and_one_empty() -> None:
    only = score_fusion([Ranked("a", 2.0)], [], vector_share=0.5, normalisation="minmax")
    assert [f.key for f in only] == ["a"]
    flat = score_fusion(
        [Ranked("a", 2.0), Ranked("b", 2.0)], [], vector_share=0.5, normalisation="zscore"
    )
    assert [f.key for f in flat] == ["a", "b"]  # equal scores: BM25 order
    assert flat[0].score == flat[1].score == 0.0
    assert score_fusion([], [], vector_share=0.5, normalisation="zscore") == []


def test_the_vector_share_moves_the_order() -> None:
    bm25 = [Ranked("a", 9.0), Ranked("b", 1.0)]
    vector = [Ranked("b", 0.9), Ranked("a", 0.1)]
    mostly_bm25 = score_fusion(bm25, vector, vector_share=0.2, normalisation="minmax")
    mostly_vector = score_fusion(bm25, vector, vector_share=0.8, normalisation="minmax")
    assert [f.key for f in mostly_bm25] == ["a", "b"]
    assert [f.key for f in mostly_vector] == ["b", "a"]
