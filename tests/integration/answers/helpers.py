"""A knowledge base of the bundled docs (built once per module) and an engine factory."""

from __future__ import annotations

import asyncio
import html
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.answer.claude import ClaudeModel
from core.answer.engine import AnswerEngine
from core.answer.limits import BurstLimits
from core.answer.openai_compat import OpenAICompatibleModel
from core.answer.search_then_answer import SearchThenAnswer
from core.backends.sqlite.asker_windows import SqliteAskerWindows
from core.backends.sqlite.conversation_store import SqliteConversationStore
from core.backends.sqlite.index import SqliteIndex
from core.config import OpenAICompatibleSettings, RepetitionSettings, Settings
from core.config_loader import load_settings
from core.domain.conversation import ChannelKind, Question
from core.ingest.pipeline import Ingestor
from core.ports import ChatModel, ModelFacts, SearchIndex
from core.search.embedder import CachedEmbedder, MiniLMEmbedder
from core.search.embedding_cache import EmbeddingCache
from tests.conftest import REPO

_SOURCE = re.compile(r'<source id="(\d+)"[^>]*>\n(.*?)\n</source>', re.DOTALL)


def build_kb(data_dir: Path, minilm: MiniLMEmbedder) -> Settings:
    settings = load_settings(REPO / "config.yaml", environ={"BOT_STORAGE__DATA_DIR": str(data_dir)})

    async def ingest() -> None:
        embedder = cached(settings, minilm)
        index = SqliteIndex(settings.index_path, embedder, settings.search)
        await Ingestor(index, embedder, settings.ingest).ingest([str(REPO / "docs")], source="kb")
        await index.close()

    asyncio.run(ingest())
    return settings


def cached(settings: Settings, minilm: MiniLMEmbedder) -> CachedEmbedder:
    cache = EmbeddingCache(settings.embedding_cache_path, minilm.model_id, minilm.dimensions)
    return CachedEmbedder(minilm, cache, settings.embeddings.query_cache_size)


def engine(
    settings: Settings,
    index: SearchIndex,
    *,
    model: ChatModel | None = None,
    **answer_settings: Any,
) -> AnswerEngine:
    """An engine as the wiring builds one: `model` with search-then-answer as its fallback."""
    answers = settings.answers.model_copy(update=answer_settings)
    return AnswerEngine(
        index=index,
        store=SqliteConversationStore(settings.state_path, 5_000),
        settings=answers,
        top_k=settings.search.top_k,
        model=model,
        fallback=SearchThenAnswer(model, answers) if model else None,
        ground_tool_answers=(
            settings.anthropic if isinstance(model, ClaudeModel) else settings.openai
        ).ground_answers,
    )


def local_model(
    http: Any,
    url: str,
    *,
    api_key: str | None = None,
    facts: ModelFacts | None = None,
    **settings: Any,
) -> OpenAICompatibleModel:
    """An OpenAI-compatible model on a local stand-in: no retries unless asked, short waits."""
    fields: dict[str, Any] = {
        "base_url": url,
        "model": "llama-test",
        "max_tokens": 512,
        "max_retries": 0,
        "retry_initial_s": 0.01,
        "retry_max_s": 0.01,
        **settings,
    }
    return OpenAICompatibleModel(
        http, OpenAICompatibleSettings(**fields), RepetitionSettings(), api_key=api_key, facts=facts
    )


def kb_engine(
    kb: Settings, minilm: MiniLMEmbedder, settings: Settings, claude: ClaudeModel | None
) -> tuple[SqliteIndex, SqliteConversationStore, SqliteAskerWindows, AnswerEngine]:
    """The shared knowledge base's index, a conversation store and an asker count of
    `settings`, and an engine bounded as `bot slack` and `bot discord` build theirs
    (`answers.limits`)."""
    index = SqliteIndex(kb.index_path, cached(kb, minilm), settings.search)
    store = SqliteConversationStore(settings.state_path, 5_000)
    askers = SqliteAskerWindows(settings.state_path, 5_000)
    answers = AnswerEngine(
        index=index,
        store=store,
        settings=settings.answers,
        top_k=settings.search.top_k,
        model=claude,
        policies=settings.policy,
        limits=BurstLimits(settings.answers.limits, askers),
    )
    return index, store, askers, answers


async def poll_until(check: Callable[[], bool], timeout: float, calls: object) -> None:
    """Wait for a background listener's effect; on time-out, show what the platform saw."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; platform calls: {calls}")
        await asyncio.sleep(0.02)


def question(text: str, key: str = "slack/T1/C1/1700000000.000100") -> Question:
    return Question("test", key, "U1", text, ChannelKind.THREAD)


def sources_in(tool_result_content: str) -> dict[int, str]:
    """Source number -> passage text, from a search tool result as the model receives it."""
    return {
        int(m.group(1)): html.unescape(m.group(2)) for m in _SOURCE.finditer(tool_result_content)
    }


def first_sentence(text: str, limit: int = 200) -> str:
    """A short verbatim piece of the passage, as a model would quote it."""
    sentence = re.split(r"(?<=[.!?])\s", " ".join(text.split()))[0]
    return sentence if len(sentence) <= limit else sentence[:limit].rsplit(" ", 1)[0]
