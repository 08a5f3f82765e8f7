"""How every SQLite store of the bot opens its file: one place for the pragmas that matter.

WAL lets readers and the one writer work at once (a bot process answering while an ingest or a
second process writes); the busy timeout makes a writer wait its turn instead of failing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


def connect_store(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """An autocommit connection usable from worker threads (callers serialise with a lock)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    db.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    db.execute("PRAGMA journal_mode=WAL")
    return db
