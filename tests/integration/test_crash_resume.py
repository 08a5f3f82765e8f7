"""An ingest killed with SIGKILL mid-way keeps what it wrote, and the rerun completes it; one
stopped with Ctrl-C says so, and that is true."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

DOCS = 150
KILL_AFTER = 20


def _count(db_path: Path) -> int:
    if not db_path.exists():
        return 0
    try:
        with sqlite3.connect(db_path, timeout=5) as db:
            return int(db.execute("SELECT count(*) FROM documents").fetchone()[0])
    except sqlite3.OperationalError:  # schema not created yet
        return 0


def _corpus(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """The command ingesting DOCS small pages, and its environment."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(DOCS):
        (corpus / f"page{i:03d}.md").write_text(
            f"# Page {i}\n\nThis page explains feature number {i} of the product in detail.\n"
        )
    env = {
        **os.environ,
        "BOT_STORAGE__DATA_DIR": str(tmp_path / "data"),
        "BOT_INGEST__EMBED_GROUP_CHUNKS": "5",  # commit often, so the signal lands mid-way
        "BOT_CONFIG": str(REPO / "config.yaml"),
    }
    return [sys.executable, "-m", "bot", "ingest", str(corpus)], env


def _stopped_mid_way(
    command: list[str], env: dict[str, str], index: Path, sig: signal.Signals
) -> subprocess.Popen[str]:
    """The ingest, sent `sig` once KILL_AFTER documents are in. SIGINT as a terminal's Ctrl-C
    sends it: a child of a shell without job control would inherit it ignored."""
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while _count(index) < KILL_AFTER and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(sig)
    return process


@pytest.mark.slow
def test_killed_ingest_resumes(tmp_path: Path) -> None:
    command, env = _corpus(tmp_path)
    index = tmp_path / "data" / "index.sqlite"
    process = _stopped_mid_way(command, env, index, signal.SIGKILL)
    process.wait()
    survived = _count(index)
    assert KILL_AFTER <= survived < DOCS, "the kill should land in the middle of the ingest"
    _rerun_completes(command, env, index, survived)


@pytest.mark.slow
def test_an_interrupted_ingest_says_so_in_one_line_and_the_rerun_resumes(tmp_path: Path) -> None:
    command, env = _corpus(tmp_path)
    index = tmp_path / "data" / "index.sqlite"
    process = _stopped_mid_way(command, env, index, signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert out == ""  # no "Ingested in ..." of a run that did not finish
    assert err.splitlines()[-1] == (
        "interrupted; the documents written so far are kept: run the same command again to "
        "resume (what is already indexed is skipped as unchanged)"
    )
    assert "Traceback" not in err
    survived = _count(index)
    assert KILL_AFTER <= survived < DOCS, "the interrupt should land in the middle of the ingest"
    with sqlite3.connect(tmp_path / "data" / "state.sqlite") as db:
        assert db.execute("SELECT count(*) FROM run_locks").fetchone()[0] == 0  # released
    _rerun_completes(command, env, index, survived)


def _rerun_completes(command: list[str], env: dict[str, str], index: Path, survived: int) -> None:
    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{DOCS - survived} added" in rerun.stdout
    assert f"{survived} unchanged" in rerun.stdout
    with sqlite3.connect(index) as db:
        assert db.execute("SELECT count(*) FROM documents").fetchone()[0] == DOCS
        assert db.execute("SELECT count(*) FROM chunks").fetchone()[0] == DOCS
        assert db.execute("SELECT count(DISTINCT doc_id) FROM chunks").fetchone()[0] == DOCS
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
