"""One evaluation run, from dataset to figures: index the corpus through the product's own
pipeline, then measure retrieval per mode or answers per question. The CLI only parses
arguments and prints what comes back."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from core.answer.engine import AnswerEngine
from core.config import GroundingSettings, Settings
from core.domain.documents import SearchMode
from core.errors import SearchIndexError
from core.evaluation.answers import AnswerEvaluation, evaluate_answers, load_references
from core.evaluation.retrieval import Dataset, ModeResult, evaluate, prepared_corpus
from core.ingest.pipeline import Ingestor, IngestReport
from core.ports import Embedder, IngestProgress, Judge, SearchIndex

_EVAL_SOURCE = "eval"


def isolated_settings(settings: Settings, dataset: str, scratch: Path) -> Settings:
    """Settings under which an evaluation writes only throwaway data: its own Elasticsearch
    indices (a fresh prefix), its own state in `scratch`, and never the web (an evaluation
    measures the knowledge base)."""
    name = "".join(c if c.isalnum() else "-" for c in dataset.lower())
    prefix = f"{settings.elasticsearch.index_prefix}-eval-{name}-{uuid.uuid4().hex[:8]}"
    return settings.model_copy(
        update={
            "elasticsearch": settings.elasticsearch.model_copy(update={"index_prefix": prefix}),
            "storage": settings.storage.model_copy(update={"data_dir": scratch}),
            "web_search": settings.web_search.model_copy(update={"enabled": False, "channels": {}}),
        }
    )


async def index_dataset(
    data: Dataset,
    index: SearchIndex,
    embedder: Embedder,
    settings: Settings,
    progress: IngestProgress | None = None,
) -> float:
    """Index a BEIR corpus through the product's pipeline; returns the seconds it took. An
    index kept from an earlier run is reused only if it holds nothing but this dataset: the
    figures would count anything else, and it must never be a knowledge base."""
    started = time.perf_counter()
    held = await index.documents()
    foreign = sorted(d for d, r in held.items() if r.source != _EVAL_SOURCE or d not in data.corpus)
    if foreign:
        raise SearchIndexError(
            f"the index holds {len(foreign)} document(s) that are not {data.name}'s (such as "
            f"{foreign[0]}): an evaluation reuses only an index it made for the same dataset; "
            "give --index a new path"
        )
    if progress is not None:
        progress.start(len(data.corpus))
    await Ingestor(index, embedder, settings.ingest).write(
        prepared_corpus(data, settings.ingest, _EVAL_SOURCE),
        held,
        IngestReport(),
        progress,
    )
    return time.perf_counter() - started


async def retrieval_run(
    data: Dataset,
    index: SearchIndex,
    settings: Settings,
    embedder: Embedder,
    seconds: float,
    embeddings: dict[str, int],
) -> dict[str, Any]:
    """Every search mode on the indexed dataset, with the settings that produced the figures
    (`embeddings`: how many vectors were computed and how many came from the cache)."""
    stats = await index.stats()
    modes = await evaluate(index, data, list(SearchMode), shown=settings.search.top_k)
    return {
        "dataset": data.name,
        "backend": settings.search.backend,
        "queries": len(data.queries),
        "documents": len(data.corpus),
        "chunks": stats.chunks,
        "index_seconds": round(seconds, 1),
        **embeddings,
        "settings": _ranking_settings(settings, embedder),
        "modes": [_mode(r) for r in modes],
    }


async def answers_run(
    data: Dataset,
    folder: Path,
    engine: AnswerEngine,
    judge: Judge | None,
    grounding: GroundingSettings,
) -> dict[str, Any]:
    """Every question through the engine, graded against the dataset's reference answers."""
    evaluation: AnswerEvaluation = await evaluate_answers(
        engine, data, references=load_references(folder), judge=judge, grounding=grounding
    )
    return {"dataset": data.name, **evaluation.summary(), "per_question": evaluation.rows}


def _ranking_settings(s: Settings, embedder: Embedder) -> dict[str, Any]:
    return {
        "fusion": s.search.fusion,
        "vector_share": s.search.vector_share,
        "rrf_k": s.search.rrf_k,
        "candidates": s.search.candidates,
        "top_k": s.search.top_k,
        "max_passages_per_document": s.search.max_passages_per_document,
        "bm25_weight": s.search.bm25_weight,
        "vector_weight": s.search.vector_weight,
        "bm25_columns": s.search.bm25_columns.model_dump(),
        "bm25_max_postings": s.search.bm25_max_postings,
        "rescore_left_out_terms": s.search.rescore_left_out_terms,
        "proximity_weight": s.search.proximity_weight,
        "proximity_window": s.search.proximity_window,
        "proximity_candidates": s.search.proximity_candidates,
        "chunk_chars": s.ingest.chunk_chars,
        "chunk_overlap_chars": s.ingest.chunk_overlap_chars,
        "embedder": embedder.model_id,
    }


def _mode(result: ModeResult) -> dict[str, Any]:
    return {
        "mode": result.mode.value,
        "metrics": result.metrics,
        "p50_ms": result.latency_ms_p50,
        "p95_ms": result.latency_ms_p95,
    }
