"""Everything a command runs on, opened in one order and closed once in the reverse order: the
embedder, the backend (index, stores, client), and on demand the answer engine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bot.wiring import build_embedder, build_engine, open_backend
from core.config import Settings
from core.ports import Backend
from core.search.embedder import CachedEmbedder

if TYPE_CHECKING:
    from core.answer.engine import AnswerEngine


@dataclass
class Runtime:
    settings: Settings
    embedder: CachedEmbedder
    backend: Backend
    _engine: AnswerEngine | None = field(default=None, init=False)

    def engine(self, *, chat: bool = False) -> AnswerEngine:
        """The answer engine, built on first use (commands that only search never build it);
        `chat`: it answers a chat platform's people, so `answers.limits` bound a burst."""
        if self._engine is None:
            self._engine = build_engine(self.settings, self.backend, chat=chat)
        return self._engine

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.close()
        await self.backend.close()


@asynccontextmanager
async def opened(
    settings: Settings,
    path: Path | None = None,
    *,
    check_compatible: bool = True,
    embedder: CachedEmbedder | None = None,
) -> AsyncIterator[Runtime]:
    """The runtime of one command, closed on the way out whatever happens. `path` puts a
    SQLite index there (an evaluation's scratch index); `embedder` shares one already built."""
    embedder = embedder or build_embedder(settings)
    backend = await open_backend(settings, embedder, path, check_compatible=check_compatible)
    runtime = Runtime(settings, embedder, backend)
    try:
        yield runtime
    finally:
        await runtime.close()
