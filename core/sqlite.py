"""How every SQLite file of the bot is opened and written: one place for the pragmas that matter,
for the write transaction, and for what a failure of the file itself tells the user.

WAL lets readers and the one writer work at once (a bot process answering while an ingest or a
second process writes); the busy timeout makes a writer wait its turn instead of failing.
`BEGIN IMMEDIATE` takes the write lock at the start, so two writers queue instead of one failing
at its first write.

A damaged file, or one this user can't write, fails every statement the same way, wherever it
runs: the connection turns such an error into one that names the file and says what to do
(`UnusableFile`), so no caller has to, and no command ends in a bare "database disk image is
malformed". Other SQLite errors (a constraint, a statement's own mistake) pass through as they
are: they are about the statement, not the file.
"""

from __future__ import annotations

import codecs
import enum
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any, NoReturn, Self, cast

from core.errors import IndexUnavailable

log = logging.getLogger(__name__)

_DAMAGED = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
_NOT_WRITABLE = (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM)
_DISK = (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR)


class UnusableFile(IndexUnavailable):
    """One of the bot's SQLite files can't be used as it is; the message names it and says what
    to do. An `IndexUnavailable`: no document's fault, so a batch stops at once (every later
    write would fail the same way), and an answer says the index can't be used."""

    def __init__(self, message: str, path: Path, code: int) -> None:
        super().__init__(message)
        self.path = path
        self.code = code  # SQLite's extended result code


class DamagedFile(UnusableFile):
    """SQLite found the file malformed, or it is no database at all."""


class InaccessibleFile(UnusableFile):
    """The file, or its folder, can't be opened or written by this user (permissions, a
    read-only mount)."""


def connect_store(
    path: Path, busy_timeout_ms: int, *, if_damaged: str, rebuildable: bool = False
) -> sqlite3.Connection:
    """An autocommit connection usable from worker threads (callers serialise with a lock).
    A `rebuildable` file (the index, the embedding cache: both can be made again from the
    sources) skips the fsync of every commit; state (deliveries, locks, feedback) keeps it.
    `if_damaged` completes the message of a damaged file: what the user should do about it.

    In a folder this user can't write, SQLite can't make the files WAL reads need beside the
    database; the file is then read as it is (`immutable`), so read-only commands still work,
    and a write fails as `InaccessibleFile`. Unless the folder holds a write-ahead log that a
    crashed writer left: reading without it would silently miss committed writes."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InaccessibleFile(
            f"can't make the folder of {path} ({exc.strerror or exc}): it must be a folder this "
            "user can write",
            path,
            sqlite3.SQLITE_CANTOPEN,
        ) from exc
    if path.is_dir():  # `search.sqlite_path: /srv/docbot`: SQLite would say only "can't open"
        raise InaccessibleFile(
            f"{path} is a folder: it must name a file (the folder for them all is "
            "storage.data_dir)",
            path,
            sqlite3.SQLITE_CANTOPEN,
        )
    try:
        return _connect(path, str(path), busy_timeout_ms, if_damaged, rebuildable)
    except InaccessibleFile as exc:
        if not _in_read_only_folder(path, exc.code) or _has_log(path):
            raise
    _read_only_folder(path.parent.resolve())
    snapshot = f"{path.resolve().as_uri()}?immutable=1"
    return _connect(path, snapshot, busy_timeout_ms, if_damaged, rebuildable=False)


def _connect(
    path: Path, target: str, busy_timeout_ms: int, if_damaged: str, rebuildable: bool
) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(
            target,
            check_same_thread=False,
            isolation_level=None,
            uri=target != str(path),
            factory=_NamedConnection,
        )
    except sqlite3.DatabaseError as exc:
        _raise_named(path, if_damaged, exc)
    db.path = path
    db.if_damaged = if_damaged
    try:
        db.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        if target == str(path):  # an immutable file has no journal to set
            db.execute("PRAGMA journal_mode=WAL")
        if rebuildable:
            db.execute("PRAGMA synchronous=NORMAL")
    except BaseException:
        db.close()
        raise
    return db


def _in_read_only_folder(path: Path, code: int) -> bool:
    """Whether opening failed only because nothing can be written beside the file: a folder
    without write permission (SQLite says so), or a read-only mount (a Docker `:ro` volume),
    where SQLite can't make its shared-memory file and says only that it can't open."""
    if code == sqlite3.SQLITE_READONLY_DIRECTORY:
        return True
    return (
        code == sqlite3.SQLITE_CANTOPEN and path.is_file() and not os.access(path.parent, os.W_OK)
    )


def _has_log(path: Path) -> bool:
    wal = path.with_name(path.name + "-wal")
    return wal.is_file() and wal.stat().st_size > 0


@cache
def _read_only_folder(folder: Path) -> None:
    """Said once per folder and process, however many connections the commands open."""
    log.warning(
        "%s is read-only: its SQLite files are read as they are now (what another process "
        "writes meanwhile is not seen), and nothing can be saved there",
        folder,
    )


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction: committed when the block ends, rolled back on any error
    (Ctrl-C included). SQLite may have rolled back already (a full disk, an I/O error): the
    error that did it is the one raised, not a failed ROLLBACK."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


class Integrity(enum.Enum):
    WHOLE = "whole"
    DAMAGED = "damaged"
    UNFINISHED = "unfinished"  # the time given ran out first


def check_integrity(
    db: sqlite3.Connection, within_s: float, more: Mapping[str, str]
) -> tuple[Integrity, str]:
    """SQLite's `quick_check` of the whole file (every page and b-tree, not index contents:
    O(file size)), then each check of `more` (what it checks: its statement, such as a virtual
    table's own check), all within `within_s` seconds; with what was found. `db` is the check's
    own connection, interrupted when the time is up; with no busy timeout, so a check that needs
    the write lock (FTS5's) is skipped while another process writes, not waited for."""
    timer = threading.Timer(within_s, db.interrupt)
    timer.start()
    skipped: list[str] = []
    try:
        problems = [str(row[0]) for row in db.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            return Integrity.DAMAGED, "; ".join(problems)
        for what, statement in more.items():
            try:
                db.execute(statement)
            except InaccessibleFile:
                skipped.append(f"{what} not checked: read-only here")
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                    raise
                skipped.append(f"{what} not checked: another process is writing")
    except DamagedFile as exc:
        return Integrity.DAMAGED, str(exc.__cause__ or exc)
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode != sqlite3.SQLITE_INTERRUPT:
            raise
        return Integrity.UNFINISHED, f"not checked to the end within {within_s:g} s"
    finally:
        timer.cancel()
    return Integrity.WHOLE, "; ".join(["whole", *skipped])


_TEXT_PROBE_BYTES = 4_096


def _reads_as_text(path: Path) -> bool:
    """Whether the file begins as text does (no NUL, UTF-8): a README or a config file, where a
    database whose first page was damaged reads as bytes."""
    try:
        with path.open("rb") as file:
            head = file.read(_TEXT_PROBE_BYTES)
        codecs.getincrementaldecoder("utf-8")().decode(head)  # a letter cut at the end is text
    except (OSError, UnicodeDecodeError):
        return False
    return bool(head) and b"\x00" not in head


def _named_error(path: Path, if_damaged: str, exc: sqlite3.Error) -> UnusableFile | None:
    """What a failure of the file itself means for the user; None when the error is about the
    statement, not the file."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return None
    primary = code & 0xFF  # an extended code's low byte is its primary code
    detail = str(exc)
    if primary == sqlite3.SQLITE_NOTADB and _reads_as_text(path):
        # Some other file named by mistake (a setting pointing at a README), not a database
        # damaged: never "delete it", nor set it aside.
        return InaccessibleFile(
            f"{path} is no database but a text file: check the setting that led here "
            "(search.sqlite_path, embeddings.cache_path or storage.data_dir)",
            path,
            code,
        )
    if primary in _DAMAGED:
        return DamagedFile(f"{path} is damaged ({detail}): {if_damaged}", path, code)
    if primary in _NOT_WRITABLE:
        return InaccessibleFile(
            f"can't write {path} ({detail}): the file and its folder must be writable by this user",
            path,
            code,
        )
    if primary == sqlite3.SQLITE_CANTOPEN:
        return InaccessibleFile(
            f"can't open {path} ({detail}): the file and its folder must be readable and "
            "writable by this user",
            path,
            code,
        )
    if primary in _DISK:
        return UnusableFile(f"can't use {path} ({detail}): check the disk it is on", path, code)
    return None


def _raise_named(path: Path, if_damaged: str, exc: sqlite3.Error) -> NoReturn:
    error = _named_error(path, if_damaged, exc)
    if error is None:
        raise exc
    raise error from exc


class _NamedConnection(sqlite3.Connection):
    """A connection whose statements fail, when the file is at fault, with `UnusableFile`."""

    path: Path
    if_damaged: str

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return self.cursor(_NamedCursor).execute(sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        return self.cursor(_NamedCursor).executemany(sql, parameters)


class _NamedCursor(sqlite3.Cursor):
    """Rows are read from the file as they are fetched, so a fetch can find damage too."""

    def _fail(self, exc: sqlite3.Error) -> NoReturn:
        db = cast(_NamedConnection, self.connection)
        _raise_named(db.path, db.if_damaged, exc)

    def execute(self, sql: str, parameters: Any = (), /) -> Self:
        try:
            return super().execute(sql, parameters)
        except sqlite3.DatabaseError as exc:
            self._fail(exc)

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> Self:
        try:
            return super().executemany(sql, seq_of_parameters)
        except sqlite3.DatabaseError as exc:
            self._fail(exc)

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.DatabaseError as exc:
            self._fail(exc)

    def fetchmany(self, size: int | None = 1) -> list[Any]:
        try:
            return super().fetchmany(size)
        except sqlite3.DatabaseError as exc:
            self._fail(exc)

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.DatabaseError as exc:
            self._fail(exc)

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except sqlite3.DatabaseError as exc:
            self._fail(exc)


def set_aside(path: Path, reason: str) -> Path | None:
    """A damaged file of data that can be made again, moved out of the way with its
    write-ahead log, under a name that says when (`<name>.corrupt-<time>`), for a new one to
    be started in its place; None (logged) when it can't be moved."""
    aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
    for suffix in ("", "-wal", "-shm"):
        try:
            path.with_name(path.name + suffix).rename(aside.with_name(aside.name + suffix))
        except FileNotFoundError:
            continue  # no log, or another process moved it first
        except OSError as exc:
            log.warning("%s is damaged (%s) and can't be moved aside: %s", path, reason, exc)
            return None
    log.warning("%s is damaged (%s): moved aside to %s, a new one is started", path, reason, aside)
    return aside
