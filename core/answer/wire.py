"""Reading a model server's reply safely: its media type and token counts as a reason or a
trace may show them, never more than a well-formed value."""

from __future__ import annotations

import re

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
