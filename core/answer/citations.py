"""Numbered sources for one answer, and the checks an answer passes before anyone sees it.

Every passage retrieved while answering gets a number the model cites as [n]. Before the answer
leaves the core: a marker that points at no retrieved passage is removed; a quote that is not in
its passage (after folding whitespace and case, on word boundaries), or that says too little to
show anything (`quote_verified`), marks that citation unverified; a URL that no
retrieved passage has is unlinked; and platform-wide pings (`@everyone`, `<!channel>`, ...) are
defused, since model output and documents are untrusted text.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urldefrag

from core.answer.tools import CitedSource, RespondInput
from core.domain.conversation import (
    Answer,
    AnswerMode,
    AnswerStatus,
    Citation,
    SourceKind,
    passage_fingerprint,
)
from core.domain.documents import SearchHit
from core.domain.text import (
    LINE_PREFIX,
    MARKER_NUMBER,
    WORD,
    defuse_pings,
    stands_whole,
    sub_outside_code,
    terms,
)
from core.domain.text_fragments import text_directive
from core.domain.urls import is_linkable
from core.domain.web import WEB_SOURCE

_MARKER = re.compile(rf"([ \t]?)\[({MARKER_NUMBER}(?:\s*,\s*{MARKER_NUMBER})*)\]")

# What the reader's client turns into a link, each judged once, in one pass (alternatives are
# tried left to right at each position, so a Markdown link is judged as a whole before its
# parts). Every form a URL can take on Slack, Discord or a terminal is here: a Markdown link or
# image (any scheme, an optional <...> destination, one level of parentheses, a title), a
# reference definition `[1]: url`, an HTML anchor, a Slack/autolink `<url>` or `<url|label>`,
# a bare URL of any scheme, `javascript:`/`data:`/`mailto:` URLs (a bare e-mail address is
# left as written: the address is in plain view), protocol-relative `//host/...`, and
# scheme-less text clients auto-link: `www.anything`, `host.tld/path`, `host.tld:port`
# (`host.tld./path` too: a trailing dot names the same host), and a bare `host.tld` on a
# common top-level domain. Dots include the full-width and ideographic ones browsers map to
# ".". Case-insensitive: `HTTPS://` is a URL too.
_DOT = "[.\uff0e\u3002\uff61]"
# What a client's linkifier keeps reading as part of a URL; `(` and `[` too, so text glued to a
# URL (`https://docs.example.com/guide(x`) is judged as the client would read it.
_URL_CHARS = r"[^\s<>)\]\"'`|]"
# A URL with a user part (`https://docs.example.com'@evil.example`): the host is what follows
# the `@`, and clients link the whole run to it, quotes and brackets included, which
# `_URL_CHARS` stops at (leaving `@evil.example` to read as an e-mail address). Judged whole,
# and never allowed: a source's URL never carries credentials.
_USERINFO_URL = rf"[a-z][a-z0-9+.-]{{0,31}}://[^\s<>/?#@]*@{_URL_CHARS}*"
# Where scheme-less text starts a host: not inside a word or an e-mail address, nor at a later
# part of a path (`node_modules/lodash.merge/index.js`) or of a host, whichever dot joins it
# (each part of `a．a．a．...` read as a start would re-read the rest: quadratic).
_START = rf"(?<![\w-])(?<![\w-]/)(?<![\w-]{_DOT})"
_HOST = rf"[\w-]+(?:{_DOT}[\w-]+)*{_DOT}(?:[^\W\d_]{{2,63}}|xn--[a-z0-9-]{{1,59}})"
_EMAIL = rf"[\w.+-]+@{_HOST}"  # a link target a client opens as mailto:
# Top-level domains common enough that a bare `name.tld` is auto-linked by Slack; ones that
# are also file extensions (.md, .py, .sh, .zip, ...) are left out: `README.md` stays text.
_COMMON_TLDS = (
    "com|net|org|edu|gov|mil|int|io|co|ai|app|dev|info|biz|xyz|me|us|uk|de|ru|cn|fr|jp|br|au"
    "|ca|nl|eu|tv|cc|ly|gg|online|site|top|club|shop|live|link|page|cloud|tech|store|click"
)
_TARGET = r"(?:<(?P<{0}_angled>[^<>\n]*)>|(?P<{0}>(?:[^\s()<>]|\([^\s()<>]*\))+))"
_ANY_LINK = re.compile(
    rf"(?P<image>!?)\[(?P<label>[^\[\]\n]*)\]\(\s*{_TARGET.format('md')}"
    r"(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^)\n]*\)))?\s*\)"
    rf"|^[ \t]{{0,3}}\[[^\]\n]+\]:[ \t]*{_TARGET.format('ref')}[^\n]*$"
    # An anchor's tag is read at most once: its `>` must exist before any href is looked for,
    # and the first href found is the one judged (atomic), so no input makes the tag re-read.
    r"|<a\b(?=[^<>]*+>)(?>[^<>]*?\bhref\s*+=\s*+[\"']?+(?P<href>[^\"'\s<>]*+)[^<>]*+>)"
    r"(?P<anchor_label>[^<\n]*+)</a\s*+>"
    r"|<(?P<angle>[a-z][a-z0-9+.-]*:[^<>|\s]*)(?:\|(?P<angle_label>[^<>]*))?>"
    rf"|(?P<bare>{_USERINFO_URL}"
    rf"|[a-z][a-z0-9+.-]{{0,31}}://{_URL_CHARS}+"
    rf"|(?:javascript|vbscript|livescript|mailto):{_URL_CHARS}+"
    rf"|data:[\w.+-]+/[\w.+-]+[;,]{_URL_CHARS}*"
    rf"|(?<![:/])//{_HOST}{_URL_CHARS}*"
    rf"|{_START}www\d{{0,3}}{_DOT}{_URL_CHARS}+"
    rf"|{_START}{_HOST}{_DOT}?(?::\d{{1,5}})?[/?#]{_URL_CHARS}*"
    rf"|{_START}{_HOST}{_DOT}?:\d{{1,5}}"
    rf"|{_START}(?<!@)[\w-]+(?:{_DOT}[\w-]+)*{_DOT}(?:{_COMMON_TLDS})(?![\w-]))",
    re.IGNORECASE | re.MULTILINE,
)
# A link target that is a web address, not a relative reference like `#install` or `x`:
# `funcs[0](x)` in code is not a link to judge.
_ADDRESS = re.compile(
    rf"\s*(?:[a-z][a-z0-9+.-]*:|[/\\]{{2}}|www\d{{0,3}}{_DOT}|{_HOST}{_DOT}?(?:$|[:/?#])|{_EMAIL})",
    re.IGNORECASE,
)
_MAX_PASSES = 4  # judging again after a rewrite; real text settles in one or two
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*:", re.IGNORECASE)
_TRAILING_PUNCTUATION = ".,;:!?"
# What stands where a URL was removed: no brackets, so it can sit inside a kept link's label.
LINK_REMOVED = "(link removed)"
_QUOTE_PUNCTUATION = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "…": "..."})
# The fewest content words (stemmed, stop words out; numbers count) a quote holds to verify its
# citation unless it is a whole sentence or line of its passage: a letter (`e`) or one common
# word is in almost any passage and shows nothing. Two, not more: a short phrase such as
# "per minute & more" is still something a reader can find and check.
MIN_QUOTE_WORDS = 2
# A word shorter than this (`e`, `x`, `1`) is not content, whatever the stop word list says.
_MIN_WORD_CHARS = 2
# Where a passage's sentences and lines end, for telling a whole one quoted from a fragment.
_SENTENCE_BREAK = re.compile(r"\n|(?<=[.!?;])\s+")
_SENTENCE_PUNCTUATION = ".!?;:"


@dataclass(frozen=True, slots=True)
class NumberedSource:
    number: int
    hit: SearchHit

    @property
    def kind(self) -> SourceKind:
        if self.hit.chunk.learned:
            return SourceKind.LEARNED
        return SourceKind.WEB if self.hit.chunk.source == WEB_SOURCE else SourceKind.KNOWLEDGE_BASE


class SourceRegistry:
    """The passages retrieved for one question, numbered in order of first retrieval."""

    def __init__(self) -> None:
        self._by_number: dict[int, NumberedSource] = {}
        self._by_chunk: dict[str, int] = {}

    def add(self, hits: Sequence[SearchHit]) -> list[NumberedSource]:
        numbered = []
        for hit in hits:
            number = self._by_chunk.get(hit.chunk.chunk_id)
            if number is None:
                number = len(self._by_number) + 1
                self._by_chunk[hit.chunk.chunk_id] = number
                self._by_number[number] = NumberedSource(number, hit)
            numbered.append(self._by_number[number])
        return numbered

    def get(self, number: int) -> NumberedSource | None:
        return self._by_number.get(number)

    def all(self) -> list[NumberedSource]:
        return list(self._by_number.values())

    def __len__(self) -> int:
        return len(self._by_number)

    def allowed_urls(self) -> set[str]:
        return allowed_urls(source.hit.chunk.url for source in self._by_number.values())


# What may still be being written at the end of a partial answer, each read backwards from its
# end: `[label`, `[label](url`, `<tag` and `http://url`. Read forwards, every `[` of a long
# line would be a start re-reading the rest of it (quadratic on each streamed update); read
# backwards from the one place such a tail can end, each is one greedy scan to its earliest start.
_UNFINISHED_TAILS_REVERSED = tuple(
    re.compile(pattern)
    for pattern in (r"(?:[^)\s]*\(\])?[^\]\n]*\[", r"[^>\n]*<", r"[^\s)]*/?/?:s?ptth")
)


def finished_part(partial: str) -> str:
    """A partial answer without a trailing link, marker or tag still being written: its URL
    can't be checked until it is complete, so it isn't shown yet. A tail may stand before one
    final newline, as `$` would allow."""
    body = partial.removesuffix("\n")
    backwards = body[::-1]
    unfinished = max(
        (found.end() for tail in _UNFINISHED_TAILS_REVERSED if (found := tail.match(backwards))),
        default=0,
    )
    return body[: len(body) - unfinished] + partial[len(body) :]


def normalise(text: str) -> str:
    """For comparing a quote with its source: entities, typographic quotes, spacing and case
    folded (the model sees sources HTML-escaped and may copy them so)."""
    return " ".join(html.unescape(text).translate(_QUOTE_PUNCTUATION).split()).casefold()


def quote_words(quote: str) -> set[str]:
    """The content a quote carries: its stemmed content words and its numbers, each of at least
    `_MIN_WORD_CHARS` characters."""
    numbers = {w for w in WORD.findall(quote) if w.isdigit()}
    return {w for w in terms(quote) | numbers if len(w) >= _MIN_WORD_CHARS}


def quote_verified(quote: str, passage: str, *, min_words: int = MIN_QUOTE_WORDS) -> bool:
    """Whether `quote` shows its citation comes from `passage`: it is in the passage (folded as
    `normalise` does) starting and ending on word boundaries, and it says something, at least
    `min_words` content words, or all of a sentence or line of the passage (a short one
    quoted in full, as grounding quotes: "Restart it.")."""
    wanted = normalise(quote)
    if not wanted:
        return False
    if not stands_whole(wanted, normalise(passage)):
        return False
    return len(quote_words(quote)) >= min_words or _whole_sentence(wanted, passage)


def _whole_sentence(wanted: str, passage: str) -> bool:
    """Whether the folded quote `wanted` is one whole sentence or line of `passage` (its bullet
    and final punctuation aside), or the whole passage."""
    bare = LINE_PREFIX.sub("", wanted, count=1).rstrip(_SENTENCE_PUNCTUATION).strip()
    pieces = [*_SENTENCE_BREAK.split(passage), passage]
    return any(
        normalise(LINE_PREFIX.sub("", piece, count=1)).rstrip(_SENTENCE_PUNCTUATION).strip() == bare
        for piece in pieces
    )


def allowed_urls(urls: Iterable[str]) -> set[str]:
    """The URLs an answer may show: its sources' linkable URLs, each with and without its
    #fragment (a link to the page of a cited passage is fine)."""
    allowed: set[str] = set()
    for url in urls:
        if is_linkable(url):
            allowed.update((url, urldefrag(url).url))
    return allowed


def _visible(text: str) -> str:
    """Text without invisible format characters (zero-width spaces, joiners, bidi overrides):
    inside a URL they hide it from every check while the client may still link it."""
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def _unlink_unknown_urls(text: str, allowed: set[str]) -> str:
    """Every link, URL and URL-looking text judged against `allowed`: a link to somewhere
    else keeps only its label, checked in turn (a label can itself look like a URL), and
    a bare one becomes LINK_REMOVED. Repeated until nothing changes: a kept URL left glued to
    what follows a removed link (`https://docs.example.com/guide` + `docs`) is a new URL."""
    for _ in range(_MAX_PASSES):
        judged = _ANY_LINK.sub(lambda match: _judge(match, allowed), text)
        if judged == text:
            return judged
        text = judged
    # Still changing (built to keep rewriting itself): drop every link-like match until none
    # is left; each pass shortens the text, so this ends.
    while (stripped := _ANY_LINK.sub("", text)) != text:
        text = stripped
    return text


def _judge(match: re.Match[str], allowed: set[str]) -> str:
    groups = match.groupdict()
    for target_group, label_group in (
        ("md", "label"),
        ("md_angled", "label"),
        ("href", "anchor_label"),
        ("angle", "angle_label"),
    ):
        target = groups[target_group]
        if target is None:
            continue
        label = _unlink_unknown_urls(groups[label_group] or "", allowed)
        relative = target_group != "angle" and not _ADDRESS.match(target)
        if relative or _bare_allowed(target.strip(), allowed):
            if target_group == "angle":
                return match.group(0) if groups["angle_label"] is None else f"<{target}|{label}>"
            return f"{groups['image'] or ''}[{label}]({target})"
        return label
    for target_group in ("ref", "ref_angled"):
        target = groups[target_group]
        if target is not None:
            keep = _bare_allowed(target.strip(), allowed) or not _ADDRESS.match(target)
            return match.group(0) if keep else ""
    raw = groups["bare"]
    url = raw.rstrip(_TRAILING_PUNCTUATION)
    return (url if _bare_allowed(url, allowed) else LINK_REMOVED) + raw[len(url) :]


def _bare_allowed(url: str, allowed: set[str]) -> bool:
    if url in allowed:
        return True
    if _SCHEME.match(url) or url.startswith("//"):
        return False
    # Scheme-less text (`docs.example.com/a`) is what the client links as http(s)://...
    return any(f"{scheme}://{url}" in allowed for scheme in ("https", "http"))


def _linked_urls(text: str) -> set[str]:
    """Every URL a checked text still links to, scheme-less ones as the client reads them."""
    urls: set[str] = set()
    for match in _ANY_LINK.finditer(text):
        groups = match.groupdict()
        for name in ("md", "md_angled", "ref", "ref_angled", "href", "angle", "bare"):
            if (target := groups[name]) is not None:
                url = target.strip().rstrip(_TRAILING_PUNCTUATION)
                urls.update((url, f"https://{url}", f"http://{url}"))
    return urls


def check_links(text: str, allowed: set[str]) -> str:
    """Untrusted text (a model's answer, a document's passage or title) made safe to show:
    no invisible characters, no link or URL-looking text but to `allowed`, no pings. The one
    check every answer path and every platform's renderer applies."""
    return defuse_pings(_unlink_unknown_urls(_visible(text), allowed))


def check_answer(
    answer: str, cited: Sequence[CitedSource], registry: SourceRegistry, *, decoded: bool = False
) -> tuple[str, list[Citation]]:
    """The answer text with markers renumbered 1..n in reading order, and its checked citations.
    A `[n]` in code (a fenced block or an inline span) is the code's, not a marker.

    Entities are decoded first: a model copying escaped text writes `&lt;!channel&gt;`, which
    must reach the ping and link checks as the `<!channel>` a reader would see. Once only: a
    text already `decoded` (search-then-answer's, by the grounding) keeps the `&amp;` it means."""
    if not decoded:
        answer = html.unescape(answer)
    quotes: dict[int, str] = {}
    for item in cited:
        quotes.setdefault(item.source, item.quote)
    order: list[int] = []  # original source numbers, in the order the reader meets them

    def renumber(match: re.Match[str]) -> str:
        kept = []
        for raw in match.group(2).split(","):
            number = int(raw)
            if registry.get(number) is None:
                continue
            if number not in order:
                order.append(number)
            kept.append(f"[{order.index(number) + 1}]")
        return match.group(1) + "".join(kept) if kept else ""

    # Only prose has markers: `sys.argv[1]` in code is an index, kept as written.
    text = sub_outside_code(_MARKER, renumber, answer)
    for number in quotes:  # cited with a quote but never marked: still a source of the answer
        if registry.get(number) is not None and number not in order:
            order.append(number)
    text = check_links(text, registry.allowed_urls())
    linked = _linked_urls(text)
    for known in registry.all():  # linked in the text: a source of the answer, listed with them
        url = known.hit.chunk.url
        if known.number not in order and {url, urldefrag(url).url} & linked:
            order.append(known.number)
    chosen = [found for number in order if (found := registry.get(number)) is not None]
    allowed = allowed_urls(source.hit.chunk.url for source in chosen)
    citations = []
    for new_number, source in enumerate(chosen, start=1):
        quote = quotes.get(source.number, "")
        verified = quote_verified(quote, source.hit.chunk.text)
        citations.append(
            Citation(
                number=new_number,
                title=check_links(source.hit.chunk.title, allowed),
                url=source.hit.chunk.url,
                quote=check_links(quote, allowed),
                verified=verified,
                source_kind=source.kind,
                doc_id=source.hit.chunk.doc_id,
                chunk_id=source.hit.chunk.chunk_id,
                passage_sha=passage_fingerprint(source.hit.chunk.text),
                directive=text_directive(quote, source.hit.chunk.text) if verified else "",
            )
        )
    return text.strip(), citations


def checked_answer(
    respond: RespondInput, registry: SourceRegistry, mode: AnswerMode, *, decoded: bool = False
) -> Answer:
    """A model's answer as the user gets it: checked (`check_answer`), and never claiming to
    answer with nothing verifiable behind it."""
    text, citations = check_answer(respond.answer, respond.citations, registry, decoded=decoded)
    status = AnswerStatus(respond.status)
    if status is not AnswerStatus.NOT_FOUND and not citations:
        status = AnswerStatus.PARTIAL
    return Answer(
        text=text,
        status=status,
        mode=mode,
        citations=citations,
        sources=sorted({c.source_kind for c in citations}) or [SourceKind.KNOWLEDGE_BASE],
    )
