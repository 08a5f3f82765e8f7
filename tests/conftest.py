"""Shared fixtures: real settings in a temp dir, the real embedding model (loaded once)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.wiring import open_backend
from core.backends.elasticsearch.index import ElasticsearchIndex
from core.backends.sqlite.index import SqliteIndex
from core.config import Settings
from core.config_loader import load_settings
from core.ingest.pipeline import Ingestor
from core.ports import Backend
from core.search.embedder import CachedEmbedder, MiniLMEmbedder
from core.search.embedding_cache import EmbeddingCache
from tests.fakes.elasticsearch_emulator import NoidaServer

# The two index implementations the backend-parametrised tests run against.
Index = SqliteIndex | ElasticsearchIndex

REPO = Path(__file__).resolve().parent.parent
SHARED_EVAL = REPO.parent / "shared" / "eval"


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder(batch_size=32, max_tokens=256, threads=0)


@pytest.fixture(scope="session")
def eval_embedding_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for every test that indexes a shared evaluation set: its passages
    are embedded once per test run."""
    return tmp_path_factory.mktemp("eval-embeddings") / "embedding-cache.sqlite"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(settings_file(), environ={"BOT_STORAGE__DATA_DIR": str(tmp_path / "data")})


@pytest.fixture
def embedder(minilm: MiniLMEmbedder, settings: Settings) -> CachedEmbedder:
    cache = EmbeddingCache(settings.embedding_cache_path, minilm.model_id, minilm.dimensions)
    return CachedEmbedder(minilm, cache, settings.embeddings.query_cache_size)


# Every test of the index interface runs on each backend: the embedded default, Elasticsearch
# as emulated by noida-db, and a real cluster when ELASTICSEARCH_URL names one.
BACKENDS = ["sqlite", "elasticsearch", "elasticsearch-real"]
NO_REAL_CLUSTER = "ELASTICSEARCH_URL is not set: no real Elasticsearch cluster to test against"


@pytest.fixture(scope="session")
def es_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NoidaServer]:
    server = NoidaServer(tmp_path_factory.mktemp("noida")).start()
    yield server
    server.stop()


def elasticsearch_settings(settings: Settings, url: str | None) -> Settings:
    """`settings` on Elasticsearch under a prefix of its own, so tests never share indices.

    With `url` None, the real cluster from the environment (ELASTICSEARCH_URL and its
    credentials) is used."""
    if url is None:
        env = {**os.environ, "BOT_STORAGE__DATA_DIR": str(settings.storage.data_dir)}
        settings = load_settings(settings_file(), environ=env)
        url = settings.elasticsearch.url
    es = settings.elasticsearch.model_copy(
        update={
            "url": url,
            "index_prefix": f"test-{uuid.uuid4().hex[:12]}",
            "number_of_replicas": 0,
        }
    )
    search = settings.search.model_copy(update={"backend": "elasticsearch"})
    return settings.model_copy(update={"elasticsearch": es, "search": search})


def settings_file() -> Path:
    return REPO / "config.yaml"


@pytest.fixture(params=BACKENDS)
def backend_settings(request: pytest.FixtureRequest, settings: Settings) -> Settings:
    if request.param == "sqlite":
        return settings
    if request.param == "elasticsearch-real":
        if not os.environ.get("ELASTICSEARCH_URL"):
            pytest.skip(NO_REAL_CLUSTER)
        return elasticsearch_settings(settings, None)
    emulator: NoidaServer = request.getfixturevalue("es_emulator")
    return elasticsearch_settings(settings, emulator.url)


@pytest.fixture
async def backend(backend_settings: Settings, embedder: CachedEmbedder) -> AsyncIterator[Backend]:
    opened = await open_backend(backend_settings, embedder)
    try:
        yield opened
        await opened.drop()
    finally:
        await opened.close()


@pytest.fixture
def index(backend: Backend) -> Index:
    return backend.index  # type: ignore[return-value]  # one of the two, by `backend_settings`


@pytest.fixture
def ingestor(index: Index, embedder: CachedEmbedder, settings: Settings) -> Ingestor:
    return Ingestor(index, embedder, settings.ingest)


@pytest.fixture(autouse=True)
def _scripted_fakes_hold_no_hidden_failures() -> Iterator[None]:
    from tests.fakes.anthropic_api import FakeMessagesAPI

    FakeMessagesAPI.instances.clear()
    yield
    for api in FakeMessagesAPI.instances:
        api.check()
