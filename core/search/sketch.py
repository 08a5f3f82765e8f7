"""The answer log's row for one answer, as both backends write it: `log_row`, plus in privacy
mode the sketch of the question's embedding (the only place the log needs the embedder)."""

from __future__ import annotations

from core.domain.conversation import Answer
from core.domain.insights import log_row, logged_question, question_sketch
from core.ports import Embedder


async def answer_row(
    conversation_key: str,
    question: str,
    answer: Answer,
    *,
    posted: bool,
    channel: str | None,
    store_questions: bool,
    embedder: Embedder | None,
    max_question_chars: int | None = None,
) -> dict[str, object]:
    """`max_question_chars`: the longest question kept (`logged_question`); None keeps it
    whole."""
    question = logged_question(question, max_question_chars)
    sketch: tuple[float, ...] = ()
    if not store_questions and embedder is not None:  # else the report embeds the text itself
        sketch = question_sketch((await embedder.embed_query(question)).tolist())
    return log_row(
        conversation_key,
        question,
        answer,
        posted=posted,
        store_questions=store_questions,
        sketch=sketch,
        channel=channel,
    )
