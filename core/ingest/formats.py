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
import time
import unicodedata
from dataclasses import dataclass, field
from enum import StrEnum

from bs4 import BeautifulSoup, Comment, Tag
from bs4.element import NavigableString, PageElement
from markdown_it import MarkdownIt

from core.config import IngestSettings
from core.errors import UnreadableDocument


class DocumentFormat(StrEnum):
    MARKDOWN = "markdown"
    HTML = "html"
    PDF = "pdf"
    TEXT = "text"


# A parser's own error message is quoted in the skip reason up to this length.
_DETAIL_CHARS = 200


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


def parse_markdown(text: str, fallback_title: str) -> ParsedDocument:
    title = None
    if front := _FRONT_MATTER.match(text):
        title = _front_title(front.group(1))
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


_START_TAG = re.compile(r"<[A-Za-z][^<>]*>")


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """What a hostile file may cost a parser (from `ingest.*`): each bound turns a file that
    would take minutes or gigabytes into a skip reason, or flattens it, in linear time."""

    max_depth: int
    max_attributes: int
    timeout_s: float

    @classmethod
    def from_settings(cls, settings: IngestSettings) -> ParseLimits:
        return cls(
            max_depth=settings.max_nesting_depth,
            max_attributes=settings.max_html_attributes,
            timeout_s=settings.parse_timeout_s,
        )


def _check_attributes(text: str, max_attributes: int) -> None:
    """Refuse a page with an element of absurdly many attributes, in one linear scan:
    BeautifulSoup builds a dict entry for each, and a page with a million of them costs 7 s
    and 800 MB before we see a word of it."""
    for tag in _START_TAG.finditer(text):
        # Words in the tag: at least its attribute count (`a=1` or a bare `a`), more when values
        # hold spaces, which a real page never has a thousand of in one element.
        if (count := len(tag.group().split()) - 1) > max_attributes:
            raise UnreadableDocument(
                f"an element with {count:,} attributes (more than {max_attributes:,})"
            )


# html.parser's own `locatestarttagend_tolerant` (CPython 3.11) with `<` refused outside quoted
# values, so a start tag that reaches another `<` is known to be unclosed there and then.
_WHOLE_START_TAG = re.compile(
    r"""
  <[a-zA-Z][^\t\n\r\f />\x00<]*
  (?:[\s/]*
    (?:(?<=['"\s/])[^\s/><][^\s/=><]*
      (?:\s*=+\s*
        (?:'[^']*'|"[^"]*"|(?!['"])[^>\s<]*)
        \s*
       )?(?:\s|/(?!>))*
     )*
   )?
  \s*
""",
    re.VERBOSE,
)
# What closes a comment and a marked section, as html.parser (and its _markupbase) reads them.
_COMMENT_CLOSE = re.compile(r"--\s*>")
_SECTION_CLOSE = re.compile(r"]\s*]\s*>")
_MS_SECTION_CLOSE = re.compile(r"]\s*>")
_SECTION_NAME = re.compile(r"[a-zA-Z][-_.a-zA-Z0-9]*")
_SECTIONS = {"temp", "cdata", "ignore", "include", "rcdata"}
_MS_SECTIONS = {"if", "else", "endif"}


def _last_start(pattern: re.Pattern[str], text: str) -> int:
    """Where the last match of `pattern` starts (-1 if none): one linear pass, so that each
    later `search` is only made when it will succeed, and costs no more than it skips."""
    last = -1
    for match in pattern.finditer(text):
        last = match.start()
    return last


def _neutralise_unclosed_markup(text: str) -> str:
    """The page with every `<` that starts a construct html.parser can't close written `&lt;`.

    CPython's html.parser, at the end of its input, rescans from each unclosed `<tag`, `</`,
    `<!--`, `<![CDATA[`, `<?` or quoted attribute value to the end of the page: quadratic, so
    20 MB of `<a` would take days. Here each `<` is read once, like the parser would, against
    the same terminators (a comment's `-->`, a section's `]]>`, a tag's `>`): a construct that
    closes is skipped whole (its scan is the parser's own, and never repeated), and one that
    doesn't becomes text, which is what the parser would have made of it, minus the rescans.
    A start tag may not contain `<` outside a quoted value: there it counts as unclosed."""
    last_gt = text.rfind(">")
    last_comment = _last_start(_COMMENT_CLOSE, text)
    last_section = _last_start(_SECTION_CLOSE, text)
    last_ms_section = _last_start(_MS_SECTION_CLOSE, text)
    out: list[str] = []
    done = 0
    at = text.find("<")
    while at >= 0:
        end = _construct_end(text, at, last_gt, last_comment, last_section, last_ms_section)
        if end < 0:
            out += (text[done:at], "&lt;")
            done, end = at + 1, at + 1
        at = text.find("<", end)
    out.append(text[done:])
    return "".join(out)


def _construct_end(
    text: str, at: int, last_gt: int, last_comment: int, last_section: int, last_ms: int
) -> int:
    """Where the construct at `text[at] == "<"` ends, -1 if html.parser can't close it, or
    `at + 1` if it is a plain `<` of text."""
    if text.startswith("<!--", at):
        match = _COMMENT_CLOSE.search(text, at + 4) if at + 4 <= last_comment else None
        return match.end() if match else -1
    if text.startswith("<![", at):
        name = _SECTION_NAME.match(text, at + 3)
        kind = name.group().lower() if name else ""
        close, last = (
            (_SECTION_CLOSE, last_section) if kind in _SECTIONS else (_MS_SECTION_CLOSE, last_ms)
        )
        known = kind in _SECTIONS or kind in _MS_SECTIONS
        match = close.search(text, at + 3) if known and at + 3 <= last else None
        return match.end() if match else -1
    if text.startswith(("</", "<!", "<?"), at):
        return text.find(">", at + 2) + 1 if at + 2 <= last_gt else -1
    if (match := _WHOLE_START_TAG.match(text, at)) is not None:
        end = match.end()
        if text.startswith(">", end):
            return end + 1
        return end + 2 if text.startswith("/>", end) else -1
    return at + 1


def parse_html(text: str, fallback_title: str, limits: ParseLimits) -> ParsedDocument:
    """Sections of an HTML page, in time linear in its size whatever its nesting.

    The walk keeps its own stack (no recursion, no per-node look at the ancestors), a heading's
    subtree is read once (a heading inside a heading is part of its text, not a new section), and
    below `limits.max_depth` levels the structure is flattened: text is kept, blocks and headings
    no longer split it."""
    _check_attributes(text, limits.max_attributes)
    max_depth = limits.max_depth
    soup = BeautifulSoup(_neutralise_unclosed_markup(text), "html.parser")
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

    stack: list[tuple[PageElement, int]] = [(child, 1) for child in reversed(root.contents)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Tag):
            structured = depth <= max_depth
            if structured and node.name in _HEADINGS:
                close()
                parts = []
                level, heading = int(node.name[1]), node.get_text(" ", strip=True)
                trail = [(lvl, h) for lvl, h in trail if lvl < level] + [(level, heading)]
                path = [h for lvl, h in trail if not (lvl == 1 and h == title)]
                current = Section(" › ".join(path), _html_anchor(node) or current.anchor, "")
                continue  # the heading's text is its title, not body text
            if structured and node.name in _BLOCKS:
                parts.append("\n")
            stack.extend((child, depth + 1) for child in reversed(node.contents))
        elif isinstance(node, NavigableString) and not isinstance(node, Comment):
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


def parse_pdf(data: bytes, fallback_title: str, timeout_s: float) -> ParsedDocument:
    """One section per page. Pages are where pypdf spends its time (content streams can be
    crafted to be slow), so the time limit is checked between them."""
    from pypdf import PdfReader

    deadline = time.monotonic() + timeout_s
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        raise UnreadableDocument("encrypted PDF")
    meta_title = (reader.metadata.title if reader.metadata else None) or ""
    doc = ParsedDocument(title=meta_title.strip() or fallback_title)
    for number, page in enumerate(reader.pages, start=1):
        if time.monotonic() > deadline:
            raise UnreadableDocument(
                f"parsing took longer than {timeout_s:g} s (ingest.parse_timeout_s)"
            )
        text = _tidy_text((page.extract_text() or "").replace("\x00", ""))
        if text:
            doc.sections.append(Section(f"Page {number}", f"page={number}", text))
    if not doc.sections:
        raise UnreadableDocument("PDF has no extractable text (scanned images?)")
    return doc


def parse_text(text: str, fallback_title: str) -> ParsedDocument:
    return ParsedDocument(
        title=fallback_title, sections=[Section(heading="", anchor=None, text=text.strip())]
    )


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
        detail = f"{type(exc).__name__}: {exc}"
        raise UnreadableDocument(f"{what}: {detail[:_DETAIL_CHARS]}") from None


def _parse(
    data: bytes, fmt: DocumentFormat, fallback_title: str, limits: ParseLimits
) -> ParsedDocument:
    if fmt is DocumentFormat.PDF:
        return parse_pdf(data, fallback_title, limits.timeout_s)
    if (nul := data.find(b"\x00")) >= 0:
        raise UnreadableDocument(f"binary content (NUL byte at offset {nul:,}) in a text file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableDocument(f"not valid UTF-8 (byte {exc.start})") from None
    if fmt is DocumentFormat.MARKDOWN:
        doc = parse_markdown(text, fallback_title)
    elif fmt is DocumentFormat.HTML:
        doc = parse_html(text, fallback_title, limits)
    else:
        doc = parse_text(text, fallback_title)
    if not any(s.text.strip() for s in doc.sections):
        raise UnreadableDocument("no text")
    return doc
