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
