"""How every SQLite file of the bot fails: a damaged file or one that can't be written is named,
with what to do, wherever the statement ran (an execute, a fetch, rows read one by one); an
error that is the statement's own passes as it is; the integrity check stays within its time.

Real SQLite files, damaged by overwriting one of their pages."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from core.sqlite import (
    DamagedFile,
    InaccessibleFile,
    Integrity,
    check_integrity,
    connect_store,
    set_aside,
    transaction,
)

ADVICE = "delete it and try again"


def _filled(path: Path, rows: int = 2_000) -> None:
    """A table spread over many pages, closed (its log checkpointed into the file)."""
    db = connect_store(path, 1_000, if_damaged=ADVICE, rebuildable=True)
    with transaction(db):
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        db.executemany(
            "INSERT INTO t (body) VALUES (?)", [(f"row {i} " * 20,) for i in range(rows)]
        )
    db.close()


def _overwrite_page(path: Path, page: int) -> None:
    with sqlite3.connect(path) as db:
        size = db.execute("PRAGMA page_size").fetchone()[0]
    with path.open("r+b") as f:
        f.seek((page - 1) * size)
        f.write(b"\xff" * size)


def _last_page(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("PRAGMA page_count").fetchone()[0])


def test_damage_found_while_rows_are_read_one_by_one_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    _filled(path)
    _overwrite_page(path, _last_page(path) // 2)
    db = connect_store(path, 1_000, if_damaged=ADVICE)
    with pytest.raises(DamagedFile) as raised:
        for _ in db.execute("SELECT body FROM t ORDER BY id"):
            pass
    assert str(raised.value) == f"{path} is damaged (database disk image is malformed): {ADVICE}"
    assert raised.value.path == path


def test_a_file_that_is_no_database_is_named_at_connect(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    path.write_bytes(b"not a database\x00at all \xff" * 500)  # bytes, as a damaged page is
    with pytest.raises(DamagedFile, match=rf"^{path} is damaged \(file is not a database\): "):
        connect_store(path, 1_000, if_damaged=ADVICE)


def test_a_text_file_is_named_as_one_never_as_damaged(tmp_path: Path) -> None:
    """A setting pointing at a README was told "damaged: <advice>", and the advice for the
    index is to delete it."""
    path = tmp_path / "README.md"
    path.write_text("# Handbook\n\nCafé hours — all of them.\n" * 300)
    with pytest.raises(InaccessibleFile, match=rf"^{path} is no database but a text file: "):
        connect_store(path, 1_000, if_damaged=ADVICE)
    assert path.read_text().startswith("# Handbook")


def test_an_error_of_the_statement_passes_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    _filled(path, rows=1)
    db = connect_store(path, 1_000, if_damaged=ADVICE)
    with pytest.raises(sqlite3.IntegrityError):
        db.execute("INSERT INTO t (id, body) SELECT id, body FROM t")
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        db.execute("SELECT * FROM missing").fetchall()


def test_a_folder_that_cannot_be_made_is_named(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    path = tmp_path / "a-file" / "store.sqlite"
    with pytest.raises(InaccessibleFile, match=rf"^can't make the folder of {path} "):
        connect_store(path, 1_000, if_damaged=ADVICE)


def test_the_check_finds_a_damaged_page(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    _filled(path)
    _overwrite_page(path, _last_page(path) // 2)
    found, _ = check_integrity(connect_store(path, 0, if_damaged=ADVICE), 10, {})
    assert found is Integrity.DAMAGED


def test_the_check_stops_when_its_time_is_up(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    _filled(path, rows=10)
    endless = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
        "SELECT count(*) FROM n WHERE i > 0 LIMIT 1"
    )
    db = connect_store(path, 0, if_damaged=ADVICE)
    started = time.monotonic()
    found, detail = check_integrity(db, 0.2, {"everything": endless})
    assert (found, detail) == (Integrity.UNFINISHED, "not checked to the end within 0.2 s")
    assert time.monotonic() - started < 5
    assert db.execute("SELECT count(*) FROM t").fetchone() == (10,)  # usable after


def test_a_damaged_file_is_set_aside_with_its_log(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"damaged")
    path.with_name("cache.sqlite-wal").write_bytes(b"its log")
    aside = set_aside(path, "file is not a database")
    assert aside is not None
    assert aside.name.startswith("cache.sqlite.corrupt-")
    assert aside.read_bytes() == b"damaged"
    assert aside.with_name(aside.name + "-wal").read_bytes() == b"its log"
    assert not path.exists()
    assert not path.with_name("cache.sqlite-wal").exists()
