"""HTML to sections, safely: attribute and nesting bombs refused, unclosed markup neutralised
before the parser sees it, boilerplate (navigation, scripts, footers) dropped, an image's alt
text read in its place (`image_text`), and each section anchored at its heading's own id."""

from __future__ import annotations

import re

from bs4 import BeautifulSoup, Comment, Tag
from bs4.element import NavigableString, PageElement

from core.domain.text import CODE_FENCE, FENCE
from core.errors import UnreadableDocument
from core.ingest.image_text import image_words
from core.ingest.ooxml import CELL_SEPARATOR
from core.ingest.sections import ParsedDocument, ParseLimits, Section, tidy_text

_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}


_DECORATIVE_ROLES = ("presentation", "none")
# A table's cells: apart in the text (`Setting | Meaning`), as the Office formats write a row;
# run together they read as one word (`max_pagesPages in one crawl`).
_CELLS = ("td", "th")
_DROP = ["script", "style", "noscript", "template", "svg", "nav", "footer", "head"]
# A block of code, whose spacing is part of what it says (Python's indentation, aligned columns).
_CODE_BLOCK = "pre"


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


def _alt_text(image: Tag) -> str:
    """An image's alt text, unless its author marked it decorative (role or aria-hidden)."""
    if image.get("role") in _DECORATIVE_ROLES or image.get("aria-hidden") == "true":
        return ""
    alt = image.get("alt")
    return image_words(alt if isinstance(alt, str) else None)


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


def neutralise_unclosed_markup(text: str) -> str:
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
    soup = BeautifulSoup(neutralise_unclosed_markup(text), "html.parser")
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
    parts: list[str | _Code] = []

    def close() -> None:
        current.text = _section_text(parts)
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
            if node.name == "img":
                parts.append(f" {_alt_text(node)} ")
                continue
            if structured and node.name == _CODE_BLOCK and (code := _fenced(node)) is not None:
                parts.append(code)
                continue
            if structured and node.name in _BLOCKS:
                parts.append("\n")
            elif node.name in _CELLS and node.find_previous_sibling(_CELLS) is not None:
                parts.append(CELL_SEPARATOR)
            stack.extend((child, depth + 1) for child in reversed(node.contents))
        elif isinstance(node, NavigableString) and not isinstance(node, Comment):
            parts.append(str(node))
    close()
    return doc


class _Code(str):
    """A code block's text, fenced as Markdown writes one, its spacing kept as the page shows it."""


def _fenced(block: Tag) -> _Code | None:
    """A `<pre>` as a fenced code block, as the Markdown docs' own code is held: the chunker
    keeps it whole, the answer shows it as code, and a quote of it keeps its indentation. None
    when a line of it would read as a fence (the block would end there): it is then read as
    text, as before."""
    lines = [line.rstrip() for line in block.get_text().splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    if not lines or any(CODE_FENCE.match(line) for line in lines):
        return None
    return _Code("\n".join([FENCE, *lines, FENCE]))


def _section_text(parts: list[str | _Code]) -> str:
    """The section's text: its prose tidied (runs of spaces and blank lines collapsed, as the
    page shows them), its code blocks as they are."""
    pieces: list[str] = []
    prose: list[str] = []
    for part in [*parts, _Code()]:
        if not isinstance(part, _Code):
            prose.append(part)
            continue
        pieces.append(tidy_text("".join(prose)))
        pieces.append(part)
        prose = []
    return "\n".join(piece for piece in pieces if piece)
