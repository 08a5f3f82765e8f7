"""The clock's schedule: when the prune job fires, how a run's slot is named, bad schedules."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
import structlog
import time_machine

from bot.clock import (
    EXPIRE_JOB,
    PRUNE_JOB,
    RECHECK_JOB,
    ExpireJob,
    PruneJob,
    RecheckJob,
    RunningJobs,
    ScheduledJob,
    build_scheduler,
    prune_trigger,
)
from core.config import InsightSettings, KeywordSettings
from core.config_loader import load_settings
from core.errors import ConfigError


def job(settings: KeywordSettings) -> PruneJob:
    return PruneJob(None, prune_trigger(settings), settings, holder="test")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        ("UTC", datetime(2026, 11, 24, 3, 17, tzinfo=UTC)),
        ("Europe/Paris", datetime(2026, 11, 24, 2, 17, tzinfo=UTC)),  # 03:17 CET
    ],
)
async def test_the_prune_job_fires_on_the_configured_cron(zone: str, expected: datetime) -> None:
    settings = KeywordSettings(prune_schedule="17 3 * * *", timezone=zone)
    with time_machine.travel(datetime(2026, 11, 23, 10, 0, tzinfo=UTC), tick=False):
        scheduler = build_scheduler(settings, job(settings), prune_trigger(settings))
        scheduler.start(paused=True)
        try:
            scheduled = scheduler.get_job(PRUNE_JOB)
            assert scheduled.next_run_time == expected
            assert scheduled.coalesce is True
            assert scheduled.max_instances == 1
            assert scheduled.misfire_grace_time == int(settings.misfire_grace_s)
        finally:
            scheduler.shutdown(wait=False)


def test_every_clock_names_a_run_by_the_time_it_was_scheduled_for() -> None:
    settings = KeywordSettings(prune_schedule="17 3 * * *", misfire_grace_s=300)
    prune = job(settings)
    on_time = prune.slot(datetime(2026, 11, 24, 3, 17, 0, 200_000, tzinfo=UTC))
    late = prune.slot(datetime(2026, 11, 24, 3, 21, 30, tzinfo=UTC))  # within the grace
    assert on_time == late == "2026-11-24T03:17:00Z"
    assert prune.slot(datetime(2026, 11, 25, 3, 17, 1, tzinfo=UTC)) == "2026-11-25T03:17:00Z"


@pytest.mark.parametrize("schedule", ["61 3 * * *", "17 3 * * mon-xyz", "*/0 * * * *"])
def test_a_bad_schedule_is_a_config_error_naming_the_key_when_settings_load(schedule: str) -> None:
    """Every command reads the settings, so a bad cron fails `bot ask` or a deploy's `bot
    doctor` too, not first the clock process."""
    with pytest.raises(ConfigError, match=r"keywords\.prune_schedule: .*not a valid cron"):
        load_settings(environ={"BOT_KEYWORDS__PRUNE_SCHEDULE": schedule})


def test_schedule_and_zone_are_checked_when_settings_load() -> None:
    with pytest.raises(ValueError, match="5 fields"):
        KeywordSettings(prune_schedule="17 3 * *")
    with pytest.raises(ValueError, match="unknown time zone"):
        KeywordSettings(timezone="Mars/Olympus")


def test_runs_closer_together_than_the_grace_still_get_their_own_slot() -> None:
    settings = KeywordSettings(prune_schedule="*/2 * * * *", misfire_grace_s=300)
    prune = job(settings)
    on_time = prune.slot(datetime(2026, 11, 24, 3, 18, 0, 100_000, tzinfo=UTC))
    late = prune.slot(datetime(2026, 11, 24, 3, 19, 30, tzinfo=UTC))  # the 03:18 run, late
    assert on_time == late == "2026-11-24T03:18:00Z"
    assert prune.slot(datetime(2026, 11, 24, 3, 20, 0, 5, tzinfo=UTC)) == "2026-11-24T03:20:00Z"


@pytest.mark.parametrize("grace", ["0.5", "0", "-3"])
def test_a_misfire_grace_apscheduler_would_refuse_fails_when_settings_load(grace: str) -> None:
    """APScheduler takes only a positive whole number of seconds: a fraction passed the
    settings and stopped `bot clock` at start, after a deploy had gone green."""
    with pytest.raises(ConfigError, match=r"keywords\.misfire_grace_s"):
        load_settings(environ={"BOT_KEYWORDS__MISFIRE_GRACE_S": grace})


def test_a_stopping_clock_always_gives_its_runs_time_to_release_their_locks() -> None:
    """A grace of 0 cancelled the runs and closed the stores while they still unwound, so
    their run locks stayed held until they expired."""
    with pytest.raises(ConfigError, match=r"keywords\.shutdown_grace_s"):
        load_settings(environ={"BOT_KEYWORDS__SHUTDOWN_GRACE_S": "0"})


async def test_the_smallest_misfire_grace_the_settings_take_starts_the_scheduler() -> None:
    settings = load_settings(environ={"BOT_KEYWORDS__MISFIRE_GRACE_S": "1"}).keywords
    scheduler = build_scheduler(settings, job(settings), prune_trigger(settings))
    scheduler.start(paused=True)
    try:
        assert scheduler.get_job(PRUNE_JOB).misfire_grace_time == 1
    finally:
        scheduler.shutdown(wait=False)


def test_a_claim_must_outlive_a_late_start() -> None:
    with pytest.raises(ValueError, match="lock_ttl_s must be longer than misfire_grace_s"):
        KeywordSettings(lock_ttl_s=60, misfire_grace_s=300)


async def test_a_stopping_clock_waits_for_the_prune_under_way() -> None:
    finished: list[str] = []

    class SlowPruner:
        async def prune_claimed(self, holder: str, *, slot: str) -> None:
            await asyncio.sleep(0.2)
            finished.append(slot)

    settings = KeywordSettings()
    prune = PruneJob(SlowPruner(), prune_trigger(settings), settings, holder="h")  # type: ignore[arg-type]
    running = RunningJobs()
    under_way = asyncio.create_task(running.tracked(PRUNE_JOB, prune.run)())
    await asyncio.sleep(0.01)
    with structlog.testing.capture_logs() as logs:
        await running.stop(grace_s=5)
    assert len(finished) == 1  # waited for it, rather than closing the stores under it
    assert under_way.done()
    assert "job_cancelled" not in [e["event"] for e in logs]


async def test_a_run_past_the_grace_is_cancelled_unwinds_and_says_so_in_one_line() -> None:
    unwound: list[str] = []

    async def endless() -> None:
        try:
            await asyncio.sleep(3_600)
        finally:
            await asyncio.sleep(0.05)  # a release in a `finally`: awaited, not cut short
            unwound.append("released")

    running = RunningJobs()
    under_way = asyncio.create_task(running.tracked("sync-slow", endless)())
    await asyncio.sleep(0.01)
    with structlog.testing.capture_logs() as logs:
        await running.stop(grace_s=0.1)
    assert unwound == ["released"]
    assert under_way.done()
    assert not under_way.cancelled()  # handled: APScheduler sees a run that ended, no error
    [line] = logs
    assert line["event"] == "job_cancelled"
    assert line["log_level"] == "warning"
    assert line["job"] == "sync-slow"
    assert "exc_info" not in line


@pytest.mark.parametrize(
    ("other", "job_id", "expected"),
    [
        (
            ExpireJob(None, None, None, InsightSettings(expire_schedule="43 4 * * *")),  # type: ignore[arg-type]
            EXPIRE_JOB,
            datetime(2026, 11, 24, 4, 43, tzinfo=UTC),
        ),
        (
            RecheckJob(None, None, None, {}, InsightSettings(recheck_schedule="*/30 * * * *")),  # type: ignore[arg-type]
            RECHECK_JOB,
            datetime(2026, 11, 23, 10, 30, tzinfo=UTC),
        ),
    ],
)
async def test_the_other_jobs_fire_on_their_own_schedules(
    other: ScheduledJob, job_id: str, expected: datetime
) -> None:
    settings = KeywordSettings(prune_schedule="17 3 * * *")
    with time_machine.travel(datetime(2026, 11, 23, 10, 5, tzinfo=UTC), tick=False):
        scheduler = build_scheduler(settings, job(settings), prune_trigger(settings), [other])
        scheduler.start(paused=True)
        try:
            assert scheduler.get_job(job_id).next_run_time == expected
        finally:
            scheduler.shutdown(wait=False)


def test_a_bad_expiry_schedule_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"insights\.expire_schedule: .*not a valid cron"):
        load_settings(environ={"BOT_INSIGHTS__EXPIRE_SCHEDULE": "99 3 * * *"})
