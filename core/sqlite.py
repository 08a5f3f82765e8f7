"""How every SQLite file of the bot is opened and written: one place for the pragmas that matter
and for the write transaction.

WAL lets readers and the one writer work at once (a bot process answering while an ingest or a
second process writes); the busy timeout makes a writer wait its turn instead of failing.
`BEGIN IMMEDIATE` takes the write lock at the start, so two writers queue instead of one failing
at its first write.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def connect_store(
    path: Path, busy_timeout_ms: int, *, rebuildable: bool = False
) -> sqlite3.Connection:
    """An autocommit connection usable from worker threads (callers serialise with a lock).
    A `rebuildable` file (the index, the embedding cache: both can be made again from the
    sources) skips the fsync of every commit; state (deliveries, locks, feedback) keeps it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    db.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    db.execute("PRAGMA journal_mode=WAL")
    if rebuildable:
        db.execute("PRAGMA synchronous=NORMAL")
    return db


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction: committed when the block ends, rolled back on any error
    (Ctrl-C included)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
