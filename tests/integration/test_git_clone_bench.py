"""`bench.git_clone` on a small repository: both settings find the same documents, and the
shipped one leaves the large asset on the server."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from bench.git_clone import MODES, measure

ASSET_BYTES = 1_000_000


def test_the_bench_measures_both_settings_on_the_same_documents(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "guide.md").write_text("# Guide\n\nRestart the workers.\n")
    (repo / "logo.png").write_bytes(os.urandom(ASSET_BYTES))
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "--quiet"], ["add", "-A"], [*identity, "commit", "--quiet", "-m", "x"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    rows = measure(repo, runs=1)
    shipped, whole = (rows[mode] for mode in MODES)
    assert shipped["documents"] == whole["documents"] == 1
    assert shipped["files_checked_out"] == 1
    assert whole["files_checked_out"] == 2
    assert whole["git_bytes"] > ASSET_BYTES > shipped["git_bytes"]
    assert shipped["seconds"] > 0
