"""CPU-bound work on untrusted input (a parse, a page's links) that may not finish in time.

`asyncio.to_thread` runs it in the default executor, whose threads can't be stopped, and which
the process waits for on the way out: `asyncio.run` joins the executor before it returns, and
the interpreter joins its threads before it exits. One parse that runs for hours then holds a
finished run, and Ctrl-C, for hours. Here each piece of work runs in a daemon thread of its
own: past its deadline, or when the run is cancelled, it is abandoned (it still finishes in
the background, using the CPU, but nothing waits for it, and the process ends when its work
does)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_SLOT_POLL_S = 0.05  # how often work waiting for a free thread looks again


class NoFreeThread(TimeoutError):
    """Every thread of the limit was busy (with work past its deadline) for the whole of this
    work's time: it was never started."""


@functools.cache
def _threads(limit: int) -> threading.BoundedSemaphore:
    """One count per limit and process: the threads running, abandoned ones included."""
    return threading.BoundedSemaphore(limit)


async def run_abandonable(work: Callable[[], T], timeout_s: float, threads: int) -> T:
    """`work()` in a daemon thread, with the caller's context variables (the log lines' bound
    fields); raises TimeoutError after `timeout_s`, and whatever `work` raised.

    At most `threads` of them run at once, those abandoned included: each holds its place
    until it really ends, so abandoned work can't pile up and slow every later parse. Work
    that finds no free place within its own deadline raises `NoFreeThread`, unstarted."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    places = _threads(threads)
    while not places.acquire(blocking=False):
        if loop.time() >= deadline:
            raise NoFreeThread(f"{threads} thread(s) busy with work past its deadline")
        await asyncio.sleep(_SLOT_POLL_S)
    done: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome = functools.partial(_settle, done, context.run(work), None)
        except BaseException as exc:  # noqa: BLE001 (handed to the awaiting task, whatever it is)
            outcome = functools.partial(_settle, done, None, exc)
        finally:
            places.release()
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody to tell
            loop.call_soon_threadsafe(outcome)

    try:
        threading.Thread(target=run, name="docbot-untrusted-work", daemon=True).start()
    except BaseException:
        places.release()
        raise
    async with asyncio.timeout_at(deadline):
        return await done


def _settle(done: asyncio.Future[T], result: T | None, error: BaseException | None) -> None:
    if done.done():  # abandoned: its waiter timed out or was cancelled
        return
    if error is not None:
        done.set_exception(error)
    else:
        done.set_result(result)  # type: ignore[arg-type]  # None only alongside an error
