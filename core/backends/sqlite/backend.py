"""The embedded backend on one machine: the index file and the state file beside it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from core.backends.sqlite.asker_windows import SqliteAskerWindows
from core.backends.sqlite.conversation_store import SqliteConversationStore
from core.backends.sqlite.index import IF_DAMAGED as INDEX_IF_DAMAGED
from core.backends.sqlite.index import SqliteIndex
from core.backends.sqlite.keyword_store import SqliteKeywordStore
from core.backends.sqlite.model_facts import SqliteModelFacts
from core.backends.sqlite.platform_state import SqlitePlatformState
from core.backends.sqlite.run_locks import SqliteRunLocks
from core.backends.sqlite.state_file import IF_DAMAGED as STATE_IF_DAMAGED
from core.backends.sqlite.state_file import state_integrity
from core.backends.stores import OpenedStores
from core.config import Settings
from core.domain.health import HealthCheck, ReindexReport
from core.errors import SearchIndexError
from core.ports import (
    AskerWindows,
    ConversationStore,
    Embedder,
    KeywordStore,
    ModelFacts,
    PlatformState,
    RunLocks,
)
from core.sqlite import Integrity, UnusableFile


class SqliteBackend:
    def __init__(self, settings: Settings, embedder: Embedder, path: Path | None = None) -> None:
        """`path` puts the index elsewhere (an evaluation's scratch file); state stays put."""
        self._index_path = path or settings.index_path
        self.index = SqliteIndex(self._index_path, embedder, settings.search)
        self.embedder = embedder
        self._state_path = settings.state_path
        self._busy_ms = settings.search.busy_timeout_ms
        self._check_s = settings.search.integrity_check_s
        self._max_question_chars = settings.answers.max_question_chars
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

    @property
    def askers(self) -> AskerWindows:
        return self._stores.shared(
            "askers", lambda: SqliteAskerWindows(self._state_path, self._busy_ms)
        )

    def platform_state(self, dedup_ttl_s: float, store_questions: bool = True) -> PlatformState:
        return self._stores.new(
            lambda: SqlitePlatformState(
                self._state_path,
                self._busy_ms,
                dedup_ttl_s,
                store_questions,
                self.embedder,
                self._max_question_chars,
            )
        )

    async def health(self) -> list[HealthCheck]:
        """Whether the state file and the index are whole (`bot doctor`), each checked for at
        most `search.integrity_check_s`: SQLite has no cheaper way to tell, and a large index,
        not in the page cache, takes longer to read than a doctor should wait (a team's docs,
        tens of MB, are checked whole in a fraction of a second; 1 GB from disk takes 5 s)."""
        state = await asyncio.to_thread(
            _file_health,
            "state file",
            self._state_path,
            STATE_IF_DAMAGED,
            lambda: state_integrity(self._state_path, self._check_s),
        )
        index = await asyncio.to_thread(
            _file_health,
            "index file",
            self._index_path,
            INDEX_IF_DAMAGED,
            lambda: self.index.integrity(self._check_s),
        )
        return [index, state]

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


def _file_health(
    name: str, path: Path, if_damaged: str, check: Callable[[], tuple[Integrity, str]]
) -> HealthCheck:
    if not path.exists():
        return HealthCheck(name, True, f"{path}: none yet, made when first needed")
    try:
        found, detail = check()
    except UnusableFile as exc:
        return HealthCheck(name, False, str(exc))
    if found is Integrity.DAMAGED:
        return HealthCheck(name, False, f"{path} is damaged ({detail}): {if_damaged}")
    if found is Integrity.UNFINISHED:
        mb = path.stat().st_size / 1e6
        return HealthCheck(
            name,
            True,
            f"{path}: {detail} ({mb:.0f} MB); a full check: sqlite3 {path} 'PRAGMA quick_check'",
        )
    return HealthCheck(name, True, f"{path}: {detail}")
