"""Feedback arithmetic shared by every state store: an answer's citations as stored, and the net
vote each learned document earned from the answers that cited it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from core.domain.conversation import Answer, AnswerMode, AnswerStatus, Citation, SourceKind
from core.domain.learned import LEARNED_PREFIX


def citations_json(citations: Sequence[Citation]) -> list[dict[str, object]]:
    return [json.loads(json.dumps(asdict(c), default=str)) for c in citations]


# What a 👎 can say was wrong, as the reason form offers it.
FEEDBACK_REASONS = {
    "wrong": "It's wrong",
    "outdated": "It's outdated",
    "missing": "Something is missing",
    "unclear": "It's unclear",
}
MAX_FEEDBACK_NOTE_CHARS = 1_000  # what a person may add in their own words


@dataclass(frozen=True, slots=True)
class RecordedAnswer:
    """An answer as the state store kept it: enough to show it again, as it was first shown
    (a private answer shared with the channel): its mode label and the sources it consulted
    come back with it. Its trace does not."""

    conversation_key: str
    question: str
    answer: Answer


def recorded_answer(
    conversation_key: str,
    question: str,
    text: str,
    status: str,
    citations: Any,
    mode: str = AnswerMode.AGENT.value,
    consulted: Any = (),
) -> RecordedAnswer:
    kept = _citations(citations)
    answer = Answer(
        text,
        AnswerStatus(status),
        AnswerMode(mode),
        citations=kept,
        consulted=_citations(consulted),
    )
    answer.sources = sorted({c.source_kind for c in kept})
    return RecordedAnswer(conversation_key, question, answer)


def _citations(kept: Any) -> list[Citation]:
    """Citations as a store kept them (`citations_json`); anything else is dropped."""
    return [
        Citation(
            number=int(c["number"]),
            title=str(c["title"]),
            url=str(c["url"]),
            quote=str(c["quote"]),
            verified=bool(c["verified"]),
            source_kind=SourceKind(c.get("source_kind", SourceKind.KNOWLEDGE_BASE)),
            doc_id=str(c.get("doc_id", "")),
            chunk_id=str(c.get("chunk_id", "")),
            passage_sha=str(c.get("passage_sha", "")),
            directive=str(c.get("directive", "")),
        )
        for c in kept or ()
        if isinstance(c, dict)
    ]


def votes_by_learned_document(answers: Iterable[tuple[list[Any], int]]) -> dict[str, int]:
    """Each answer's net vote credited to every learned document it cited (once per answer):
    learned passages, and web pages the same answer learned (their `doc_id` names the learned
    document; a page's own URL matches none)."""
    votes: dict[str, int] = {}
    for citations, net in answers:
        cited = {
            c.get("doc_id")
            for c in citations
            if isinstance(c, dict)
            and (
                c.get("source_kind") == SourceKind.LEARNED.value
                or (
                    c.get("source_kind") == SourceKind.WEB.value
                    and str(c.get("doc_id", "")).startswith(LEARNED_PREFIX)
                )
            )
        }
        for doc_id in cited:
            if isinstance(doc_id, str) and doc_id:
                votes[doc_id] = votes.get(doc_id, 0) + net
    return votes
