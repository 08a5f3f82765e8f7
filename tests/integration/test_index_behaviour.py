from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import Any

import numpy as np
import pytest

from core.backends.sqlite.index import SqliteIndex
from core.config import Settings
from core.domain.documents import Chunk, DocumentRecord, SearchFilters, SearchMode, embedding_text
from core.errors import SearchIndexError
from core.search.embedder import CachedEmbedder
from tests.conftest import Index
from tests.fakes.faults import ForeignEmbedder

DOCS = {
    "doc:slack": (
        "handbook",
        False,
        [
            "Install the Slack app from the manifest and invite it to a channel.",
            "Follow-up questions in a thread need no new mention.",
        ],
    ),
    "doc:discord": (
        "handbook",
        False,
        [
            "Run the /ask slash command in Discord; the answer opens a thread.",
        ],
    ),
    "doc:billing": (
        "finance",
        False,
        [
            "Invoices are sent on the first business day of each month.",
        ],
    ),
    "doc:learned": (
        "web",
        True,
        [
            "Error code E1234 means the webhook signature expired; resend within five minutes.",
        ],
    ),
}

SIDE_WAIT_S = 10  # long enough for a busy CI host; a failing run waits it out once


async def _fill(index: Index, embedder: CachedEmbedder) -> None:
    for doc_id, (source, learned, texts) in DOCS.items():
        chunks = [
            Chunk(
                f"{doc_id}-{i}",
                doc_id,
                source,
                doc_id.title(),
                "",
                f"https://x/{doc_id}#{i}",
                text,
                i,
                learned=learned,
                keywords=("e1234",) if learned else (),
            )
            for i, text in enumerate(texts)
        ]
        vectors = await embedder.embed_documents([embedding_text(c) for c in chunks])
        record = DocumentRecord(
            doc_id, source, doc_id.title(), f"https://x/{doc_id}", "c1", len(chunks)
        )
        await index.replace_document(record, chunks, vectors)


async def test_hybrid_search_explains_both_sides(index: Index, embedder) -> None:
    await _fill(index, embedder)
    hits = await index.search("slash command in Discord", k=3)
    top = hits[0]
    assert top.chunk.doc_id == "doc:discord"
    assert top.bm25_rank == 1
    assert top.vector_rank == 1
    assert top.bm25_score is not None
    assert top.bm25_score > 0
    assert top.vector_score is not None
    assert 0 < top.vector_score <= 1
    assert top.score == pytest.approx(1.0)  # first on both sides of the min-max mix
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_modes_use_one_side_only(index: Index, embedder) -> None:
    await _fill(index, embedder)
    bm25 = await index.search("invoices", k=5, mode=SearchMode.BM25)
    assert [h.chunk.doc_id for h in bm25] == ["doc:billing"]
    assert all(h.vector_rank is None for h in bm25)
    vector = await index.search("when do we get billed", k=2, mode=SearchMode.VECTOR)
    assert vector[0].chunk.doc_id == "doc:billing"
    assert all(h.bm25_rank is None for h in vector)


async def test_lexical_side_runs_while_the_query_embeds(
    index: Index, embedder: CachedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The query's embedding is milliseconds of model time: the lexical side must not wait for
    it. The embedding here finishes only once the lexical side has asked its question; were the
    sides run one after the other, the search would never finish."""
    await _fill(index, embedder)
    loop = asyncio.get_running_loop()
    lexical_ran = asyncio.Event()

    def signal() -> None:
        loop.call_soon_threadsafe(lexical_ran.set)

    class WaitsForLexical:
        async def embed_query(self, text: str) -> Any:
            await lexical_ran.wait()
            return await embedder.embed_query(text)

    if isinstance(index, SqliteIndex):
        bm25_side = index._bm25_side

        def lexical(*args: Any) -> Any:
            signal()
            return bm25_side(*args)

        monkeypatch.setattr(index, "_bm25_side", lexical)
    else:
        side = index._side

        async def lexical(**body: Any) -> Any:
            if "query" in body:
                signal()
            return await side(**body)

        monkeypatch.setattr(index, "_side", lexical)
    monkeypatch.setattr(index, "_query_embedder", WaitsForLexical())
    hits = await asyncio.wait_for(index.search("slash command in Discord", k=3), timeout=30)
    assert hits[0].chunk.doc_id == "doc:discord"
    assert hits[0].vector_rank == 1


async def test_vector_side_runs_while_the_lexical_side_ranks(
    index: Index, embedder: CachedEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the query is embedded, the vector side must not wait for the lexical side either:
    a hybrid search costs the slower side, not both in a row. The lexical side here finishes
    only once the vector side has ranked; run one after the other, it gives up waiting."""
    await _fill(index, embedder)
    vector_ranked = threading.Event()
    waited: list[bool] = []

    if isinstance(index, SqliteIndex):
        bm25_side, ranked = index._bm25_side, index._vectors.ranked

        def lexical(*args: Any) -> Any:
            waited.append(vector_ranked.wait(timeout=SIDE_WAIT_S))
            return bm25_side(*args)

        def nearest(*args: Any) -> Any:
            found = ranked(*args)
            vector_ranked.set()
            return found

        monkeypatch.setattr(index, "_bm25_side", lexical)
        monkeypatch.setattr(index._vectors, "ranked", nearest)
    else:
        side = index._side

        async def either(**body: Any) -> Any:
            if "query" in body:
                waited.append(await asyncio.to_thread(vector_ranked.wait, SIDE_WAIT_S))
                return await side(**body)
            found = await side(**body)
            vector_ranked.set()
            return found

        monkeypatch.setattr(index, "_side", either)
    hits = await index.search("slash command in Discord", k=3)
    assert waited == [True]
    assert hits[0].chunk.doc_id == "doc:discord"
    assert (hits[0].bm25_rank, hits[0].vector_rank) == (1, 1)


async def test_filters_apply_on_both_sides(index: Index, embedder) -> None:
    await _fill(index, embedder)
    query = "Discord slash command thread"
    only_finance = await index.search(query, k=10, filters=SearchFilters(sources=("finance",)))
    assert {h.chunk.source for h in only_finance} == {"finance"}
    one_doc = await index.search(query, k=10, filters=SearchFilters(doc_ids=("doc:slack",)))
    assert {h.chunk.doc_id for h in one_doc} == {"doc:slack"}
    learned = await index.search("webhook signature", k=10, filters=SearchFilters(learned=True))
    assert [h.chunk.doc_id for h in learned] == ["doc:learned"]
    assert learned[0].chunk.learned
    assert learned[0].chunk.keywords == ("e1234",)
    not_learned = await index.search("E1234", k=10, filters=SearchFilters(learned=False))
    assert all(not h.chunk.learned for h in not_learned)


async def test_keywords_field_is_searched(index: Index, embedder) -> None:
    await _fill(index, embedder)
    hits = await index.search("e1234", k=1, mode=SearchMode.BM25)
    assert hits[0].chunk.doc_id == "doc:learned"


async def test_replace_and_delete_document(index: Index, embedder) -> None:
    await _fill(index, embedder)
    stats = await index.stats()
    assert (stats.documents, stats.chunks, stats.learned_chunks) == (4, 5, 1)
    new = Chunk(
        "doc:slack-0", "doc:slack", "handbook", "Slack", "", "https://x/s", "Only one now.", 0
    )
    vectors = await embedder.embed_documents([new.text])
    record = DocumentRecord("doc:slack", "handbook", "Slack", "https://x/s", "c2", 1)
    await index.replace_document(record, [new], vectors)
    docs = await index.documents()
    assert docs["doc:slack"].checksum == "c2"
    assert docs["doc:slack"].chunk_count == 1
    assert (await index.stats()).chunks == 4
    assert not await index.search("manifest invite channel", k=5, mode=SearchMode.BM25)
    assert await index.delete_document("doc:discord") == 1
    assert "doc:discord" not in await index.documents()
    assert all(h.chunk.doc_id != "doc:discord" for h in await index.search("Discord", k=10))


@pytest.mark.parametrize("query", ["", "   ", "the of and", '"NEAR(* OR', "🚀"])
async def test_odd_queries_never_fail(index: Index, embedder, query: str) -> None:
    await _fill(index, embedder)
    hits = await index.search(query, k=3)
    assert isinstance(hits, list)
    if not query.strip():
        assert hits == []


async def test_empty_index_returns_nothing(index: Index) -> None:
    assert await index.search("anything", k=5) == []


async def test_mismatched_vectors_are_refused(index: Index) -> None:
    chunk = Chunk("c", "d", "s", "t", "", "u", "text", 0)
    record = DocumentRecord("d", "s", "t", "u", "x", 1)
    with pytest.raises(ValueError, match="dimensions"):
        await index.replace_document(record, [chunk], np.zeros((1, 10), np.float32))
    with pytest.raises(ValueError, match="1 chunks but 0 vectors"):
        await index.replace_document(record, [chunk], np.zeros((0, 384), np.float32))
    assert await index.documents() == {}


async def test_index_built_by_another_model_is_refused(settings: Settings, embedder) -> None:
    first = SqliteIndex(settings.index_path, embedder, settings.search)
    await first.close()
    with pytest.raises(SearchIndexError, match="was built with embedder="):
        SqliteIndex(settings.index_path, ForeignEmbedder(), settings.search)  # type: ignore[arg-type]


async def test_opening_an_index_made_by_this_bot_writes_nothing(
    settings: Settings, embedder
) -> None:
    """So a read-only index file (a read-only mount, another user's) can still be searched."""
    first = SqliteIndex(settings.index_path, embedder, settings.search)
    await first.close()
    with sqlite3.connect(settings.index_path) as db:
        changes = db.execute("PRAGMA data_version").fetchone()
        again = SqliteIndex(settings.index_path, embedder, settings.search)
        assert db.execute("PRAGMA data_version").fetchone() == changes  # nobody else wrote
    assert await again.documents() == {}
    await again.close()


async def test_not_a_database_is_a_clear_error(settings: Settings, embedder) -> None:
    settings.index_path.parent.mkdir(parents=True, exist_ok=True)
    settings.index_path.write_bytes(b"this is not\x00sqlite\xff" * 100)  # bytes, as damage is
    with pytest.raises(SearchIndexError) as raised:
        SqliteIndex(settings.index_path, embedder, settings.search)
    assert str(raised.value).startswith(
        f"{settings.index_path} is damaged (file is not a database): delete it and ingest again"
    )


@pytest.mark.parametrize("k", [0, -1, 10_001])
async def test_k_out_of_range_is_refused(index: Index, k: int) -> None:
    with pytest.raises(ValueError, match="k must be between 1 and 10000"):
        await index.search("anything", k=k)


LONG_PAGE = [
    f"Webhook retries: a failed webhook delivery is retried with exponential backoff, step {n}."
    for n in range(6)
]
SHORT_PAGES = {
    "doc:retries-faq": "Why was my webhook retried? Deliveries that fail are retried later.",
    "doc:retries-limits": "Webhook retry limits: after the last backoff a delivery is dropped.",
}


async def test_one_long_page_does_not_fill_every_passage(
    index: Index, embedder, backend_settings: Settings
) -> None:
    # Six passages of one page outrank every other page's; at most
    # search.max_passages_per_document of them come before the other pages' passages.
    limit = backend_settings.search.max_passages_per_document
    assert 0 < limit < len(LONG_PAGE)
    await _fill(index, embedder)
    pages = {"doc:webhooks": LONG_PAGE, **{d: [t] for d, t in SHORT_PAGES.items()}}
    for doc_id, texts in pages.items():
        chunks = [
            Chunk(f"{doc_id}-{i}", doc_id, "handbook", "Webhooks", "", f"https://x/{doc_id}", t, i)
            for i, t in enumerate(texts)
        ]
        vectors = await embedder.embed_documents([embedding_text(c) for c in chunks])
        record = DocumentRecord(doc_id, "handbook", "Webhooks", "https://x", "c1", len(chunks))
        await index.replace_document(record, chunks, vectors)
    hits = await index.search("webhook retries exponential backoff step", k=5)
    documents = [h.chunk.doc_id for h in hits]
    assert documents[0] == "doc:webhooks"
    assert documents.count("doc:webhooks") == limit
    assert set(SHORT_PAGES) <= set(documents)
    shallower = await index.search("webhook retries exponential backoff step", k=3)
    assert [h.chunk.chunk_id for h in shallower] == [h.chunk.chunk_id for h in hits[:3]]
