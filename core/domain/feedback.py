"""Feedback arithmetic shared by every state store: an answer's citations as stored, and the net
vote each learned document earned from the answers that cited it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from core.domain.conversation import Answer, SourceKind
from core.domain.learned import LEARNED_PREFIX


def citations_json(answer: Answer) -> list[dict[str, object]]:
    return [json.loads(json.dumps(asdict(c), default=str)) for c in answer.citations]


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
