"""Progress for long ingests: a live bar on a terminal, a line every tenth of the way in logs.

Short runs show nothing but their summary.
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

from core.domain.documents import Outcome
from core.domain.text import clip

_LOG_STEPS = 10
_WHERE_CHARS = 60  # of the places a source finds its documents in, on the spinner's line


class _LiveBar:
    """A transient rich bar, stopped when the `with` block ends however it ends."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._bar = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        self._task: TaskID | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._bar.stop()


class RichIngestProgress(_LiveBar):
    def __init__(self, console: Console, min_items: int) -> None:
        super().__init__(console)
        self._min_items = min_items
        self._total = 0
        self._done = 0
        self._next_log = 0

    def discovering(self, where: str) -> None:
        """On a terminal, a pulsing bar naming where the documents are being found (a crawl
        of hundreds of pages showed nothing for minutes); in logs, nothing."""
        if self._console.is_terminal:
            label = f"Finding documents in {clip(where, _WHERE_CHARS)}"
            self._task = self._bar.add_task(label, total=None)
            self._bar.start()

    def start(self, total: int) -> None:
        self._total = total
        finding, self._task = self._task, None
        if finding is not None:  # the search for documents is over: its spinner goes
            self._bar.remove_task(finding)
        if total < self._min_items:
            if finding is not None:
                self._bar.stop()
            return
        if self._console.is_terminal:
            self._task = self._bar.add_task("Indexing", total=total)
            self._bar.start()  # a no-op when the spinner started it
        else:
            self._next_log = max(1, total // _LOG_STEPS)

    def advance(self, display: str, outcome: Outcome) -> None:  # noqa: ARG002 (protocol)
        self._done += 1
        if self._task is not None:
            self._bar.advance(self._task)
        elif self._next_log and (self._done >= self._next_log or self._done == self._total):
            self._console.print(f"Indexing: {self._done}/{self._total} documents")
            self._next_log += max(1, self._total // _LOG_STEPS)


class RichCountProgress(_LiveBar):
    """A bar for work counted in items whose total is known up front (a reindex)."""

    def __init__(self, console: Console, label: str) -> None:
        super().__init__(console)
        self._label = label

    def update(self, done: int, total: int) -> None:
        if not self._console.is_terminal:
            self._console.print(f"{self._label}: {done}/{total}")
            return
        if self._task is None:
            self._task = self._bar.add_task(self._label, total=total)
            self._bar.start()
        self._bar.update(self._task, completed=done, total=total)
