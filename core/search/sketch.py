"""The sketch of a question whose text the answer log does not keep (privacy mode)."""

from __future__ import annotations

from core.domain.insights import question_sketch
from core.ports import Embedder


async def sketch_of(
    question: str, store_questions: bool, embedder: Embedder | None
) -> tuple[float, ...]:
    """Empty when the text itself is kept (the report embeds it) or there is no embedder."""
    if store_questions or embedder is None:
        return ()
    return question_sketch((await embedder.embed_query(question)).tolist())
