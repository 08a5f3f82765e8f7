"""One knowledge base of the bundled docs for every answer test; each test gets its own
conversation store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core.config import Settings
from core.embedder import MiniLMEmbedder
from core.sqlite_index import SqliteIndex
from tests.integration.answers.helpers import cached


@pytest.fixture
async def index(kb: Settings, minilm: MiniLMEmbedder) -> AsyncIterator[SqliteIndex]:
    idx = SqliteIndex(kb.index_path, cached(kb, minilm), kb.search)
    yield idx
    await idx.close()


@pytest.fixture
def settings(kb: Settings, tmp_path: Path) -> Settings:
    storage = kb.storage.model_copy(update={"data_dir": tmp_path})
    search = kb.search.model_copy(update={"sqlite_path": kb.index_path})
    return kb.model_copy(update={"storage": storage, "search": search})
