"""The bot's SQLite files as a newcomer may leave them: damaged by a crash or a bad copy, or in a
folder this user can't write. `bot doctor` fails on a damaged index or state file; every other
command that meets one says, in one line, which file and what to do; the embedding cache, which
only saves work, is set aside and started again; a read-only data folder still searches.

Each case runs the real `bot` executable on a copy of one ingest of the bundled docs."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.integration.test_hostile_cli import one_error_line, run_bot, unprivileged
from tests.integration.test_hostile_doctor import _rows

WIDE = {"COLUMNS": "1000"}  # one doctor row per line, a channel's whole policy included
INDEX_ADVICE = "delete it and ingest again (`bot ingest PATH`, `bot sync NAME`)"
STATE_ADVICE = "restore it from a backup, or move it aside"


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("ingested") / "data"
    done = run_bot(["ingest", str(REPO / "docs")], data.parent)
    assert done.returncode == 0, done.stderr
    return data


@pytest.fixture
def data(ingested: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(ingested, tmp_path / "data"))


def _bot(
    data: Path, *args: str, wrapper: Sequence[str] = (), **env: str
) -> subprocess.CompletedProcess[str]:
    return run_bot(list(args), data.parent, wrapper, BOT_STORAGE__DATA_DIR=str(data), **WIDE, **env)


def _overwrite_root_page(path: Path, table: str) -> None:
    """The first page of `table` overwritten with zeros, as a torn write would leave it."""
    with sqlite3.connect(path) as db:
        page = db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        size = db.execute("PRAGMA page_size").fetchone()[0]
    with path.open("r+b") as f:
        f.seek((page[0] - 1) * size)
        f.write(bytes(size))


@pytest.mark.parametrize(
    "args",
    [
        ["search", "re-ingest"],
        ["ask", "How do I re-ingest changed documents?"],
        ["ingest", str(REPO / "docs")],
    ],
)
def test_a_damaged_full_text_table_is_named_by_every_command(data: Path, args: list[str]) -> None:
    index = data / "index.sqlite"
    _overwrite_root_page(index, "chunks_fts_config")
    done = _bot(data, *args)
    assert done.returncode == 2
    assert one_error_line(done) == (
        f"error: {index} is damaged (vtable constructor failed: chunks_fts): {INDEX_ADVICE}; "
        "the embedding cache makes that quick"
    )


def _doctor_fails_on(data: Path, row: str) -> str:
    """`bot doctor` exits 1 with `row` failed; its detail."""
    doctor = _bot(data, "doctor")
    assert doctor.returncode == 1
    status, detail = _rows(doctor.stdout)[row]
    assert status == "FAIL", detail
    return detail


def test_doctor_fails_on_damage_the_index_opens_past(data: Path) -> None:
    """Only the chunks are damaged: the index opens, an unchanged ingest reads none of them,
    but doctor's check finds it, and a search names the file."""
    index = data / "index.sqlite"
    _overwrite_root_page(index, "chunks")
    detail = _doctor_fails_on(data, "index file")
    assert detail.startswith(f"{index} is damaged (database disk image is malformed): ")
    search = _bot(data, "search", "re-ingest")
    assert search.returncode == 2
    assert one_error_line(search).startswith(f"error: {index} is damaged")


def test_doctor_fails_on_a_truncated_index(data: Path) -> None:
    index = data / "index.sqlite"
    with index.open("r+b") as f:
        f.truncate(20_000)
    done = _bot(data, "doctor")
    assert done.returncode == 1
    assert "unexpected" not in done.stdout + done.stderr
    status, detail = _rows(done.stdout)["index"]
    assert (status, detail.split(": ")[0]) == (
        "FAIL",
        f"{index} is damaged (database disk image is malformed)",
    )


def test_doctor_checks_the_full_text_index_itself(data: Path) -> None:
    """Damage inside the full-text index's data leaves every page well formed: SQLite's own
    check passes, FTS5's finds it."""
    index = data / "index.sqlite"
    with sqlite3.connect(index) as db:
        db.execute(
            "UPDATE chunks_fts_data SET block = zeroblob(length(block))"
            " WHERE id = (SELECT max(id) FROM chunks_fts_data)"
        )
        assert db.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    assert _doctor_fails_on(data, "index file") == (
        f"{index} is damaged (database disk image is malformed): {INDEX_ADVICE}; the embedding "
        "cache makes that quick"
    )


def test_a_damaged_state_file_is_named_and_fails_doctor(data: Path) -> None:
    state = data / "state.sqlite"
    state.write_bytes(os.urandom(12_288))
    detail = _doctor_fails_on(data, "state file")
    assert detail.startswith(f"{state} is damaged (file is not a database): {STATE_ADVICE}")
    ask = _bot(data, "ask", "How do I re-ingest changed documents?")
    assert ask.returncode == 2
    assert one_error_line(ask).startswith(
        f"error: {state} is damaged (file is not a database): {STATE_ADVICE}"
    )


def test_a_damaged_embedding_cache_is_set_aside_and_the_command_goes_on(data: Path) -> None:
    cache = data / "embedding-cache.sqlite"
    cache.write_bytes(os.urandom(12_288))
    (data / "index.sqlite").unlink()  # every passage embedded again: the cache is written
    ingest = _bot(data, "ingest", str(REPO / "docs"))
    assert ingest.returncode == 0, ingest.stderr
    (aside,) = data.glob("embedding-cache.sqlite.corrupt-*")
    assert f"{cache} is damaged (file is not a database): moved aside to {aside}" in ingest.stderr
    ask = _bot(data, "ask", "How do I re-ingest changed documents?")
    assert ask.returncode == 0, ask.stderr
    assert "Re-ingesting" in ask.stdout
    assert "is damaged" not in ask.stderr  # the new cache is whole


@contextmanager
def _read_only(folder: Path) -> Iterator[list[str]]:
    """`folder` and its files made read-only; yields the command prefix under which that
    holds."""
    prefix = unprivileged()
    files = list(folder.iterdir())
    for file in files:
        file.chmod(0o444)
    folder.chmod(0o555)
    try:
        yield prefix
    finally:
        folder.chmod(0o755)
        for file in files:
            file.chmod(0o644)


def test_a_read_only_data_folder_still_searches_and_answers(data: Path) -> None:
    with _read_only(data) as prefix:
        search = _bot(data, "search", "re-ingest", wrapper=prefix)
        assert search.returncode == 0, search.stderr
        assert "Re-ingesting" in search.stdout
        assert f"{data} is read-only: its SQLite files are read as they are now" in search.stderr
        doctor = _bot(data, "doctor", wrapper=prefix)
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        ask = _bot(data, "ask", "How do I re-ingest changed documents?", wrapper=prefix)
        assert ask.returncode == 0, ask.stderr
        assert "Re-ingesting" in ask.stdout
        ingest = _bot(data, "ingest", str(REPO / "docs"), wrapper=prefix)
        assert ingest.returncode == 2
        assert one_error_line(ingest).endswith(
            "(attempt to write a readonly database): the file and its folder must be writable "
            "by this user"
        )
    assert sorted(p.name for p in data.iterdir()) == [  # nothing was written there
        "embedding-cache.sqlite",
        "index.sqlite",
        "state.sqlite",
    ]


def _read_only_mount(folder: Path) -> list[str]:
    """The command prefix that runs its command with `folder` mounted read-only (as a Docker
    `:ro` volume is), in a mount namespace of its own; skips where none can be made."""
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    prefix = ["unshare", "--map-root-user", "--mount", "sh", "-c", script, str(folder)]
    if shutil.which("unshare") is None:
        pytest.skip("no unshare here to make a read-only mount with")
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"no read-only mount can be made here: {probe.stderr.strip()}")
    return prefix


def test_a_data_folder_on_a_read_only_mount_still_searches(data: Path) -> None:
    """On a read-only mount SQLite can't make its shared-memory file and says only "unable to
    open database file" (not, as for a folder without write permission, that the folder is
    read-only): every read-only command failed, telling the user to make it writable."""
    prefix = _read_only_mount(data)
    search = _bot(data, "search", "re-ingest", wrapper=prefix)
    assert search.returncode == 0, search.stderr
    assert "Re-ingesting" in search.stdout
    assert f"{data} is read-only: its SQLite files are read as they are now" in search.stderr
    ask = _bot(data, "ask", "How do I re-ingest changed documents?", wrapper=prefix)
    assert ask.returncode == 0, ask.stderr
    assert "Re-ingesting" in ask.stdout
    ingest = _bot(data, "ingest", str(REPO / "docs"), wrapper=prefix)
    assert ingest.returncode == 2
    assert "must be writable by this user" in one_error_line(ingest)
    graph = data / "index.sqlite.vectors"
    rebuild = _bot(
        data, "index", "rebuild-vectors", wrapper=prefix, BOT_SEARCH__APPROXIMATE__MIN_CHUNKS="1"
    )
    assert rebuild.returncode != 0
    assert one_error_line(rebuild).startswith(f"error: can't write the vector graph {graph} (")
    assert "unexpected" not in rebuild.stderr


def _as_an_older_version_left_it(state: Path) -> None:
    """The state file as a release before the answer log's columns and the re-check table
    left it, holding one logged answer."""
    with closing(sqlite3.connect(state)) as db, db:
        db.execute("DROP TABLE IF EXISTS rechecks")
        db.execute("DROP TABLE IF EXISTS answers")
        db.execute(
            "CREATE TABLE answers (id TEXT PRIMARY KEY, conversation_key TEXT NOT NULL,"
            " question TEXT NOT NULL, answer TEXT NOT NULL, status TEXT NOT NULL,"
            " citations TEXT NOT NULL, created_at REAL NOT NULL)"
        )
        db.execute(
            "INSERT INTO answers VALUES ('a1', 'slack/T1/C1/1.0', 'Where are the refunds?',"
            " 'Nowhere.', 'not_found', '[]', strftime('%s', 'now'))"
        )


def test_an_older_state_file_in_a_read_only_folder_is_read_as_it_is(data: Path) -> None:
    state = data / "state.sqlite"
    _as_an_older_version_left_it(state)
    with _read_only(data) as prefix:
        older = f"{state} was made by an older release and can't be brought up to date here"
        ask = _bot(data, "ask", "How do I re-ingest changed documents?", wrapper=prefix)
        assert ask.returncode == 0, ask.stderr
        assert "Re-ingesting" in ask.stdout
        assert older in ask.stderr
        figures = data.parent / "report.json"
        report = _bot(data, "report", "--json", str(figures), wrapper=prefix)
        assert report.returncode == 0, report.stderr
        found = json.loads(figures.read_text())
        assert (found["answers"], found["statuses"]["not_found"]) == (1, 1)
        doctor = _bot(data, "doctor", wrapper=prefix)
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    # Nothing was written there; the first run that can write brings the file up to date.
    with sqlite3.connect(state) as db:
        assert "rechecks" not in {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    assert _bot(data, "ask", "How do I re-ingest changed documents?").returncode == 0
    with sqlite3.connect(state) as db:
        assert "rechecks" in {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        columns = {r[1] for r in db.execute("PRAGMA table_info(answers)")}
        assert {"platform", "question_sketch"} <= columns
        assert db.execute("SELECT question FROM answers").fetchall() == [
            ("Where are the refunds?",)
        ]


def test_an_older_state_files_answers_keep_their_channel_read_only_or_not(data: Path) -> None:
    """Rows from before the log had channels are counted in their channel's report: read as
    they are in a folder this user can't write, then brought up to date."""
    _as_an_older_version_left_it(data / "state.sqlite")
    figures = data.parent / "report.json"
    with _read_only(data) as prefix:
        report = _bot(data, "report", "--channel", "C1", "--json", str(figures), wrapper=prefix)
        assert report.returncode == 0, report.stderr
    assert json.loads(figures.read_text())["per_channel"] == {"slack/T1/C1": 1}
    report = _bot(data, "report", "--channel", "C1", "--json", str(figures))
    assert report.returncode == 0, report.stderr
    assert json.loads(figures.read_text())["per_channel"] == {"slack/T1/C1": 1}


def test_doctor_fails_when_a_channel_searches_a_source_nobody_ingested(data: Path) -> None:
    policies = '{"slack/T0123/C0DOCS": {"sources": ["handbok"]}}'
    done = _bot(data, "doctor", "--channel", "slack/T0123/C0DOCS", BOT_CHANNELS__POLICIES=policies)
    assert done.returncode == 1
    rows = _rows(done.stdout)
    missing = (
        "source handbok has no document in the index and no entry in `sources:` (a typo? else "
        "`bot ingest PATH --source handbok`) (indexed: docs)"
    )
    assert rows["channel sources"] == ("FAIL", f"channels.policies.slack/T0123/C0DOCS: {missing}")
    status, detail = rows["channel slack/T0123/C0DOCS"]
    assert status == "FAIL"
    assert "sources handbok;" in detail
    assert detail.endswith(f"(from slack/T0123/C0DOCS); {missing}")


def test_a_text_file_named_as_the_index_is_never_called_damaged(data: Path, tmp_path: Path) -> None:
    """`search.sqlite_path` pointing at some other file said it was damaged: "delete it and
    ingest again", of the user's README."""
    readme = tmp_path / "README.md"
    readme.write_text("# Our handbook\n\nNothing to lose here, except everything.\n" * 200)
    search = _bot(data, "search", "re-ingest", BOT_SEARCH__SQLITE_PATH=str(readme))
    assert search.returncode != 0
    line = one_error_line(search)
    assert line.startswith(f"error: {readme} is no database but a text file: ")
    assert "delete" not in line
    assert readme.read_text().startswith("# Our handbook")
