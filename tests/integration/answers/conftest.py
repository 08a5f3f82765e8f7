"""One knowledge base of the bundled docs for every answer test; each test gets its own
conversation store."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from core.backends.sqlite.index import SqliteIndex
from core.config import Settings
from core.search.embedder import MiniLMEmbedder
from tests.fakes.chat_server import ChatServer
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


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    """A scripted chat-completions server on loopback (the OpenAI-compatible path's remote)."""
    server = ChatServer()
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.server.shutdown()
    if server.errors:
        raise server.errors[0]
