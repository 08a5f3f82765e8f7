"""An ingest killed with SIGKILL mid-way keeps what it wrote, and the rerun completes it."""

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


@pytest.mark.slow
def test_killed_ingest_resumes(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(DOCS):
        (corpus / f"page{i:03d}.md").write_text(
            f"# Page {i}\n\nThis page explains feature number {i} of the product in detail.\n"
        )
    data = tmp_path / "data"
    env = {
        **os.environ,
        "BOT_STORAGE__DATA_DIR": str(data),
        "BOT_INGEST__EMBED_GROUP_CHUNKS": "5",  # commit often, so the kill lands mid-way
        "BOT_CONFIG": str(REPO / "config.yaml"),
    }
    command = [sys.executable, "-m", "bot", "ingest", str(corpus)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    index = data / "index.sqlite"
    deadline = time.monotonic() + 120
    while _count(index) < KILL_AFTER and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    survived = _count(index)
    assert KILL_AFTER <= survived < DOCS, "the kill should land in the middle of the ingest"

    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{DOCS - survived} added" in rerun.stdout
    assert f"{survived} unchanged" in rerun.stdout
    with sqlite3.connect(index) as db:
        assert db.execute("SELECT count(*) FROM documents").fetchone()[0] == DOCS
        assert db.execute("SELECT count(*) FROM chunks").fetchone()[0] == DOCS
        assert db.execute("SELECT count(DISTINCT doc_id) FROM chunks").fetchone()[0] == DOCS
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
