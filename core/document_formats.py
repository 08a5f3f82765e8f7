"""Parsing Markdown, HTML, PDF and plain text into titled sections that each carry an anchor.

A section is the text under one heading; its anchor is what the published page uses for that
heading, so `URL#anchor` lands the reader on the passage a citation quotes:
- Markdown: an explicit `{#id}` or `<a id|name=...>` in the heading, else GitHub's slug rules
  (which MkDocs, Docusaurus and most renderers share);
- HTML: the heading's own `id`, an anchor inside it, or the id of its enclosing `<section>`;
  never an invented slug, since the page would not have it;
- PDF: one section per page, anchored `page=N` (the PDF open parameter browsers honour).
"""

from __future__ import annotations

import io
import re
import unicodedata
from dataclasses import dataclass, field
from enum import StrEnum

from bs4 import BeautifulSoup, Comment, Tag
from bs4.element import NavigableString
from markdown_it import MarkdownIt


class DocumentFormat(StrEnum):
    MARKDOWN = "markdown"
    HTML = "html"
    PDF = "pdf"
    TEXT = "text"


class UnreadableDocument(ValueError):
    """The content can't be parsed into text; the message is the per-file skip reason."""


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


# ---------------------------------------------------------------------------------- Markdown

_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.DOTALL)
_FRONT_TITLE = re.compile(r"^title:\s*['\"]?(.+?)['\"]?\s*$", re.MULTILINE)
_EXPLICIT_ID = re.compile(r"\s*\{\s*#([\w\-:.]+)[^}]*\}\s*$")
_HTML_ANCHOR = re.compile(
    r"<a\s+[^>]*(?:id|name)\s*=\s*['\"]([^'\"]+)['\"][^>]*>\s*(?:</a>)?", re.I
)
_TAGS = re.compile(r"<[^>]+>")
_INLINE_MARKUP = re.compile(r"[*_`~]|!?\[([^\]]*)\]\([^)]*\)")


def _plain_heading(raw: str) -> tuple[str, str | None]:
    """The heading's readable text and its explicit anchor, if the author set one."""
    explicit = None
    if match := _EXPLICIT_ID.search(raw):
        explicit, raw = match.group(1), raw[: match.start()]
    if match := _HTML_ANCHOR.search(raw):
        explicit = explicit or match.group(1)
    text = _TAGS.sub("", raw)
    text = _INLINE_MARKUP.sub(lambda m: m.group(1) or "", text)
    return " ".join(text.split()), explicit


def parse_markdown(text: str, fallback_title: str) -> ParsedDocument:
    title = None
    if front := _FRONT_MATTER.match(text):
        if found := _FRONT_TITLE.search(front.group(1)):
            title = found.group(1).strip()
        text = text[front.end() :]
    lines = text.splitlines()
    tokens = MarkdownIt("commonmark").parse(text)
    headings: list[tuple[int, int, int, str, str | None]] = []  # start, end, level, text, id
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.map:
            heading, explicit = _plain_heading(tokens[i + 1].content)
            headings.append((token.map[0], token.map[1], int(token.tag[1]), heading, explicit))
    if title is None:
        title = next((h[3] for h in headings if h[2] == 1 and h[3]), fallback_title)

    slugger = AnchorSlugger()
    doc = ParsedDocument(title=title)
    preamble = "\n".join(lines[: headings[0][0]] if headings else lines).strip()
    if preamble:
        doc.sections.append(Section(heading="", anchor=None, text=preamble))
    trail: list[tuple[int, str]] = []
    for n, (_, end, level, heading, explicit) in enumerate(headings):
        anchor = slugger.reserve(explicit) if explicit else slugger.slug(heading)
        trail = [(lvl, h) for lvl, h in trail if lvl < level] + [(level, heading)]
        stop = headings[n + 1][0] if n + 1 < len(headings) else len(lines)
        body = "\n".join(lines[end:stop]).strip()
        if body:
            path = [h for lvl, h in trail if not (lvl == 1 and h == title)]
            doc.sections.append(Section(" › ".join(path), anchor, body))
    return doc


# -------------------------------------------------------------------------------------- HTML

_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_DROP = ["script", "style", "noscript", "template", "svg", "nav", "footer", "head"]
_BLOCKS = {
    "p",
    "div",
    "li",
    "ul",
    "ol",
    "pre",
    "table",
    "tr",
    "br",
    "section",
    "article",
    "blockquote",
    "dd",
    "dt",
    "dl",
    "hr",
    "main",
    "aside",
    "figure",
    "figcaption",
    "details",
    "summary",
}


def _html_anchor(heading: Tag) -> str | None:
    for candidate in (
        heading,
        heading.select_one("[id]"),
        heading.select_one("a[name]"),
    ):
        if isinstance(candidate, Tag):
            value = candidate.get("id") or candidate.get("name")
            if isinstance(value, str) and value:
                return value
    parent = heading.parent
    if isinstance(parent, Tag) and parent.name == "section":
        value = parent.get("id")
        if isinstance(value, str) and value:
            return value
    return None


def parse_html(text: str, fallback_title: str) -> ParsedDocument:
    soup = BeautifulSoup(text, "html.parser")
    title_tag = soup.find("title")
    page_title = title_tag.get_text(" ", strip=True) if title_tag else ""
    for name in _DROP:
        for tag in soup.find_all(name):
            tag.decompose()
    root = soup.find("main") or soup.find("article") or soup.body or soup
    first_h1 = root.find("h1")
    title = page_title or (first_h1.get_text(" ", strip=True) if first_h1 else "") or fallback_title

    doc = ParsedDocument(title=title)
    trail: list[tuple[int, str]] = []
    current = Section(heading="", anchor=None, text="")
    parts: list[str] = []

    def close() -> None:
        current.text = _tidy_text("".join(parts))
        if current.text:
            doc.sections.append(current)

    for node in root.descendants:
        if isinstance(node, Tag):
            if node.name in _HEADINGS:
                close()
                parts = []
                level, heading = int(node.name[1]), node.get_text(" ", strip=True)
                trail = [(lvl, h) for lvl, h in trail if lvl < level] + [(level, heading)]
                path = [h for lvl, h in trail if not (lvl == 1 and h == title)]
                current = Section(" › ".join(path), _html_anchor(node) or current.anchor, "")
            elif node.name in _BLOCKS:
                parts.append("\n")
        elif (
            isinstance(node, NavigableString)
            and not isinstance(node, Comment)
            and not any(isinstance(p, Tag) and p.name in _HEADINGS for p in node.parents)
        ):
            parts.append(str(node))
    close()
    return doc


def _tidy_text(raw: str) -> str:
    lines = [" ".join(line.split()) for line in raw.splitlines()]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


# --------------------------------------------------------------------------------- PDF, text


def parse_pdf(data: bytes, fallback_title: str) -> ParsedDocument:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise UnreadableDocument("encrypted PDF")
        meta_title = (reader.metadata.title if reader.metadata else None) or ""
        doc = ParsedDocument(title=meta_title.strip() or fallback_title)
        for number, page in enumerate(reader.pages, start=1):
            text = _tidy_text(page.extract_text() or "")
            if text:
                doc.sections.append(Section(f"Page {number}", f"page={number}", text))
    except UnreadableDocument:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise UnreadableDocument(f"not a readable PDF: {exc}") from None
    if not doc.sections:
        raise UnreadableDocument("PDF has no extractable text (scanned images?)")
    return doc


def parse_text(text: str, fallback_title: str) -> ParsedDocument:
    return ParsedDocument(
        title=fallback_title, sections=[Section(heading="", anchor=None, text=text.strip())]
    )


def parse_document(data: bytes, fmt: DocumentFormat, fallback_title: str) -> ParsedDocument:
    """Bytes in a known format to sections; raises `UnreadableDocument` with the skip reason."""
    if not data.strip():
        raise UnreadableDocument("empty file")
    if fmt is DocumentFormat.PDF:
        return parse_pdf(data, fallback_title)
    if b"\x00" in data[:8192]:
        raise UnreadableDocument("binary content (NUL bytes) in a text file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableDocument(f"not valid UTF-8 (byte {exc.start})") from None
    parser = {
        DocumentFormat.MARKDOWN: parse_markdown,
        DocumentFormat.HTML: parse_html,
        DocumentFormat.TEXT: parse_text,
    }[fmt]
    doc = parser(text, fallback_title)
    if not any(s.text.strip() for s in doc.sections):
        raise UnreadableDocument("no text")
    return doc
