"""Work on untrusted input that may not finish: its result or error when it does, a
TimeoutError when it does not, and nothing left for the process to wait for."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest

from core.ingest.daemon_work import run_abandonable

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")
STUCK_S = 60  # far longer than any test waits


async def test_the_result_and_the_callers_context_come_back() -> None:
    WHO.set("docs/a.md")
    assert await run_abandonable(lambda: f"parsed {WHO.get()}", timeout_s=5) == "parsed docs/a.md"


async def test_an_error_of_the_work_is_raised_to_the_caller() -> None:
    def broken() -> None:
        raise ValueError("damaged")

    with pytest.raises(ValueError, match="damaged"):
        await run_abandonable(broken, timeout_s=5)


async def test_work_past_its_deadline_is_abandoned_in_a_daemon_thread() -> None:
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await run_abandonable(lambda: release.wait(STUCK_S), timeout_s=0.2)
    assert time.monotonic() - started < STUCK_S / 2
    stuck = [t for t in threading.enumerate() if t.name == "docbot-untrusted-work"]
    assert stuck
    assert all(t.daemon for t in stuck)  # the interpreter's exit does not wait for them
    release.set()
