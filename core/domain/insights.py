"""The answer log: every answer the bot gave (or held back), as `bot report` reads it.

An entry keeps what a team needs to see what the bot could not answer and which docs it stood
on: status and mode, the passages cited (and whether each quote was verified), web use, the
model, tokens and timings, and the votes and 👎 reasons it got. With `insights.store_questions:
false` the question itself is never written; a hash of it stays, so repeats still count, and a
sketch of its embedding (`question_sketch`), so the report can still group questions by meaning.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from core.domain.conversation import Answer, AnswerMode, SourceKind
from core.domain.feedback import citations_json
from core.domain.text import without_controls

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

NO_MODEL = "none"  # the model of an answer written without one (quoted passages)
# The sketch: the embedding projected on fixed random ±1 directions, fewer than it has. On the
# 168 labelled gap questions, 128 of them group as well as the full vector (adjusted Rand index
# 0.85 against 0.88) and no text can be read back from them by the bot. They are derived from
# a hash, not a random generator, so every version and process projects the same way.
SKETCH_DIMENSIONS = 128
SKETCH_DECIMALS = 4


@dataclass(frozen=True, slots=True)
class LoggedCitation:
    doc_id: str
    url: str
    title: str
    verified: bool
    web: bool
    chunk_id: str = ""
    passage_sha: str = ""  # the passage as it was cited


@dataclass(frozen=True, slots=True)
class LoggedAnswer:
    answer_id: str
    at: float  # epoch seconds
    conversation_key: str  # where it was given: its thread, to post an update in
    platform: str
    channel: str  # the conversation key without its thread: slack/TEAM/CHANNEL, discord/GUILD/…
    question: str  # "" when questions are not stored
    question_hash: str
    text: str  # the answer as posted
    status: str
    mode: str
    posted: bool  # False: an `auto` channel's answer held back (not grounded)
    model: str
    input_tokens: int
    output_tokens: int
    total_seconds: float
    model_seconds: float
    citations: tuple[LoggedCitation, ...]
    up: int = 0
    down: int = 0
    reasons: tuple[str, ...] = ()
    sketch: tuple[float, ...] = ()  # of the question's embedding, when its text is not kept

    @property
    def web(self) -> bool:
        return any(c.web for c in self.citations)


def question_sketch(vector: Sequence[float]) -> tuple[float, ...]:
    """A few numbers that keep how close questions are, not what they say."""
    import numpy as np  # at call time: importing it costs a tenth of a second

    projected = np.asarray(vector, dtype=np.float64) @ _directions(len(vector))
    return tuple(round(float(x), SKETCH_DECIMALS) for x in projected)


@cache
def _directions(dimensions: int) -> npt.NDArray[np.float64]:
    """`dimensions` x SKETCH_DIMENSIONS of ±1, one bit of sha256("docbot-sketch-<row>") per cell."""
    import numpy as np

    rows = [
        np.unpackbits(
            np.frombuffer(hashlib.sha256(f"docbot-sketch-{row}".encode()).digest(), np.uint8)
        )[:SKETCH_DIMENSIONS]
        for row in range(dimensions)
    ]
    return np.stack(rows).astype(np.float64) * 2 - 1


def question_hash(question: str) -> str:
    """Who asked the same thing again, without keeping what they asked: case and spacing do
    not make a question new."""
    normal = " ".join(question.lower().split())
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()


def logged_question(question: str, max_chars: int | None) -> str:
    """The question as the log keeps it: as the engine reads it (without control characters
    or surrounding space) and no longer than the engine answers (`answers.max_question_chars`):
    an adapter records the message as it came, and one refused as too long may run to tens of
    thousands of characters."""
    kept = without_controls(question).strip()
    return kept if max_chars is None else kept[:max_chars]


def channel_of(conversation_key: str) -> tuple[str, str]:
    """(platform, channel) of a conversation key: its first part, and the key up to the
    channel (`slack/T1/C1/1700000000.000100` -> `slack`, `slack/T1/C1`)."""
    parts = conversation_key.split("/")
    return parts[0], "/".join(parts[:3])


def logged_citations(kept: object) -> tuple[LoggedCitation, ...]:
    """The citations as a store kept them (`citations_json`); anything else is dropped."""
    items = kept if isinstance(kept, list) else []
    return tuple(
        LoggedCitation(
            str(c.get("doc_id", "")),
            str(c.get("url", "")),
            str(c.get("title", "")),
            bool(c.get("verified")),
            c.get("source_kind") == SourceKind.WEB.value,
            str(c.get("chunk_id", "")),
            str(c.get("passage_sha", "")),
        )
        for c in items
        if isinstance(c, dict)
    )


def model_of(answer: Answer) -> str:
    return NO_MODEL if answer.mode is AnswerMode.EXTRACTIVE else answer.trace.model or "unknown"


def log_row(
    conversation_key: str,
    question: str,
    answer: Answer,
    *,
    posted: bool,
    store_questions: bool,
    sketch: Sequence[float] = (),
    channel: str | None = None,
) -> dict[str, object]:
    """What both backends keep of one answer: the fields of a `LoggedAnswer`, and what it
    takes to show the answer again (its text, citations and the sources it consulted)."""
    platform, from_key = channel_of(conversation_key)
    channel = channel or from_key
    return {
        "conversation_key": conversation_key,
        "platform": platform,
        "channel": channel,
        "question": question if store_questions else "",
        "question_hash": question_hash(question),
        "answer": answer.text,
        "status": answer.status.value,
        "mode": answer.mode.value,
        "posted": posted,
        "model": model_of(answer),
        "input_tokens": answer.trace.usage.input_tokens,
        "output_tokens": answer.trace.usage.output_tokens,
        "total_s": answer.trace.total_seconds,
        "model_s": answer.trace.model_seconds,
        "citations": citations_json(answer.citations),
        "consulted": citations_json(answer.consulted),
        "question_sketch": [] if store_questions else list(sketch),
    }


def logged_answer(
    answer_id: str, at: float, row: Mapping[str, Any], votes: Sequence[int], reasons: Sequence[str]
) -> LoggedAnswer:
    """A stored row read back (`log_row`'s fields), with the votes and 👎 reasons it got.
    A row an older release wrote before the log had channels (a state file brought up to date
    before its rows were filled in, an Elasticsearch document of then) gets its platform and
    channel from its conversation key and its hash from its question, as `log_row` would."""
    key, question = str(row["conversation_key"]), str(row["question"])
    platform, channel = str(row["platform"]), str(row["channel"])
    if not channel:
        platform, channel = channel_of(key)
    return LoggedAnswer(
        answer_id=answer_id,
        at=at,
        conversation_key=key,
        platform=platform,
        channel=channel,
        question=question,
        question_hash=str(row["question_hash"]) or question_hash(question),
        text=str(row["answer"]),
        status=str(row["status"]),
        mode=str(row["mode"]),
        posted=bool(row["posted"]),
        model=str(row["model"]),
        input_tokens=int(row["input_tokens"]),
        output_tokens=int(row["output_tokens"]),
        total_seconds=float(row["total_s"]),
        model_seconds=float(row["model_s"]),
        citations=logged_citations(row["citations"]),
        up=sum(1 for v in votes if v > 0),
        down=sum(1 for v in votes if v < 0),
        reasons=tuple(sorted(reasons)),
        sketch=tuple(float(x) for x in row.get("question_sketch") or ()),
    )
