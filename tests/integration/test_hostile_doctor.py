"""`bot doctor` given a newcomer's mistakes: a malformed ELASTICSEARCH_URL carrying a password
is reported (exit 1) without the password, even with -v; informational rows never fail the
command, contradictions do."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app, main
from tests.conftest import REPO

runner = CliRunner()
PASSWORD = "hunter2"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOT_CONFIG", str(REPO / "config.yaml"))
    for name in ("ANTHROPIC_API_KEY", "PERPLEXITY_API_KEY", "SLACK_BOT_TOKEN", "DISCORD_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"http://elastic:{PASSWORD}@[bad", "Could not parse URL 'http://[bad'"),
        (
            f"http://elastic:{PASSWORD}@host:notaport",
            "Could not parse URL 'http://host:notaport'",
        ),
        (
            f"http://elastic:{PASSWORD}@local host:9200",
            "Could not parse URL 'http://local host:9200'",
        ),
        (f"elastic:{PASSWORD}@host:9200", "URL must include a 'scheme', 'host', and 'port'"),
    ],
)
def test_a_malformed_url_with_a_password_is_reported_without_it(
    env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    url: str,
    shown: str,
) -> None:
    monkeypatch.setenv("BOT_SEARCH__BACKEND", "elasticsearch")
    monkeypatch.setenv("ELASTICSEARCH_URL", url)
    monkeypatch.setenv("COLUMNS", "400")  # one table row per line
    monkeypatch.setattr("sys.argv", ["bot", "-v", "doctor"])  # -v: tracebacks too
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 1
    printed = capsys.readouterr()
    assert PASSWORD not in printed.out + printed.err
    status, detail = _rows(printed.out)["connection"]
    assert status == "FAIL"
    assert detail.startswith(f"elasticsearch settings: {shown}")


def test_a_ca_file_that_holds_no_certificate_is_a_settings_error(
    env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 and one line naming elasticsearch.ca_certs, like every settings error (it was
    "unexpected SSLError", exit 1, as for a bug)."""
    not_a_ca = tmp_path / "ca.pem"
    not_a_ca.write_text("search:\n  backend: elasticsearch\n")
    monkeypatch.setenv("BOT_SEARCH__BACKEND", "elasticsearch")
    monkeypatch.setenv("ELASTICSEARCH_URL", "https://127.0.0.1:9200")
    monkeypatch.setenv("BOT_ELASTICSEARCH__CA_CERTS", str(not_a_ca))
    monkeypatch.setattr("sys.argv", ["bot", "search", "install"])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: elasticsearch.ca_certs: {not_a_ca} holds no CA certificate")


def test_informational_rows_do_not_fail_the_command(
    env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "page.md").write_text("# Setup\n\nRun the installer, then sign in.\n")
    assert runner.invoke(app, ["ingest", str(tmp_path / "page.md")]).exit_code == 0
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setenv("DISCORD_TOKEN", "discord-token-value")

    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 0, result.output
    rows = _rows(result.output)
    assert rows["model"] == (
        "info",
        "none: extractive answers, the best passages quoted (neither ANTHROPIC_API_KEY nor "
        "openai.base_url + openai.model is set)",
    )
    assert rows["platform tokens"] == (
        "info",
        "set: DISCORD_TOKEN; not set: SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET, SLACK_APP_TOKEN; "
        "can start: bot discord",
    )
    assert rows["web search"] == (
        "info",
        "off (web_search.enabled, web_search.channels, channel policies)",
    )
    assert rows["content"][0] == "ok"
    assert "discord-token-value" not in result.output

    # Web search on with no key: every answering process would stop at start.
    monkeypatch.setenv("BOT_WEB_SEARCH__ENABLED", "true")
    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 1
    assert _rows(result.output)["web search"] == (
        "FAIL",
        "on everywhere, but PERPLEXITY_API_KEY is not set: every command that answers "
        "(bot ask, chat, slack, discord) stops at start",
    )


def _rows(table: str) -> dict[str, tuple[str, str]]:
    """check name -> (status, detail) from doctor's table printed one row per line."""
    cells = [line.split("│")[1:4] for line in table.splitlines() if line.startswith("│")]
    return {name.strip(): (status.strip(), detail.strip()) for name, status, detail in cells}
