"""Text rules every part shares: shortening for display, making untrusted text unable to
notify anyone or to act on a terminal, and the content words that tie a sentence or a quote to
the passage it comes from."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import snowballstemmer  # type: ignore[import-untyped]

ELLIPSIS = "…"
# The number in a citation marker, [1] or [1, 3]: at most four digits. Model and web-search text
# is hostile, and Python refuses int() of a number over 4,300 digits; no answer cites ten
# thousand sources, so a longer number in brackets is text, not a marker.
MARKER_NUMBER = r"\d{1,4}"
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
