"""Closing the embedded index while a worker thread is still inside one of its connections (an
answer cancelled at shutdown stops awaiting its search; the search goes on in its thread).
sqlite3 closing a connection in use crashed the test process (a segfault in CI): the close
must interrupt the statement, wait for the thread to leave, and only then close."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from core.backends.sqlite.index import SqliteIndex
from core.config import SearchSettings
from core.errors import SearchIndexError
from tests.fakes.memory import ConstantEmbedder

# Counts to 200 million: seconds of work, unless interrupted (bounded, so that a close that
# does not interrupt fails the test instead of leaving a thread running for ever).
LONG = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000000)"
    " SELECT count(*) FROM n"
)
WAIT_S = 30  # far longer than an interrupted statement takes to end
LATE_STATEMENT_S = 5  # LONG uninterrupted takes longer (seconds on a fast machine)


async def test_closing_interrupts_a_statement_under_way_and_waits_for_its_thread(
    tmp_path: Path,
) -> None:
    index = SqliteIndex(tmp_path / "index.sqlite", ConstantEmbedder(), SearchSettings())
    inside = threading.Event()

    def long() -> object:
        db = index._reader()
        inside.set()
        return db.execute(LONG).fetchone()

    running = asyncio.create_task(index._in_thread(long))
    assert await asyncio.to_thread(inside.wait, WAIT_S)
    await asyncio.wait_for(index.close(), WAIT_S)
    assert running.done()  # the close waited for the thread to leave its connection
    with pytest.raises(sqlite3.OperationalError, match="interrupted"):
        running.result()
    with pytest.raises(SearchIndexError, match="closed"):
        await index.documents()


async def test_a_statement_started_just_after_the_interrupt_is_interrupted_too(
    tmp_path: Path,
) -> None:
    """A thread that entered before the close but starts its statement after the interrupt
    (SQLite clears an interrupt when a first statement starts): the close interrupts again
    instead of waiting out the whole statement. Under load CI saw exactly this window."""
    index = SqliteIndex(tmp_path / "index.sqlite", ConstantEmbedder(), SearchSettings())
    inside, interrupted = threading.Event(), threading.Event()

    def late() -> object:
        db = index._reader()
        inside.set()
        interrupted.wait(WAIT_S)  # the close has interrupted by now: no statement was running
        return db.execute(LONG).fetchone()

    running = asyncio.create_task(index._in_thread(late))
    assert await asyncio.to_thread(inside.wait, WAIT_S)
    closing = asyncio.create_task(index.close())
    await asyncio.sleep(0.2)
    interrupted.set()
    await asyncio.wait_for(closing, LATE_STATEMENT_S)
    with pytest.raises(sqlite3.OperationalError, match="interrupted"):
        running.result()


async def test_closing_an_idle_index_leaves_only_its_file(tmp_path: Path) -> None:
    """An interrupt that finds no statement stays set in SQLite and would interrupt the
    checkpoint closing runs: the WAL was left behind, and a copied file missed its last writes."""
    index = SqliteIndex(tmp_path / "index.sqlite", ConstantEmbedder(), SearchSettings())
    assert await index.documents() == {}
    await index.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.sqlite"]
