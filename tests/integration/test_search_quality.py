"""Retrieval quality on the real Anthropic docs QA set (232 chunks, 100 questions).

Small enough for every CI run; the figures are deterministic (same model, same data), so the
targets are asserted directly: a change that makes search worse fails here. The embedded
backend must reach the absolute targets; Elasticsearch must stay within 0.02 nDCG@10 of the
embedded backend on the same passages and vectors (its BM25 scores differ by design).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.wiring import open_backend
from core.backends.sqlite.index import SqliteIndex
from core.config import Settings
from core.domain.documents import SearchMode
from core.evaluation.retrieval import Dataset, evaluate, load_dataset, prepared_corpus
from core.ingest.pipeline import Ingestor, IngestReport
from core.search.embedder import CachedEmbedder, MiniLMEmbedder
from core.search.embedding_cache import EmbeddingCache
from tests.conftest import SHARED_EVAL, Index

DATASET = SHARED_EVAL / "anthropic_docs_qa"
MAX_NDCG_GAP = 0.02
# The embedded backend's figures, measured once per test run (the same passages, vectors and
# settings every time; by the run's embedding cache): every backend is held to them.
_REFERENCE: dict[Path, dict[SearchMode, dict[str, float]]] = {}


async def _metrics(
    index: Index,
    embedder: CachedEmbedder,
    settings: Settings,
    data: Dataset,
    modes: tuple[SearchMode, ...] = tuple(SearchMode),
    deep: bool = True,
) -> dict[SearchMode, dict[str, float]]:
    await _indexed(index, embedder, settings, data)
    modes_run = await evaluate(index, data, list(modes), shown=settings.search.top_k, deep=deep)
    return {r.mode: r.metrics for r in modes_run}


async def _indexed(
    index: Index, embedder: CachedEmbedder, settings: Settings, data: Dataset
) -> None:
    """The set's corpus through the product's own chunking, every passage written."""
    report = IngestReport()
    await Ingestor(index, embedder, settings.ingest).write(
        prepared_corpus(data, settings.ingest, "eval"), {}, report
    )
    assert report.failed == []


@pytest.mark.slow
@pytest.mark.skipif(not DATASET.exists(), reason=f"{DATASET} is not beside this checkout")
async def test_anthropic_docs_quality_on_every_backend(
    settings: Settings,
    backend_settings: Settings,
    minilm: MiniLMEmbedder,
    eval_embedding_cache: Path,
) -> None:
    data = load_dataset(DATASET)
    embedder = CachedEmbedder(
        minilm,
        EmbeddingCache(eval_embedding_cache, minilm.model_id, minilm.dimensions),
        settings.embeddings.query_cache_size,
    )
    embedded = _REFERENCE.get(eval_embedding_cache)
    if embedded is None:
        reference = SqliteIndex(settings.index_path, embedder, settings.search)
        try:
            embedded = await _metrics(reference, embedder, settings, data)
        finally:
            await reference.close()
        _REFERENCE[eval_embedding_cache] = embedded
    hybrid = embedded[SearchMode.HYBRID]
    # Issue 18's targets. Score fusion with term proximity: 0.835 (0.832 before code passages
    # were fenced; without proximity 0.828; RRF k=60: 0.809).
    assert hybrid["ndcg@10"] >= 0.83
    assert hybrid["mrr@10"] >= 0.90  # 0.921 (without proximity 0.916; RRF: 0.891)
    # What an answer is written from: the relevant documents among the top 8 passages.
    assert hybrid[f"shown@{settings.search.top_k}"] >= 0.84  # 0.8525 (no per-document limit: 0.811)
    assert hybrid["ndcg@10"] > embedded[SearchMode.BM25]["ndcg@10"]
    assert hybrid["ndcg@10"] > embedded[SearchMode.VECTOR]["ndcg@10"]
    if backend_settings.search.backend == "sqlite":
        return
    # Without term proximity on Elasticsearch: the emulator takes half a second per phrase
    # clause (a 12-word question, 6 s), 20 minutes for this set. BENCHMARKS.md has the gap with
    # it on; tests/integration/test_term_proximity.py its rescore on the emulator.
    search = backend_settings.search.model_copy(update={"proximity_weight": 0.0})
    without_proximity = backend_settings.model_copy(update={"search": search})
    backend = await open_backend(without_proximity, embedder)
    try:
        served = await _metrics(
            backend.index,  # type: ignore[arg-type]  # Elasticsearch here
            embedder,
            without_proximity,
            data,
            (SearchMode.HYBRID, SearchMode.VECTOR),
            deep=False,  # only nDCG@10 is compared: half the emulator's searches
        )
    finally:
        await backend.close()
    gap = embedded[SearchMode.HYBRID]["ndcg@10"] - served[SearchMode.HYBRID]["ndcg@10"]
    assert gap <= MAX_NDCG_GAP, (embedded, served)
    # The vector side sees the same vectors: only approximate kNN may cost a little.
    vector_gap = embedded[SearchMode.VECTOR]["ndcg@10"] - served[SearchMode.VECTOR]["ndcg@10"]
    assert vector_gap <= MAX_NDCG_GAP, (embedded, served)


# The latency bench's size: what the postings budget does there is what this test holds.
GROWN_TO = 50_000


@pytest.mark.slow
@pytest.mark.skipif(not DATASET.exists(), reason=f"{DATASET} is not beside this checkout")
async def test_the_postings_budget_of_a_grown_index_keeps_the_docs_sets_ranking(
    settings: Settings, minilm: MiniLMEmbedder, eval_embedding_cache: Path
) -> None:
    """The budget is a count: once the docs have grown to 50,000 passages, it leaves out of the
    query what the budget scaled down to this set's size leaves out here (BENCHMARKS.md, "The
    postings budget at 50,000 passages"). Scoring the left-out terms back on BM25's first
    candidates must keep most of what leaving them out loses."""
    data = load_dataset(DATASET)
    embedder = CachedEmbedder(
        minilm,
        EmbeddingCache(eval_embedding_cache, minilm.model_id, minilm.dimensions),
        settings.embeddings.query_cache_size,
    )
    index = SqliteIndex(settings.index_path, embedder, settings.search)
    try:
        await _indexed(index, embedder, settings, data)
        chunks = (await index.stats()).chunks
    finally:
        await index.close()
    held = max(1, round(settings.search.bm25_max_postings * chunks / GROWN_TO))
    figures: dict[bool, float] = {}
    for rescore in (False, True):
        update = {"bm25_max_postings": held, "rescore_left_out_terms": rescore}
        search = settings.search.model_copy(update=update)
        grown = SqliteIndex(settings.index_path, embedder, search)
        try:
            top_k = settings.search.top_k
            hybrid = await evaluate(grown, data, [SearchMode.HYBRID], shown=top_k, deep=False)
        finally:
            await grown.close()
        figures[rescore] = hybrid[0].metrics["ndcg@10"]
    # Measured: 0.8078 re-scored, 0.7769 left out, 0.8323 with no budget at all.
    assert figures[True] >= 0.80, figures
    assert figures[True] - figures[False] >= 0.02, figures
