"""How often one person may ask, and how many answers the model writes at once (per process).

Without them a burst (a script hammering `/ask`, someone pasting thirty questions, a busy
`auto` channel) starts one model answer per question at the same moment: the model bill and
the provider's rate limits take the hit, and every answer in flight slows down together.

- **One asker's questions** in a sliding window (`answers.limits.per_asker` in `window_s`):
  beyond it, a question asked is told when it may ask again; one nobody asked is left alone.
- **Answers written by the model at once** (`model_concurrency`): a question beyond it waits
  its turn first come, first served, for up to `model_wait_s`, and is then answered from the
  passages as with no model. Never silence.

Only the chat adapters' engine is bounded; the terminal, evaluations and benches are not. In
one process only: several processes serving one platform each keep their own counts.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from core.config import LimitSettings


class AskerWindow:
    """Each asker's questions in the last `window_s`, for the least recently seen
    `tracked_askers` askers at most: a flood of new ids cannot grow it without bound (one
    forgotten starts afresh, which only matters to an id that floods by itself)."""

    def __init__(self, settings: LimitSettings, clock: Callable[[], float] = time.monotonic):
        self._settings = settings
        self._clock = clock
        self._asked: OrderedDict[str, deque[float]] = OrderedDict()

    def admit(self, asker: str) -> float:
        """0 when `asker` may ask now (and this question counts); otherwise the seconds until
        they may (a refused question does not count, so asking again sooner adds no wait)."""
        cap = self._settings.per_asker
        if not cap:
            return 0.0
        now = self._clock()
        asked = self._asked.pop(asker, None) or deque()
        while asked and asked[0] <= now - self._settings.window_s:
            asked.popleft()
        self._asked[asker] = asked
        while len(self._asked) > self._settings.tracked_askers:
            self._asked.popitem(last=False)
        if len(asked) >= cap:
            return asked[0] + self._settings.window_s - now
        asked.append(now)
        return 0.0


class ModelSlots:
    """At most `model_concurrency` answers with the model at once; the others wait in order."""

    def __init__(self, settings: LimitSettings) -> None:
        self._slots = asyncio.Semaphore(settings.model_concurrency)
        self._wait_s = settings.model_wait_s

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[bool]:
        """True with a slot held; False when none came free within `model_wait_s`."""
        try:
            async with asyncio.timeout(self._wait_s):
                await self._slots.acquire()
        except TimeoutError:
            yield False
            return
        try:
            yield True
        finally:
            self._slots.release()


class BurstLimits:
    def __init__(self, settings: LimitSettings, clock: Callable[[], float] = time.monotonic):
        self.askers = AskerWindow(settings, clock)
        self.model = ModelSlots(settings)
