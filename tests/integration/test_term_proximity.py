"""Term proximity on the embedded index (`search.proximity_weight`, `core.backends.sqlite.
proximity`): BM25's candidates where the query's neighbouring words stand together gain; the
others keep their BM25 score exactly; words further apart than the window do not count; a
search still writes nothing to the index file."""

from __future__ import annotations

import sqlite3

import pytest

from bot.wiring import open_backend
from core.backends.sqlite.index import SqliteIndex
from core.config import Settings
from core.domain.documents import Chunk, DocumentRecord, SearchMode, embedding_text
from core.ports import SearchIndex
from core.search.embedder import CachedEmbedder

STRONG = 5.0  # a proximity weight that decides on both backends (their scores' scales differ)
QUERY = "vitamin D deficiency"  # "d" is too short a term: the pair is vitamin-deficiency
PASSAGES = {
    # The words together (two positions apart), in a longer passage: BM25 alone ranks it below
    # the next one.
    "together": "Vitamin D deficiency raises the risk of fractures in older adults who rarely "
    "spend time outdoors during the long winter months of the northern countries.",
    # The same words more often, never within three positions in order, in a short passage.
    "apart": "Deficiency is common. Vitamin intake varies. D is a grade. Deficiency of vitamins.",
    # "deficiency" four positions after "vitamin": outside the window of 3.
    "spread": "Vitamin pills are taken; deficiency shows late, and rarely in the young.",
    "unrelated": "Iron deficiency is the commonest deficiency in the world.",
}


async def _index(
    settings: Settings, embedder: CachedEmbedder, weight: float, window: int = 3
) -> SqliteIndex:
    update = {"proximity_weight": weight, "proximity_window": window}
    search = settings.search.model_copy(update=update)
    index = SqliteIndex(settings.index_path, embedder, search)
    if not await index.documents():
        await _fill(index, embedder)
    return index


async def _fill(index: SearchIndex, embedder: CachedEmbedder) -> None:
    for name, text in PASSAGES.items():
        chunk = Chunk(f"{name}-0", name, "docs", name.title(), "", f"https://x/{name}", text, 0)
        vectors = await embedder.embed_documents([embedding_text(chunk)])
        record = DocumentRecord(name, "docs", name.title(), chunk.url, "c1", 1)
        await index.replace_document(record, [chunk], vectors)


async def _bm25(index: SearchIndex) -> dict[str, float]:
    hits = await index.search(QUERY, k=10, mode=SearchMode.BM25)
    return {h.chunk.doc_id: h.bm25_score or 0.0 for h in hits}


async def _searched(
    settings: Settings,
    embedder: CachedEmbedder,
    weight: float,
    window: int = 3,
    candidates: int = 100,
) -> dict[str, float]:
    """BM25's scores on a backend of `settings` (SQLite, or Elasticsearch: a `rescore`)."""
    update = {
        "proximity_weight": weight,
        "proximity_window": window,
        "proximity_candidates": candidates,
    }
    bounded = settings.model_copy(update={"search": settings.search.model_copy(update=update)})
    backend = await open_backend(bounded, embedder)
    try:
        if not await backend.index.documents():
            await _fill(backend.index, embedder)
        return await _bm25(backend.index)
    finally:
        await backend.close()


async def test_passages_with_the_words_together_gain_the_others_keep_their_score(
    backend_settings: Settings, embedder: CachedEmbedder
) -> None:
    plain = await _searched(backend_settings, embedder, 0.0)
    near = await _searched(backend_settings, embedder, STRONG)
    ranked = list(plain)
    assert ranked.index("apart") < ranked.index("together")  # BM25 alone: the words apart win
    assert next(iter(near)) == "together"
    assert near["together"] > plain["together"]
    for name in ("apart", "spread", "unrelated"):
        assert near[name] == pytest.approx(plain[name])
    wider = await _searched(backend_settings, embedder, STRONG, window=4)
    assert wider["spread"] > plain["spread"]  # four positions apart: within a window of 4


async def test_only_bm25s_first_candidates_are_rescored(
    backend_settings: Settings, embedder: CachedEmbedder
) -> None:
    """`search.proximity_candidates`: a passage below them keeps its BM25 score, words
    together or not; one among them gains."""
    plain = await _searched(backend_settings, embedder, 0.0)
    above = list(plain).index("together")  # the passages BM25 ranks above it
    assert above > 0
    short = await _searched(backend_settings, embedder, STRONG, candidates=above)
    assert list(short) == list(plain)
    assert short == pytest.approx(plain)
    reaching = await _searched(backend_settings, embedder, STRONG, candidates=above + 1)
    assert reaching["together"] > plain["together"]
    assert next(iter(reaching)) == "together"


async def test_a_search_with_proximity_writes_nothing_to_the_index_file(
    settings: Settings, embedder: CachedEmbedder
) -> None:
    """The candidates' positions come from a temporary table of the connection's own: a
    read-only index file (a read-only mount, another user's) is still searched."""
    index = await _index(settings, embedder, 1.0)
    try:
        with sqlite3.connect(settings.index_path) as db:
            changes = db.execute("PRAGMA data_version").fetchone()
            for _ in range(3):
                assert await index.search(QUERY, k=3)
            assert db.execute("PRAGMA data_version").fetchone() == changes
    finally:
        await index.close()


@pytest.mark.parametrize(
    "query",
    ['"NEAR(* OR', "vitamin vitamin vitamin", "a_b_c d-e-f 🚀 vitamin", "x " * 2_000, "🚀 ☃"],
)
async def test_odd_queries_with_proximity_on_never_fail(
    settings: Settings, embedder: CachedEmbedder, query: str
) -> None:
    """Query text reaches the candidates' table only as bound values, never as FTS5 syntax;
    repeated, multi-token, over-long and wordless queries are searched or find nothing."""
    index = await _index(settings, embedder, STRONG)
    try:
        hits = await index.search(query, k=3, mode=SearchMode.BM25)
        assert all(h.bm25_score is not None for h in hits)
    finally:
        await index.close()
