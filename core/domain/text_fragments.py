"""Links that open a page at the quote a citation verified in it: URL text fragments
(`#anchor:~:text=start,end`, https://wicg.github.io/scroll-to-text-fragment/).

A citation's link led to the passage's heading; the sentence that says the claim could be a
screen further down. With a text fragment, Chrome, Edge, Safari (16.1+) and Firefox (131+)
scroll to the quote and highlight it. But where the text is not found as written, Chromium
opens the page at its top, not at the `#anchor` in front (checked in Chromium 156), so a
fragment must match or be left out:
- each of its terms stays within one block of the page (a term never matches across two:
  a paragraph and the list under it, two list items), so the quote is placed in its passage
  and its terms are cut at the passage's line breaks;
- what the passage holds as written but a page does not show is left out: a list's bullet, a
  heading's hashes, emphasis marks, a link's target, a code fence's line; a code span shows
  what it holds, without its backticks;
- a quote ending or starting in a table's row (a `|` outside code) gets none.
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
_CODE_MARKS = re.compile(r"`+")
_MARKDOWN_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")
_EMPHASIS = re.compile(r"(?<!\w)[*_]+|[*_]+(?!\w)")  # not inside a word: `max_pages` is shown
_TABLE_CELL = "|"
# The longest directive a link carries: a passage's words are its own (a hostile one's "word"
# can be thousands of characters), and a link too long for a Slack text object or a Discord
# embed field is shown unlinked. Past it, the link goes to the passage alone.
MAX_DIRECTIVE_CHARS = 400


def text_directive(quote_text: str, passage: str) -> str:
    """The text directive (`start` or `start,end`, encoded) for `quote_text` where it stands in
    `passage`; "" when it can't be placed there, or can't be matched as a page shows it."""
    words = quote_text.split()
    if not words:
        return ""
    found = re.search(r"\s+".join(re.escape(word) for word in words), passage)
    if found is None:
        return ""
    runs: list[list[str] | None] = []  # each line's words as shown; None: a table's row
    in_fence = False
    position = 0
    for line in passage.splitlines(keepends=True):
        start, position = position, position + len(line)
        fence = CODE_FENCE.match(line) is not None
        if position > found.start() and start < found.end() and not fence:
            part = line[max(found.start() - start, 0) : found.end() - start]
            whole_line = start >= found.start()
            runs.append(_as_written(part) if in_fence else _shown(part, whole_line=whole_line))
        in_fence = in_fence != fence
        if position >= found.end():
            break
    directive = _directive([run for run in runs if run != []])
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


def _shown(part: str, *, whole_line: bool) -> list[str] | None:
    """The words of one line's part as a page shows them, each with the space after it; None
    for a table's row."""
    if whole_line:
        part = LINE_PREFIX.sub("", part, count=1)
    shown: list[str] = []
    for number, piece in enumerate(_CODE_MARKS.split(part)):
        if number % 2:  # inside a code span
            shown.append(piece)
        elif _TABLE_CELL in piece:
            return None
        else:
            shown.append(_EMPHASIS.sub("", _MARKDOWN_LINK.sub(r"\1", piece)))
    return [f"{word} " for word in "".join(shown).split()]


def _directive(runs: list[list[str] | None]) -> str:
    """`start` for a short quote within one line; `start,end` otherwise, each within a line."""
    if not runs or runs[0] is None or runs[-1] is None:
        return ""
    first, last = runs[0], runs[-1]
    if len(runs) == 1 and len(first) <= 2 * END_WORDS:
        return _term(first)
    return f"{_term(first[:END_WORDS])},{_term(last[-END_WORDS:])}"


def _term(words: list[str]) -> str:
    """Words (each with the spacing after it) as one term of the directive: percent-encoded,
    `-`, `,` and `&` included (they separate a directive's parts)."""
    return quote("".join(words).rstrip(), safe="").replace("-", "%2D")
