from __future__ import annotations

import io

from rich.console import Console

from bot.progress import RichIngestProgress
from core.domain.documents import Outcome


def test_logs_progress_lines_when_not_a_terminal() -> None:
    buffer = io.StringIO()
    progress = RichIngestProgress(Console(file=buffer, force_terminal=False), min_items=5)
    with progress:
        progress.start(50)
        for i in range(50):
            progress.advance(f"doc{i}", Outcome.ADDED)
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "Indexing: 5/50 documents"
    assert lines[-1] == "Indexing: 50/50 documents"
    assert len(lines) == 10


def test_short_runs_print_nothing() -> None:
    buffer = io.StringIO()
    progress = RichIngestProgress(Console(file=buffer, force_terminal=False), min_items=20)
    with progress:
        progress.start(3)
        for i in range(3):
            progress.advance(f"doc{i}", Outcome.ADDED)
    assert buffer.getvalue() == ""


def test_finding_the_documents_shows_a_spinner_on_a_terminal_then_the_bar() -> None:
    """A crawl of hundreds of pages (a clone, a space's listing) ran for minutes before the
    bar appeared, with nothing on the screen to say the command was working."""
    buffer = io.StringIO()
    terminal = Console(file=buffer, force_terminal=True, width=120)
    with RichIngestProgress(terminal, min_items=5) as progress:
        progress.discovering("https://docs.example.com/handbook/")
        progress.start(6)
        for i in range(6):
            progress.advance(f"doc{i}", Outcome.ADDED)
    shown = buffer.getvalue()
    assert "Finding documents in https://docs.example.com/handbook/" in shown
    assert "Indexing" in shown


def test_the_spinner_goes_when_too_few_documents_were_found_for_a_bar() -> None:
    buffer = io.StringIO()
    terminal = Console(file=buffer, force_terminal=True, width=120)
    progress = RichIngestProgress(terminal, min_items=20)
    with progress:
        progress.discovering("docs")
        progress.start(3)
        assert not progress._bar.live.is_started
    assert "Indexing" not in buffer.getvalue()


def test_in_logs_finding_the_documents_prints_nothing() -> None:
    buffer = io.StringIO()
    with RichIngestProgress(Console(file=buffer, force_terminal=False), min_items=5) as progress:
        progress.discovering("docs")
        progress.start(3)
    assert buffer.getvalue() == ""
