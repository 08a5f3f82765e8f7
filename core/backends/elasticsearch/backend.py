"""The production backend: the chunks index and the state indices on one cluster, through one
client that the index owns and closes last. Maintenance (health, reindex, drop) is asked of the
backend, so nothing outside this package touches the client."""

from __future__ import annotations

from collections.abc import Callable

from core.backends.elasticsearch.asker_windows import ElasticsearchAskerWindows
from core.backends.elasticsearch.connection import (
    build_client,
    checking,
    connect,
    licence,
    where,
)
from core.backends.elasticsearch.index import ElasticsearchIndex
from core.backends.elasticsearch.keyword_store import ElasticsearchKeywordStore
from core.backends.elasticsearch.reindex import reindex
from core.backends.elasticsearch.state import (
    ElasticsearchConversationStore,
    ElasticsearchModelFacts,
    ElasticsearchPlatformState,
    ElasticsearchRunLocks,
    ensure_state_indices,
)
from core.backends.elasticsearch.versions import drop_indices, several_behind_alias
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


class ElasticsearchBackend:
    def __init__(self, index: ElasticsearchIndex, max_question_chars: int | None = None) -> None:
        """`max_question_chars`: the longest question the answer log keeps (`open` passes
        `answers.max_question_chars`; None keeps a question whole)."""
        self.index = index
        self.embedder: Embedder = index.embedder
        self._settings = index.settings
        self._max_question_chars = max_question_chars
        self._stores = OpenedStores()

    @classmethod
    async def open(
        cls, settings: Settings, embedder: Embedder, *, check_compatible: bool = True
    ) -> ElasticsearchBackend:
        """Checked and ready: a bad cluster address, wrong credentials or a version mismatch
        fail here, at start, with a clear message (and the client is closed)."""
        es = settings.elasticsearch
        index = ElasticsearchIndex(
            build_client(es, settings.secrets), embedder, settings.search, es
        )
        try:
            await index.open(check_compatible=check_compatible)
            with checking("state indices"):
                await ensure_state_indices(index.client, index.names, es)
        except BaseException:
            await index.close()
            raise
        return cls(index, settings.answers.max_question_chars)

    @property
    def conversations(self) -> ConversationStore:
        return self._stores.shared(
            "conversations",
            lambda: ElasticsearchConversationStore(self.index.client, self._settings),
        )

    @property
    def facts(self) -> ModelFacts:
        return self._stores.shared(
            "facts", lambda: ElasticsearchModelFacts(self.index.client, self._settings)
        )

    @property
    def locks(self) -> RunLocks:
        return self._stores.shared(
            "locks", lambda: ElasticsearchRunLocks(self.index.client, self._settings)
        )

    @property
    def keywords(self) -> KeywordStore:
        return self._stores.shared(
            "keywords", lambda: ElasticsearchKeywordStore(self.index.client, self._settings)
        )

    @property
    def askers(self) -> AskerWindows:
        return self._stores.shared(
            "askers", lambda: ElasticsearchAskerWindows(self.index.client, self._settings)
        )

    def platform_state(self, dedup_ttl_s: float, store_questions: bool = True) -> PlatformState:
        return self._stores.new(
            lambda: ElasticsearchPlatformState(
                self.index.client,
                self._settings,
                dedup_ttl_s,
                store_questions,
                self.embedder,
                self._max_question_chars,
            )
        )

    async def health(self) -> list[HealthCheck]:
        client, index = self.index.client, self.index
        info = await connect(client, self._settings)
        checks = [
            HealthCheck("connection", True, f"{where(self._settings)}, cluster {info.name}"),
            HealthCheck("version", True, f"Elasticsearch {info.version} (client major matches)"),
        ]
        health = (await client.cluster.health()).body
        status = str(health.get("status"))
        nodes = health.get("number_of_nodes")
        checks.append(
            HealthCheck("health", status in ("green", "yellow"), f"{status}, {nodes} node(s)")
        )
        kind, licence_status = await licence(client)
        fusion = self._settings.fusion
        checks.append(HealthCheck("licence", True, f"{kind} ({licence_status}); fusion: {fusion}"))
        indices = await index.alias_indices()
        if len(indices) > 1:
            entries = await index.entries(indices)
            checks.append(HealthCheck("index", False, several_behind_alias(index.names, entries)))
            return checks
        try:
            await index.check_compatible()
            checks.append(HealthCheck("index", True, f"{index.names.chunks} -> {indices[-1]}"))
        except SearchIndexError as exc:
            checks.append(HealthCheck("index", False, str(exc)))
        return checks

    async def reindex(
        self, *, delete_old: bool, on_progress: Callable[[int, int], None]
    ) -> ReindexReport:
        return await reindex(self.index, delete_old=delete_old, on_progress=on_progress)

    async def drop(self) -> None:
        await drop_indices(self.index.client, self.index.names)

    async def close(self) -> None:
        await self._stores.close()
        await self.index.close()
