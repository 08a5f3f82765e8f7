"""The worker threads inside the index's connections, so that closing never pulls one away
from a thread still using it.

An answer cancelled at shutdown stops awaiting its search, but the search goes on in its
worker thread; sqlite3 closing a connection another thread is executing on can crash the whole
process (a segfault, seen in CI), not raise. So `close` first refuses new work, interrupts the
statements under way (`sqlite3_interrupt` is made to be called from another thread), waits for
every thread to leave, and only then closes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from core.errors import SearchIndexError

T = TypeVar("T")


class InFlight:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running = 0
        self._closing = False

    def run(self, work: Callable[[], T]) -> T:
        """`work`, counted while it runs (in the calling thread); refused once closing."""
        with self._changed:
            if self._closing:
                raise SearchIndexError("the index was closed while a search was still asking it")
            self._running += 1
        try:
            return work()
        finally:
            with self._changed:
                self._running -= 1
                self._changed.notify_all()

    def close(self) -> None:
        """No new work from now on."""
        with self._changed:
            self._closing = True

    def wait_idle(self, timeout_s: float) -> bool:
        """Whether no thread is inside `run` any more, waiting up to `timeout_s`. Each is
        bounded: its statement was interrupted, or it waits at most the busy timeout, or it is
        numpy work of milliseconds."""
        with self._changed:
            return self._changed.wait_for(lambda: self._running == 0, timeout_s)
