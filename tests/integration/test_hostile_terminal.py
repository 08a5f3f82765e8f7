"""What the `bot` command prints of text it did not write (the answer log's questions, cited
titles, documents, settings, a server's words): never read as rich markup (a `[/bold]` in a
question stopped `bot report` with a MarkupError, a `[link=...]` made a terminal link) and
without the characters a terminal acts on (escape sequences that clear the screen or make a
link, NUL, bidi overrides)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.cli.app import main
from core.backends.sqlite.platform_state import SqlitePlatformState
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, Citation
from core.domain.text import printable
from tests.conftest import REPO

runner = CliRunner()
QUESTIONS = (
    "what does [/bold] mean in the rollback docs?",
    "where is [link=https://evil.example]the refund policy[/link] documented?",
    "ANSI \x1b[31mRED\x1b[0m \x1b]8;;https://evil.example\x07click\x1b]8;;\x07 \x1b[2J export?",
    "control \x00\x07\x08\r\x0b chars about password reset?",
    "bidi \u202eevil\u202c and zero\u200bwidth\u2066x\u2069 question about webhooks?",
)
TITLE = "Key [/bold] rotation \x1b]0;pwned\x07[link=https://evil.example]here[/link]"
# What a terminal acts on: none of it may reach the output.
ACTING = ("\x1b", "\x00", "\x07", "\x08", "\r", "\x0b", "\u202e", "\u202c", "\u2066", "\u200b")
WIDE = {"COLUMNS": "400"}


def assert_inert(output: str) -> None:
    assert "unexpected" not in output, output
    found = [c for c in ACTING if c in output]
    assert not found, f"{found!r} in {output!r}"


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data folder whose answer log holds the hostile questions, each missed, down-voted,
    and citing a passage since removed (so each is a stale answer too)."""
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(folder))
    monkeypatch.setenv("BOT_CONFIG", str(REPO / "config.yaml"))

    async def seed() -> None:
        state = SqlitePlatformState(folder / "state.sqlite", 1000, 60)
        try:
            for n, question in enumerate(QUESTIONS):
                cited = Citation(
                    1,
                    TITLE,
                    "https://docs.example/k",
                    "q",
                    True,
                    chunk_id=f"gone-{n}",
                    passage_sha="0" * 16,
                )
                answer = Answer("Not in the docs.", AnswerStatus.PARTIAL, AnswerMode.AGENT, [cited])
                answer_id = await state.record_answer(f"slack/T1/C{n}/{n}.1", question, answer)
                await state.record_feedback(answer_id, "U1", helpful=False)
        finally:
            await state.close()

    asyncio.run(seed())
    return folder


def test_report_prints_the_questions_as_they_were_asked(data: Path) -> None:
    result = runner.invoke(app, ["report", "--since", "99999d"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert_inert(result.output)
    assert "what does [/bold] mean in the rollback docs?" in result.output


@pytest.mark.parametrize("n", range(len(QUESTIONS)))
def test_report_of_one_channel_prints_its_question(data: Path, n: int) -> None:
    result = runner.invoke(app, ["report", "--since", "99999d", "--channel", f"C{n}"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert_inert(result.output)
    flat = " ".join(result.output.split())  # the table's title wraps
    assert f"channel C{n}: 1 questions" in flat
    assert " ".join(printable(QUESTIONS[n]).split()) in flat


def test_report_of_a_channel_named_like_markup_is_empty(data: Path) -> None:
    result = runner.invoke(app, ["report", "--channel", "[/bold]"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "channel [/bold]: 0 questions" in " ".join(result.output.split())


def test_stale_answers_prints_questions_and_titles_as_they_are(data: Path) -> None:
    result = runner.invoke(app, ["stale-answers", "--since", "99999d"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert_inert(result.output)
    assert f"{len(QUESTIONS)} stale answers" in result.output
    assert "what does [/bold] mean in the rollback docs?" in result.output
    assert "removed: Key [/bold] rotation" in result.output


def test_search_names_a_source_filter_as_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    page = tmp_path / "rollback.md"
    page.write_text("# Rollback [/bold] guide\n\nRoll back with `deploy --undo`.\n")
    assert runner.invoke(app, ["ingest", str(page)]).exit_code == 0
    hits = runner.invoke(app, ["search", "rollback"], env=WIDE)
    assert hits.exit_code == 0, hits.output
    assert "Rollback [/bold] guide" in hits.output
    unknown = runner.invoke(app, ["search", "rollback", "--source", "[/bold]"], env=WIDE)
    assert unknown.exit_code == 0, unknown.output
    assert_inert(unknown.output)
    assert "No document has the source '[/bold]'" in unknown.output


def test_doctor_prints_a_policys_source_names_as_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOT_CHANNELS__POLICIES", '{"slack/T1/C1": {"sources": ["[/bold]x"]}}')
    result = runner.invoke(app, ["doctor"], env=WIDE)
    assert result.exit_code == 1, result.output  # that source is in no document: a FAIL row
    assert_inert(result.output)
    assert "source [/bold]x has no document" in result.output


def test_sources_list_prints_locations_as_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    location = "/srv/[prod]/run[/bold]books\\u001b[2J"  # \u001b: ESC, as YAML reads it
    monkeypatch.setenv(
        "BOT_SOURCES", f'{{"runbooks": {{"type": "files", "location": ["{location}"]}}}}'
    )
    result = runner.invoke(app, ["sources", "list"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert_inert(result.output)
    assert "/srv/[prod]/run[/bold]books[2J" in result.output


def test_an_error_line_quoting_the_input_shows_it_inert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An error quotes what it was given (a path, a server's reason): as text, never acted on."""
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr("sys.argv", ["bot", "ingest", "/nope\x1b[2J\x1b]0;pwned\x07"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main()
    said = capsys.readouterr().err
    assert exited.value.code != 0
    assert "nothing to ingest at /nope[2J]0;pwned" in said
    assert_inert(said)
