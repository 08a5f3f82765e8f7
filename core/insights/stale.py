"""Answers whose sources changed: found after an ingest, re-asked, and updated where they were
given.

Every citation remembers its passage (id and a fingerprint of its text, `passage_fingerprint`).
A logged answer is stale when a passage it cited is gone from the index or reads differently
now. Re-checking one asks its question again, on its own (not in its old conversation, whose
earlier answer would colour the new one) but under the policy of the channel it was asked in
(its sources, its web search: an update must not quote what that channel may not see), and
posts the new answer in the original thread only when it stands on verified citations and says
something else; each answer is re-checked once, claimed first so that two processes never both
post. Nothing is re-asked for a thread with no place for an update, nor for a channel where the
bot is switched off (`trigger: off`): it says nothing there, updates included.

An update the platform does not take is one warning line (no contents) and the batch goes on.
A failure for now (a timeout, a rate limit, a server error) gives the claim back, so the next
run tries again; a refusal for good (the channel archived or gone, the bot removed from it,
part of the update already posted) keeps it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Literal, Protocol

import structlog

from core.answer.engine import AnswerEngine
from core.domain.conversation import (
    Answer,
    AnswerMode,
    AnswerStatus,
    ChannelKind,
    Question,
    passage_fingerprint,
)
from core.domain.insights import LoggedAnswer
from core.ports import AnswerRecords, SearchIndex
from core.run_locks import uninterrupted

log = structlog.get_logger(__name__)
UPDATE_PREFACE = "The page I quoted changed on {date}; here is the updated answer."


@dataclass(frozen=True, slots=True)
class ChangedPassage:
    title: str
    url: str
    change: Literal["changed", "removed"]


@dataclass(frozen=True, slots=True)
class StaleAnswer:
    entry: LoggedAnswer
    changes: list[ChangedPassage]


@dataclass(slots=True)
class RecheckReport:
    posted: list[str] = field(default_factory=list)  # answer ids updated in their threads
    unchanged: list[str] = field(default_factory=list)  # the new answer says the same
    not_grounded: list[str] = field(default_factory=list)  # nothing that stands to post instead
    undeliverable: list[str] = field(default_factory=list)  # no thread to post in
    silenced: list[str] = field(default_factory=list)  # asked where the bot is switched off now
    failed: list[str] = field(default_factory=list)  # not posted for now: the next run retries
    refused: list[str] = field(default_factory=list)  # refused for good (channel gone...)
    already_checked: int = 0


class UpdateFailed(Exception):
    """The platform did not take an update. `reason` names why without the update's words (an
    error code, an HTTP status, an exception's type); `permanent`: trying again can't help."""

    def __init__(self, reason: str, *, permanent: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent


class Reach(Enum):
    """Where an update to an answer can go."""

    THREAD = "thread"  # the answer's thread, or the direct message it was given in
    NOWHERE = "nowhere"  # the answer was the asker's alone (private, ephemeral): no thread
    SILENCED = "silenced"  # its channel's trigger is off: the bot says nothing there


class Notifier(Protocol):
    """Posts a re-checked answer in the thread of a conversation, on its platform."""

    def reach(self, entry: LoggedAnswer) -> Reach:
        """Where an update to this answer would go, by the platform's rules and the policy
        of the channel it was given in, as that policy reads now."""

    async def post_update(self, conversation_key: str, preface: str, answer: Answer) -> bool:
        """False when the conversation has no thread to post in (a private answer); raises
        `UpdateFailed` when the platform does not take it (permanent once part of it is
        posted: a retry would repeat that part)."""


async def stale_answers(entries: Sequence[LoggedAnswer], index: SearchIndex) -> list[StaleAnswer]:
    """The posted answers a passage of which is gone or reads differently now."""
    posted = [e for e in entries if e.posted and e.question]
    cited = {c.chunk_id for e in posted for c in e.citations if c.chunk_id and c.passage_sha}
    now = await index.passages(sorted(cited))
    stale = []
    for entry in posted:
        changes = []
        for c in entry.citations:
            if not (c.chunk_id and c.passage_sha) or c.web:
                continue
            current = now.get(c.chunk_id)
            if current is None:
                changes.append(ChangedPassage(c.title, c.url, "removed"))
            elif passage_fingerprint(current.text) != c.passage_sha:
                changes.append(ChangedPassage(c.title, c.url, "changed"))
        if changes:
            stale.append(StaleAnswer(entry, changes))
    return stale


async def recheck(
    stale: Sequence[StaleAnswer],
    engine: AnswerEngine,
    records: AnswerRecords,
    notifiers: dict[str, Notifier],
    today: datetime | None = None,
) -> RecheckReport:
    """Re-ask each stale answer's question once and post the new answer where it differs.
    `notifiers` by platform; an answer of a platform without one is left for later."""
    report = RecheckReport()
    date = (today or datetime.now(UTC)).strftime("%Y-%m-%d")
    for item in stale:
        entry = item.entry
        notifier = notifiers.get(entry.platform)
        if notifier is None:
            continue
        if not await records.claim_recheck(entry.answer_id):
            report.already_checked += 1
            continue
        reach = notifier.reach(entry)
        if reach is not Reach.THREAD:  # not worth a model's answer: nowhere to post it
            gone = report.silenced if reach is Reach.SILENCED else report.undeliverable
            gone.append(entry.answer_id)
            continue
        question = Question(
            entry.platform,
            f"recheck/{entry.answer_id}",
            "",
            entry.question,
            ChannelKind.THREAD,
            channel_key=asked_in(entry),
        )
        try:
            fresh = await engine.answer(question)
        except asyncio.CancelledError:  # a stopping clock: nothing was posted, the next run asks
            await _give_back(records, entry.answer_id)
            raise
        if not _stands(fresh, entry):
            report.not_grounded.append(entry.answer_id)
        elif _said(fresh.text) == _said(entry.text):
            report.unchanged.append(entry.answer_id)
        else:
            await _post(notifier, entry, UPDATE_PREFACE.format(date=date), fresh, records, report)
    log.info(
        "answers_rechecked",
        posted=len(report.posted),
        unchanged=len(report.unchanged),
        not_grounded=len(report.not_grounded),
        undeliverable=len(report.undeliverable),
        silenced=len(report.silenced),
        failed=len(report.failed),
        refused=len(report.refused),
    )
    return report


async def _post(
    notifier: Notifier,
    entry: LoggedAnswer,
    preface: str,
    fresh: Answer,
    records: AnswerRecords,
    report: RecheckReport,
) -> None:
    """The update posted and counted; a platform's refusal is one line, not the batch's end."""
    try:
        delivered = await notifier.post_update(entry.conversation_key, preface, fresh)
    except UpdateFailed as exc:
        if not exc.permanent:
            await _give_back(records, entry.answer_id)
        (report.refused if exc.permanent else report.failed).append(entry.answer_id)
        log.warning(
            "update_not_posted",
            platform=entry.platform,
            answer_id=entry.answer_id,
            reason=exc.reason,
            permanent=exc.permanent,
            retry=not exc.permanent,
        )
        return
    (report.posted if delivered else report.undeliverable).append(entry.answer_id)


async def _give_back(records: AnswerRecords, answer_id: str) -> None:
    """The answer's claim released, so the next run re-checks it. Awaited to its end even when
    the run is being cancelled."""
    await uninterrupted(records.release_recheck(answer_id))


def asked_in(entry: LoggedAnswer) -> str:
    """The key the answer's channel policy was looked up under when it was given (its
    question's `scope`): the conversation key where it lies in the logged channel (a Slack
    thread, which a `web_search.channels` entry may name), else the logged channel (a Discord
    thread's key names only the thread; the channel it hangs off is what was logged)."""
    key = entry.conversation_key
    if not entry.channel or key == entry.channel or key.startswith(entry.channel + "/"):
        return key
    return entry.channel


def _stands(fresh: Answer, entry: LoggedAnswer) -> bool:
    """Worth posting in place of the old answer: a model's answer on verified citations, or,
    quoting passages with no model (always "grounded", relevant or not), a verified quote of a
    page the old answer cited: the page that changed, in its new version."""
    if not fresh.grounded:
        return False
    if fresh.mode is not AnswerMode.EXTRACTIVE and fresh.status is AnswerStatus.ANSWERED:
        return True
    pages = {c.doc_id for c in entry.citations}
    return any(c.verified and c.doc_id in pages for c in fresh.citations)


def _said(text: str) -> str:
    """An answer's words, without spacing or citation markers: what "says the same" compares."""
    return " ".join(re.sub(r"\[\d+\]", " ", text).lower().split())
