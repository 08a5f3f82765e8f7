"""Why a model path could not produce an answer; the engine turns each into a user message."""

from __future__ import annotations

import re

_MEDIA_TYPE = re.compile(r"[\w.+-]{1,40}/[\w.+-]{1,60}")


class ModelUnavailable(RuntimeError):
    """The model can't be used right now (after the client's retries): fall back, don't fail."""


class NoResponse(RuntimeError):
    """The model was reachable but did not produce a valid answer, even when asked again."""


class ToolsUnsupported(RuntimeError):
    """The model ignored a forced tool call: it can't do tool use, so search for it."""


def media_type(content_type: str | None) -> str:
    """A response's media type as a reason may show it: `text/html` from `text/html; charset=x`,
    and never more than a well-formed type (the header is the server's to fill with anything)."""
    media = (content_type or "").split(";")[0].strip().lower()
    return media if _MEDIA_TYPE.fullmatch(media) else "no recognisable content type"


def token_count(value: object) -> int:
    """A token count as a server reported it, or 0 when it sent something else: usage is
    bookkeeping, and a malformed count must not fail an answer that arrived whole."""
    return value if isinstance(value, int) and value >= 0 else 0
