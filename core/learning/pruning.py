"""Forgetting what nobody uses: learned keywords that went stale, and the learned documents left
without keywords.

A keyword goes when any rule (from `keywords` in config) says so: answers citing its learned
knowledge were voted down (net) `down_votes` times or more; it has not been used for
`unused_days` (counted from its creation if it never was); or it is older than `min_age_days`
with fewer than `min_uses` uses. Its documents are rewritten without it first, and only then is
the keyword forgotten: a crash part-way leaves the keyword, so the next run makes the same
decision and finishes the job. Every run is idempotent. Last, each document the run touched is
brought back in line with the store (`LearnedKnowledge.sync`): an answer may have saved a
keyword for it meanwhile (the web process does not wait for the clock), and the rewrite from
the run's snapshot would otherwise have left that keyword out of the index, or the drop of a
document left without keywords deleted it from the store; a document still without keywords
then is dropped (a crash before that leaves one with no keywords, which the next run drops).

A scheduled run claims its slot (the scheduled time) and the running prune, so a second clock
firing for the same slot does nothing, and a manual prune never overlaps a scheduled one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import structlog

from core.config import KeywordSettings
from core.domain.learned import LearnedDocument, LearnedKeyword
from core.learning.knowledge import LearnedKnowledge
from core.ports import LearnedVotes, RunLocks
from core.run_locks import uninterrupted

PRUNE_LOCK = "prune-keywords"
log = structlog.get_logger(__name__)


class StaleReason(StrEnum):
    DOWN_VOTED = "down-voted"
    UNUSED = "unused"
    RARELY_USED = "rarely used"


@dataclass(frozen=True, slots=True)
class StaleKeyword:
    keyword: LearnedKeyword
    reason: StaleReason
    votes: int


@dataclass(slots=True)
class PruneReport:
    stale: list[StaleKeyword] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)  # associations whose keyword is gone
    documents_removed: list[str] = field(default_factory=list)
    documents_rewritten: list[str] = field(default_factory=list)
    dry_run: bool = False
    seconds: float = 0.0


def stale_keywords(
    keywords: Sequence[LearnedKeyword],
    documents: Sequence[LearnedDocument],
    votes: dict[str, int],
    settings: KeywordSettings,
    now: float,
) -> list[StaleKeyword]:
    """Which keywords the rules remove, and why (the first rule that applies)."""
    keyword_votes: dict[str, int] = {}
    for document in documents:
        for keyword in document.keywords:
            keyword_votes[keyword] = keyword_votes.get(keyword, 0) + votes.get(document.doc_id, 0)
    stale = []
    for k in keywords:
        net = keyword_votes.get(k.keyword, 0)
        # Saving a keyword again (a new web search found it useful) is activity, and gives it
        # a new chance to be used.
        saved = max(k.created_at, k.last_saved_at or 0.0)
        reason = None
        if net <= -settings.down_votes:
            reason = StaleReason.DOWN_VOTED
        elif now - max(saved, k.last_used_at or 0.0) > settings.unused_s:
            reason = StaleReason.UNUSED
        elif now - saved > settings.min_age_s and k.uses < settings.min_uses:
            reason = StaleReason.RARELY_USED
        if reason is not None:
            stale.append(StaleKeyword(k, reason, net))
    return stale


class KeywordPruner:
    def __init__(
        self,
        knowledge: LearnedKnowledge,
        votes: LearnedVotes,
        locks: RunLocks,
        settings: KeywordSettings,
    ) -> None:
        self.knowledge = knowledge
        self._votes = votes
        self._locks = locks
        self._settings = settings

    async def prune(self, *, dry_run: bool = False, now: float | None = None) -> PruneReport:
        started = time.perf_counter()
        store = self.knowledge.store
        moment = time.time() if now is None else now
        # Documents (with their associations) before keywords: a keyword is created before its
        # association, so every association read here has its keyword in the later read.
        documents = await store.documents()
        keywords = await store.all()
        report = PruneReport(
            stale=stale_keywords(
                keywords,
                documents,
                await self._votes.learned_votes(),
                self._settings,
                moment,
            ),
            dry_run=dry_run,
        )
        known = {k.keyword for k in keywords}
        report.orphaned = sorted({k for d in documents for k in d.keywords} - known)
        gone = {s.keyword.keyword for s in report.stale} | set(report.orphaned)
        for document in documents:
            remaining = [k for k in document.keywords if k not in gone]
            if not document.keywords and moment - document.created_at < self._settings.settle_s:
                continue
            if not remaining:
                # Dropped by the sync below, once the store has forgotten its keywords: a
                # keyword saved for it meanwhile keeps it.
                report.documents_removed.append(document.doc_id)
            elif len(remaining) < len(document.keywords):
                report.documents_rewritten.append(document.doc_id)
                if not dry_run:
                    await self.knowledge.with_keywords(document, remaining)
        if not dry_run:
            await store.remove_keywords(sorted(gone), saved_before=moment)
            for doc_id in report.documents_rewritten:
                await self.knowledge.sync(doc_id)
            kept = [d for d in report.documents_removed if await self.knowledge.sync(d)]
            report.documents_removed = [d for d in report.documents_removed if d not in kept]
            report.documents_rewritten += kept
            report.documents_removed += await self.knowledge.drop_untracked()
        report.seconds = time.perf_counter() - started
        return report

    async def prune_claimed(self, holder: str, *, slot: str | None = None) -> PruneReport | None:
        """`prune` under the locks; None when another process has this slot or is pruning."""
        ttl = self._settings.lock_ttl_s
        slot_lock = f"{PRUNE_LOCK}@{slot}" if slot else None
        if slot_lock and not await self._locks.claim(slot_lock, holder, ttl):
            return None
        if not await self._locks.claim(PRUNE_LOCK, holder, ttl):
            if slot_lock:  # a manual prune is running: this run was not done, by anyone
                await self._locks.release(slot_lock, holder)
            return None
        try:
            return await self.prune()
        except BaseException:
            if slot_lock:  # the slot was not done: another clock may still do it
                await uninterrupted(self._locks.release(slot_lock, holder))
            raise
        finally:
            await uninterrupted(self._locks.release(PRUNE_LOCK, holder))
