"""Elasticsearch when things go wrong: unreachable, wrong credentials, another major version,
licence refusals, bulk items refused, mapping conflicts, a new embedder, and the cluster going
away in the middle of an ingest or a question. The real client against noida-db, with a
scripted proxy in front where the emulator can't play the part."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import structlog
from aiohttp.test_utils import TestServer
from elasticsearch import AsyncElasticsearch
from pydantic import SecretStr
from typer.testing import CliRunner

from bot.cli import app
from bot.wiring import build_engine
from core.answer.engine import INDEX_UNAVAILABLE
from core.backends.elasticsearch import ElasticsearchBackend
from core.backends.elasticsearch.connection import build_client
from core.backends.elasticsearch.index import ElasticsearchIndex
from core.backends.elasticsearch.reindex import reindex
from core.backends.elasticsearch.schema import IndexNames, doc_id_key, hashed_id
from core.backends.elasticsearch.state import ElasticsearchPlatformState, ElasticsearchRunLocks
from core.backends.elasticsearch.versions import drop_indices
from core.config import Settings
from core.domain.conversation import AnswerStatus, ChannelKind, Question
from core.domain.documents import (
    Chunk,
    DocumentRecord,
    DocumentWrite,
    Outcome,
    SearchMode,
    chunk_id,
    embedding_text,
)
from core.errors import IndexUnavailable, SearchIndexError
from core.ingest.pipeline import Ingestor, remove
from core.ports import Embedder
from core.run_locks import REINDEX_LOCK
from core.search.embedder import CachedEmbedder
from tests.conftest import REPO, elasticsearch_settings
from tests.fakes.elasticsearch_emulator import NoidaServer, free_port
from tests.fakes.elasticsearch_proxy import ElasticsearchProxy, ProxyScript
from tests.fakes.faults import HalfEmbedder, StopAfter

runner = CliRunner()


async def open_index(
    settings: Settings, embedder: Embedder, *, check_compatible: bool = True
) -> ElasticsearchIndex:
    """The backend's index: these tests reach into it (its client, its names, its versions);
    its stores share the client, which closing the index closes."""
    backend = await ElasticsearchBackend.open(settings, embedder, check_compatible=check_compatible)
    return backend.index


@pytest.fixture
def es_settings(settings: Settings, es_emulator: NoidaServer) -> Settings:
    return elasticsearch_settings(settings, es_emulator.url)


@pytest.fixture
async def proxied(
    es_settings: Settings, es_emulator: NoidaServer
) -> AsyncIterator[tuple[Settings, ProxyScript]]:
    script = ProxyScript()
    proxy = ElasticsearchProxy(es_emulator.url, script)
    server = TestServer(proxy.app, host="127.0.0.1")
    await server.start_server()
    es = es_settings.elasticsearch.model_copy(update={"url": str(server.make_url("")).rstrip("/")})
    yield es_settings.model_copy(update={"elasticsearch": es}), script
    await server.close()
    await proxy.close()


async def _cleanup(settings: Settings, embedder: CachedEmbedder) -> None:
    index = await open_index(settings, embedder, check_compatible=False)
    assert isinstance(index, ElasticsearchIndex)
    await drop_indices(index.client, index.names)
    await index.close()


def _doc(doc_id: str, texts: list[str], checksum: str = "c1") -> tuple[DocumentRecord, list[Chunk]]:
    chunks = [
        Chunk(f"{doc_id}-{i}", doc_id, "kb", doc_id.title(), "", f"https://x/{doc_id}#{i}", t, i)
        for i, t in enumerate(texts)
    ]
    record = DocumentRecord(doc_id, "kb", doc_id.title(), f"https://x/{doc_id}", checksum, 0)
    return record, chunks


async def _write(index, embedder, docs) -> dict[str, str]:
    writes = []
    for record, chunks in docs:
        vectors = await embedder.embed_documents([embedding_text(c) for c in chunks])
        writes.append(DocumentWrite(record, chunks, vectors))
    return await index.write_documents(writes)


async def test_unreachable_cluster_is_a_clear_start_error(
    es_settings: Settings, embedder: CachedEmbedder
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    es = es_settings.elasticsearch.model_copy(update={"url": url, "max_retries": 0})
    with pytest.raises(IndexUnavailable, match=f"can't reach Elasticsearch at {url}"):
        await open_index(es_settings.model_copy(update={"elasticsearch": es}), embedder)


def test_doctor_reports_an_unreachable_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_CONFIG", str(REPO / "config.yaml"))
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BOT_SEARCH__BACKEND", "elasticsearch")
    monkeypatch.setenv("ELASTICSEARCH_URL", f"http://user:pw@127.0.0.1:{free_port()}")
    monkeypatch.setenv("BOT_ELASTICSEARCH__MAX_RETRIES", "0")
    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 1
    assert "FAIL" in result.output
    assert "can't reach" in result.output.replace("\n", " ")
    assert "pw@" not in result.output  # credentials in the URL never reach the screen


async def test_wrong_credentials_are_named(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder
) -> None:
    settings, script = proxied
    script.unauthorized = True
    es = settings.elasticsearch.model_copy(update={"username": "elastic"})
    secrets = settings.secrets.model_copy(update={"elasticsearch_password": SecretStr("s3cret-pw")})
    bad = settings.model_copy(update={"elasticsearch": es, "secrets": secrets})
    with pytest.raises(SearchIndexError, match="refused the credentials \\(401\\)") as caught:
        await open_index(bad, embedder)
    assert "s3cret-pw" not in str(caught.value)


async def test_processes_starting_together_on_a_fresh_cluster_all_start(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder
) -> None:
    settings, script = proxied
    # One process's "is there an index by that name?" arrives after another has created the
    # first version and its alias: it must see the alias, not a conflicting index.
    script.delay_once[f"HEAD /{settings.elasticsearch.index_prefix}-chunks"] = 0.5
    indices = await asyncio.gather(*(open_index(settings, embedder) for _ in range(4)))
    try:
        assert {await i.current_index() for i in indices} == {f"{indices[0].names.chunks}-v1"}
        await drop_indices(indices[0].client, indices[0].names)
    finally:
        for index in indices:
            await index.close()


@pytest.mark.parametrize(
    ("url", "reason"),
    [("localhost:9200", "scheme"), ("not a url at all", "")],
)
def test_malformed_urls_are_a_clear_error(es_settings: Settings, url: str, reason: str) -> None:
    es = es_settings.elasticsearch.model_copy(update={"url": url})
    with pytest.raises(SearchIndexError, match=f"elasticsearch settings: .*{reason}"):
        build_client(es, es_settings.secrets)


def test_a_username_without_password_is_refused(es_settings: Settings) -> None:
    es = es_settings.elasticsearch.model_copy(update={"username": "elastic"})
    with pytest.raises(SearchIndexError, match="ELASTICSEARCH_PASSWORD is not set"):
        build_client(es, es_settings.secrets)


@pytest.mark.parametrize(("version", "major"), [("9.1.0", 9), ("7.17.24", 7)])
async def test_another_major_version_is_refused_with_the_fix(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder, version: str, major: int
) -> None:
    settings, script = proxied
    script.server_version = version
    with pytest.raises(
        SearchIndexError, match=f"is version {version}, but this bot has the 8.x"
    ) as e:
        await open_index(settings, embedder)
    assert f"elasticsearch[async]>={major},<{major + 1}" in str(e.value)


@asynccontextmanager
async def server_fusion_index(
    proxied: tuple[Settings, ProxyScript],
    embedder: CachedEmbedder,
    licence: str,
    search_fusion: str = "rrf",
) -> AsyncIterator[tuple[ElasticsearchIndex, ProxyScript]]:
    """One document, `fusion: server`, behind a proxy that claims `licence`; the server's
    retriever fuses by RRF, so `search.fusion` is rrf unless a test says otherwise."""
    settings, script = proxied
    script.licence = licence
    es = settings.elasticsearch.model_copy(update={"fusion": "server"})
    search = settings.search.model_copy(update={"fusion": search_fusion})
    index = await open_index(
        settings.model_copy(update={"elasticsearch": es, "search": search}), embedder
    )
    assert isinstance(index, ElasticsearchIndex)
    try:
        await _write(index, embedder, [_doc("guide", ["Install the Slack app from the manifest."])])
        yield index, script
        await drop_indices(index.client, index.names)
    finally:
        await index.close()


async def test_basic_licence_keeps_fusion_in_the_bot(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder
) -> None:
    async with server_fusion_index(proxied, embedder, "basic") as (index, script):
        hits = await index.search("slack manifest", k=3)
        assert hits[0].chunk.doc_id == "guide"
        assert hits[0].bm25_rank == 1
        assert hits[0].vector_rank == 1  # fused by us: both sides' evidence kept
        assert script.seen.count("GET /_license") == 1


async def test_a_refused_rrf_retriever_falls_back_to_our_fusion(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder
) -> None:
    proxied[1].refuse_rrf = True
    async with server_fusion_index(proxied, embedder, "platinum") as (index, script):
        searches_before = script.seen.count("POST /" + index.names.chunks + "/_search")
        first = await index.search("slack manifest", k=3)
        second = await index.search("slack manifest", k=3)
        assert first[0].chunk.doc_id == second[0].chunk.doc_id == "guide"
        assert first[0].bm25_rank == 1
        searches = script.seen.count("POST /" + index.names.chunks + "/_search") - searches_before
        assert searches == 1 + 2 + 2  # one refused retriever, then two sides per search


async def test_a_licensed_cluster_fuses_on_the_server(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder
) -> None:
    async with server_fusion_index(proxied, embedder, "enterprise") as (index, _):
        hits = await index.search("slack manifest", k=3)
        assert [h.chunk.doc_id for h in hits] == ["guide"]
        assert hits[0].bm25_rank is None  # the server reports only the fused score
        assert hits[0].score > 0


async def test_the_server_fused_passages_keep_the_per_document_limit(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder
) -> None:
    long_page = [f"Install the Slack app from the manifest, step {n}." for n in range(6)]
    limit = proxied[0].search.max_passages_per_document
    assert 0 < limit < len(long_page)
    async with server_fusion_index(proxied, embedder, "enterprise") as (index, _):
        await _write(index, embedder, [_doc("long", long_page), _doc("faq", ["Slack install"])])
        hits = await index.search("install slack app manifest step", k=5)
        documents = [h.chunk.doc_id for h in hits]
        # The limit's passages, then the two other pages; the long page's rest only after them.
        assert documents[: limit + 2].count("long") == limit
        assert {"guide", "faq"} <= set(documents[: limit + 2])
        assert hits[0].bm25_rank is None  # fused by the server


async def test_score_fusion_stays_in_the_bot_even_on_a_licensed_cluster(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder
) -> None:
    """The server's retriever only knows RRF: with `search.fusion: minmax` the bot fuses."""
    async with server_fusion_index(proxied, embedder, "enterprise", "minmax") as (index, script):
        searches_before = script.seen.count("POST /" + index.names.chunks + "/_search")
        hits = await index.search("slack manifest", k=3)
        assert [h.chunk.doc_id for h in hits] == ["guide"]
        assert (hits[0].bm25_rank, hits[0].vector_rank) == (1, 1)
        assert hits[0].score == pytest.approx(1.0)  # first on both sides of a min-max mix
        searches = script.seen.count("POST /" + index.names.chunks + "/_search") - searches_before
        assert searches == 2  # the two sides, no retriever


async def test_bulk_partial_failures_are_reported_per_document(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder
) -> None:
    settings, script = proxied
    index = await open_index(settings, embedder)
    assert isinstance(index, ElasticsearchIndex)
    try:
        docs = [
            _doc("alpha", ["Alpha release notes."]),
            _doc("beta", ["Beta part one.", "Beta part two."]),
            _doc("gamma", ["Gamma migration guide."]),
        ]
        script.reject = {"beta-1"}
        script.throttle_once = {"gamma-0"}
        failed = await _write(index, embedder, docs)
        assert set(failed) == {"beta"}
        assert "scripted rejection" in failed["beta"]
        assert script.throttle_once == set()  # the 429 was seen, and the item retried
        assert set(await index.documents()) == {"alpha", "gamma"}  # beta is not marked done
        hits = await index.search("gamma migration", k=1, mode=SearchMode.BM25)
        assert hits[0].chunk.doc_id == "gamma"
        script.reject = set()
        assert await _write(index, embedder, [docs[1]]) == {}  # a rerun completes it
        assert set(await index.documents()) == {"alpha", "beta", "gamma"}
        assert (await index.stats()).chunks == 4
    finally:
        await drop_indices(index.client, index.names)
        await index.close()


def _sections(marker: str, count: int) -> str:
    """A page of `count` sections, each a passage of its own with a findable word."""
    body = "Configure the widget carefully before the first run. " * 12
    return "".join(f"## Part {i}\n\n{marker}{i} {body}\n\n" for i in range(count))


@asynccontextmanager
async def failing_writes(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder, tmp_path: Path
) -> AsyncIterator[tuple[ElasticsearchIndex, ProxyScript, Ingestor, Path]]:
    """An index behind the proxy whose bulk requests hold two actions each (so one document's
    chunks take several), no retries, and a folder to ingest from."""
    settings, script = proxied
    es = settings.elasticsearch.model_copy(update={"bulk_chunk_size": 2, "max_retries": 0})
    settings = settings.model_copy(update={"elasticsearch": es})
    index = await open_index(settings, embedder)
    folder = tmp_path / "docs"
    folder.mkdir()
    try:
        yield index, script, Ingestor(index, embedder, settings.ingest), folder
    finally:
        script.fail_bulks_after, script.reject, script.unavailable = None, set(), set()
        await drop_indices(index.client, index.names)
        await index.close()


@pytest.mark.parametrize("fault", ["bulk 503", "chunk rejected"])
async def test_a_new_document_whose_write_failed_leaves_nothing_searchable(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder, tmp_path: Path, fault: str
) -> None:
    """As on SQLite, where a document is written in one transaction: the chunks written before
    the failure are deleted again, and a rerun adds the document."""
    async with failing_writes(proxied, embedder, tmp_path) as (index, script, ingestor, folder):
        page = folder / "many.md"
        page.write_text(_sections("marker", 6))
        doc_id = page.resolve().as_uri()
        if fault == "bulk 503":
            script.bulks, script.fail_bulks_after = 0, 2  # the pending record, two chunks
        else:
            script.reject = {doc_id_key(chunk_id(doc_id, 4))}
        report = await ingestor.ingest([str(folder)], source="kb")
        assert [f.display for f in report.failed] == [str(page)]
        assert report.counts[Outcome.FAILED] == 1
        script.fail_bulks_after, script.reject = None, set()
        await index.client.indices.refresh(index=index.names.chunks)  # as any later search
        assert await index.search("marker0", k=1, mode=SearchMode.BM25) == []
        stats = await index.stats()
        assert (stats.documents, stats.chunks) == (0, 0)
        assert await index.documents() == {}
        report = await ingestor.ingest([str(folder)], source="kb")
        assert report.failed == []
        assert report.counts[Outcome.ADDED] == 1
        hits = await index.search("marker0", k=1, mode=SearchMode.BM25)
        assert [h.chunk.doc_id for h in hits] == [doc_id]
        assert (await index.documents())[doc_id].complete


async def test_a_failed_write_that_cannot_be_cleared_stays_in_reach_of_remove_and_prune(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder, tmp_path: Path
) -> None:
    """When the cluster refuses the clean-up too, the passages written stay under a pending
    record: `bot remove` and `--prune` find them, and the next ingest completes the document."""
    async with failing_writes(proxied, embedder, tmp_path) as (index, script, ingestor, folder):
        pages = [folder / "one.md", folder / "two.md"]
        for n, page in enumerate(pages):
            page.write_text(_sections(f"marker{n}x", 4))
        doc_ids = [p.resolve().as_uri() for p in pages]
        script.reject = {doc_id_key(chunk_id(d, 3)) for d in doc_ids}
        script.unavailable = {"/_delete_by_query"}
        report = await ingestor.ingest([str(folder)], source="kb")
        assert {f.display for f in report.failed} == {str(p) for p in pages}
        assert all("pending record" in f.reason for f in report.failed)
        script.reject, script.unavailable = set(), set()
        held = await index.documents()
        assert set(held) == set(doc_ids)
        assert not any(record.complete for record in held.values())
        assert await index.search("marker0x0", k=1, mode=SearchMode.BM25) != []

        [removal] = await remove(index, [str(pages[0])])
        assert removal.documents == 1
        assert removal.chunks > 0
        assert await index.search("marker0x0", k=1, mode=SearchMode.BM25) == []
        for page in pages:
            page.unlink()
        report = await ingestor.ingest([str(folder)], source="kb", prune=True)
        assert report.counts[Outcome.DELETED] == 1
        stats = await index.stats()
        assert (stats.documents, stats.chunks) == (0, 0)

        pages[0].write_text(_sections("marker0x", 4))
        script.reject, script.unavailable = (
            {doc_id_key(chunk_id(doc_ids[0], 3))},
            {"/_delete_by_query"},
        )
        await ingestor.ingest([str(folder)], source="kb")
        script.reject, script.unavailable = set(), set()
        report = await ingestor.ingest([str(folder)], source="kb")
        assert report.counts[Outcome.ADDED] == 1  # a pending document was never indexed
        assert (await index.documents())[doc_ids[0]].complete
        assert (await index.stats()).chunks == 4


async def test_an_updated_document_whose_write_failed_keeps_its_old_record(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder, tmp_path: Path
) -> None:
    """Elasticsearch can't roll back the passages already overwritten, so a failed update
    keeps the old record (and its old checksum): the document stays listed, removable, and is
    rewritten by the next ingest."""
    async with failing_writes(proxied, embedder, tmp_path) as (index, script, ingestor, folder):
        page = folder / "guide.md"
        page.write_text(_sections("old", 3))
        await ingestor.ingest([str(folder)], source="kb")
        doc_id = page.resolve().as_uri()
        before = (await index.documents())[doc_id]
        page.write_text(_sections("new", 5))
        script.reject = {doc_id_key(chunk_id(doc_id, 4))}
        report = await ingestor.ingest([str(folder)], source="kb")
        assert report.counts[Outcome.FAILED] == 1
        script.reject = set()
        assert (await index.documents())[doc_id] == before
        report = await ingestor.ingest([str(folder)], source="kb")
        assert report.counts[Outcome.UPDATED] == 1
        assert await index.search("old0", k=1, mode=SearchMode.BM25) == []
        assert (await index.stats()).chunks == 5


async def test_an_update_whose_old_passages_could_not_all_be_deleted_is_not_marked_done(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder, tmp_path: Path
) -> None:
    """The delete of a shrunk document's old passages answered, yet left some: its record
    keeps the old checksum, so the next ingest deletes them, rather than skipping the file
    as unchanged while the old passages stay searchable."""
    async with failing_writes(proxied, embedder, tmp_path) as (index, script, ingestor, folder):
        page = folder / "guide.md"
        page.write_text(_sections("old", 5))
        await ingestor.ingest([str(folder)], source="kb")
        doc_id = page.resolve().as_uri()
        before = (await index.documents())[doc_id]
        page.write_text(_sections("new", 2))
        cause = {"type": "es_rejected_execution_exception", "reason": "shard busy"}
        failure = {"index": "x", "id": "y", "cause": cause, "status": 429}
        script.refuse["/_delete_by_query"] = (200, {"deleted": 0, "failures": [failure]})
        report = await ingestor.ingest([str(folder)], source="kb")
        script.refuse.clear()
        assert [f.display for f in report.failed] == [str(page)]
        assert "failed to delete 1 entries: es_rejected_execution_exception" in (
            report.failed[0].reason
        )
        assert (await index.documents())[doc_id] == before
        report = await ingestor.ingest([str(folder)], source="kb")
        assert report.counts[Outcome.UPDATED] == 1
        assert await index.search("old4", k=1, mode=SearchMode.BM25) == []
        assert (await index.stats()).chunks == 2


def _es_error(kind: str, reason: str, status: int) -> dict[str, Any]:
    """An error body as Elasticsearch writes one."""
    cause = {"type": kind, "reason": reason}
    return {"error": {"root_cause": [cause], **cause}, "status": status}


def _cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, settings: Settings) -> None:
    """The command line on `settings`' cluster and prefix, one table row per line."""
    es = settings.elasticsearch
    for key, value in {
        "BOT_CONFIG": str(REPO / "config.yaml"),
        "BOT_STORAGE__DATA_DIR": str(tmp_path),
        "BOT_SEARCH__BACKEND": "elasticsearch",
        "ELASTICSEARCH_URL": str(es.url),
        "BOT_ELASTICSEARCH__INDEX_PREFIX": es.index_prefix,
        "BOT_ELASTICSEARCH__NUMBER_OF_REPLICAS": "0",
        "BOT_ELASTICSEARCH__MAX_RETRIES": "0",
        "COLUMNS": "400",
    }.items():
        monkeypatch.setenv(key, value)


def _rows(output: str) -> dict[str, tuple[str, str]]:
    """`bot doctor`'s table: check -> (status, detail)."""
    cells = [line.split("│")[1:4] for line in output.splitlines() if line.startswith("│")]
    return {name.strip(): (status.strip(), detail.strip()) for name, status, detail in cells}


def test_a_refused_request_says_the_servers_reason_and_what_failed(
    es_settings: Settings, embedder: CachedEmbedder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A state index whose field has another type: the message carries the server's reason,
    not only its error type, and `bot doctor` names the state indices, not the connection."""
    es = es_settings.elasticsearch
    reason = "mapper [status] cannot be changed from type [integer] to [keyword]"

    async def conflicting_state_index() -> SearchIndexError:
        async with AsyncElasticsearch(es.url) as client:
            await client.indices.create(
                index=f"{es.index_prefix}-answers",
                mappings={"properties": {"status": {"type": "integer"}}},
            )
        with pytest.raises(SearchIndexError) as caught:
            await open_index(es_settings, embedder)
        return caught.value

    async def drop() -> None:
        async with AsyncElasticsearch(es.url) as client:
            await drop_indices(client, IndexNames(es.index_prefix))

    try:
        refused = asyncio.run(conflicting_state_index())
        assert str(refused).endswith(f"answered 400: illegal_argument_exception: {reason}")
        assert refused.check == "state indices"

        _cli_env(monkeypatch, tmp_path, es_settings)
        result = runner.invoke(app, ["doctor"])
        assert result.exit_code == 1, result.output
        rows = _rows(result.output)
        status, detail = rows["state indices"]
        assert status == "FAIL"
        assert detail.endswith(reason)  # its [names] shown, not read as markup
        assert "connection" not in rows
    finally:
        asyncio.run(drop())


async def test_a_request_too_large_says_what_to_change(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder
) -> None:
    """A proxy's bare 413 (no body) still says what to do."""
    settings, script = proxied
    index = await open_index(settings, embedder)
    try:
        script.refuse["/_bulk"] = (413, "")
        with pytest.raises(SearchIndexError) as caught:
            await _write(index, embedder, [_doc("guide", ["Install the app."])])
        assert str(caught.value).endswith(
            "answered 413: the request was too large: lower elasticsearch.bulk_chunk_size, or "
            "raise the cluster's http.max_content_length (and any proxy's body limit)"
        )
    finally:
        script.refuse.clear()
        await drop_indices(index.client, index.names)
        await index.close()


async def test_a_missing_privilege_is_named_with_the_servers_reason(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder
) -> None:
    settings, script = proxied
    reason = (
        "action [indices:admin/index_template/put] is unauthorized for user [docbot] with "
        "effective roles [reader], this action is granted by the cluster privileges "
        "[manage_index_templates,manage,all]"
    )
    template = f"/_index_template/{settings.elasticsearch.index_prefix}-chunks"
    script.refuse[template] = (403, _es_error("security_exception", reason, 403))
    with pytest.raises(SearchIndexError) as caught:
        await open_index(settings, embedder)
    assert "refused the request (403): the user or API key needs the privileges" in str(
        caught.value
    )
    assert str(caught.value).endswith(f"(security_exception: {reason})")
    assert caught.value.check == "index template"


FLOOD_STAGE = (
    "index [docbot-chunks-v1] blocked by: [TOO_MANY_REQUESTS/12/disk usage exceeded "
    "flood-stage watermark, index has read-only-allow-delete block];"
)


@pytest.mark.parametrize("block", ["write block", "flood stage", "answered with failures"])
async def test_a_blocked_index_is_named_as_blocked_not_as_missing_privileges(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder, block: str
) -> None:
    """A write block (403), the flood-stage watermark's block (429), or a delete by query
    that answers yet deleted nothing: one line saying the index is blocked and how it lifts,
    and the document stays listed for a later `bot remove`."""
    settings, script = proxied
    es = settings.elasticsearch.model_copy(update={"max_retries": 0})
    index = await open_index(settings.model_copy(update={"elasticsearch": es}), embedder)
    try:
        await _write(index, embedder, [_doc("guide", ["Install the app.", "Then sign in."])])
        current = await index.current_index()
        if block == "write block":
            await index.client.indices.put_settings(
                index=current, settings={"index.blocks.write": True}
            )
        elif block == "flood stage":
            error = _es_error("cluster_block_exception", FLOOD_STAGE, 429)
            script.refuse["/_delete_by_query"] = (429, error)
        else:
            cause = {"type": "cluster_block_exception", "reason": FLOOD_STAGE}
            failure = {"index": current, "id": "guide-0", "cause": cause, "status": 429}
            script.refuse["/_delete_by_query"] = (200, {"deleted": 0, "failures": [failure]})
        with pytest.raises(SearchIndexError) as caught:
            await index.delete_document("guide")
        message = str(caught.value)
        assert "refused the request because the index is blocked (cluster_block_exception:" in (
            message
        )
        assert "flood-stage watermark" in message
        assert "privileges" not in message
        assert "\n" not in message
        assert len(message) < 600  # one line, not the response dict
        script.refuse.clear()
        assert set(await index.documents()) == {"guide"}
    finally:
        script.refuse.clear()
        with contextlib.suppress(Exception):
            await index.client.indices.put_settings(
                index=await index.current_index(), settings={"index.blocks.write": None}
            )
        await drop_indices(index.client, index.names)
        await index.close()


async def test_health_fails_when_the_alias_points_at_several_indices(
    es_settings: Settings, embedder: CachedEmbedder
) -> None:
    """An index added to the alias by hand leaves no write index: every ingest write fails,
    so `bot doctor` must not say ok; the request it names repairs it."""
    backend = await ElasticsearchBackend.open(es_settings, embedder)
    index, names = backend.index, backend.index.names
    try:
        await _write(index, embedder, [_doc("guide", ["Install the app.", "Then sign in."])])
        await index.client.indices.create(index=names.version(2), aliases={names.chunks: {}})
        [check] = [c for c in await backend.health() if c.name == "index"]
        assert not check.ok
        assert check.detail.startswith(
            f"{names.chunks} points at several indices: {names.version(1)} (3 entries), "
            f"{names.version(2)} (0 entries)"
        )
        repair = check.detail.split("POST _aliases ", 1)[1]
        await index.client.indices.update_aliases(**json.loads(repair))
        [check] = [c for c in await backend.health() if c.name == "index"]
        assert check.ok, check.detail
        assert check.detail == f"{names.chunks} -> {names.version(1)}"
    finally:
        await backend.drop()
        await backend.close()


async def test_mapping_conflicts_are_refused(
    es_settings: Settings, embedder: CachedEmbedder
) -> None:
    es = es_settings.elasticsearch
    client = AsyncElasticsearch(es.url)
    alias = f"{es.index_prefix}-chunks"
    try:
        await client.indices.create(index=alias)  # a plain index where the alias belongs
        with pytest.raises(SearchIndexError, match="is an index, not an alias"):
            await open_index(es_settings, embedder)
        await client.indices.delete(index=alias)
        await client.indices.create(
            index=f"{alias}-v1",
            mappings={
                "_meta": {
                    "schema_version": "1",
                    "embedder": embedder.model_id,
                    "dimensions": str(embedder.dimensions),
                },
                "properties": {"embedding": {"type": "keyword"}, "text": {"type": "keyword"}},
            },
            aliases={alias: {}},
        )
        with pytest.raises(SearchIndexError, match="mapping conflict") as caught:
            await open_index(es_settings, embedder)
        assert "embedding is keyword, expected dense_vector" in str(caught.value)
        assert "bot index reindex" in str(caught.value)
    finally:
        await client.close()
        await _cleanup(es_settings, embedder)


async def test_a_new_embedder_needs_a_reindex_which_swaps_the_alias(
    es_settings: Settings, embedder: CachedEmbedder
) -> None:
    index = await open_index(es_settings, embedder)
    assert isinstance(index, ElasticsearchIndex)
    topics = ["billing invoices", "slack manifest", "discord threads", "pdf pages", "webhooks"]
    docs = [_doc(f"doc{i}", [f"{t}, part {j}." for j in range(3)]) for i, t in enumerate(topics)]
    await _write(index, embedder, docs)
    before = await index.documents()
    await index.close()
    other = HalfEmbedder(embedder)
    with pytest.raises(SearchIndexError, match="run `bot index reindex`"):
        await open_index(es_settings, other)  # type: ignore[arg-type]
    fresh = await open_index(es_settings, other, check_compatible=False)  # type: ignore[arg-type]
    assert isinstance(fresh, ElasticsearchIndex)
    try:
        progress: list[tuple[int, int]] = []
        report = await reindex(
            fresh, delete_old=True, on_progress=lambda d, t: progress.append((d, t))
        )
        assert (report.old_index, report.new_index) == (
            f"{fresh.names.chunks}-v1",
            f"{fresh.names.chunks}-v2",
        )
        assert (report.chunks, report.documents, report.reembedded) == (15, 5, True)
        assert other.computed == 15
        assert progress[-1] == (20, 20)
        assert await fresh.current_index() == report.new_index
        assert not await fresh.client.indices.exists(index=report.old_index)
        await fresh.check_compatible()  # the new version is the new embedder's
        assert await fresh.documents() == before
        hits = await fresh.search("threads in discord", k=3)
        assert hits[0].chunk.doc_id == "doc2"
        assert hits[0].vector_rank is not None
    finally:
        await drop_indices(fresh.client, fresh.names)
        await fresh.close()


@asynccontextmanager
async def operators_template(settings: Settings) -> AsyncIterator[str]:
    """An operator's index template over every index of the bot's prefix, of a higher
    priority than the bot's: it is applied instead of the bot's, whole."""
    es = settings.elasticsearch
    name = f"ops-{es.index_prefix}"
    async with AsyncElasticsearch(es.url) as client:
        await client.indices.put_index_template(
            name=name,
            index_patterns=[f"{es.index_prefix}-*"],
            priority=200,
            template={"settings": {"number_of_replicas": 0}},
        )
        try:
            yield name
        finally:
            await client.indices.delete_index_template(name=name)


async def test_reindex_refuses_an_index_a_shadowing_template_made(
    es_settings: Settings, embedder: CachedEmbedder
) -> None:
    """The new version gets the operator's template, not the bot's: no `_meta`, no vector
    mapping. Moving the alias to it would break every process; the reindex refuses, naming
    the template, and leaves the alias and the old version as they were."""
    index = await open_index(es_settings, embedder)
    try:
        await _write(index, embedder, [_doc("guide", ["Install the Slack app."])])
        async with operators_template(es_settings) as template:
            with pytest.raises(SearchIndexError) as caught:
                await reindex(index, delete_old=True)
        message = str(caught.value)
        assert message.startswith(
            f"{index.names.version(2)} was not created with the bot's mapping: the index "
            f"template(s) {template}, of a higher priority than {index.names.template}, "
            "override the bot's mapping"
        )
        assert "the alias stays where it was" in message
        assert await index.alias_indices() == [index.names.version(1)]
        assert not await index.client.indices.exists(index=index.names.version(2))
        await index.check_compatible()
        hits = await index.search("slack app", k=1)
        assert [h.chunk.doc_id for h in hits] == ["guide"]
    finally:
        await drop_indices(index.client, index.names)
        await index.close()


async def test_a_first_version_a_shadowing_template_made_names_the_template(
    es_settings: Settings, embedder: CachedEmbedder
) -> None:
    """Not "holds vectors of None ... run `bot index reindex`", which would only build
    another such version: the template to change."""
    try:
        async with operators_template(es_settings) as template:
            with pytest.raises(SearchIndexError) as caught:
                await open_index(es_settings, embedder)
        assert f"the index template(s) {template}, of a higher priority" in str(caught.value)
        assert "vectors of None" not in str(caught.value)
    finally:
        await _cleanup(es_settings, embedder)


def test_reindex_refuses_to_run_twice_at_once(
    es_settings: Settings, embedder: CachedEmbedder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import asyncio

    _cli_env(monkeypatch, tmp_path, es_settings)

    async def hold_lock() -> None:
        index = await open_index(es_settings, embedder)
        await ElasticsearchRunLocks(index.client, es_settings.elasticsearch).claim(
            REINDEX_LOCK, "another-host:1", 600
        )
        await index.close()

    asyncio.run(hold_lock())
    try:
        result = runner.invoke(app, ["index", "reindex"])
        assert result.exit_code != 0
        assert "another reindex is running" in str(result.exception or result.output)
    finally:
        asyncio.run(_cleanup(es_settings, embedder))


async def test_cluster_going_away_mid_ingest_then_resume(
    tmp_path: Path, settings: Settings, embedder: CachedEmbedder
) -> None:
    server = NoidaServer(tmp_path / "cluster").start()
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(24):
        (folder / f"doc{i:02d}.md").write_text(f"# Doc {i}\n\nGadget {i} manual, about widgets.\n")
    s = elasticsearch_settings(settings, server.url)
    s = s.model_copy(
        update={
            "ingest": s.ingest.model_copy(update={"embed_group_chunks": 4}),
            "elasticsearch": s.elasticsearch.model_copy(update={"max_retries": 0}),
        }
    )
    index = await open_index(s, embedder)
    try:
        with pytest.raises(IndexUnavailable, match="can't reach Elasticsearch"):
            await Ingestor(index, embedder, s.ingest).ingest(
                [str(folder)], source="kb", progress=StopAfter(server, 8)
            )
    finally:
        await index.close()
    server.start()  # same port, same data: the cluster is back
    index = await open_index(s, embedder)
    try:
        report = await Ingestor(index, embedder, s.ingest).ingest([str(folder)], source="kb")
        assert report.failed == []
        assert report.counts[Outcome.UNCHANGED] >= 8  # what was done before is not redone
        assert report.counts[Outcome.ADDED] + report.counts[Outcome.UNCHANGED] == 24
        stats = await index.stats()
        assert (stats.documents, stats.chunks) == (24, 24)  # nothing twice, nothing missing
    finally:
        await index.close()
        server.stop()


@pytest.mark.parametrize("chat", [False, True], ids=["terminal", "chat"])
async def test_cluster_going_away_mid_question_is_a_clear_answer(
    tmp_path: Path, settings: Settings, embedder: CachedEmbedder, chat: bool
) -> None:
    """In a chat the asker's count, in the cluster too, fails first: it admits the question
    (and says so in the log), and the search then says what is wrong."""
    server = NoidaServer(tmp_path / "cluster").start()
    s = elasticsearch_settings(settings, server.url)
    s = s.model_copy(
        update={"elasticsearch": s.elasticsearch.model_copy(update={"max_retries": 0})}
    )
    index = await open_index(s, embedder)
    engine = build_engine(s, ElasticsearchBackend(index), chat=chat)
    try:
        await _write(index, embedder, [_doc("guide", ["Invite the bot to a channel."])])
        question = Question(
            "slack", "slack:T/C/1.0", "U1", "How do I invite the bot?", ChannelKind.CHANNEL
        )
        ok = await engine.answer(question)
        assert ok.status is not AnswerStatus.ERROR
        server.stop()
        with structlog.testing.capture_logs() as logs:
            down = await engine.answer(question)
        assert down.status is AnswerStatus.ERROR
        assert down.text == INDEX_UNAVAILABLE
        assert any("can't reach Elasticsearch" in note for note in down.trace.notes)
        assert ("asker_count_failed" in [e["event"] for e in logs]) is chat
    finally:
        await engine.close()
        await index.close()
        server.stop()


async def test_racing_deliveries_of_one_event_answer_it_once(
    proxied: tuple[Settings, ProxyScript], embedder: CachedEmbedder
) -> None:
    """The winner of the first key is slow to claim the second: the loser must not take it."""
    settings, script = proxied
    index = await open_index(settings, embedder)
    a, b = (ElasticsearchPlatformState(index.client, settings.elasticsearch, 60) for _ in range(2))
    try:
        second = f"/{settings.elasticsearch.index_prefix}-deliveries/_create/{hashed_id('msg:1')}"
        script.delay_once[f"PUT {second}"] = 0.3
        first_a = asyncio.create_task(a.first_delivery("event:1", "msg:1"))
        await asyncio.sleep(0.1)  # a holds event:1 and waits on msg:1
        assert not await b.first_delivery("event:1", "msg:1")
        assert await first_a
        assert isinstance(index, ElasticsearchIndex)
        await drop_indices(index.client, index.names)
    finally:
        await index.close()
