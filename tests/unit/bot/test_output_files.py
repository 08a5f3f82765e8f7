"""A place a command is told to write to, checked when the command line is read."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from tests.conftest import REPO


def test_a_file_given_for_the_export_folder_is_refused_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing to export it said "0 liked and 0 disliked questions, 0 documents -> FILE"
    and exited 0; with something, it failed only after reading the answer log."""
    monkeypatch.setenv("BOT_CONFIG", str(REPO / "config.yaml"))
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    taken = tmp_path / "notes.txt"
    taken.write_text("mine\n")
    for given, said in (
        (taken, f"{taken} is a file: name the folder to write in"),
        (taken / "feedback", f"{taken} is a file, so {taken / 'feedback'} can't be written"),
    ):
        wide = {"COLUMNS": "1000"}  # the error box's line unwrapped
        result = CliRunner().invoke(app, ["eval", "export-feedback", str(given)], env=wide)
        assert result.exit_code == 2, result.output
        assert said in result.output
    assert taken.read_text() == "mine\n"
    assert not (tmp_path / "data").exists()  # refused before the index was opened
