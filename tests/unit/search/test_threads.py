"""`search.blas_threads`: the vector scan's BLAS thread cap, applied when the SQLite backend
opens. Checked in a child process, since the cap is process-wide."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PROBE = """
import asyncio, json, sys
from pathlib import Path
from threadpoolctl import threadpool_info
from bot.wiring import open_backend
from core.config_loader import load_settings
from tests.fakes.memory import ConstantEmbedder
settings = load_settings(Path(sys.argv[1]), environ={
    "BOT_STORAGE__DATA_DIR": sys.argv[2], "BOT_SEARCH__BLAS_THREADS": sys.argv[3]})
before = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
backend = asyncio.run(open_backend(settings, ConstantEmbedder()))
after = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
print(json.dumps({"before": before, "after": after}))
"""


@pytest.mark.parametrize(("setting", "expected"), [("1", [1]), ("0", None)])
def test_opening_the_sqlite_backend_caps_blas_threads(
    setting: str, expected: list[int] | None, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(REPO / "config.yaml"), str(tmp_path), setting],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    threads = json.loads(done.stdout.strip().splitlines()[-1])
    assert threads["before"], "numpy's BLAS is loaded"
    assert threads["after"] == (expected or threads["before"])
