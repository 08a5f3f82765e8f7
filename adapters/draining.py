"""The answers a chat process is writing, and how they end when it stops (SIGTERM: a deploy,
a restart), the same for Slack and Discord.

Each answer runs in a task of its own, known here while it runs. On stop, the tasks still
running get `shutdown_grace_s` to finish; whatever is running then is cancelled, and each task
cut short apologises where its asker waits (its own `CancelledError` handling) within
`apology_deadline_s`. Together those stay under the platform's stop timeout, or the process is
killed first and the askers are left waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import structlog

log = structlog.get_logger(__name__)


class InFlight:
    """The tasks answering someone now."""

    def __init__(self, platform: str) -> None:
        self._platform = platform
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    @contextlib.contextmanager
    def tracking(self) -> Iterator[None]:
        """The current task known to `drain` while the block runs."""
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            yield
        finally:
            self._tasks.discard(task)

    async def drain(self, grace_s: float, apology_deadline_s: float) -> None:
        """Wait up to `grace_s` for the answers to finish, then cancel the rest and give them
        `apology_deadline_s` to apologise. A task that joins during the grace (an event the
        platform's client dispatched just before the stop) is waited for too: the set is read
        again until it is empty or the grace is over."""
        if not self._tasks:
            return
        log.info("draining", platform=self._platform, answers=len(self._tasks), grace_s=grace_s)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace_s
        while self._tasks and (left := deadline - loop.time()) > 0:
            await asyncio.wait(set(self._tasks), timeout=left)
        late = set(self._tasks)
        if not late:
            return
        log.warning("answers_cut_short", platform=self._platform, answers=len(late))
        for task in late:
            task.cancel()
        await asyncio.wait(late, timeout=apology_deadline_s)
