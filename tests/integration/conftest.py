"""A knowledge base of the bundled docs, built once per test session for the answer and
platform tests."""

from __future__ import annotations

import pytest

from core.config import Settings
from core.search.embedder import MiniLMEmbedder
from tests.integration.answers.helpers import build_kb


@pytest.fixture(scope="session")
def kb(tmp_path_factory: pytest.TempPathFactory, minilm: MiniLMEmbedder) -> Settings:
    return build_kb(tmp_path_factory.mktemp("kb"), minilm)
