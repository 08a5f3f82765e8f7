"""Building the core's parts from settings: the one place that knows which implementation to use."""

from __future__ import annotations

from pathlib import Path

import anthropic
import httpx

from core.claude_agent import ClaudeAgent
from core.config import Settings
from core.conversation_store import SqliteConversationStore
from core.embedder import CachedEmbedder, MiniLMEmbedder
from core.embedding_cache import EmbeddingCache
from core.engine import AnswerEngine
from core.openai_agent import OpenAICompatibleAgent
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


def build_claude(settings: Settings) -> ClaudeAgent | None:
    key = settings.secrets.anthropic_api_key
    wanted = settings.answers.provider
    if wanted not in ("auto", "anthropic") or key is None:
        return None
    a = settings.anthropic
    client = anthropic.AsyncAnthropic(
        api_key=key.get_secret_value(),
        base_url=a.base_url,
        timeout=a.timeout_s,
        max_retries=a.max_retries,
    )
    return ClaudeAgent(
        client,
        model=a.model,
        max_tokens=settings.answers.max_tokens,
        max_rounds=settings.answers.max_rounds,
        tool_timeout_s=settings.answers.tool_timeout_s,
    )


def build_openai(settings: Settings) -> OpenAICompatibleAgent | None:
    o = settings.openai
    if settings.answers.provider not in ("auto", "openai") or not o.base_url or not o.model:
        return None
    key = settings.secrets.openai_api_key
    return OpenAICompatibleAgent(
        httpx.AsyncClient(timeout=o.timeout_s),
        base_url=o.base_url,
        model=o.model,
        api_key=key.get_secret_value() if key else None,
        max_tokens=settings.answers.max_tokens,
        max_rounds=settings.answers.max_rounds,
        tool_timeout_s=settings.answers.tool_timeout_s,
        max_retries=o.max_retries,
        retry_initial_s=o.retry_initial_s,
        retry_max_s=o.retry_max_s,
    )


def build_engine(settings: Settings, index: SqliteIndex) -> AnswerEngine:
    claude = build_claude(settings)
    return AnswerEngine(
        index=index,
        store=SqliteConversationStore(settings.state_path, settings.search.busy_timeout_ms),
        settings=settings.answers,
        top_k=settings.search.top_k,
        claude=claude,
        openai=None if claude else build_openai(settings),
    )
