"""The terms the postings budget leaves out, scored back on BM25's first candidates
(`search.rescore_left_out_terms`, `core.backends.sqlite.left_out`): those candidates then score
exactly what FTS5's bm25() gives them over every term of the query, in that order; without it
the common term counts for nothing among them."""

from __future__ import annotations

import sqlite3

import pytest

from core.backends.sqlite.candidates import varints
from core.backends.sqlite.fts_query import fts_or_expression
from core.backends.sqlite.index import SqliteIndex
from core.config import Settings
from core.domain.documents import Chunk, DocumentRecord, SearchMode, embedding_text
from core.search.embedder import CachedEmbedder
from core.search.terms import query_terms

QUERY = "apoptosis of cells and their api_key"
PASSAGES = {
    # The rare term once; the common one, and the two-token term, often.
    "both": "Apoptosis removes damaged cells: cells die, cells are cleared, cells divide. "
    "An api_key opens it; the api_key rotates.",
    # The rare term twice, nothing else of the query: ahead on the rare term alone.
    "rare-only": "Apoptosis, then apoptosis again: programmed death.",
    **{f"cells-{n}": f"Cells of kind {n} grow in culture." for n in range(10)},
    **{f"api-{n}": f"The api_key of service {n}." for n in range(5)},
    **{f"other-{n}": f"Unrelated passage number {n} about weather." for n in range(23)},
}
TIGHT = 4  # postings: room for "apoptosis" (2) only; "cells" (11) and "api_key" (6) left out


async def _index(settings: Settings, embedder: CachedEmbedder, rescore: bool) -> SqliteIndex:
    update = {
        "bm25_max_postings": TIGHT,
        "rescore_left_out_terms": rescore,
        "proximity_weight": 0.0,  # BM25 alone, to compare with FTS5's own
    }
    index = SqliteIndex(settings.index_path, embedder, settings.search.model_copy(update=update))
    if not await index.documents():
        for name, text in PASSAGES.items():
            chunk = Chunk(f"{name}-0", name, "docs", name, "", f"https://x/{name}", text, 0)
            vectors = await embedder.embed_documents([embedding_text(chunk)])
            record = DocumentRecord(name, "docs", name, chunk.url, "c1", 1)
            await index.replace_document(record, [chunk], vectors)
    return index


def _every_term(settings: Settings) -> dict[str, float]:
    """FTS5's bm25() over every term of the query, straight from the file."""
    w = settings.search.bm25_columns
    with sqlite3.connect(settings.index_path) as db:
        rows = db.execute(
            "SELECT c.doc_id, bm25(chunks_fts, ?, ?, ?, ?) FROM chunks_fts"
            " JOIN chunks c ON c.id = chunks_fts.rowid WHERE chunks_fts MATCH ?",
            (w.title, w.heading, w.text, w.keywords, fts_or_expression(query_terms(QUERY))),
        ).fetchall()
    return {doc: -score for doc, score in rows}


@pytest.mark.parametrize("rescore", [True, False])
async def test_the_first_candidates_score_what_bm25_gives_over_every_term(
    settings: Settings, embedder: CachedEmbedder, rescore: bool
) -> None:
    index = await _index(settings, embedder, rescore)
    try:
        hits = await index.search(QUERY, k=2, mode=SearchMode.BM25)
    finally:
        await index.close()
    scores = {h.chunk.doc_id: h.bm25_score for h in hits}
    assert set(scores) == {"both", "rare-only"}  # only the rare term finds candidates
    every = _every_term(settings)
    assert every["both"] > every["rare-only"]  # with the common terms, "both" is ahead
    if rescore:
        assert [h.chunk.doc_id for h in hits] == ["both", "rare-only"]
        assert scores == pytest.approx({d: every[d] for d in scores}, rel=1e-12)
    else:  # the rare term alone: "rare-only" ahead, "both" short of its common terms
        assert [h.chunk.doc_id for h in hits] == ["rare-only", "both"]
        assert scores["both"] < every["both"]


@pytest.mark.parametrize(
    ("blob", "values"),
    [
        (b"\x00\x11", [0, 17]),
        (b"\x81\x11", [145]),  # two bytes: 1 << 7 | 0x11
        (b"\xd3\x05\x89\x8d\x1b", [10_629, 149_147]),
        (b"\xff" * 8 + b"\x01", [(1 << 64) - 255]),  # nine bytes: the last one whole
    ],
)
def test_fts5s_varints_are_read_as_sqlite_writes_them(blob: bytes, values: list[int]) -> None:
    assert varints(blob) == values
