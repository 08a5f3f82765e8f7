"""Text rules every part shares: shortening for display, and making untrusted text unable to
notify anyone or to act on a terminal."""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict, deque
from collections.abc import Callable, Iterator, Mapping

ELLIPSIS = "…"
# The number in a citation marker, [1] or [1, 3]: at most four digits. Model and web-search text
# is hostile, and Python refuses int() of a number over 4,300 digits; no answer cites ten
# thousand sources, so a longer number in brackets is text, not a marker.
MARKER_NUMBER = r"\d{1,4}"
# One citation marker as the renderers link it: [n].
_MARKER = re.compile(rf"\[({MARKER_NUMBER})\]")
# A line that opens or closes a fenced code block, as Slack and Discord read it.
CODE_FENCE = re.compile(r"^\s*```")
# A run of backticks: it opens an inline code span that the next run of the same length closes.
_BACKTICKS = re.compile(r"`+")
# A blank line ends a paragraph, and no inline code span reaches past it.
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
# English words too common to tell passages apart (search) or to show a claim came from one
# (grounding).
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't
    doing don't down during each few for from further had hadn't has hasn't have haven't having he
    her here hers herself him himself his how i if in into is isn't it it's its itself let's me
    more most mustn't my myself no nor not of off on once only or other ought our ours ourselves
    out over own same shan't she should shouldn't so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was wasn't we
    were weren't what when where which while who whom why with won't would wouldn't you your yours
    yourself yourselves s t d ll m re ve y
    """.split()  # noqa: SIM905 (a word list reads better as text)
)
_PINGS = re.compile(
    # Slack (<!channel>, <!subteam^...>, <@U1|bob>, <#C1>) and Discord (<@1>, <@!1>, <@&1>,
    # <#1>) control sequences: anything in <...> that starts with @, # or !; and Discord's
    # clickable command mentions (</ask:123>), which offer to run a command.
    r"<[@#!][^<>\n]*>|</[^<>\n]*:\d+>|@(?=(?:everyone|here|channel)\b)",
    re.IGNORECASE,
)


# Control characters a question is read without (C0 but tab, line feed and carriage return;
# DEL): what the engine answers, and what the answer log keeps.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# Unicode categories a terminal acts on rather than shows: controls (NUL, BEL, ESC starting the
# sequences that clear the screen, set the window title or make a link; the C1 controls some
# terminals read as ESC sequences), format characters (bidi overrides that reorder what is shown,
# zero-width characters that hide text) and lone surrogates (which can't be written at all).
_ACTING = frozenset({"Cc", "Cf", "Cs"})
# ... but line breaks and tabs, and the format characters words are spelt with: the zero-width
# non-joiner and joiner (Persian, Hindi; emoji sequences such as a family) and the soft hyphen.
# They reorder nothing and hide nothing.
_KEPT_CONTROLS = frozenset("\n\t\u200c\u200d\u00ad")


def clip(text: str, limit: int, *, ellipsis: str = ELLIPSIS) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` characters (the ellipsis
    included), so a snippet, quote or keyword never ends mid-word."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - len(ellipsis)].rsplit(" ", 1)[0] + ellipsis


def defuse_pings(text: str) -> str:
    """Remove platform mention syntax so untrusted text can never notify anyone. Repeated until
    nothing changes: removing `<!here>` from `<<!here>!channel>` must not leave `<!channel>`."""
    while True:
        defused = _PINGS.sub(lambda m: "@\u200b" if m.group(0) == "@" else "", text)
        if defused == text:
            return defused
        text = defused


def printable(text: str) -> str:
    """`text` as a terminal may show it: without what would act on the terminal instead of
    being read (see `_ACTING`); line breaks, tabs and the joiners words need stay. For text
    from outside the bot (the answer log, documents, a server's error) printed by the CLI."""
    return "".join(c for c in text if c in _KEPT_CONTROLS or unicodedata.category(c) not in _ACTING)


def without_controls(text: str) -> str:
    """`text` without the control characters a question is read without (`_CONTROL`)."""
    return _CONTROL.sub("", text)


def code_ranges(text: str) -> Iterator[tuple[int, int]]:
    """Where `text` is code, as (start, end) offsets in order: fenced blocks (fence lines
    included; an unclosed fence runs to the end, as Slack and Discord show it) and inline code
    spans. Inside code, `[1]` is an index and `**` an operator, not Markdown to rewrite."""
    offset = 0
    prose_start = 0
    fence_start: int | None = None
    for line in text.splitlines(keepends=True):
        if CODE_FENCE.match(line):
            if fence_start is None:
                yield from _inline_code(text, prose_start, offset)
                fence_start = offset
            else:
                yield fence_start, offset + len(line)
                fence_start = None
                prose_start = offset + len(line)
        offset += len(line)
    if fence_start is not None:
        yield fence_start, len(text)
    else:
        yield from _inline_code(text, prose_start, len(text))


def _inline_code(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The inline code spans of `text[start:end]`, paragraph by paragraph (CommonMark's rule: a
    run of n backticks is closed by the next run of exactly n; one left unclosed is a literal
    backtick). Each run is looked at a bounded number of times, so hostile text full of
    backticks costs linear time."""
    for paragraph in _paragraphs(text, start, end):
        runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text, *paragraph)]
        later: defaultdict[int, deque[int]] = defaultdict(deque)  # run length -> run indices
        for index, (run_start, run_end) in enumerate(runs):
            later[run_end - run_start].append(index)
        index = 0
        while index < len(runs):
            run_start, run_end = runs[index]
            same = later[run_end - run_start]
            while same and same[0] <= index:
                same.popleft()
            if not same:
                index += 1
                continue
            closing = same.popleft()
            yield run_start, runs[closing][1]
            index = closing + 1


def _paragraphs(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    for brk in _PARAGRAPH_BREAK.finditer(text, start, end):
        yield start, brk.start()
        start = brk.end()
    yield start, end


def outside_code(text: str, rewrite: Callable[[str], str]) -> str:
    """`text` with `rewrite` applied to each stretch of prose between code (`code_ranges`); the
    code itself is kept exactly as written."""
    out: list[str] = []
    done = 0
    for start, end in code_ranges(text):
        out += [rewrite(text[done:start]), text[start:end]]
        done = end
    out.append(rewrite(text[done:]))
    return "".join(out)


def link_markers(text: str, urls: Mapping[int, str], link: Callable[[str, str], str]) -> str:
    """Each citation marker `[n]` outside code whose number has a URL in `urls`, replaced by
    `link(url, "[n]")` in the platform's link syntax; others stay as written. `sys.argv[1]` in
    a code block is code, and a link there would show up as literal Markdown in the code."""

    def rewrite(prose: str) -> str:
        return _MARKER.sub(
            lambda m: link(urls[n], m.group(0)) if (n := int(m.group(1))) in urls else m.group(0),
            prose,
        )

    return outside_code(text, rewrite)
