"""Feedback arithmetic shared by every state store: an answer's citations as stored, and the net
vote each learned document earned from the answers that cited it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from core.domain.conversation import Answer, AnswerMode, AnswerStatus, Citation, SourceKind
from core.domain.learned import LEARNED_PREFIX


def citations_json(answer: Answer) -> list[dict[str, object]]:
    return [json.loads(json.dumps(asdict(c), default=str)) for c in answer.citations]


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
    """An answer as the state store kept it: enough to show it again (a private answer
    shared with the channel). How it was produced is not kept; its text says so where it
    matters (quoted passages carry their reason)."""

    conversation_key: str
    question: str
    answer: Answer


def recorded_answer(
    conversation_key: str, question: str, text: str, status: str, citations: Any
) -> RecordedAnswer:
    kept = [
        Citation(
            number=int(c["number"]),
            title=str(c["title"]),
            url=str(c["url"]),
            quote=str(c["quote"]),
            verified=bool(c["verified"]),
            source_kind=SourceKind(c.get("source_kind", SourceKind.KNOWLEDGE_BASE)),
            doc_id=str(c.get("doc_id", "")),
        )
        for c in citations
        if isinstance(c, dict)
    ]
    answer = Answer(text, AnswerStatus(status), AnswerMode.AGENT, citations=kept)
    answer.sources = sorted({c.source_kind for c in kept})
    return RecordedAnswer(conversation_key, question, answer)


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
