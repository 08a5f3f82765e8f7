"""`bench.search_sides` in small: its baseline variants (the sides in a row; every candidate's
document looked up) give the shipped search's hits, and the interleaved timing reports every
variant, on the bundled docs instead of the 50,000-chunk latency index."""

from __future__ import annotations

from pathlib import Path

from bench.search_latency import interleaved
from bench.search_sides import EveryDocument, InARow
from core.backends.sqlite.index import SqliteIndex
from core.config import Settings
from core.domain.documents import SearchMode
from core.ingest.pipeline import Ingestor
from core.search.embedder import CachedEmbedder
from tests.conftest import REPO

QUESTIONS = [
    "How do I install the Slack app?",
    "which file formats can be ingested",
    "how does the bot decide to answer in an auto channel",
    "prune learned keywords",
    "Elasticsearch settings",
]


async def test_the_variants_agree_and_are_each_timed(
    settings: Settings, embedder: CachedEmbedder, tmp_path: Path
) -> None:
    path = tmp_path / "index.sqlite"
    shipped = SqliteIndex(path, embedder, settings.search)
    report = await Ingestor(shipped, embedder, settings.ingest).ingest(
        [str(REPO / "docs")], source="docs"
    )
    assert report.chunks_written
    assert not report.failed
    variants = {
        "in a row": InARow(path, embedder, settings.search),
        "every document": EveryDocument(path, embedder, settings.search),
        "shipped": shipped,
    }
    k = settings.search.top_k
    try:
        for question in QUESTIONS:
            found = {
                name: [h.chunk.chunk_id for h in await index.search(question, k=k)]
                for name, index in variants.items()
            }
            assert len(found["shipped"]) == k
            assert found["in a row"] == found["every document"] == found["shipped"]
        timed = await interleaved(variants, QUESTIONS, (SearchMode.HYBRID,), k, runs=2)
        assert set(timed) == {f"hybrid, {name}" for name in variants}
        for figures in timed.values():
            assert isinstance(figures, dict)
            assert len(figures["p95_ms_runs"]) == 2
            assert 0 < figures["p50_ms_median"] <= figures["p95_ms_median"]
    finally:
        for index in variants.values():
            await index.close()
