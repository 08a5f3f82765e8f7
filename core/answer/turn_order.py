"""One answer at a time per conversation, in the order its questions came.

Two follow-ups sent seconds apart in one thread were answered side by side: each without the
other's turn in its history, stored in the order they finished, and on Slack posted in that
order too, so an answer could sit above the answer to the question before it. An `asyncio.Lock`
wakes its waiters first come, first served, so holding one per conversation while it is
answered keeps the thread's order; an adapter that reads a thread's history back from its
platform holds it from before that reading (`AnswerEngine.in_turn`). In-process only: a
deployment that spreads one platform's events over several processes keeps each process's
order, not the thread's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class ConversationLocks:
    """A lock per conversation key while anyone holds or waits for it; none kept after, so
    a long-running bot holds as many locks as it has conversations in flight. The task that
    holds a key's lock may take it again (an adapter holds it while it reads the thread's
    history back, then asks the engine, which takes it too)."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._holders: dict[str, asyncio.Task[object] | None] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @asynccontextmanager
    async def held(self, key: str) -> AsyncIterator[None]:
        task = asyncio.current_task()
        if key in self._holders and self._holders[key] is task:
            yield
            return
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                self._holders[key] = task
                try:
                    yield
                finally:
                    del self._holders[key]
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)
