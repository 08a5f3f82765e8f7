"""The `clock` process: APScheduler 3 on the event loop, pruning learned keywords, expiring
the answer log, syncing the sources that have a schedule and (`insights.notify_stale`)
re-checking stale answers, each on its schedule.

Exactly one clock is meant to run, but a second one is harmless: each prune claims its slot (the
time it was scheduled for) in the shared run locks before doing anything, so of two clocks
firing for the same slot one prunes and the other logs that it stood aside. Expiry needs no
claim: deleting what is older than the retention twice deletes nothing the second time.

A stopping clock (SIGTERM, Ctrl-C) starts nothing new, lets the runs under way finish for
`keywords.shutdown_grace_s`, then cancels the rest and waits (as long again) for them to
unwind, so that every run lock is released before the stores close: a lock left behind would
keep the next clock, on a new host that can't tell its holder is gone, off that work for hours.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from zoneinfo import ZoneInfo

import structlog
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger

from core.answer.engine import AnswerEngine
from core.config import InsightSettings, KeywordSettings
from core.cron import cron_trigger
from core.errors import BotError, RunLockHeld
from core.insights.stale import Notifier, recheck, stale_answers
from core.learning.pruning import KeywordPruner
from core.ports import AnswerRecords, ConversationStore, KeywordStore, SearchIndex

PRUNE_JOB = "prune-keywords"
EXPIRE_JOB = "expire-answer-log"
RECHECK_JOB = "recheck-stale-answers"
DAY_S = 86_400
_STEP = timedelta(microseconds=1)  # "strictly after" for a trigger's next fire time
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
log = structlog.get_logger(__name__)


def process_holder() -> str:
    """Who holds a lock: readable (host, pid) and unique even for two clocks in one process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def prune_trigger(settings: KeywordSettings) -> CronTrigger:
    # The expression was checked when the settings loaded (KeywordSettings._valid_cron).
    return cron_trigger(settings.prune_schedule, ZoneInfo(settings.timezone))


class PruneJob:
    """One scheduled prune: claims the slot it was scheduled for, prunes, logs a summary."""

    def __init__(
        self, pruner: KeywordPruner, trigger: BaseTrigger, settings: KeywordSettings, holder: str
    ) -> None:
        self._pruner = pruner
        self._trigger = trigger
        self._grace = timedelta(seconds=settings.misfire_grace_s)
        self._holder = holder

    def slot(self, now: datetime) -> str:
        """The fire time this run belongs to: the latest one at or before `now` (a run starts
        at most `misfire_grace_s` late, so it is searched from there; every clock computes the
        same answer, however close together the fire times are)."""
        latest = None
        scheduled = self._trigger.get_next_fire_time(None, now - self._grace)
        while scheduled is not None and scheduled <= now:
            latest = scheduled
            scheduled = self._trigger.get_next_fire_time(latest, latest + _STEP)
        chosen = latest or scheduled or now  # a clock running a hair early: the coming one
        return chosen.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    async def run(self) -> None:
        """A coroutine function, not an async `__call__`: APScheduler's asyncio executor awaits
        only what `iscoroutinefunction` recognises, and runs anything else in a thread."""
        slot = self.slot(datetime.now(UTC))
        try:
            report = await self._pruner.prune_claimed(self._holder, slot=slot)
        except Exception:
            log.exception("prune_failed", slot=slot)
            return
        if report is None:
            log.info(
                "prune_skipped",
                slot=slot,
                reason="another clock claimed this run, or another prune is running",
            )
            return
        log.info(
            "keywords_pruned",
            slot=slot,
            keywords_removed=len(report.stale),
            documents_removed=len(report.documents_removed),
            documents_rewritten=len(report.documents_rewritten),
            seconds=round(report.seconds, 3),
        )


class ScheduledJob(Protocol):
    """A clock job besides the prune: its id and name in the scheduler, when, and what."""

    job_id: str
    name: str
    trigger: BaseTrigger

    async def run(self) -> None: ...


class ExpireJob:
    """Deletes the answer log's entries, and the conversations, older than the retention, and
    the questions kept with what was learned from the web then."""

    job_id = EXPIRE_JOB
    name = "expire the answer log"

    def __init__(
        self,
        records: AnswerRecords,
        conversations: ConversationStore,
        keywords: KeywordStore,
        settings: InsightSettings,
    ) -> None:
        self._records = records
        self._conversations = conversations
        self._keywords = keywords
        self._retention_s = settings.retention_days * DAY_S
        self.trigger = cron_trigger(settings.expire_schedule, UTC)

    async def run(self) -> None:
        """A coroutine function, for APScheduler's asyncio executor (see `PruneJob.run`)."""
        before = time.time() - self._retention_s
        try:
            answers = await self._records.expire_answers(before)
            conversations = await self._conversations.expire(before)
            learned = await self._keywords.forget_questions(before)
        except Exception:
            log.exception("expiry_failed")
            return
        log.info(
            "answer_log_expired",
            answers=answers,
            conversations=conversations,
            learned_questions=learned,
        )


class RecheckJob:
    """Finds the answers whose cited passages changed since and updates them in their threads
    (`insights.notify_stale`): once per answer, only where the new answer differs."""

    job_id = RECHECK_JOB
    name = "re-check answers whose sources changed"

    def __init__(
        self,
        records: AnswerRecords,
        index: SearchIndex,
        engine: AnswerEngine,
        notifiers: dict[str, Notifier],
        settings: InsightSettings,
    ) -> None:
        self._records = records
        self._index = index
        self._engine = engine
        self._notifiers = notifiers
        self._window_s = settings.retention_days * DAY_S
        self.trigger = cron_trigger(settings.recheck_schedule, UTC)

    async def run(self) -> None:
        try:
            entries = await self._records.answer_log(time.time() - self._window_s)
            found = await stale_answers(entries, self._index)
            await recheck(found, self._engine, self._records, self._notifiers)
        except Exception:
            log.exception("recheck_failed")


class SyncJob:
    """A named source synced on its own schedule (`sources.NAME.schedule`); a sync another
    process is running is left to it."""

    def __init__(self, source: str, schedule: str, sync: Callable[[], Awaitable[object]]) -> None:
        self.job_id = f"sync-{source}"
        self.name = f"sync {source}"
        self.trigger = cron_trigger(schedule, UTC)
        self._source = source
        self._sync = sync

    async def run(self) -> None:
        try:
            await self._sync()
        except RunLockHeld:
            log.info("sync_skipped", source=self._source, reason="another sync of it is running")
        except BotError as exc:  # the source's own failure, said in one line: no traceback
            log.error("sync_failed", source=self._source, reason=str(exc))
        except Exception:
            log.exception("sync_failed", source=self._source)
        else:
            log.info("source_synced", source=self._source)


class RunningJobs:
    """The clock's runs under way, so that a stopping clock can let them finish for a while,
    cancel the rest and still see each of them unwind (its run locks released) before the
    stores close. APScheduler's own shutdown only cancels them, without waiting."""

    def __init__(self) -> None:
        self._runs: dict[asyncio.Task[Any], str] = {}

    def tracked(
        self, job_id: str, run: Callable[[], Awaitable[None]]
    ) -> Callable[[], Coroutine[Any, Any, None]]:
        """`run`, known while it runs; cancelled by a stopping clock, it says so in one line
        (APScheduler would log an error with the cancellation's tracebacks)."""

        async def tracked_run() -> None:
            task = asyncio.current_task()
            assert task is not None  # APScheduler runs a coroutine job as a task of its own
            self._runs[task] = job_id
            try:
                await run()
            except asyncio.CancelledError:
                task.uncancel()  # the clock's own cancellation, handled: the task ends cleanly
                log.warning(
                    "job_cancelled", job=job_id, reason="the clock stopped before it finished"
                )
            finally:
                del self._runs[task]

        return tracked_run

    async def stop(self, grace_s: float) -> None:
        """Let the runs under way finish for `grace_s`, then cancel the rest and wait as long
        again for them to unwind; one that still has not is named, and left to the loop."""
        if not self._runs:
            return
        _, late = await asyncio.wait(set(self._runs), timeout=grace_s)
        for task in late:
            task.cancel()
        if late:
            _, stuck = await asyncio.wait(late, timeout=grace_s)
            for task in stuck:
                log.warning("job_not_stopped", job=self._runs.get(task, "?"))


def build_scheduler(
    settings: KeywordSettings,
    job: PruneJob,
    trigger: BaseTrigger,
    others: Sequence[ScheduledJob] = (),
    running: RunningJobs | None = None,
) -> AsyncIOScheduler:
    """The scheduler with every job; `running` learns of each run (a clock's shutdown waits
    for them)."""
    running = running or RunningJobs()
    scheduler = AsyncIOScheduler(
        timezone=ZoneInfo(settings.timezone),
        job_defaults={
            "coalesce": True,  # after downtime, one catch-up run, not one per missed slot
            "max_instances": 1,
            "misfire_grace_time": settings.misfire_grace_s,
        },
    )
    scheduler.add_job(
        running.tracked(PRUNE_JOB, job.run), trigger, id=PRUNE_JOB, name="prune learned keywords"
    )
    for other in others:
        scheduler.add_job(
            running.tracked(other.job_id, other.run),
            other.trigger,
            id=other.job_id,
            name=other.name,
        )
    return scheduler


async def run_clock(
    settings: KeywordSettings, pruner: KeywordPruner, others: Sequence[ScheduledJob]
) -> None:
    """Run until SIGTERM or SIGINT; then stop as the module says, before the stores close."""
    trigger = prune_trigger(settings)
    job = PruneJob(pruner, trigger, settings, process_holder())
    running = RunningJobs()
    scheduler = build_scheduler(settings, job, trigger, others, running)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in _STOP_SIGNALS:
        loop.add_signal_handler(signum, stop.set)
    scheduler.start()
    scheduled = scheduler.get_job(PRUNE_JOB)
    log.info(
        "clock_started",
        schedule=settings.prune_schedule,
        timezone=settings.timezone,
        next_run=str(scheduled.next_run_time) if scheduled else None,
        jobs=[other.job_id for other in others],
    )
    try:
        await stop.wait()
    finally:
        # No new runs; those under way finish or unwind (their locks released) before the
        # stores close: shutting the scheduler down first would cancel them and not wait.
        scheduler.pause()
        await running.stop(settings.shutdown_grace_s)
        scheduler.shutdown(wait=False)
        for signum in _STOP_SIGNALS:
            loop.remove_signal_handler(signum)
        log.info("clock_stopped")
