"""Work on untrusted input that may not finish: its result or error when it does, a
TimeoutError when it does not, and nothing left for the process to wait for."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest

from core.ingest.daemon_work import NoFreeThread, run_abandonable

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")
STUCK_S = 60  # far longer than any test waits


async def test_the_result_and_the_callers_context_come_back() -> None:
    WHO.set("docs/a.md")
    assert (
        await run_abandonable(lambda: f"parsed {WHO.get()}", timeout_s=5, threads=2)
        == "parsed docs/a.md"
    )


async def test_an_error_of_the_work_is_raised_to_the_caller() -> None:
    def broken() -> None:
        raise ValueError("damaged")

    with pytest.raises(ValueError, match="damaged"):
        await run_abandonable(broken, timeout_s=5, threads=2)


async def test_work_past_its_deadline_is_abandoned_in_a_daemon_thread() -> None:
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        await run_abandonable(lambda: release.wait(STUCK_S), timeout_s=0.2, threads=2)
    assert time.monotonic() - started < STUCK_S / 2
    stuck = [t for t in threading.enumerate() if t.name == "docbot-untrusted-work"]
    assert stuck
    assert all(t.daemon for t in stuck)  # the interpreter's exit does not wait for them
    release.set()


async def test_abandoned_work_holds_its_thread_so_it_cannot_pile_up() -> None:
    """Each abandoned piece of work keeps using the CPU until it ends: at most `threads` run
    at once, and work that finds none free within its deadline is never started."""
    release = threading.Event()
    started: list[str] = []
    threads = 3  # a limit of its own: no other test shares its count
    for _ in range(threads):
        with pytest.raises(TimeoutError):
            await run_abandonable(lambda: release.wait(STUCK_S), timeout_s=0.1, threads=threads)
    with pytest.raises(NoFreeThread):
        await run_abandonable(lambda: started.append("late"), timeout_s=0.3, threads=threads)
    assert started == []  # never started
    release.set()  # the abandoned ones end, and give their threads back
    assert await run_abandonable(lambda: "parsed", timeout_s=5, threads=threads) == "parsed"
