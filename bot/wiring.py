"""Building the core's parts from settings: the one place that knows which implementation to use."""

from __future__ import annotations

from pathlib import Path

from core.config import Settings
from core.embedder import CachedEmbedder, MiniLMEmbedder
from core.embedding_cache import EmbeddingCache
from core.sqlite_index import SqliteIndex


def build_embedder(settings: Settings) -> CachedEmbedder:
    e = settings.embeddings
    model = MiniLMEmbedder(batch_size=e.batch_size, max_tokens=e.max_tokens, threads=e.threads)
    cache = EmbeddingCache(settings.embedding_cache_path, model.model_id, model.dimensions)
    return CachedEmbedder(model, cache, e.query_cache_size)


def build_index(
    settings: Settings, embedder: CachedEmbedder, path: Path | None = None
) -> SqliteIndex:
    return SqliteIndex(path or settings.index_path, embedder, settings.search)
