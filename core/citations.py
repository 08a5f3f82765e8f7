"""Numbered sources for one answer, and the checks an answer passes before anyone sees it.

Every passage retrieved while answering gets a number the model cites as [n]. Before the answer
leaves the core: a marker that points at no retrieved passage is removed; a quote that is not in
its passage (after folding whitespace and case) marks that citation unverified; a URL that no
retrieved passage has is unlinked; and platform-wide pings (`@everyone`, `<!channel>`, ...) are
defused, since model output and documents are untrusted text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urldefrag

from core.conversation import Citation, SourceKind
from core.models import SearchHit
from core.tools import CitedSource
from core.web_search import WEB_SOURCE

_MARKER = re.compile(r"([ \t]?)\[(\d+(?:\s*,\s*\d+)*)\]")
# One pass over every link form, so each URL is judged exactly once: a Markdown link (with an
# optional <...> destination and title), a Slack/autolink `<url>` or `<url|label>`, or a bare URL
# wherever it stands. Case-insensitive: `HTTPS://` is a URL too.
_ANY_LINK = re.compile(
    r"\[(?P<label>[^\]\n]*)\]\(\s*<?(?P<md>https?://[^)\s>]+)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"
    r"|<(?P<angle>https?://[^>|\s]+)(?:\|(?P<angle_label>[^>]*))?>"
    r"|(?P<bare>https?://[^\s<>()\[\]\"'`]+)",
    re.IGNORECASE,
)
_PINGS = re.compile(
    r"<!(?:channel|here|everyone)(?:\|[^>]*)?>|<!subteam\^[^>]*>|<@[A-Z0-9]+(?:\|[^>]*)?>"
    r"|<#[A-Z0-9]+(?:\|[^>]*)?>|<@[!&]?\d+>|@(?=(?:everyone|here|channel)\b)",
    re.IGNORECASE,
)
_QUOTE_PUNCTUATION = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "…": "..."})


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
        urls: set[str] = set()
        for source in self._by_number.values():
            urls.add(source.hit.chunk.url)
            urls.add(urldefrag(source.hit.chunk.url).url)
        return urls


_UNFINISHED_TAIL = re.compile(r"(\[[^\]\n]*(\]\([^)\s]*)?|<[^>\n]*|https?:/?/?[^\s)]*)$")


def finished_part(partial: str) -> str:
    """A partial answer without a trailing link, marker or tag still being written: its URL
    can't be checked until it is complete, so it isn't shown yet."""
    return _UNFINISHED_TAIL.sub("", partial)


def normalise(text: str) -> str:
    """For comparing a quote with its source: entities, typographic quotes, spacing and case
    folded (the model sees sources HTML-escaped and may copy them so)."""
    return " ".join(html.unescape(text).translate(_QUOTE_PUNCTUATION).split()).casefold()


def defuse_pings(text: str) -> str:
    """Remove platform mention syntax so untrusted text can never notify anyone. Repeated until
    nothing changes: removing `<!here>` from `<<!here>!channel>` must not leave `<!channel>`."""
    while True:
        defused = _PINGS.sub(lambda m: "@\u200b" if m.group(0) == "@" else "", text)
        if defused == text:
            return defused
        text = defused


def _unlink_unknown_urls(text: str, allowed: set[str]) -> str:
    def judge(match: re.Match[str]) -> str:
        if match.group("md"):
            return match.group(0) if match.group("md") in allowed else match.group("label")
        if match.group("angle"):
            url = match.group("angle")
            return match.group(0) if url in allowed else (match.group("angle_label") or "")
        raw = match.group("bare")
        url = raw.rstrip(".,;:!?")
        return (url if url in allowed else "[link removed]") + raw[len(url) :]

    return _ANY_LINK.sub(judge, text)


def check_answer(
    answer: str, cited: Sequence[CitedSource], registry: SourceRegistry
) -> tuple[str, list[Citation]]:
    """The answer text with markers renumbered 1..n in reading order, and its checked citations."""
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

    text = _MARKER.sub(renumber, answer)
    for number in quotes:  # cited with a quote but never marked: still a source of the answer
        if registry.get(number) is not None and number not in order:
            order.append(number)
    text = defuse_pings(_unlink_unknown_urls(text, registry.allowed_urls()))
    citations = []
    for new_number, number in enumerate(order, start=1):
        source = registry.get(number)
        assert source is not None
        quote = quotes.get(number, "")
        verified = bool(quote.strip()) and normalise(quote) in normalise(source.hit.chunk.text)
        citations.append(
            Citation(
                number=new_number,
                title=source.hit.chunk.title,
                url=source.hit.chunk.url,
                quote=defuse_pings(quote),
                verified=verified,
                source_kind=source.kind,
                doc_id=source.hit.chunk.doc_id,
            )
        )
    return text.strip(), citations
