"""Shared fixtures: real settings in a temp dir, the real embedding model (loaded once)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from core.config import Settings, load_settings
from core.embedder import CachedEmbedder, MiniLMEmbedder
from core.embedding_cache import EmbeddingCache
from core.ingest import Ingestor
from core.sqlite_index import SqliteIndex

REPO = Path(__file__).resolve().parent.parent
SHARED_EVAL = REPO.parent / "shared" / "eval"


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder(batch_size=32, max_tokens=256, threads=0)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(
        REPO / "config.yaml", environ={"BOT_STORAGE__DATA_DIR": str(tmp_path / "data")}
    )


@pytest.fixture
def embedder(minilm: MiniLMEmbedder, settings: Settings) -> CachedEmbedder:
    cache = EmbeddingCache(settings.embedding_cache_path, minilm.model_id, minilm.dimensions)
    return CachedEmbedder(minilm, cache, settings.embeddings.query_cache_size)


@pytest.fixture
async def index(settings: Settings, embedder: CachedEmbedder) -> AsyncIterator[SqliteIndex]:
    idx = SqliteIndex(settings.index_path, embedder, settings.search)
    yield idx
    await idx.close()


@pytest.fixture
def ingestor(index: SqliteIndex, embedder: CachedEmbedder, settings: Settings) -> Ingestor:
    return Ingestor(index, embedder, settings.ingest)


@pytest.fixture(autouse=True)
def _scripted_fakes_hold_no_hidden_failures() -> Iterator[None]:
    from tests.fakes.anthropic_api import FakeMessagesAPI

    FakeMessagesAPI.instances.clear()
    yield
    for api in FakeMessagesAPI.instances:
        api.check()
