"""Links that open a page at the quote a citation verified in it: URL text fragments
(`#anchor:~:text=start,end`, https://wicg.github.io/scroll-to-text-fragment/).

A citation's link led to the passage's heading; the sentence that says the claim could be a
screen further down. With a text fragment, Chrome, Edge, Safari (16.1+) and Firefox (131+)
scroll to the quote and highlight it. But where the text is not found as written, Chromium
opens the page at its top, not at the `#anchor` in front (checked in Chromium 156), so a
fragment must match or be left out:
- each of its terms stays within one block of the page (a term never matches across two:
  a paragraph and the list under it, two list items), so the quote is placed in its passage
  and its terms are cut at the passage's line breaks and list markers, each term of at least
  `MIN_TERM_WORDS` words;
- a list's bullet, a heading's hashes, an inline link's target and a fence's line are left
  out, and a code span shows what it holds, without its backticks;
- a quote holding anything a page may show otherwise than the passage holds it (a table's
  row, emphasis or a literal `*`, an image, an entity, inline HTML: `_UNSURE`) gets none.
The renderers link only the markers in an answer's text this way; the sources listed under it
keep the passage's own link, so a fragment that misses still leaves a link to the section.
`python -m bench.text_fragments` checks every sentence of the bundled docs in Chromium.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

from core.domain.text import CODE_FENCE, LINE_PREFIX

FRAGMENT_DIRECTIVE = ":~:text="
# Words matched at each end of a quote longer than twice this: enough to find one place in a
# page, few enough to keep a link short (a Slack text object holds 3,000 characters).
END_WORDS = 4
# Files a browser does not show as a page of text: a fragment there means something else
# (a PDF's `#page=3`), or nothing.
_NOT_PAGES = (".pdf", ".docx", ".pptx", ".xlsx")
_PAGE_PARAMETER = "page="
# Words each term holds at least: a shorter one may match anywhere on the page.
MIN_TERM_WORDS = 3
_CODE_MARKS = re.compile(r"`+")
_MARKDOWN_LINK = re.compile(r"(?<!!)\[([^\]\n]*)\]\([^)\n]*\)")  # an inline link shows its text
# What a page may show otherwise than the passage holds it, outside code spans: a table's
# cells (`|`), an image or a reference link (`[`, `]`), an entity (`&`), an escape (`\`),
# inline HTML or an autolink (`<`, `>`), a strike-through (`~`), emphasis or a literal `*` or
# `_` against a word's edge (`max_pages` is safe: inside a word).
_UNSURE = re.compile(r"[|\[\]&\\<>~]|(?<!\w)[*_]|[*_](?!\w)")
_LIST_MARKER = re.compile(r"[-+•]|\d{1,9}[.)]")
# The longest directive a link carries: a passage's words are its own (a hostile one's "word"
# can be thousands of characters), and a link too long for a Slack text object or a Discord
# embed field is shown unlinked. Past it, the link goes to the passage alone.
MAX_DIRECTIVE_CHARS = 400


def text_directive(quote_text: str, passage: str) -> str:
    """The text directive (`start` or `start,end`, encoded) for `quote_text` where it stands in
    `passage`; "" when it can't be placed there, or when how a page shows it is not sure."""
    words = quote_text.split()
    if not words:
        return ""
    found = re.search(r"\s+".join(re.escape(word) for word in words), passage)
    if found is None:
        return ""
    runs: list[list[str]] = []  # the quote's words as shown, in runs a term may not cross
    in_fence = False
    position = 0
    for line in passage.splitlines(keepends=True):
        start, position = position, position + len(line)
        fence = CODE_FENCE.match(line) is not None
        if position > found.start() and start < found.end() and not fence:
            offset = max(found.start() - start, 0)
            part = line[offset : found.end() - start]
            shown = [_as_written(part)] if in_fence else _shown(line, offset, part)
            if shown is None:
                return ""
            runs += shown
        in_fence = in_fence != fence
        if position >= found.end():
            break
    directive = _directive(runs)
    return directive if len(directive) <= MAX_DIRECTIVE_CHARS else ""


def highlighting(url: str, directive: str) -> str:
    """`url` with the text fragment `directive`; `url` as it is without one, or when it is no
    page a browser shows as text."""
    parts = urlsplit(url)
    if (
        not directive
        or parts.scheme not in ("http", "https", "file")
        or parts.path.lower().endswith(_NOT_PAGES)
        or parts.fragment.startswith(_PAGE_PARAMETER)
        or FRAGMENT_DIRECTIVE in parts.fragment
    ):
        return url
    return f"{url}{'' if '#' in url else '#'}{FRAGMENT_DIRECTIVE}{directive}"


def _as_written(code: str) -> list[str]:
    """A code block's line as a page shows it: its words, each with the spacing after it (a
    `<pre>` keeps the spacing, and a term matches there only with it)."""
    return re.findall(r"\S+\s*", code.rstrip())


def _shown(line: str, offset: int, part: str) -> list[list[str]] | None:
    """The words of `part` (of `line`, from `offset`) as a page shows them, each with the space
    after it, in runs between list markers; None where that is not sure: a table's row, a
    literal `*` or `_` against a word (emphasis in Markdown, text in HTML: `__init__.py`), an
    image, a reference link, an entity or escape, inline HTML."""
    if offset == 0:
        part = LINE_PREFIX.sub("", part, count=1)
    in_code = len(_CODE_MARKS.findall(line[:offset])) % 2 == 1  # a quote begun in a code span
    shown: list[str] = []
    for number, piece in enumerate(_CODE_MARKS.split(part)):
        if (number % 2 == 1) != in_code:
            shown.append(piece)  # a code span shows what it holds
            continue
        text = _MARKDOWN_LINK.sub(r"\1", piece)
        if _UNSURE.search(text):
            return None
        shown.append(text)
    runs: list[list[str]] = [[]]
    for word in "".join(shown).split():
        if _LIST_MARKER.fullmatch(word):
            runs.append([])
        else:
            runs[-1].append(f"{word} ")
    return runs


def _directive(runs: list[list[str]]) -> str:
    """`start` for a short quote within one run; `start,end` otherwise, each within a run. A
    run of fewer than `MIN_TERM_WORDS` words is no term ("The" at a line's end would match the
    page's first "The"): the highlight then starts or ends at the next run long enough."""
    terms = [run for run in runs if len(run) >= MIN_TERM_WORDS]
    if not terms:
        return ""
    first, last = terms[0], terms[-1]
    if len(terms) == 1 and len(first) <= 2 * END_WORDS:
        return _term(first)
    return f"{_term(first[:END_WORDS])},{_term(last[-END_WORDS:])}"


def _term(words: list[str]) -> str:
    """Words (each with the spacing after it) as one term of the directive: percent-encoded,
    `-`, `,` and `&` included (they separate a directive's parts)."""
    return quote("".join(words).rstrip(), safe="").replace("-", "%2D")
