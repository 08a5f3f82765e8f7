"""The answer when no model can be used: the best passages, quoted and linked, and labelled.

It is the floor under every other path: a user never gets silence, and what they get instead is
honest (verbatim passages, so every citation is verified by construction).
"""

from __future__ import annotations

from core.citations import NumberedSource, defuse_pings
from core.conversation import Answer, AnswerMode, AnswerStatus, Citation

_NOTHING = "I couldn't find anything about this in the knowledge base."


def extractive_answer(
    sources: list[NumberedSource], *, passages: int, quote_chars: int, reason: str
) -> Answer:
    """Up to `passages` passages from distinct documents, best first, each quoted and cited."""
    chosen: list[NumberedSource] = []
    seen_docs: set[str] = set()
    for source in sources:
        if source.hit.chunk.doc_id not in seen_docs:
            seen_docs.add(source.hit.chunk.doc_id)
            chosen.append(source)
        if len(chosen) == passages:
            break
    if not chosen:
        return Answer(
            text=f"{_NOTHING} ({reason})",
            status=AnswerStatus.NOT_FOUND,
            mode=AnswerMode.EXTRACTIVE,
        )
    lines = [f"_{reason} These are the most relevant passages, quoted as written:_", ""]
    citations = []
    for number, source in enumerate(chosen, start=1):
        chunk = source.hit.chunk
        quote = " ".join(chunk.text.split())
        if len(quote) > quote_chars:
            quote = quote[: quote_chars - 1].rsplit(" ", 1)[0] + "…"
        quote = defuse_pings(quote)
        where = defuse_pings(f"{chunk.title} › {chunk.heading}" if chunk.heading else chunk.title)
        lines.append(f"**{where}** [{number}]")
        lines.append(f"> {quote}")
        lines.append("")
        citations.append(
            Citation(
                number,
                chunk.title,
                chunk.url,
                quote,
                verified=True,
                source_kind=source.kind,
                doc_id=chunk.doc_id,
            )
        )
    return Answer(
        text="\n".join(lines).strip(),
        status=AnswerStatus.PARTIAL,
        mode=AnswerMode.EXTRACTIVE,
        citations=citations,
        sources=sorted({c.source_kind for c in citations}),
    )
