"""What a web search gives back, as values: the pages an answer cites, and each page as one
passage that can be numbered, cited and learned like a document's."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from core.domain.documents import Chunk


@dataclass(frozen=True, slots=True)
class WebSource:
    url: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class WebResult:
    query: str
    sources: tuple[WebSource, ...]


def page_chunk(
    page: WebSource, *, chunk_id: str, doc_id: str, source: str, position: int, **extra: Any
) -> Chunk:
    """A web page as a passage: its own URL (no anchor: the page is the passage's home)."""
    return Chunk(
        chunk_id=chunk_id,
        doc_id=doc_id,
        source=source,
        title=page.title,
        heading="",
        url=page.url,
        text=page.text,
        position=position,
        **extra,
    )


def web_chunks(result: WebResult) -> list[Chunk]:
    """The result's pages as passages an answer can cite, numbered like any other."""
    return [
        page_chunk(
            s,
            chunk_id=f"web:{hashlib.sha256(f'{s.url}|{s.text}'.encode()).hexdigest()[:24]}",
            doc_id=s.url,
            source=WEB_SOURCE,
            position=position,
        )
        for position, s in enumerate(result.sources)
    ]


WEB_SOURCE = "web"  # `source` of a live web page among an answer's passages
