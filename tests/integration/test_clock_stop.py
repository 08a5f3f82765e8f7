"""`bot clock` stopped by SIGTERM in the middle of a scheduled sync: the sync is cancelled after
the grace, says so in one line (no error, no traceback), and its run lock in the real SQLite
state file is released before the stores close, so the next sync, from any host, runs."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest
import structlog
from apscheduler.triggers.date import DateTrigger

from bot.clock import SyncJob, run_clock
from core.backends.sqlite.run_locks import SqliteRunLocks
from core.config_loader import load_settings
from core.run_locks import run_lock
from tests.conftest import REPO


async def test_sigterm_mid_sync_cancels_it_and_releases_its_run_lock(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_settings(
        REPO / "config.yaml",
        environ={
            "BOT_STORAGE__DATA_DIR": str(tmp_path / "data"),
            "BOT_KEYWORDS__SHUTDOWN_GRACE_S": "0.2",
        },
    )
    settings.storage.data_dir.mkdir(parents=True)
    locks = SqliteRunLocks(settings.state_path, settings.search.busy_timeout_ms)
    syncing = asyncio.Event()

    async def slow_sync() -> None:  # a crawl of a slow site, as `SourceSyncer.sync` holds it
        async with run_lock(locks, "sync-slow", settings.ingest.lock_ttl_s):
            syncing.set()
            await asyncio.sleep(3_600)

    job = SyncJob("slow", "* * * * *", slow_sync)
    job.trigger = DateTrigger(run_date=datetime.now(UTC))  # due now, not at the next minute
    caplog.set_level(logging.INFO, logger="apscheduler")
    with structlog.testing.capture_logs() as logs:
        clock = asyncio.create_task(run_clock(settings.keywords, None, [job]))  # type: ignore[arg-type]
        await asyncio.wait_for(syncing.wait(), timeout=10)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(clock, timeout=10)
    await locks.close()  # what the runtime does as soon as the clock returns

    reopened = SqliteRunLocks(settings.state_path, settings.search.busy_timeout_ms)
    try:
        assert await reopened.held("sync-slow") is None
    finally:
        await reopened.close()
    events = [(e["event"], e["log_level"]) for e in logs]
    assert ("job_cancelled", "warning") in events
    assert events[-1] == ("clock_stopped", "info")
    assert not [e for e in logs if e["log_level"] == "error" or "exc_info" in e]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
