"""An `Answer` as Discord content: an embed per 4,096 characters (or plain messages of 2,000),
numbered source links, a status line. Mentions are defused in the text as well as disabled
on send (`AllowedMentions.none()`), so nothing from a document or a model can ping anyone; and
the text and titles go through `check_links` once more here, whatever built the `Answer`, so
the only URLs an embed shows, as a link or as text, are its citations' http(s) ones."""

from __future__ import annotations

import discord

from adapters.answer_labels import (
    CONSULTED,
    EMPTY_ANSWER,
    FROM_WEB,
    KIND_MARKS,
    SOURCES,
    answer_labels,
    source_title,
)
from core.answer.citations import allowed_urls, check_links
from core.domain.conversation import Answer, Citation
from core.domain.text import CODE_FENCE
from core.domain.text import link_markers as core_link_markers
from core.domain.urls import is_linkable

# Discord's limits on one message: ten embeds, and 6,000 characters of embed text in all
# (titles, descriptions, fields, footers); over either, the whole message is refused.
MESSAGE_EMBEDS = 10
MESSAGE_EMBED_CHARS = 6_000
_ICONS = {
    "partial": "⚠️",
    "not_found": "🔍",
    "extractive": "📄",
    "search_then_answer": "🤖",
    FROM_WEB: "🌐",
}
_EMPTY = f"*({EMPTY_ANSWER})*"


_URL_UNSAFE = str.maketrans({" ": "%20", "(": "%28", ")": "%29", "<": "%3C", ">": "%3E"})


def safe_url(url: str) -> str:
    """A URL that can't close a Markdown link early and start another one."""
    return url.translate(_URL_UNSAFE)


def safe_label(text: str, allowed: set[str]) -> str:
    """Link text that can't close the link or open a new one (`escape_markdown` leaves `]`),
    show a URL that isn't a source, or ping."""
    label = discord.utils.escape_markdown(source_title(text, allowed))
    return label.replace("[", "\\[").replace("]", "\\]")


def link_markers(text: str, citations: list[Citation]) -> str:
    """Markers `[n]` outside code linked to their source (`[[n]](url)`)."""
    urls = {c.number: safe_url(c.link) for c in citations if is_linkable(c.url)}
    return core_link_markers(text, urls, lambda url, marker: f"[{marker}]({url})")


def split_text(text: str, limit: int) -> list[str]:
    """Pieces of at most `limit` characters, cut between paragraphs (never inside a code
    fence unless the fence alone is longer), then between lines, then between words."""
    blocks: list[str] = []
    current: list[str] = []
    in_fence = False
    for line in text.split("\n"):
        if CODE_FENCE.match(line):
            in_fence = not in_fence
        current.append(line)
        if not in_fence and not line.strip():
            blocks.append("\n".join(current))
            current = []
    if current:
        blocks.append("\n".join(current))
    pieces: list[str] = []
    buffer = ""
    for block in blocks:
        for part in _cut(block.strip("\n"), limit):
            joined = f"{buffer}\n\n{part}" if buffer else part
            if len(joined) <= limit:
                buffer = joined
            else:
                if buffer:
                    pieces.append(buffer)
                buffer = part
    if buffer.strip():
        pieces.append(buffer)
    return pieces


def _cut(block: str, limit: int) -> list[str]:
    parts: list[str] = []
    while len(block) > limit:
        cut = block.rfind("\n", 0, limit)
        if cut < limit // 2:
            cut = block.rfind(" ", 0, limit)
        if cut < limit // 2:
            cut = limit
        parts.append(block[:cut].rstrip())
        block = block[cut:].lstrip()
    if block:
        parts.append(block)
    return parts


FIELD_CHARS = 1_024  # Discord's limit for an embed field value


def sources_text(citations: list[Citation], limit: int, *, quoted: bool = True) -> str:
    """Numbered source links, deduplicated, at most `limit`, never cut inside a link;
    `quoted=False` for sources consulted without a quote (no "not verified" note)."""
    seen: dict[str, Citation] = {}
    for c in citations:
        seen.setdefault(c.url, c)
    allowed = allowed_urls(seen)
    lines: list[str] = []
    for c in list(seen.values())[:limit]:
        note = "" if c.verified or not quoted else " *(quote not verified)*"
        label = safe_label(c.title, allowed)
        # The section: markers link the quote (`link_markers`).
        linked = f"[{label}]({safe_url(c.url)})" if is_linkable(c.url) else label
        line = f"[{c.number}] {linked}"
        line += f"{KIND_MARKS.get(c.source_kind, '')}{note}"
        if sum(len(x) + 1 for x in lines) + len(line) > FIELD_CHARS:
            break
        lines.append(line)
    return "\n".join(lines)


def status_line(answer: Answer) -> str:
    return answer_labels(answer, _ICONS)


def answer_embeds(
    answer: Answer, *, description_chars: int, max_sources: int
) -> list[discord.Embed]:
    """One embed per piece of the answer; the last one lists the sources and the status."""
    allowed = allowed_urls(c.url for c in answer.citations)
    body = link_markers(check_links(answer.text, allowed), answer.citations)
    body = body if body.strip() else _EMPTY
    embeds = [discord.Embed(description=part) for part in split_text(body, description_chars)]
    last = embeds[-1]
    if answer.citations and (sources := sources_text(answer.citations, max_sources)):
        last.add_field(name=SOURCES, value=sources, inline=False)
    if answer.consulted and (
        consulted := sources_text(answer.consulted, max_sources, quoted=False)
    ):
        last.add_field(name=CONSULTED, value=consulted, inline=False)
    if status := status_line(answer):
        last.set_footer(text=status)
    if len(last) > MESSAGE_EMBED_CHARS:
        # A full last piece and its sources would be refused together: the sources and the
        # status go in an embed of their own.
        tail = discord.Embed()
        for field in last.fields:
            tail.add_field(name=field.name, value=field.value, inline=False)
        if last.footer.text:
            tail.set_footer(text=last.footer.text)
        last.clear_fields()
        last.remove_footer()
        embeds.append(tail)
    return embeds


def message_groups(embeds: list[discord.Embed]) -> list[list[discord.Embed]]:
    """The embeds in order, as few messages as Discord takes: at most ten embeds and
    `MESSAGE_EMBED_CHARS` of their text in each."""
    groups: list[list[discord.Embed]] = []
    size = 0
    for embed in embeds:
        full = bool(groups) and len(groups[-1]) == MESSAGE_EMBEDS
        if not groups or full or size + len(embed) > MESSAGE_EMBED_CHARS:
            groups.append([])
            size = 0
        groups[-1].append(embed)
        size += len(embed)
    return groups
