"""A seeded answer log, as weeks of a real deployment would leave it: the questions of
`tests/data/gap_questions.jsonl` (12 topics the bundled docs do not cover) answered not_found
or in part, the docs questions of `tests/data/chat_messages.jsonl` answered with verified
citations, some held back, some voted on. Shared by the report's tests and `bench/report.py`."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import time_machine

from core.config import Settings
from core.domain.conversation import (
    Answer,
    AnswerMode,
    AnswerStatus,
    Citation,
    Trace,
    Usage,
)
from core.domain.documents import DocumentRecord
from core.domain.insights import LoggedAnswer
from core.ports import AnswerRecords, Backend, PlatformState

DATA = Path(__file__).parents[1] / "data"
DAY_S = 86_400
CHANNELS = ("slack/T1/CDOCS", "slack/T1/CSUPPORT", "discord/42/77")
CITED_SHARE = 0.5  # of the index's documents, the ones answers cite (the rest: never cited)


@dataclass(frozen=True, slots=True)
class Seeded:
    question: str
    topic: str | None  # the gap topic, for a question the docs do not answer
    answer: Answer
    posted: bool
    channel: str
    days_ago: float
    votes: tuple[bool, ...]  # helpful or not, one per voter


def logged_answer(**fields: object) -> LoggedAnswer:
    """One entry of the log as a test states it: the fields it is about, the rest neutral (a
    grounded Slack answer in slack/T1/C1, no tokens, no citations)."""
    neutral: dict[str, object] = {
        "answer_id": "a1",
        "at": 0.0,
        "conversation_key": "slack/T1/C1/1",
        "platform": "slack",
        "channel": "slack/T1/C1",
        "question": "",
        "question_hash": "",
        "text": "",
        "status": "answered",
        "mode": "agent",
        "posted": True,
        "model": "",
        "input_tokens": 0,
        "output_tokens": 0,
        "total_seconds": 0.0,
        "model_seconds": 0.0,
        "citations": (),
    }
    return LoggedAnswer(**{**neutral, **fields})  # type: ignore[arg-type]


def gap_questions() -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in (DATA / "gap_questions.jsonl").read_text().splitlines()]
    return [(r["text"], r["topic"]) for r in rows]


def docs_questions() -> list[str]:
    rows = [json.loads(line) for line in (DATA / "chat_messages.jsonl").read_text().splitlines()]
    return [r["text"] for r in rows if r["answer"]]


def seeded(
    total: int,
    documents: Sequence[DocumentRecord],
    seed: int = 7,
    distinct_missed: int | None = None,
) -> Iterator[Seeded]:
    """`total` answers: one in three a gap question, the rest docs questions answered citing
    the first half of `documents` (sorted by id). The gap questions come in turn, or with
    `distinct_missed` each is drawn from that many distinct texts (the labelled ones, then
    each again with a case number: "... (case 1234)"), as a big deployment's log would hold."""
    rng = random.Random(seed)
    ordered = sorted(documents, key=lambda d: d.doc_id)
    cited = ordered[: max(1, int(len(ordered) * CITED_SHARE))]
    labelled = gap_questions()
    gaps = itertools.cycle(labelled)
    answered = itertools.cycle(docs_questions())
    for n in range(total):
        channel = rng.choice(CHANNELS)
        days_ago = rng.uniform(0, 28)
        if n % 3 == 0:
            question, topic = next(gaps)
            if distinct_missed is not None:
                drawn = rng.randrange(distinct_missed)
                question, topic = labelled[drawn % len(labelled)]
                question = question if drawn < len(labelled) else f"{question} (case {drawn})"
            status = AnswerStatus.NOT_FOUND if rng.random() < 0.8 else AnswerStatus.PARTIAL
            posted = not (channel.endswith("CDOCS") and status is AnswerStatus.NOT_FOUND)
            votes = (False,) if rng.random() < 0.2 else ()
            answer = _answer(status, cited, rng)
            yield Seeded(question, topic, answer, posted, channel, days_ago, votes)
        else:
            votes = tuple(rng.random() < 0.85 for _ in range(rng.choice((0, 0, 1, 2))))
            answer = _answer(AnswerStatus.ANSWERED, cited, rng)
            yield Seeded(next(answered), None, answer, True, channel, days_ago, votes)


async def record(log: AnswerRecords, entries: Iterator[Seeded], now: float) -> list[str]:
    """Each entry recorded at its time, with its votes; returns the answer ids."""
    ids = []
    for n, entry in enumerate(entries):
        key = f"{entry.channel}/{n}"
        with time_machine.travel(now - entry.days_ago * DAY_S, tick=False):
            answer_id = await log.record_answer(
                key, entry.question, entry.answer, posted=entry.posted
            )
            for voter, helpful in enumerate(entry.votes):
                await log.record_feedback(answer_id, f"U{voter}", helpful)
                if not helpful:
                    await log.record_feedback_reason(answer_id, f"U{voter}", "missing", "")
        ids.append(answer_id)
    return ids


def _answer(status: AnswerStatus, cited: Sequence[DocumentRecord], rng: random.Random) -> Answer:
    trace = Trace(
        model_calls=2,
        model_seconds=rng.uniform(1.0, 4.0),
        total_seconds=rng.uniform(1.2, 5.0),
        model="claude-sonnet-4-5",
        usage=Usage(input_tokens=rng.randint(2_000, 6_000), output_tokens=rng.randint(150, 600)),
    )
    if status is AnswerStatus.NOT_FOUND:
        return Answer("The docs don't say.", status, AnswerMode.AGENT, trace=trace)
    doc = rng.choice(cited)
    citation = Citation(1, doc.title, doc.url, "a quote", rng.random() < 0.95, doc_id=doc.doc_id)
    return Answer("It says so [1].", status, AnswerMode.AGENT, citations=[citation], trace=trace)


def over_kb(kb: Settings, data_dir: Path) -> Settings:
    """Settings with the shared index of the bundled docs and a state of their own."""
    return kb.model_copy(
        update={
            "storage": kb.storage.model_copy(update={"data_dir": data_dir}),
            "search": kb.search.model_copy(update={"sqlite_path": kb.index_path}),
        }
    )


async def seed_log(
    backend: Backend, total: int, now: float, *, store_questions: bool = True
) -> PlatformState:
    """`total` seeded answers recorded in the backend's state, citing its documents."""
    documents = list((await backend.index.documents()).values())
    log = backend.platform_state(60, store_questions)
    await record(log, seeded(total, documents), now)
    return log
