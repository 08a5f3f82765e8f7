"""A token the command needs and the environment lacks: one line, with the `.env` file that
sets it named when there is one (only docker compose reads it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app, main
from bot.cli.app import EXIT_USER_ERROR
from bot.unset_secrets import missing_secret
from tests.conftest import REPO


def _said(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    monkeypatch.setattr("sys.argv", ["bot", *args])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == EXIT_USER_ERROR
    return capsys.readouterr().err.strip()


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "DISCORD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BOT_CONFIG", str(REPO / "config.yaml"))
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_token_only_in_dot_env_is_named_there(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """README's Quick start people put the token in `.env` (as compose wants) and ran `bot
    slack`: "SLACK_BOT_TOKEN is not set", while they looked at it set."""
    (workdir / ".env").write_text("# tokens\nexport SLACK_BOT_TOKEN=xoxb-in-the-file\n")
    said = _said(monkeypatch, capsys, "slack", "--http")
    assert said == (
        "error: SLACK_BOT_TOKEN is not set: it is needed to post answers (.env sets it, but "
        "only docker compose reads that file: export it)"
    )
    assert "xoxb" not in said


def test_without_dot_env_the_line_is_the_plain_one(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    said = _said(monkeypatch, capsys, "slack", "--socket")
    assert said == "error: SLACK_APP_TOKEN is not set: it is needed for Socket Mode"


@pytest.mark.parametrize(
    "text", ["DISCORD_TOKEN=\n", "# DISCORD_TOKEN=abc\n", "MY_DISCORD_TOKEN=abc\n"]
)
def test_a_file_that_does_not_set_it_is_no_hint(tmp_path: Path, text: str) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(text)
    error = missing_secret("DISCORD_TOKEN", "to connect to Discord", env_file)
    assert str(error) == "DISCORD_TOKEN is not set: it is needed to connect to Discord"


def test_a_model_key_only_in_dot_env_is_named_by_doctor(workdir: Path) -> None:
    """Set only in `.env` (as .env.example says), the key was ignored: answers were quoted
    passages, and `bot doctor` said only that it was not set."""
    (workdir / ".env").write_text("ANTHROPIC_API_KEY=sk-ant-in-the-file\n")
    wide = {"ANTHROPIC_API_KEY": "", "COLUMNS": "400"}
    result = CliRunner().invoke(app, ["doctor"], env=wide)
    text = " ".join(result.output.split())
    assert "(.env sets it, but only docker compose reads that file: export it)" in text
    assert "sk-ant-in-the-file" not in result.output
