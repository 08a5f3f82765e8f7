"""`evaluate`'s work: recall@100 costs a second, deeper search per question, which a caller
reading only the top-10 figures on a slow index (the Elasticsearch emulator) leaves out."""

from __future__ import annotations

from core.domain.documents import Chunk, SearchFilters, SearchHit, SearchMode
from core.evaluation.retrieval import Dataset, evaluate


class _Index:
    """Ranks the same three documents for every question, and counts the searches."""

    def __init__(self) -> None:
        self.depths: list[int] = []

    async def search(
        self, query: str, k: int, mode: SearchMode, filters: SearchFilters | None = None
    ) -> list[SearchHit]:
        self.depths.append(k)
        return [
            SearchHit(Chunk(f"{d}#0", d, "s", d, "", f"https://x/{d}", "text", 0), 1.0 / rank)
            for rank, d in enumerate(["b", "a", "c"], start=1)
        ]


DATA = Dataset("t", {}, {"q1": "one?", "q2": "two?"}, {"q1": {"a": 1}, "q2": {"c": 1}})


async def test_without_deep_a_question_is_searched_once_for_the_same_top_figures() -> None:
    deep, shallow = _Index(), _Index()
    [full] = await evaluate(deep, DATA, [SearchMode.HYBRID], shown=2)  # type: ignore[arg-type]
    [top] = await evaluate(shallow, DATA, [SearchMode.HYBRID], shown=2, deep=False)  # type: ignore[arg-type]
    assert len(deep.depths) == 4
    assert len(shallow.depths) == 2
    assert full.metrics["recall@100"] == 1.0
    assert "recall@100" not in top.metrics
    assert {k: v for k, v in full.metrics.items() if k != "recall@100"} == top.metrics
    assert top.metrics["mrr@10"] == round((1 / 2 + 1 / 3) / 2, 4)
    assert top.metrics["shown@2"] == 0.5
