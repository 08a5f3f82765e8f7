"""The embedded backend on one machine: the index file and the state file beside it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from core.backends.sqlite.conversation_store import SqliteConversationStore
from core.backends.sqlite.index import SqliteIndex
from core.backends.sqlite.keyword_store import SqliteKeywordStore
from core.backends.sqlite.model_facts import SqliteModelFacts
from core.backends.sqlite.platform_state import SqlitePlatformState
from core.backends.sqlite.run_locks import SqliteRunLocks
from core.backends.stores import OpenedStores
from core.config import Settings
from core.domain.health import HealthCheck, ReindexReport
from core.errors import SearchIndexError
from core.ports import (
    ConversationStore,
    Embedder,
    KeywordStore,
    ModelFacts,
    PlatformState,
    RunLocks,
)


class SqliteBackend:
    def __init__(self, settings: Settings, embedder: Embedder, path: Path | None = None) -> None:
        """`path` puts the index elsewhere (an evaluation's scratch file); state stays put."""
        self._index_path = path or settings.index_path
        self.index = SqliteIndex(self._index_path, embedder, settings.search)
        self.embedder = embedder
        self._state_path = settings.state_path
        self._busy_ms = settings.search.busy_timeout_ms
        self._stores = OpenedStores()

    @property
    def conversations(self) -> ConversationStore:
        return self._stores.shared(
            "conversations", lambda: SqliteConversationStore(self._state_path, self._busy_ms)
        )

    @property
    def locks(self) -> RunLocks:
        return self._stores.shared("locks", lambda: SqliteRunLocks(self._state_path, self._busy_ms))

    @property
    def keywords(self) -> KeywordStore:
        return self._stores.shared(
            "keywords", lambda: SqliteKeywordStore(self._state_path, self._busy_ms)
        )

    @property
    def facts(self) -> ModelFacts:
        return self._stores.shared(
            "facts", lambda: SqliteModelFacts(self._state_path, self._busy_ms)
        )

    def platform_state(self, dedup_ttl_s: float, store_questions: bool = True) -> PlatformState:
        return self._stores.new(
            lambda: SqlitePlatformState(
                self._state_path, self._busy_ms, dedup_ttl_s, store_questions, self.embedder
            )
        )

    async def health(self) -> list[HealthCheck]:
        return []

    async def reindex(
        self,
        *,
        delete_old: bool,  # noqa: ARG002 (the port's; nothing to reindex here)
        on_progress: Callable[[int, int], None],  # noqa: ARG002
    ) -> ReindexReport:
        raise SearchIndexError(
            "reindex is for the elasticsearch backend; for SQLite, delete "
            f"{self._index_path} and run `bot ingest` again (the embedding cache makes it quick)"
        )

    async def drop(self) -> None:
        """Nothing to do: a scratch SQLite index lives in a folder its caller removes."""

    async def close(self) -> None:
        await self._stores.close()
        await self.index.close()
