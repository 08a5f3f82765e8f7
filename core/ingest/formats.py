"""Parsing Markdown, HTML, reStructuredText, AsciiDoc, PDF, Word (.docx), PowerPoint (.pptx),
Excel (.xlsx) and plain text into titled sections that each carry an anchor.

A section is the text under one heading; its anchor is what the published page uses for that
heading, so `URL#anchor` lands the reader on the passage a citation quotes:
- Markdown: an explicit `{#id}` or `<a id|name=...>` in the heading, else GitHub's slug rules
  (which MkDocs, Docusaurus and most renderers share);
- HTML: the heading's own `id`, an anchor inside it, or the id of its enclosing `<section>`;
  never an invented slug, since the page would not have it;
- PDF: one section per page, anchored `page=N` (the PDF open parameter browsers honour);
- Word: a section per heading, PowerPoint per slide, Excel per sheet, with no anchor (a browser
  opens none of them at a heading, slide or sheet).
"""

from __future__ import annotations

import codecs
import functools
import io
import re
from enum import StrEnum

from markdown_it import MarkdownIt

from core.errors import UnreadableDocument
from core.ingest.asciidoc import parse_asciidoc
from core.ingest.daemon_work import NoFreeThread, run_abandonable
from core.ingest.html import parse_html
from core.ingest.rst import parse_rst
from core.ingest.sections import (
    AnchorSlugger,
    Deadline,
    ParsedDocument,
    ParseLimits,
    Section,
    tidy_text,
    too_slow,
)
from core.ingest.sheets import parse_sheets
from core.ingest.slides import parse_slides
from core.ingest.word import parse_word


class DocumentFormat(StrEnum):
    MARKDOWN = "markdown"
    HTML = "html"
    PDF = "pdf"
    TEXT = "text"
    RST = "rst"
    ASCIIDOC = "asciidoc"
    WORD = "docx"
    SLIDES = "pptx"
    SHEETS = "xlsx"


# Formats read as bytes; every other one is text, in UTF-8.
BINARY_FORMATS = frozenset(
    {DocumentFormat.PDF, DocumentFormat.WORD, DocumentFormat.SLIDES, DocumentFormat.SHEETS}
)


# A parser's own error message is quoted in the skip reason up to this length.
_DETAIL_CHARS = 200


# ---------------------------------------------------------------------------------- Markdown

_FRONT_MATTER = re.compile(r"\A---[ \t\r]*\n(.*?)\n---[ \t\r]*\n", re.DOTALL)
_EXPLICIT_ID = re.compile(r"\{\s*#([\w\-:.]+)[^{}]*\}")
# Every pattern below is linear in its input: a bracket or `<` starts a scan that stops at the
# next bracket of its own kind, so a 100 KB heading of `<a <a <a ...` or `[[[[...` costs one pass
# (a negated class like `[^>]*` alone would rescan to the end from every `<`: quadratic).
_TAGS = re.compile(r"<[^<>]*>")
_ANCHOR_ATTR = re.compile(r"""\b(?:id|name)[ \t]*=[ \t]*['"]([^'"<>]+)['"]""", re.I)
_INLINE_MARKUP = re.compile(r"[*_`~]|!?\[([^\[\]]*)\]\([^()]*\)")


def _front_title(front: str) -> str | None:
    """The `title:` of YAML front matter, read line by line (no regex to backtrack)."""
    for line in front.splitlines():
        if line.startswith("title:"):
            return line.removeprefix("title:").strip().strip("'\"").strip() or None
    return None


def _html_anchor_in(raw: str) -> str | None:
    """The id or name of the first `<a>` tag in a Markdown heading."""
    for tag in _TAGS.finditer(raw):
        text = tag.group()
        is_a = text[1:2].lower() == "a" and text[2:3].isspace()
        if is_a and (found := _ANCHOR_ATTR.search(text)):
            return found.group(1)
    return None


def _plain_heading(raw: str) -> tuple[str, str | None]:
    """The heading's readable text and its explicit anchor, if the author set one."""
    explicit = None
    stripped = raw.rstrip()
    brace = stripped.rfind("{") if stripped.endswith("}") else -1
    if brace >= 0 and (match := _EXPLICIT_ID.fullmatch(stripped, brace)):
        explicit, raw = match.group(1), stripped[:brace].rstrip()
    explicit = explicit or _html_anchor_in(raw)
    text = _TAGS.sub("", raw)
    text = _INLINE_MARKUP.sub(lambda m: m.group(1) or "", text)
    return " ".join(text.split()), explicit


# Only where the headings are is read (their text is the heading line as written), so only
# markdown-it's block rules run: its inline parse cost 470 bytes of memory per byte of input
# (`*_` repeated: 2 GB for 4 MB). The block rules, reference definitions included (a setext
# underline after one makes no heading of it), stay, so the headings are CommonMark's.
_BLOCKS_ONLY = MarkdownIt("commonmark").disable("inline")


def parse_markdown(text: str, fallback_title: str) -> ParsedDocument:
    title = None
    if front := _FRONT_MATTER.match(text):
        title = _front_title(front.group(1))
        text = text[front.end() :]
    lines = text.splitlines()
    tokens = _BLOCKS_ONLY.parse(text)
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


# --------------------------------------------------------------------------------- PDF, text


def parse_pdf(data: bytes, fallback_title: str, timeout_s: float) -> ParsedDocument:
    """One section per page. Pages are where pypdf spends its time (content streams can be
    crafted to be slow), so the time limit is checked between them."""
    from pypdf import PdfReader

    deadline = Deadline(timeout_s)
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        raise UnreadableDocument("encrypted PDF")
    meta_title = (reader.metadata.title if reader.metadata else None) or ""
    doc = ParsedDocument(title=meta_title.strip() or fallback_title)
    for number, page in enumerate(reader.pages, start=1):
        deadline.check()
        text = tidy_text((page.extract_text() or "").replace("\x00", ""))
        if text:
            doc.sections.append(Section(f"Page {number}", f"page={number}", text))
    if not doc.sections:
        raise UnreadableDocument("PDF has no extractable text (scanned images?)")
    return doc


def parse_text(text: str, fallback_title: str) -> ParsedDocument:
    return ParsedDocument(
        title=fallback_title, sections=[Section(heading="", anchor=None, text=text.strip())]
    )


def not_parsed(late: TimeoutError, timeout_s: float) -> UnreadableDocument:
    """Why a parse that did not end in time skips its file: too slow, or never started because
    earlier parses past their own deadline still held every thread."""
    if isinstance(late, NoFreeThread):
        return UnreadableDocument(
            f"not parsed: earlier files' parses, past their deadline, held every parse thread "
            f"(ingest.parse_threads) for {timeout_s:g} s"
        )
    return too_slow(timeout_s)


async def parse_in_time(
    data: bytes, fmt: DocumentFormat, fallback_title: str, limits: ParseLimits
) -> ParsedDocument:
    """`parse_document` within `limits.timeout_s`, whatever the format, off the event loop: a
    parse still running then is abandoned (see `daemon_work`) and the file skipped."""
    try:
        return await run_abandonable(
            functools.partial(parse_document, data, fmt, fallback_title, limits),
            limits.timeout_s,
            limits.threads,
        )
    except TimeoutError as late:
        raise not_parsed(late, limits.timeout_s) from None


def parse_document(
    data: bytes, fmt: DocumentFormat, fallback_title: str, limits: ParseLimits
) -> ParsedDocument:
    """Bytes in a known format to sections; raises `UnreadableDocument` with the skip reason.

    Whatever a parser raises on a damaged file (pypdf alone has raised LimitReachedError,
    NotImplementedError, RecursionError, KeyError, ...) is that file's skip reason: no error
    class of a third-party parser may end an ingest. KeyboardInterrupt and SystemExit are not
    `Exception`s and pass through."""
    if not data.strip():
        raise UnreadableDocument("empty file")
    try:
        return _parse(data, fmt, fallback_title, limits)
    except UnreadableDocument:
        raise
    except Exception as exc:  # noqa: BLE001 (see the docstring: the file is skipped, with why)
        what = "not a readable PDF" if fmt is DocumentFormat.PDF else f"can't parse as {fmt}"
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())  # a reason is one line
        raise UnreadableDocument(f"{what}: {detail[:_DETAIL_CHARS]}") from None


# Byte order marks of the Unicode encodings a text file is saved in besides UTF-8 (Windows'
# Notepad's "Unicode" is UTF-16 LE), UTF-32's first: its little-endian mark starts as UTF-16's.
_MARKED_ENCODINGS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _text_of(data: bytes) -> str:
    """A text file's text: UTF-8 (a BOM or not), or UTF-16/32 where its BOM says so; with a NUL
    in it, the file is binary whatever its name."""
    encoding = next((name for bom, name in _MARKED_ENCODINGS if data.startswith(bom)), None)
    if encoding is None and (nul := data.find(b"\x00")) >= 0:
        raise UnreadableDocument(f"binary content (NUL byte at offset {nul:,}) in a text file")
    try:
        text = data.decode(encoding or "utf-8-sig")
    except UnicodeDecodeError as exc:
        said = (encoding or "utf-8").upper()
        raise UnreadableDocument(f"not valid {said} (byte {exc.start})") from None
    if (nul := text.find("\x00")) >= 0:
        raise UnreadableDocument(f"binary content (NUL at character {nul:,}) in a text file")
    return text


def _parse(
    data: bytes, fmt: DocumentFormat, fallback_title: str, limits: ParseLimits
) -> ParsedDocument:
    if fmt is DocumentFormat.PDF:
        return parse_pdf(data, fallback_title, limits.timeout_s)
    if fmt is DocumentFormat.WORD:
        return parse_word(data, fallback_title, limits)
    if fmt is DocumentFormat.SLIDES:
        return parse_slides(data, fallback_title, limits)
    if fmt is DocumentFormat.SHEETS:
        return parse_sheets(data, fallback_title, limits)
    text = _text_of(data)
    if fmt is DocumentFormat.MARKDOWN:
        doc = parse_markdown(text, fallback_title)
    elif fmt is DocumentFormat.HTML:
        doc = parse_html(text, fallback_title, limits)
    elif fmt is DocumentFormat.RST:
        doc = parse_rst(text, fallback_title, limits)
    elif fmt is DocumentFormat.ASCIIDOC:
        doc = parse_asciidoc(text, fallback_title)
    else:
        doc = parse_text(text, fallback_title)
    if not any(s.text.strip() for s in doc.sections):
        raise UnreadableDocument("no text")
    return doc
