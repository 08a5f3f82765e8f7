"""Platform-free questions, turns and answers: what adapters hand the core and get back.

Adapters translate a Slack event or a Discord interaction into a `Question`, and render an
`Answer`; nothing in here knows which platform it came from beyond a label.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from core.domain.text import ELLIPSIS
from core.domain.text_fragments import highlighting

PASSAGE_SHA_CHARS = 16  # 64 bits: enough to tell two versions of one passage apart


class ChannelKind(StrEnum):
    CHANNEL = "channel"
    THREAD = "thread"
    DIRECT = "direct"
    TERMINAL = "terminal"


class AnswerStatus(StrEnum):
    ANSWERED = "answered"
    PARTIAL = "partial"
    NOT_FOUND = "not_found"
    ERROR = "error"


class AnswerMode(StrEnum):
    """How the answer was produced, so a reader knows how much to trust it."""

    AGENT = "agent"  # a model with native tool use
    SEARCH_THEN_ANSWER = "search_then_answer"  # a model given passages, no tool calls
    EXTRACTIVE = "extractive"  # no model: the best passages, quoted


class SourceKind(StrEnum):
    KNOWLEDGE_BASE = "knowledge_base"
    LEARNED = "learned"
    WEB = "web"


@dataclass(frozen=True, slots=True)
class Question:
    platform: str
    conversation_key: str  # workspace/channel/thread: one conversation's memory
    user: str
    text: str
    channel_kind: ChannelKind
    # platform/workspace/channel where it was asked, for per-channel settings; empty when the
    # conversation key already starts with it (a Discord thread's key names only the thread).
    channel_key: str = ""
    # Nobody asked the bot (an `auto` channel, a forum post): the channel's `min_relevance`
    # decides whether the model is asked at all.
    unasked: bool = False

    @property
    def scope(self) -> str:
        return self.channel_key or self.conversation_key


@dataclass(frozen=True, slots=True)
class Turn:
    question: str
    answer: str


# A thread the bot was asked in without having taken part, as the conversation's first turn:
# what people said, and (as the model's side of that turn) what the bot makes of it. Nothing
# it did not do.
THREAD_SO_FAR = (
    "Before I was asked, people wrote this in the thread (each line: the author's id, then "
    "the message; … where messages are left out):"
)
NEWEST_UNREAD = "(the thread's newest messages could not be read)"
THREAD_NOTED = (
    "I had not taken part in this thread yet. I will answer the next message with this "
    "discussion in mind."
)


def discussion_turn(
    first: str, rest: Sequence[str], *, max_chars: int, left_out: bool, cut_short: bool
) -> Turn:
    """What people said in a thread, one line each (`author: message`, already cut), as one
    turn of at most about `max_chars`: the first line (what the thread is about) and the
    latest of `rest` that fit. `left_out`: messages between the two were not read;
    `cut_short`: the reading stopped before the thread's end, so the model is not handed its
    middle as its latest."""
    kept: list[str] = []
    used = len(first)
    for line in reversed(rest):
        if used + len(line) > max_chars:
            break
        kept.insert(0, line)
        used += len(line)
    gap = [ELLIPSIS] if left_out or len(kept) < len(rest) else []
    unread = [f"{ELLIPSIS} {NEWEST_UNREAD}"] if cut_short else []
    said = "\n".join([first, *gap, *kept, *unread])
    return Turn(f"{THREAD_SO_FAR}\n{said}", THREAD_NOTED)


@dataclass(frozen=True, slots=True)
class Citation:
    number: int
    title: str
    url: str
    quote: str
    verified: bool
    source_kind: SourceKind = SourceKind.KNOWLEDGE_BASE
    doc_id: str = ""  # which document backs it: ties feedback on the answer to learned knowledge
    chunk_id: str = ""  # which passage: an answer is re-checked when it changes or goes
    passage_sha: str = ""  # the passage's text as cited (`passage_fingerprint`)
    # The quote as a text fragment (`text_directive`), when it was verified in the passage: set
    # where the passage's text is at hand, since the quote shown may be cut or have its links
    # removed, and a fragment that does not match opens the page at its top.
    directive: str = ""

    @property
    def link(self) -> str:
        """Where the citation takes a reader: its passage, scrolled to the quote and the quote
        highlighted. `url` stays the passage's own, for everything that tells one source from
        another."""
        return highlighting(self.url, self.directive)


@dataclass(slots=True)
class ToolCall:
    """One step of the trace: what was called, how long it took, whether it failed."""

    name: str
    input: dict[str, object]
    seconds: float
    is_error: bool = False
    summary: str = ""


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens


@dataclass(slots=True)
class Trace:
    tool_calls: list[ToolCall] = field(default_factory=list)
    model_calls: int = 0
    model_seconds: float = 0.0
    tool_seconds: float = 0.0
    total_seconds: float = 0.0
    usage: Usage = field(default_factory=Usage)
    notes: list[str] = field(default_factory=list)
    model: str = ""  # the model that wrote the answer, as its API names it

    @property
    def own_seconds(self) -> float:
        """Time spent in our code: everything but waiting for the model and the tools."""
        return max(0.0, self.total_seconds - self.model_seconds - self.tool_seconds)


@dataclass(slots=True)
class Answer:
    text: str
    status: AnswerStatus
    mode: AnswerMode
    citations: list[Citation] = field(default_factory=list)
    sources: list[SourceKind] = field(default_factory=list)
    trace: Trace = field(default_factory=Trace)
    # Passages the answer was written from but does not cite (search-then-answer): listed as
    # "Sources consulted", without quotes, so the reader can always check them.
    consulted: list[Citation] = field(default_factory=list)
    # An unasked question no passage came close to (its channel's `min_relevance`): never
    # posted, whatever the channel's other settings, and not kept as a conversation turn.
    withheld: bool = False

    @property
    def grounded(self) -> bool:
        """Whether the answer stands on the docs: it answers (wholly or in part) and at least
        one of its citations quotes its passage verbatim."""
        answers = self.status in (AnswerStatus.ANSWERED, AnswerStatus.PARTIAL)
        return answers and any(c.verified for c in self.citations)


def passage_fingerprint(text: str) -> str:
    """What a citation remembers of its passage's text, to tell later whether it changed."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:PASSAGE_SHA_CHARS]
