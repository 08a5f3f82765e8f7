"""What a parser makes of a document: titled sections with anchors, the limits a parse runs
under, and the anchor slugs a heading gets (unique within its document, like a site's own)."""

from __future__ import annotations

import re
import time
import unicodedata
from dataclasses import dataclass, field

from core.config import IngestSettings
from core.errors import UnreadableDocument


@dataclass(slots=True)
class Section:
    heading: str
    anchor: str | None
    text: str


@dataclass(slots=True)
class ParsedDocument:
    title: str
    sections: list[Section] = field(default_factory=list)


class AnchorSlugger:
    """GitHub-style heading slugs, with `-1`, `-2` suffixes for repeats within one page."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def slug(self, heading: str) -> str:
        text = unicodedata.normalize("NFKC", heading).strip().lower()
        base = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        count = self._seen.get(base)
        self._seen[base] = 0 if count is None else count + 1
        return base if count is None else f"{base}-{count + 1}"

    def reserve(self, anchor: str) -> str:
        self._seen.setdefault(anchor, 0)
        return anchor


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """What a hostile file may cost a parser (from `ingest.*`): each bound turns a file that
    would take minutes or gigabytes into a skip reason, or flattens it, in linear time."""

    max_depth: int
    max_attributes: int
    timeout_s: float
    threads: int  # parses running at once, abandoned ones included (`daemon_work`)
    max_unpacked_bytes: int  # what an Office file (.docx, .pptx, .xlsx: a zip) may unpack to

    @classmethod
    def from_settings(cls, settings: IngestSettings) -> ParseLimits:
        return cls(
            max_depth=settings.max_nesting_depth,
            max_attributes=settings.max_html_attributes,
            timeout_s=settings.parse_timeout_s,
            threads=settings.parse_threads,
            max_unpacked_bytes=settings.max_unpacked_bytes,
        )


def too_slow(timeout_s: float) -> UnreadableDocument:
    return UnreadableDocument(f"parsing took longer than {timeout_s:g} s (ingest.parse_timeout_s)")


class Deadline:
    """A parse's time limit, checked between the pieces a parser walks (pages, paragraphs,
    rows, slides): a crafted file can make any one library slow, so past it the file is
    skipped as too slow rather than holding a parse thread."""

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._at = time.monotonic() + timeout_s

    def check(self) -> None:
        if time.monotonic() > self._at:
            raise too_slow(self._timeout_s)


def tidy_text(raw: str) -> str:
    lines = [" ".join(line.split()) for line in raw.splitlines()]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()
