"""Learned knowledge as values: a keyword's rules (normalised, 2 to 50 characters, no control
characters; written for the model to correct its call) and the records kept per keyword and
per learned document."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from core.domain.text import defuse_pings
from core.domain.web import WebSource
from core.errors import InvalidKeyword

MIN_KEYWORD_CHARS = 2


MAX_KEYWORD_CHARS = 50


_SPACES = re.compile(r"\s+")


def keyword_key(raw: str) -> str:
    """How a keyword is stored (single-spaced, trimmed, case-folded), without judging it: to
    find one learned before today's rules (`bot keywords show/forget`)."""
    return _SPACES.sub(" ", raw).strip().casefold()


def normalise_keyword(raw: str) -> str:
    """Trimmed, case-folded, single-spaced; refused when too short, too long or with controls."""
    if any(unicodedata.category(ch) == "Cc" and ch not in " \t\n" for ch in raw):
        raise InvalidKeyword(f"keyword {raw!r} contains control characters; remove them")
    # A keyword is shown again (`bot keywords`, the report) and comes from untrusted text (a
    # model's save, a web page's title): mention syntax has no place in a search term.
    if defuse_pings(raw) != raw:
        raise InvalidKeyword(
            f"keyword {raw!r} contains a mention (<!here>, <@U…>, @everyone); remove it"
        )
    keyword = keyword_key(raw)
    if not keyword:
        raise InvalidKeyword("a keyword can't be empty")
    if not MIN_KEYWORD_CHARS <= len(keyword) <= MAX_KEYWORD_CHARS:
        raise InvalidKeyword(
            f"keyword {keyword!r} has {len(keyword)} characters; use "
            f"{MIN_KEYWORD_CHARS} to {MAX_KEYWORD_CHARS} (a specific term, not a sentence)"
        )
    return keyword


@dataclass(frozen=True, slots=True)
class LearnedKeyword:
    keyword: str
    associations: int
    uses: int
    created_at: float
    last_used_at: float | None
    last_saved_at: float | None = None  # the newest association: a re-save is activity too


@dataclass(frozen=True, slots=True)
class LearnedDocument:
    """One web search's result as the bot remembers it; `keywords` are its current links."""

    doc_id: str
    question: str
    query: str
    sources: tuple[WebSource, ...]
    created_at: float
    last_used_at: float | None = None
    uses: int = 0
    keywords: tuple[str, ...] = ()


def sources_json(sources: Sequence[WebSource]) -> str:
    return json.dumps([asdict(s) for s in sources])


def sources_from(raw: Any) -> tuple[WebSource, ...]:
    items = json.loads(raw) if isinstance(raw, str) else raw
    return tuple(WebSource(str(i["url"]), str(i["title"]), str(i["text"])) for i in items)


# An association's question past the retention: its hash (`insights.question_hash`) after this.
HASHED_QUESTION = "sha256:"


LEARNED_PREFIX = (
    "learned:"  # learned document ids; never a file or URL, so ingest --prune skips them
)
