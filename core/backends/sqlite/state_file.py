"""The state file beside the index: its tables, how each store connects to it, and what to do
when it is damaged.

It holds deliveries, bot threads, the answer log and its feedback, replies in progress,
conversation turns, run locks, learned keywords, model facts and each asker's recent questions,
each store with its own connection. Every table is made the first time any store opens the
file, and only then is anything written: a process that only reads (a search, a report) works
on a file it can't write, as long as some earlier process made it; if an older release made
it, what it lacks is stood in for in that process's temporary schema (`_stand_in`).

Unlike the index, it can't be made again from the sources: a damaged one is the user's to
restore or give up, never set aside by the bot.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from functools import cache
from pathlib import Path

from core.domain.insights import channel_of, question_hash
from core.sqlite import (
    InaccessibleFile,
    Integrity,
    check_integrity,
    connect_store,
    transaction,
)

log = logging.getLogger(__name__)

IF_DAMAGED = (
    "restore it from a backup, or move it aside and the bot starts a new one (without the "
    "conversation history, answer log, feedback and learned keywords it held)"
)

_SCHEMA = (
    # conversations: earlier turns of each conversation
    "CREATE TABLE IF NOT EXISTS turns (id INTEGER PRIMARY KEY, key TEXT NOT NULL,"
    " question TEXT NOT NULL, answer TEXT NOT NULL, created_at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS turns_by_key ON turns (key, id)",
    # run locks
    "CREATE TABLE IF NOT EXISTS run_locks (name TEXT PRIMARY KEY, holder TEXT NOT NULL,"
    " expires_at REAL NOT NULL)",
    # learned keywords and the learned documents they are tied to
    "CREATE TABLE IF NOT EXISTS keywords (keyword TEXT PRIMARY KEY,"
    " created_at REAL NOT NULL, last_used_at REAL, uses INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS keyword_links (keyword TEXT NOT NULL, doc_id TEXT NOT NULL,"
    " question TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (keyword, doc_id, question))",
    "CREATE TABLE IF NOT EXISTS learned_documents (doc_id TEXT PRIMARY KEY,"
    " question TEXT NOT NULL, query TEXT NOT NULL, sources TEXT NOT NULL,"
    " created_at REAL NOT NULL, last_used_at REAL, uses INTEGER NOT NULL DEFAULT 0)",
    # model facts
    "CREATE TABLE IF NOT EXISTS model_facts (key TEXT PRIMARY KEY, value TEXT NOT NULL,"
    " updated_at REAL NOT NULL)",
    # the platforms' state: deliveries, bot threads, the answer log and its feedback
    "CREATE TABLE IF NOT EXISTS deliveries (key TEXT PRIMARY KEY, seen_at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS bot_threads (key TEXT PRIMARY KEY, created_at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS answers (id TEXT PRIMARY KEY, conversation_key TEXT NOT NULL,"
    " question TEXT NOT NULL, answer TEXT NOT NULL, status TEXT NOT NULL,"
    " citations TEXT NOT NULL, created_at REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS feedback (answer_id TEXT NOT NULL, user TEXT NOT NULL,"
    " vote INTEGER NOT NULL, at REAL NOT NULL, PRIMARY KEY (answer_id, user))",
    "CREATE TABLE IF NOT EXISTS feedback_reasons (answer_id TEXT NOT NULL, user TEXT NOT NULL,"
    " reason TEXT NOT NULL, note TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (answer_id, user))",
    "CREATE TABLE IF NOT EXISTS rechecks (answer_id TEXT PRIMARY KEY, at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS answers_by_time ON answers (created_at)",
    # replies in progress (placeholders not yet replaced) and the heartbeats of their owners
    "CREATE TABLE IF NOT EXISTS pending_replies (id TEXT PRIMARY KEY, platform TEXT NOT NULL,"
    " channel TEXT NOT NULL, message TEXT NOT NULL, thread TEXT NOT NULL,"
    " streamed INTEGER NOT NULL, owner TEXT NOT NULL, created_at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS pending_replies_by_time ON pending_replies (platform, created_at)",
    "CREATE TABLE IF NOT EXISTS reply_owners (owner TEXT PRIMARY KEY, beat_at REAL NOT NULL)",
    # each asker's questions in the burst limit's window (`answers.limits.per_asker`)
    "CREATE TABLE IF NOT EXISTS asked (asker TEXT NOT NULL, at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS asked_by_asker ON asked (asker, at)",
    "CREATE INDEX IF NOT EXISTS asked_by_time ON asked (at)",
)
_NAMES = frozenset(re.findall(r"IF NOT EXISTS (\w+)", " ".join(_SCHEMA)))
_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+)")
# The answer log's columns, added to an `answers` table made before it existed (its rows keep
# these defaults: nothing of the kind was known then; except where and on which platform each
# was asked, and its question's hash, which `_known_from_rows` fills in).
_LOG_COLUMNS = {
    "platform": "TEXT NOT NULL DEFAULT ''",
    "channel": "TEXT NOT NULL DEFAULT ''",
    "question_hash": "TEXT NOT NULL DEFAULT ''",
    "mode": "TEXT NOT NULL DEFAULT 'agent'",
    "posted": "INTEGER NOT NULL DEFAULT 1",
    "model": "TEXT NOT NULL DEFAULT ''",
    "input_tokens": "INTEGER NOT NULL DEFAULT 0",
    "output_tokens": "INTEGER NOT NULL DEFAULT 0",
    "total_s": "REAL NOT NULL DEFAULT 0",
    "model_s": "REAL NOT NULL DEFAULT 0",
    "consulted": "TEXT NOT NULL DEFAULT '[]'",
    "question_sketch": "TEXT NOT NULL DEFAULT '[]'",
}


def connect_state(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """A connection to the state file, its tables made or brought up to date first."""
    db = connect_store(path, busy_timeout_ms, if_damaged=IF_DAMAGED)
    try:
        if not _current(db):
            try:
                with transaction(db):
                    for statement in _SCHEMA:
                        db.execute(statement)
                    missing = _missing_columns(db)
                    for column, kind in missing.items():
                        db.execute(f"ALTER TABLE answers ADD COLUMN {column} {kind}")
                    if missing:
                        _known_from_rows(db, "main")
            except InaccessibleFile:
                _stand_in(db, path)
    except BaseException:
        db.close()
        raise
    return db


def _stand_in(db: sqlite3.Connection, path: Path) -> None:
    """An older release's file that this user can't write: what it lacks is made in this
    connection's own temporary schema, which SQLite searches first. The missing tables start
    empty, and the answer log is copied there with the newer columns at their defaults, so
    the commands that read work on it as on an up-to-date file. What they write there is
    lost at the end of the run, as any write to a read-only folder is."""
    _older_file(path)
    with transaction(db):
        present = {row[0] for row in db.execute("SELECT name FROM main.sqlite_master")}
        if _missing_columns(db):
            present.discard("answers")  # stood in for too: with the columns it lacks
        for statement in _SCHEMA:
            table = _TABLE.match(statement)
            if table is not None and table[1] not in present:
                db.execute(statement.replace("CREATE TABLE", "CREATE TEMP TABLE", 1))
        if "answers" in present:
            return
        for column, kind in _LOG_COLUMNS.items():
            db.execute(f"ALTER TABLE temp.answers ADD COLUMN {column} {kind}")
        if db.execute("SELECT 1 FROM main.sqlite_master WHERE name = 'answers'").fetchone():
            # Only names of our own schema go into the statement, not the file's.
            had = {row[1] for row in db.execute("PRAGMA main.table_info(answers)").fetchall()}
            ours = [row[1] for row in db.execute("PRAGMA temp.table_info(answers)").fetchall()]
            kept = ", ".join(column for column in ours if column in had)
            db.execute(f"INSERT INTO temp.answers ({kept}) SELECT {kept} FROM main.answers")  # noqa: S608
            _known_from_rows(db, "temp")


def _known_from_rows(db: sqlite3.Connection, schema: str) -> None:
    """What an older release's rows tell once the log's columns are added: the platform and
    channel are in the conversation key (`channel_of`, as `log_row` derives them), the
    question's hash in its text. Without them `bot report --channel` and the re-check, which
    go by channel and platform, would pass those rows by."""
    db.create_function("docbot_platform", 1, lambda key: channel_of(key)[0], deterministic=True)
    db.create_function("docbot_channel", 1, lambda key: channel_of(key)[1], deterministic=True)
    db.create_function("docbot_question_hash", 1, question_hash, deterministic=True)
    db.execute(
        f"UPDATE {schema}.answers SET platform = docbot_platform(conversation_key),"  # noqa: S608 (main or temp)
        " channel = docbot_channel(conversation_key) WHERE channel = ''"
    )
    db.execute(
        f"UPDATE {schema}.answers SET question_hash = docbot_question_hash(question)"  # noqa: S608 (main or temp)
        " WHERE question_hash = '' AND question != ''"
    )


@cache
def _older_file(path: Path) -> None:
    """Said once per file and process, however many stores connect to it."""
    log.warning(
        "%s was made by an older release and can't be brought up to date here: read as it "
        "is, with what it lacks empty, until a run that can write it",
        path,
    )


def _current(db: sqlite3.Connection) -> bool:
    present = {row[0] for row in db.execute("SELECT name FROM sqlite_master").fetchall()}
    return present >= _NAMES and not _missing_columns(db)


def _missing_columns(db: sqlite3.Connection) -> dict[str, str]:
    have = {row[1] for row in db.execute("PRAGMA table_info(answers)").fetchall()}
    return {column: kind for column, kind in _LOG_COLUMNS.items() if column not in have}


def state_integrity(path: Path, within_s: float) -> tuple[Integrity, str]:
    """Whether the file is whole, as far as `within_s` seconds of checking can tell."""
    db = connect_store(path, busy_timeout_ms=0, if_damaged=IF_DAMAGED)
    try:
        return check_integrity(db, within_s, {})
    finally:
        db.close()
