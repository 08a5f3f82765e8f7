"""The production index: Elasticsearch, behind the same interface as the embedded SQLite one.

Hybrid search sends a BM25F query (`combined_fields` over title, heading, text and learned
keywords, weighted as in config) and a kNN query with the same filters at once, and fuses the
two rankings with our own RRF (`core/fusion.py`), so both backends rank alike and the free
licence is enough. When the licence allows it and `elasticsearch.fusion: server` is set, the
server's `rrf` retriever does the fusion instead; a 403 from it switches this process back to
ours.

Writes go through `helpers.async_bulk` with deterministic `_id`s (the chunk ids), so re-ingest
overwrites instead of duplicating, and 429s are retried with backoff. Per document, the order
is: a pending record when the document is new, chunks, then the removal of the document's chunks
that are not in the new set, then the document record with its checksum. A crash anywhere
leaves the old (or the pending) checksum, so the next ingest rewrites that document: resumable,
never half-marked as done, and never out of reach of `bot remove` and `--prune`. A new
document whose write fails is deleted again, so that, as on SQLite, it leaves nothing
searchable; an updated one keeps its old record, and whichever of its old passages were not
overwritten yet, until the next ingest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Collection, Iterable, Sequence
from dataclasses import replace
from http import HTTPStatus
from typing import Any

from elasticsearch import ApiError, AsyncElasticsearch, NotFoundError, helpers

from core.backends.elasticsearch.connection import (
    ClusterInfo,
    allows_server_rrf,
    by_query_failure,
    checking,
    connect,
    explained,
    licence,
)
from core.backends.elasticsearch.documents import (
    SOURCE_FIELDS,
    chunk_from_source,
    chunk_source,
    item_reason,
    now_millis,
    record_id,
    record_source,
)
from core.backends.elasticsearch.queries import (
    bm25_query,
    knn_query,
    proximity_rescore,
    rrf_retriever,
)
from core.backends.elasticsearch.schema import (
    CHUNK,
    DOCUMENT,
    IndexNames,
    chunks_template,
    doc_id_key,
    mapping_conflicts,
)
from core.backends.elasticsearch.versions import (
    by_version,
    create_first_version,
    overridden,
    shadowing_templates,
)
from core.config import ElasticsearchSettings, SearchSettings
from core.domain.documents import (
    PENDING_CHECKSUM,
    Chunk,
    DocumentRecord,
    DocumentWrite,
    IndexStats,
    SearchFilters,
    SearchHit,
    SearchMode,
    Vectors,
)
from core.errors import IndexUnavailable, SearchIndexError
from core.ports import Embedder
from core.search.checks import check_vectors
from core.search.fusion import Fused, Ranked
from core.search.hybrid import (
    HybridIndex,
    SearchRequest,
    fuse,
    fused_hits,
    limited,
    limits_documents,
    no_candidates,
)
from core.search.terms import query_terms

log = logging.getLogger(__name__)

# Buckets of the per-source chunk count in `stats` (sources are a handful of labels).
_MAX_SOURCES = 10_000
# Said of a new document whose failed write could not be cleared away either.
_LEFT_IN_REACH = (
    "the passages written before the failure stay under a pending record until the next "
    "ingest rewrites them or `bot remove` deletes them"
)


class ElasticsearchIndex(HybridIndex):
    def __init__(
        self,
        client: AsyncElasticsearch,
        embedder: Embedder,
        search: SearchSettings,
        settings: ElasticsearchSettings,
    ) -> None:
        super().__init__(embedder, search)
        self.client = client
        self.embedder = embedder
        self.settings = settings
        self.names = IndexNames(settings.index_prefix)
        # Bulk writes and deletes by query can take far longer than a search on a busy cluster.
        self.slow_client = client.options(request_timeout=settings.bulk_timeout_s)
        self._search = search
        self._server_rrf = False

    @property
    def location(self) -> str:
        """Where the chunks live, for messages: the index alias only (the cluster's URL may
        carry credentials)."""
        return f"the Elasticsearch index {self.names.chunks}"

    # -- opening ----------------------------------------------------------------------------

    async def open(self, *, check_compatible: bool = True) -> ClusterInfo:
        """Check the cluster, create the template and first index version if missing, and
        refuse an index built for another embedder or with a conflicting mapping."""
        info = await connect(self.client, self.settings)
        with checking("index template"), explained(self.settings):
            await self.client.indices.put_index_template(
                name=self.names.template,
                **chunks_template(
                    self.names, self.settings, self.embedder.model_id, self.embedder.dimensions
                ),
            )
        with checking("index"), explained(self.settings):
            if not await self.client.indices.exists_alias(name=self.names.chunks):
                await create_first_version(self.client, self.names)
            if check_compatible:
                await self.check_compatible()
        with checking("licence"), explained(self.settings):
            if self.settings.fusion == "server":
                kind, status = await licence(self.client)
                self._server_rrf = allows_server_rrf(kind, status)
                if not self._server_rrf:
                    log.warning(
                        "elasticsearch.fusion is server, but the licence is %s (%s): "
                        "fusing in the bot instead",
                        kind,
                        status,
                    )
        return info

    async def alias_indices(self) -> list[str]:
        """The indices behind the chunks alias, by version number (v10 after v9); one, unless
        someone added another by hand."""
        aliases = await self.client.indices.get_alias(name=self.names.chunks)
        return by_version(self.names, aliases.body)

    async def current_index(self) -> str:
        return (await self.alias_indices())[-1]

    async def entries(self, indices: Sequence[str]) -> dict[str, int]:
        """How many entries (chunks and records) each index holds."""
        await self.client.indices.refresh(index=",".join(indices))
        return {i: int((await self.client.count(index=i))["count"]) for i in indices}

    async def index_meta(self, index: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(`_meta`, properties) of one concrete chunks index."""
        mapping = (await self.client.indices.get_mapping(index=index)).body[index]["mappings"]
        return dict(mapping.get("_meta") or {}), dict(mapping.get("properties") or {})

    async def check_compatible(self) -> None:
        index = await self.current_index()
        meta, properties = await self.index_meta(index)
        wanted = (self.embedder.model_id, str(self.embedder.dimensions))
        found = (meta.get("embedder"), meta.get("dimensions"))
        if not meta and (shadows := await shadowing_templates(self.client, self.names, index)):
            # No `_meta` at all: another template made it; a reindex would do the same.
            raise SearchIndexError(
                f"{overridden(self.names, index, shadows)}; then run `bot index reindex`"
            )
        if found != wanted:
            raise SearchIndexError(
                f"{index} holds vectors of {found[0]} ({found[1]} dimensions), but this bot "
                f"embeds with {wanted[0]} ({wanted[1]}); run `bot index reindex` to build a "
                "new index version with it"
            )
        conflicts = mapping_conflicts(properties, self.embedder.dimensions)
        if conflicts:
            raise SearchIndexError(
                f"mapping conflict in {index}: {'; '.join(conflicts)}; run `bot index reindex` "
                "to build a new index version with the current mapping"
            )

    # -- writing ----------------------------------------------------------------------------

    async def _bulk(
        self, actions: Iterable[dict[str, Any]], refresh: bool = False
    ) -> list[dict[str, Any]]:
        """Send actions in bulk (429s retried with backoff); returns the failed items."""
        s = self.settings
        with explained(self.settings):
            _, errors = await helpers.async_bulk(
                self.slow_client,
                actions,
                chunk_size=s.bulk_chunk_size,
                max_retries=s.bulk_max_retries,
                initial_backoff=s.bulk_initial_backoff_s,
                raise_on_error=False,
                refresh=refresh,
            )
        return list(errors) if isinstance(errors, list) else []

    async def write_documents(self, writes: Sequence[DocumentWrite]) -> dict[str, str]:
        failed: dict[str, str] = {}
        valid: list[DocumentWrite] = []
        for w in writes:
            try:
                check_vectors(w.chunks, w.vectors, self.embedder.dimensions)
            except ValueError as exc:
                failed[w.record.doc_id] = str(exc)
            else:
                valid.append(w)
        now = now_millis()
        new = await self._hold_new_documents(valid, now, failed)
        valid = [w for w in valid if w.record.doc_id not in failed]
        try:
            await self._write_held(valid, now, failed)
        except IndexUnavailable:
            raise  # the cluster is gone: the pending records keep what was written in reach
        except SearchIndexError:
            await self._forget_unfinished(new)
            raise
        unfinished = new & set(failed)
        if unfinished and not await self._forget_unfinished(unfinished):
            for doc_id in unfinished:
                failed[doc_id] += f"; {_LEFT_IN_REACH}"
        return failed

    async def _hold_new_documents(
        self, writes: Sequence[DocumentWrite], now: int, failed: dict[str, str]
    ) -> set[str]:
        """Record each document the index does not hold yet as pending, before any of its
        chunks: a failed or interrupted write then leaves nothing out of reach of `bot remove`
        and `--prune`, and the pending checksum makes the next ingest write it again.

        Returns the documents recorded here (a failure must leave nothing of them behind). A
        document held already keeps its record (the `create` conflicts); one whose pending
        record is refused fails before anything of it is written."""
        by_record = {record_id(w.record.doc_id): w.record.doc_id for w in writes}
        held = set(by_record.values())
        actions = (
            {
                "_op_type": "create",
                "_index": self.names.chunks,
                "_id": record_id(w.record.doc_id),
                "_source": record_source(replace(w.record, checksum=PENDING_CHECKSUM), 0, now),
            }
            for w in writes
        )
        for error in await self._bulk(actions):
            item = next(iter(error.values()))
            doc_id = by_record.get(str(item.get("_id")))
            if doc_id is None:
                continue
            held.discard(doc_id)
            if item.get("status") != HTTPStatus.CONFLICT:
                failed[doc_id] = item_reason(item)
        return held

    async def _write_held(
        self, valid: Sequence[DocumentWrite], now: int, failed: dict[str, str]
    ) -> None:
        """Chunks, then the removal of each document's chunks not in its new set, then its
        record with the new checksum; a document's failure at any step goes into `failed`."""
        owner = {doc_id_key(c.chunk_id): w.record.doc_id for w in valid for c in w.chunks}
        actions = (
            {
                "_op_type": "index",
                "_index": self.names.chunks,
                "_id": doc_id_key(c.chunk_id),
                "_source": chunk_source(c, v, now),
            }
            for w in valid
            for c, v in zip(w.chunks, w.vectors, strict=True)
        )
        for error in await self._bulk(actions):
            item = next(iter(error.values()))
            doc_id = owner.get(str(item.get("_id")))
            if doc_id is not None and doc_id not in failed:
                failed[doc_id] = item_reason(item)
        done = [w for w in valid if w.record.doc_id not in failed]
        if not done:
            return
        if (stale := await self._delete_stale_chunks(done)) is not None:
            # Old passages may still be there: no new checksum, so the next ingest rewrites.
            for w in done:
                failed[w.record.doc_id] = str(stale)
            return
        records = (
            {
                "_op_type": "index",
                "_index": self.names.chunks,
                "_id": record_id(w.record.doc_id),
                "_source": record_source(w.record, len(w.chunks), now),
            }
            for w in done
        )
        for error in await self._bulk(records, refresh=self.settings.write_refresh):
            item = next(iter(error.values()))
            for w in done:
                if record_id(w.record.doc_id) == item.get("_id"):
                    failed[w.record.doc_id] = item_reason(item)

    async def _forget_unfinished(self, doc_ids: Collection[str]) -> bool:
        """Delete what a failed write left of documents that were new (their chunks and their
        pending records), so that, as on SQLite, a new document whose write failed leaves
        nothing searchable. Best effort, on a cluster that has just failed a write: False when
        this failed too, and the pending records keep those chunks in reach."""
        if not doc_ids:
            return True
        try:
            with explained(self.settings):
                await self.client.indices.refresh(index=self.names.chunks)
                response = await self.slow_client.delete_by_query(
                    index=self.names.chunks,
                    query={"terms": {"doc_id": sorted(doc_ids)}},
                    conflicts="proceed",
                    refresh=True,
                )
        except SearchIndexError as exc:
            log.warning("%d document(s) failed to write: %s; %s", len(doc_ids), exc, _LEFT_IN_REACH)
            return False
        if response.body.get("failures"):
            log.warning("%d document(s) failed to write; %s", len(doc_ids), _LEFT_IN_REACH)
            return False
        return True

    async def _delete_stale_chunks(self, done: Sequence[DocumentWrite]) -> SearchIndexError | None:
        """The documents' passages that are not in their new sets deleted; the error when the
        delete answered, yet left some (a block, a shard failure)."""
        keep = [doc_id_key(c.chunk_id) for w in done for c in w.chunks]
        query: dict[str, Any] = {
            "bool": {
                "filter": [
                    {"term": {"kind": CHUNK}},
                    {"terms": {"doc_id": [w.record.doc_id for w in done]}},
                ],
                "must_not": [{"ids": {"values": keep}}] if keep else [],
            }
        }
        with explained(self.settings):
            await self.client.indices.refresh(index=self.names.chunks)
            deleted = await self.slow_client.delete_by_query(
                index=self.names.chunks, query=query, conflicts="proceed", refresh=True
            )
        return by_query_failure(deleted.body, self.settings)

    async def replace_document(
        self, record: DocumentRecord, chunks: Sequence[Chunk], vectors: Vectors
    ) -> None:
        check_vectors(chunks, vectors, self.embedder.dimensions)
        failed = await self.write_documents([DocumentWrite(record, chunks, vectors)])
        if failed:
            raise SearchIndexError(f"{record.doc_id}: {failed[record.doc_id]}")

    async def delete_document(self, doc_id: str) -> int:
        with explained(self.settings):
            deleted = await self.slow_client.delete_by_query(
                index=self.names.chunks,
                query={
                    "bool": {"filter": [{"term": {"kind": CHUNK}}, {"term": {"doc_id": doc_id}}]}
                },
                conflicts="proceed",
                refresh=True,
            )
            # Chunks left behind (a block, a shard failure) must not be reported as removed,
            # nor the record deleted that keeps them in reach of the next `bot remove`.
            if (failure := by_query_failure(deleted.body, self.settings)) is not None:
                raise failure
            with contextlib.suppress(NotFoundError):
                await self.client.delete(
                    index=self.names.chunks, id=record_id(doc_id), refresh=True
                )
        return int(deleted["deleted"])

    # -- reading ----------------------------------------------------------------------------

    async def scan(
        self, query: dict[str, Any], index: str | None = None, fields: list[str] | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """Every matching hit, page by page (documents listing, reindex)."""
        body: dict[str, Any] = {"query": query}
        if fields is not None:
            body["_source"] = fields
        with explained(self.settings):
            async for hit in helpers.async_scan(
                self.client,
                index=index or self.names.chunks,
                query=body,
                size=self.settings.scan_page_size,
            ):
                yield hit

    async def documents(self) -> dict[str, DocumentRecord]:
        with explained(self.settings):
            await self.client.indices.refresh(index=self.names.chunks)
        records: dict[str, DocumentRecord] = {}
        async for hit in self.scan({"term": {"kind": DOCUMENT}}, fields=["document"]):
            d = hit["_source"]["document"]
            records[d["doc_id"]] = DocumentRecord(
                d["doc_id"], d["source"], d["title"], d["url"], d["checksum"], d["chunk_count"]
            )
        return records

    async def passages(self, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        wanted = list(dict.fromkeys(chunk_ids))
        found: dict[str, Chunk] = {}
        with explained(self.settings):
            for start in range(0, len(wanted), self.settings.scan_page_size):
                batch = wanted[start : start + self.settings.scan_page_size]
                response = await self.client.mget(
                    index=self.names.chunks, ids=[doc_id_key(c) for c in batch]
                )
                for doc in response["docs"]:
                    if doc.get("found") and doc["_source"].get("kind") == CHUNK:
                        chunk = chunk_from_source(doc["_source"])
                        found[chunk.chunk_id] = chunk
        return found

    async def stats(self) -> IndexStats:
        with explained(self.settings):
            response = await self.client.search(
                index=self.names.chunks,
                size=0,
                query={"match_all": {}},
                aggs={
                    "documents": {"filter": {"term": {"kind": DOCUMENT}}},
                    "chunks": {
                        "filter": {"term": {"kind": CHUNK}},
                        "aggs": {
                            "sources": {"terms": {"field": "source", "size": _MAX_SOURCES}},
                            "learned": {"filter": {"term": {"learned": True}}},
                        },
                    },
                },
            )
        aggs = response["aggregations"]
        stats = IndexStats()
        stats.documents = int(aggs["documents"]["doc_count"])
        stats.chunks = int(aggs["chunks"]["doc_count"])
        stats.learned_chunks = int(aggs["chunks"]["learned"]["doc_count"])
        for bucket in aggs["chunks"]["sources"]["buckets"]:
            stats.sources[str(bucket["key"])] = int(bucket["doc_count"])
        return stats

    # -- searching --------------------------------------------------------------------------

    async def _side(self, **body: Any) -> list[tuple[str, float, dict[str, Any]]]:
        response = await self.client.search(
            index=self.names.chunks,
            source_includes=SOURCE_FIELDS,
            track_total_hits=False,
            **body,
        )
        return [(h["_id"], float(h["_score"]), h["_source"]) for h in response["hits"]["hits"]]

    async def _run(
        self, r: SearchRequest, vector: asyncio.Future[Vectors] | None
    ) -> list[SearchHit]:
        with explained(self.settings):
            if vector is not None and r.mode is SearchMode.HYBRID and self._use_server_rrf():
                served = await self._server_fused(r.query, await vector, r.filters, r.k, r.limit)
                if served is not None:
                    return served
            return await self._client_fused(r, vector)

    def _use_server_rrf(self) -> bool:
        s = self._search
        return self._server_rrf and s.fusion == "rrf" and s.bm25_weight == s.vector_weight

    async def _client_fused(
        self, r: SearchRequest, vector: asyncio.Future[Vectors] | None
    ) -> list[SearchHit]:
        """Both sides at once: the BM25 request goes out while the query is still embedding."""

        async def knn_side(
            vector: asyncio.Future[Vectors],
        ) -> list[tuple[str, float, dict[str, Any]]]:
            knn = knn_query(await vector, r.filters, r.limit, self.settings)
            return await self._side(knn=knn, size=r.limit)

        rescore = proximity_rescore(
            r.query, self._search, min(r.limit, self._search.proximity_candidates)
        )
        bm25_side = (
            self._side(
                query=bm25_query(r.query, r.filters, self._search),
                size=r.limit,
                **({"rescore": rescore} if rescore else {}),
            )
            if r.mode is not SearchMode.VECTOR and query_terms(r.query)
            else no_candidates()  # only stop words: nothing to rank by, as on SQLite
        )
        vector_side = knn_side(vector) if vector is not None else no_candidates()
        bm25, knn = await asyncio.gather(bm25_side, vector_side)
        fused = fuse(
            [Ranked(i, score) for i, score, _ in bm25],
            # Elasticsearch reports cosine as (1 + cos) / 2; we report the cosine itself.
            [Ranked(i, 2 * score - 1) for i, score, _ in knn],
            r,
            self._search,
        )
        chunks = {hit_id: chunk_from_source(source) for hit_id, _, source in (*bm25, *knn)}
        per_document = self._search.max_passages_per_document
        top = limited(fused, r.k, per_document, lambda _: _documents(chunks))
        return fused_hits(top, chunks)

    async def _server_fused(
        self, query: str, vector: Vectors, filters: SearchFilters, k: int, limit: int
    ) -> list[SearchHit] | None:
        """The server's `rrf` retriever; None (and ours from now on) when the licence refuses.
        Where the per-document limit can change the top k, the whole fused window comes back
        and the limit is applied here, as with our fusion."""
        per_document = self._search.max_passages_per_document
        retriever = rrf_retriever(query, vector, filters, limit, self._search, self.settings)
        try:
            size = limit if limits_documents(k, per_document) else k
            hits = await self._side(retriever=retriever, size=size)
        except ApiError as exc:
            if exc.meta.status != 403:
                raise
            log.warning("the rrf retriever was refused (%s); fusing in the bot", exc.message)
            self._server_rrf = False
            return None
        chunks = {hit_id: chunk_from_source(source) for hit_id, _, source in hits}
        fused = [Fused(hit_id, score) for hit_id, score, _ in hits]
        top = limited(fused, k, per_document, lambda _: _documents(chunks))
        return [SearchHit(chunk=chunks[f.key], score=f.score) for f in top]

    async def refresh(self) -> None:
        """Nothing to bring up to date: the cluster maintains its own HNSW graphs as it
        indexes, and `elasticsearch.write_refresh` decides when writes become searchable."""

    async def close(self) -> None:
        await self.client.close()


def _documents(chunks: dict[str, Chunk]) -> dict[str, str]:
    """Each hit's document: Elasticsearch returns it with the hit."""
    return {hit_id: chunk.doc_id for hit_id, chunk in chunks.items()}
