"""The terminal adapter's rendering: an answer as Markdown with numbered, linked sources.

A terminal links URLs too (Markdown links become OSC 8 hyperlinks; most terminals make any
printed URL clickable), so the text and titles go through `check_links` here as on Slack and
Discord, and a source URL that is not plain http(s) is never printed as a link. The model's and
the documents' text is `printable` first: an escape sequence in it would clear the screen, set
the title or make a link of its own.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.style import Style
from rich.text import Text

from adapters.answer_labels import CONSULTED, KIND_MARKS, SOURCES
from core.answer.citations import allowed_urls, check_links
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, Citation
from core.domain.text import printable
from core.domain.urls import is_linkable

STATUS_LABELS = {
    AnswerStatus.PARTIAL: "Partial answer: the sources cover only part of the question.",
    AnswerStatus.NOT_FOUND: "Not found in the knowledge base.",
    AnswerStatus.ERROR: "No answer.",
}
MODE_LABELS = {
    AnswerMode.EXTRACTIVE: "Extractive answer (passages quoted, no language model).",
    AnswerMode.SEARCH_THEN_ANSWER: "Answered from the top search results (model without tools).",
}


def render_answer(answer: Answer) -> RenderableType:
    parts: list[RenderableType] = []
    status = None if answer.mode is AnswerMode.EXTRACTIVE else STATUS_LABELS.get(answer.status)
    for label in (MODE_LABELS.get(answer.mode), status):
        if label:
            parts.append(Text(label, style="yellow"))
    allowed = allowed_urls(c.url for c in answer.citations)
    parts.append(Markdown(check_links(printable(answer.text), allowed)))
    for heading, listed in ((SOURCES, answer.citations), (CONSULTED, answer.consulted)):
        if listed:
            parts.append(_sources(heading, listed, quoted=heading == SOURCES))
    return Group(*parts)


def _sources(heading: str, citations: list[Citation], *, quoted: bool) -> Text:
    """Numbered sources with their links; `quoted=False` for ones consulted without a quote."""
    allowed = allowed_urls(c.url for c in citations)
    # Never wrapped by us: a link cut at the terminal's width (or at 80 columns, piped) no
    # longer opens, nor copies whole.
    sources = Text(f"\n{heading}\n", style="bold", no_wrap=True, overflow="ignore")
    for c in citations:
        sources.append(f"[{c.number}] ", style="bold")
        title = check_links(printable(c.title), allowed)
        sources.append(title + KIND_MARKS.get(c.source_kind, ""))
        if quoted and not c.verified:
            sources.append(" (quote not verified)", style="yellow")
        if is_linkable(c.url):
            # A Style object, not a style string: a URL can't smuggle in style words.
            sources.append("\n    ")
            # The passage's URL is shown; the link opens it at the quote.
            sources.append(c.url, style=Style(color="cyan", link=c.link))
        sources.append("\n")
    return sources


def answer_json(answer: Answer) -> str:
    def default(value: Any) -> Any:
        return value.value if hasattr(value, "value") else str(value)

    payload = dataclasses.asdict(answer)
    payload["trace"]["own_seconds"] = answer.trace.own_seconds
    for key in ("citations", "consulted"):  # where each link opens: at its quote, when it has one
        for shown, citation in zip(payload[key], getattr(answer, key), strict=True):
            shown["link"] = citation.link
    return json.dumps(payload, indent=2, default=default)
