"""How often one person may ask, and how many answers the model writes at once.

Without them a burst (a script hammering `/ask`, someone pasting thirty questions, a busy
`auto` channel) starts one model answer per question at the same moment: the model bill and
the provider's rate limits take the hit, and every answer in flight slows down together.

- **One asker's questions** in a sliding window (`answers.limits.per_asker` in `window_s`):
  beyond it, a question asked is told when it may ask again; one nobody asked is left alone.
  Counted in the backend's store, so every process serving it (Slack's behind a load
  balancer) draws on one count; an asker is a platform's user.
- **Answers written by the model at once** (`model_concurrency`): a question beyond it waits
  its turn first come, first served, for up to `model_wait_s`, and is then answered from the
  passages as with no model. Never silence.

Only the chat adapters' engine is bounded; the terminal, evaluations and benches are not. The
model's slots are each process's own: they bound the answers that process writes at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog

from core.config import LimitSettings
from core.errors import SearchIndexError
from core.ports import AskerWindows

log = structlog.get_logger(__name__)


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
    def __init__(self, settings: LimitSettings, askers: AskerWindows) -> None:
        """`askers`: the backend's count of each asker's questions, shared by its processes."""
        self._settings = settings
        self._askers = askers
        self.model = ModelSlots(settings)

    async def asker_wait(self, asker: str) -> float:
        """0 when `asker` may ask now (and this question counts); otherwise the seconds until
        they may. A store that fails admits the question: the limit guards the bill, and must
        never be why a question goes unanswered."""
        cap = self._settings.per_asker
        if not cap:
            return 0.0
        window_s = self._settings.window_s
        try:
            wait = await self._askers.admit(asker, cap, window_s)
        except SearchIndexError as exc:
            log.warning("asker_count_failed", error=str(exc))
            return 0.0
        # Never longer than the window: a question stamped ahead of this clock (another host's,
        # or this one before it was set back) must not hold anyone back for longer.
        return min(wait, window_s)
