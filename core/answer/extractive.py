"""The answer when no model can be used: the best passages, quoted and linked, and labelled.

It is the floor under every other path: a user never gets silence, and what they get instead is
honest (verbatim passages, so every citation is verified by construction). Verbatim is not
unchecked: a document's own links, URL-looking text and pings go through the same check as a
model's answer (`check_links`), so a planted `<https://evil.example|docs>` is never a live link.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from core.answer.citations import NumberedSource, allowed_urls, check_links
from core.domain.conversation import (
    Answer,
    AnswerMode,
    AnswerStatus,
    Citation,
    Trace,
    passage_fingerprint,
)
from core.domain.text import clip, unmarked
from core.domain.text_fragments import text_directive

log = structlog.get_logger(__name__)
_NOTHING = "I couldn't find anything about this in the knowledge base."


def top_documents(sources: list[NumberedSource], passages: int) -> list[NumberedSource]:
    """The best passage of each of the first `passages` documents, best first."""
    chosen: list[NumberedSource] = []
    seen_docs: set[str] = set()
    for source in sources:
        if source.hit.chunk.doc_id not in seen_docs:
            seen_docs.add(source.hit.chunk.doc_id)
            chosen.append(source)
        if len(chosen) == passages:
            break
    return chosen


def quoted(
    chosen: list[NumberedSource],
    *,
    first_number: int,
    quote_chars: int,
    cited: Mapping[str, int] | None = None,
) -> tuple[list[str], list[Citation]]:
    """Each passage as a block (its title and heading with a marker, then the passage quoted
    as written) and its citation, numbered from `first_number`; verified by construction.
    A passage an answer cites already (`cited`: its marker's number by passage id) is quoted
    under that number, and has no second citation. Only the marker after the title is a
    marker: a document's own `[2]` (in its text, title or heading) is shown as `［2］`
    (`unmarked`), or renderers would link it to source 2."""
    allowed = allowed_urls(source.hit.chunk.url for source in chosen)
    cited = cited or {}
    lines: list[str] = []
    citations = []
    next_number = first_number
    for source in chosen:
        chunk = source.hit.chunk
        quote = unmarked(check_links(clip(chunk.text, quote_chars), allowed))
        title = unmarked(check_links(chunk.title, allowed))
        heading = unmarked(check_links(chunk.heading, allowed))
        where = f"{title} › {heading}" if chunk.heading else title
        number = cited.get(chunk.chunk_id)
        if number is None:
            number, next_number = next_number, next_number + 1
            citations.append(
                Citation(
                    number,
                    title,
                    chunk.url,
                    quote,
                    verified=True,
                    source_kind=source.kind,
                    doc_id=chunk.doc_id,
                    chunk_id=chunk.chunk_id,
                    passage_sha=passage_fingerprint(chunk.text),
                    directive=text_directive(
                        clip(chunk.text, quote_chars, ellipsis=""), chunk.text
                    ),
                )
            )
        lines += [f"**{where}** [{number}]", f"> {quote}", ""]
    return lines, citations


def extractive_answer(
    sources: list[NumberedSource], *, passages: int, quote_chars: int, reason: str
) -> Answer:
    """Up to `passages` passages from distinct documents, best first, each quoted and cited."""
    chosen = top_documents(sources, passages)
    # Only the chosen passages' pages may be linked, the reason included (an exception's text
    # can carry an endpoint's URL).
    allowed = allowed_urls(source.hit.chunk.url for source in chosen)
    if not chosen:
        return Answer(
            text=check_links(f"{_NOTHING} ({reason})", allowed),
            status=AnswerStatus.NOT_FOUND,
            mode=AnswerMode.EXTRACTIVE,
        )
    intro = check_links(
        f"_{reason} These are the most relevant passages, quoted as written:_", allowed
    )
    lines, citations = quoted(chosen, first_number=1, quote_chars=quote_chars)
    return Answer(
        text="\n".join([intro, "", *lines]).strip(),
        status=AnswerStatus.PARTIAL,
        mode=AnswerMode.EXTRACTIVE,
        citations=citations,
        sources=sorted({c.source_kind for c in citations}),
    )


def consulted_sources(
    sources: list[NumberedSource], cited: list[Citation], count: int
) -> list[Citation]:
    """Up to `count` of the passages given to the model, one per document and none of a cited
    document, as unquoted sources numbered after the citations."""
    cited_docs = {c.doc_id for c in cited}
    rest = [s for s in sources if s.hit.chunk.doc_id not in cited_docs]
    chosen = top_documents(rest, count)
    allowed = allowed_urls(source.hit.chunk.url for source in chosen)
    return [
        Citation(
            len(cited) + number,
            check_links(source.hit.chunk.title, allowed),
            source.hit.chunk.url,
            "",
            verified=False,
            source_kind=source.kind,
            doc_id=source.hit.chunk.doc_id,
            chunk_id=source.hit.chunk.chunk_id,
            passage_sha=passage_fingerprint(source.hit.chunk.text),
        )
        for number, source in enumerate(chosen, start=1)
    ]


def unavailable_reason(exc: Exception, trace: Trace) -> str:
    """Why the answer falls back to quoted passages, for the user; noted in the trace and
    logged as one line (the reason is our own words: never a response body)."""
    trace.notes.append(str(exc))
    log.warning("model_unavailable", reason=str(exc))
    return f"The language model is unavailable right now ({exc})."
