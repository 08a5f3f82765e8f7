"""Reading a model server's reply safely: its media type and token counts as a reason or a
trace may show them, never more than a well-formed value."""

from __future__ import annotations

import re
from typing import Any

import jiter

_MEDIA_TYPE = re.compile(r"[\w.+-]{1,40}/[\w.+-]{1,60}")


def media_type(content_type: str | None) -> str:
    """A response's media type as a reason may show it: `text/html` from `text/html; charset=x`,
    and never more than a well-formed type (the header is the server's to fill with anything)."""
    media = (content_type or "").split(";")[0].strip().lower()
    return media if _MEDIA_TYPE.fullmatch(media) else "no recognisable content type"


def token_count(value: object) -> int:
    """A token count as a server reported it, or 0 when it sent something else: usage is
    bookkeeping, and a malformed count must not fail an answer that arrived whole."""
    return value if isinstance(value, int) and value >= 0 else 0


def partial_answer(raw: str | dict[str, Any]) -> str | None:
    """The `answer` of a `respond` call's arguments as far as they have come: a whole object,
    or JSON still being streamed, its unfinished last string included (a client's own snapshot
    leaves it out, and nothing would show until the whole answer is written)."""
    if isinstance(raw, str):
        try:
            raw = jiter.from_json(raw.encode(), partial_mode="trailing-strings")
        except ValueError:
            return None
    answer = raw.get("answer") if isinstance(raw, dict) else None
    return answer if isinstance(answer, str) else None
