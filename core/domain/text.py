"""Text rules every part shares: shortening for display, making untrusted text unable to
notify anyone or to act on a terminal, and the content words that tie a sentence or a quote to
the passage it comes from."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from functools import lru_cache

import snowballstemmer  # type: ignore[import-untyped]

ELLIPSIS = "…"
# The number in a citation marker, [1] or [1, 3]: at most four digits. Model and web-search text
# is hostile, and Python refuses int() of a number over 4,300 digits; no answer cites ten
# thousand sources, so a longer number in brackets is text, not a marker.
MARKER_NUMBER = r"\d{1,4}"
# A document's own bracketed number ("see policy [2]"), read as an answer's markers are: one
# number or a list of them. Quoted into an answer, it is shown in full-width brackets, which no
# renderer's marker pattern (`[n]` in ASCII brackets) reads and every reader still reads as a
# bracketed number. Not a zero-width character: the renderers' link check strips those.
_BRACKETED_NUMBER = re.compile(rf"\[({MARKER_NUMBER}(?:\s*,\s*{MARKER_NUMBER})*)\]")
_NOT_A_MARKER = "［{}］"
# One citation marker as the renderers link it: [n].
_MARKER = re.compile(rf"\[({MARKER_NUMBER})\]")
# What opens and closes a fenced code block on Slack and Discord.
FENCE = "```"
# A line that opens or closes a fenced code block, as the renderers read it.
CODE_FENCE = re.compile(rf"^\s*{FENCE}")
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
# A word as grounding and quote checks read it: letters and digits, with one inner apostrophe.
WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
# A list bullet, a numbered item, a heading's hashes or a block quote's `>` at the start of a
# line: markup around a sentence, not part of it.
LINE_PREFIX = re.compile(r"^\s*(?:[-*+•]\s+|\d{1,3}[.)]\s+|#{1,6}\s+|>\s*)*")
# A fenced code block as Slack and Discord show one: from a line opening with ``` to the next
# ```, wherever it stands (`npm ci``` closes it too). A fence never closed is no block there:
# its lines show as text, so they are read as text (and their markers checked) here too. No
# `~~~`: neither platform makes code of it.
FENCED = re.compile(rf"^[ \t]*{FENCE}[^\n]*\n.*?{FENCE}", re.DOTALL | re.MULTILINE)
_BACKTICKS = re.compile(r"`+")
# An inline code span ends within its paragraph: a blank line ends the paragraph.
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_STEM_CACHE_SIZE = 65_536  # distinct words stemmed; a long answer and its passages fit many times
_stemmer = snowballstemmer.stemmer("english")
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


def head(text: str, limit: int) -> str:
    """The start of `text` within `limit` characters, an ellipsis where it was cut: unlike
    `clip`, its lines stay lines (a turn of a conversation, a message of a thread)."""
    if len(text) <= limit:
        return text
    return text[: max(limit - len(ELLIPSIS), 0)].rstrip() + ELLIPSIS


# Where a sentence or a line ends: a full stop, question or exclamation mark before a space or
# the end, or a line break.
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")


_ABBREVIATIONS = frozenset({"e.g", "i.e", "etc", "vs", "approx", "fig", "dr", "mr", "ms"})
# "No." abbreviates "number" only before one ("No. 5"); else it is the answer "No." and ends
# its sentence.
_NUMBER_ABBREVIATION = "no"
_FOLLOWED_BY_NUMBER = re.compile(r"\s*\d")


def abbreviation(word: str, rest: str) -> bool:
    """Whether the `.` after `word` (followed by `rest`) abbreviates it rather than ending a
    sentence: "e.g.", "etc.", "No. 5"."""
    word = word.lower().rstrip(".")
    if word == _NUMBER_ABBREVIATION:
        return bool(_FOLLOWED_BY_NUMBER.match(rest))
    return word in _ABBREVIATIONS


def finished_sentences(text: str) -> str:
    """`text` up to the end of its last finished sentence or line: what is left of a reply cut
    off mid-sentence (empty when no sentence was finished). "e.g." ends none."""
    ends = [
        match.end()
        for match in _SENTENCE_END.finditer(text)
        if match.group(0) != "."
        or not abbreviation(_word_before(text, match.start()), text[match.end() : match.end() + 2])
    ]
    return text[: ends[-1]].rstrip() if ends else ""


def _word_before(text: str, end: int) -> str:
    start = max(text.rfind(" ", 0, end), text.rfind("\n", 0, end)) + 1
    return text[start:end]


def stands_whole(part: str, text: str) -> bool:
    """Whether non-empty `part` is in `text` not as a piece of a longer word: `a` is in any
    text, `0 redirects` is in "10 redirects"; an edge that is no word character (`.bot/`)
    needs no boundary."""
    start = r"(?<!\w)" if part[0].isalnum() or part[0] == "_" else ""
    end = r"(?!\w)" if part[-1].isalnum() or part[-1] == "_" else ""
    return re.search(start + re.escape(part) + end, text) is not None


def clip(text: str, limit: int, *, ellipsis: str = ELLIPSIS) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` characters (the ellipsis
    included), so a snippet, quote or keyword never ends mid-word."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - len(ellipsis)].rsplit(" ", 1)[0] + ellipsis


@lru_cache(maxsize=_STEM_CACHE_SIZE)
def _stem(word: str) -> str:
    return str(_stemmer.stemWord(word))


def terms(text: str) -> set[str]:
    """Content words, lower-cased and stemmed (stop words and bare numbers out): what a claim
    and its source, or a quote, must share to be about the same thing."""
    return {
        _stem(w)
        for w in (m.group(0).lower() for m in WORD.finditer(text))
        if w not in STOPWORDS and not w.isdigit()
    }


def split_code(text: str) -> list[tuple[str, bool]]:
    """`text` cut into pieces, in order, each with whether it is code: a fenced block, or an
    inline span between two equal runs of backticks in one paragraph (as Markdown reads them).
    Code is shown as written, so a rule that rewrites prose (citation markers) must not touch
    it: `sys.argv[1]` is an index, not a citation."""
    pieces: list[tuple[str, bool]] = []
    position = 0
    for fence in FENCED.finditer(text):
        pieces += _inline_code(text[position : fence.start()])
        pieces.append((fence.group(0), True))
        position = fence.end()
    return [piece for piece in pieces + _inline_code(text[position:]) if piece[0]]


def _inline_code(text: str) -> list[tuple[str, bool]]:
    """`text` (no fenced block in it) cut at its inline code spans. One pass over the backtick
    runs of each paragraph: a run opens a span closed by the next run of the same length, and
    a run with none is literal text (linear, whatever a hostile text holds)."""
    pieces: list[tuple[str, bool]] = []
    position = 0
    starts = [0, *(m.end() for m in _PARAGRAPH_BREAK.finditer(text))]
    ends = [*(m.start() for m in _PARAGRAPH_BREAK.finditer(text)), len(text)]
    for start, end in zip(starts, ends, strict=True):
        runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text, start, end)]
        closing: list[int | None] = [None] * len(runs)
        latest: dict[int, int] = {}  # a run length to the next run of that length
        for i in range(len(runs) - 1, -1, -1):
            length = runs[i][1] - runs[i][0]
            closing[i] = latest.get(length)
            latest[length] = i
        i = 0
        while i < len(runs):
            j = closing[i]
            if j is None:
                i += 1
                continue
            pieces += [(text[position : runs[i][0]], False), (text[runs[i][0] : runs[j][1]], True)]
            position = runs[j][1]
            i = j + 1
    return [*pieces, (text[position:], False)]


def outside_code(text: str, rewrite: Callable[[str], str]) -> str:
    """`text` with `rewrite` applied to each stretch of prose between code (`split_code`); the
    code itself is kept exactly as written."""
    return "".join(piece if code else rewrite(piece) for piece, code in split_code(text))


def sub_outside_code(
    pattern: re.Pattern[str], replacement: str | Callable[[re.Match[str]], str], text: str
) -> str:
    """`pattern.sub(replacement, text)` on the prose of `text` only, in reading order."""
    return outside_code(text, lambda prose: pattern.sub(replacement, prose))


def findall_outside_code(pattern: re.Pattern[str], text: str) -> list[str]:
    """`pattern.findall(text)` on the prose of `text` only (`split_code`)."""
    return [
        found for piece, code in split_code(text) if not code for found in pattern.findall(piece)
    ]


def unmarked(text: str) -> str:
    """Document text quoted into an answer with its own `[2]` as `［2］`: left as written, the
    renderers would link it to the answer's second source, which is another document. Its
    code keeps its brackets: no renderer links a marker in code, and `argv[1]` must copy."""
    return sub_outside_code(_BRACKETED_NUMBER, lambda m: _NOT_A_MARKER.format(m.group(1)), text)


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
