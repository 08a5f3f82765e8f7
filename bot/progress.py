"""A rich progress bar for long ingests; short runs print only their summary."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from core.ingest import Outcome


class RichIngestProgress:
    def __init__(self, console: Console, min_items: int) -> None:
        self._min_items = min_items
        self._bar = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        self._task: int | None = None

    def __enter__(self) -> RichIngestProgress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._bar.stop()

    def start(self, total: int) -> None:
        if total >= self._min_items:
            self._task = self._bar.add_task("Indexing", total=total)
            self._bar.start()

    def advance(self, display: str, outcome: Outcome) -> None:  # noqa: ARG002 (protocol)
        if self._task is not None:
            self._bar.advance(self._task)
