"""Settings as a newcomer's shell hands them to `bot`: someone else's `BOT_*` variables, a
`--base-url` without its scheme, a bad value whose variable must be found."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app, main
from tests.conftest import REPO

runner = CliRunner()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOT_CONFIG", str(REPO / "config.yaml"))
    page = tmp_path / "page.md"
    page.write_text("# Setup\n\nRun the installer, then sign in.\n")
    return page


def test_someone_elses_bot_variables_leave_every_command_alone(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_TOKEN", "xyz")
    monkeypatch.setenv("BOT_DEBUG", "1")
    ingested = runner.invoke(app, ["ingest", str(env)])
    assert ingested.exit_code == 0, ingested.output
    result = runner.invoke(app, ["search", "installer"])
    assert result.exit_code == 0, result.output
    assert "Run the installer" in result.output


@pytest.mark.parametrize("url", ["handbook.example.com", "not a url", "https://"])
def test_a_base_url_without_scheme_or_host_is_refused_before_anything_is_ingested(
    env: Path, url: str
) -> None:
    result = runner.invoke(app, ["ingest", str(env), "--base-url", url])
    assert result.exit_code == 2
    flat = " ".join(result.output.replace("│", " ").split())  # the usage box wraps
    assert "Invalid value for '--base-url': not an http(s) URL" in flat
    assert "added" not in result.output
    kept = runner.invoke(app, ["ingest", str(env), "--base-url", "https://handbook.example.com/"])
    assert kept.exit_code == 0, kept.output


def test_a_base_url_with_a_password_is_refused_before_anything_is_ingested(env: Path) -> None:
    url = "https://bob:hunter2@handbook.example.com/"
    result = runner.invoke(app, ["ingest", str(env), "--base-url", url])
    assert result.exit_code == 2
    flat = " ".join(result.output.replace("│", " ").split())  # the usage box wraps
    assert "Invalid value for '--base-url': a base for citation links can't hold a user" in flat
    assert "hunter2" not in result.output
    assert "added" not in result.output


def test_a_bad_setting_is_one_line_naming_the_variable_to_fix(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BOT_SLACK__PLACEHOLDER", "Hold on: searching the docs")  # text: fine
    monkeypatch.setenv("BOT_OPENAI__BASE_URL", "localhost:11434/v1")
    monkeypatch.setattr("sys.argv", ["bot", "search", "foo"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2
    printed = capsys.readouterr().err.strip()
    assert "\n" not in printed
    assert printed.startswith("error: invalid configuration: openai.base_url: not an http(s) URL")
    assert printed.endswith("(got 'localhost:11434/v1'), from BOT_OPENAI__BASE_URL")
