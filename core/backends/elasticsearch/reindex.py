"""Rebuilding the chunks index as a new version while the old one keeps serving.

For a new embedder or mapping: the new version is created from the current template, filled from
the old one (vectors copied when the embedder is the same, re-embedded otherwise, through the
embedding cache), checked, and only then does the alias move, in one atomic `_aliases` call.
Searches never see a missing or half-filled index. If anything fails before the swap, the new
version is deleted and the alias stays where it was; so too when the new version was not made
with the bot's mapping (an operator's index template of a higher priority shadows the bot's).

Writes made to the old version while this runs are not copied: rerun `bot ingest` afterwards
(changed documents are recognised by checksum, so it only redoes what changed).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from elasticsearch import helpers

from core.backends.elasticsearch.connection import explain, explained
from core.backends.elasticsearch.documents import chunk_from_source
from core.backends.elasticsearch.index import ElasticsearchIndex
from core.backends.elasticsearch.schema import CHUNK, chunks_meta, mapping_conflicts
from core.backends.elasticsearch.versions import overridden, shadowing_templates
from core.domain.documents import embedding_text
from core.domain.health import ReindexReport
from core.errors import SearchIndexError


async def reindex(
    index: ElasticsearchIndex,
    *,
    delete_old: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> ReindexReport:
    """Build the next version, fill it, swap the alias; `on_progress(done, total)` per page."""
    client, names = index.client, index.names
    with explained(index.settings):
        old = await index.current_index()
        old_meta, _ = await index.index_meta(old)
        existing = (await client.indices.get(index=f"{names.chunks}-v*")).body
        number = 1 + max((names.version_number(i) or 0) for i in existing)
        new = names.version(number)
        await client.indices.refresh(index=old)
        total = int((await client.count(index=old))["count"])
        await client.indices.create(index=new)
    embedder = index.embedder
    reembed = old_meta.get("embedder") != embedder.model_id or old_meta.get("dimensions") != str(
        embedder.dimensions
    )
    try:
        with explained(index.settings):
            await _check_made_as_asked(index, new)
            chunks, documents = await _copy(index, old, new, reembed, total, on_progress)
            await client.indices.refresh(index=new)
            copied = int((await client.count(index=new))["count"])
            if copied != total:
                raise SearchIndexError(
                    f"{new} received {copied} of {total} entries; the alias stays"
                )
            await client.indices.update_aliases(
                actions=[
                    {"remove": {"index": old, "alias": names.chunks}},
                    {"add": {"index": new, "alias": names.chunks}},
                ]
            )
    except BaseException:
        with contextlib.suppress(Exception):  # the cleanup must not hide why it failed
            await client.indices.delete(index=new, ignore_unavailable=True)
        raise
    if delete_old:
        try:
            await client.indices.delete(index=old)
        except Exception as exc:
            raise SearchIndexError(
                f"{new} now serves, but deleting {old} failed: {explain(exc, index.settings)}"
            ) from exc
    return ReindexReport(old, new, chunks, documents, reembed, delete_old)


async def _check_made_as_asked(index: ElasticsearchIndex, new: str) -> None:
    """The new version must have the mapping and `_meta` the bot's template gives: another
    template that shadows it would otherwise be filled, pass the count, take the alias, and
    leave every process refusing an index "of vectors of None", for a reindex to "fix" the
    same way. The caller deletes it; the alias and the old version stay untouched."""
    embedder = index.embedder
    meta, properties = await index.index_meta(new)
    wanted = chunks_meta(embedder.model_id, embedder.dimensions)
    if meta == wanted and not mapping_conflicts(properties, embedder.dimensions):
        return
    shadows = await shadowing_templates(index.client, index.names, new)
    raise SearchIndexError(
        f"{overridden(index.names, new, shadows)}; the alias stays where it was. Then run "
        "`bot index reindex` again"
    )


async def _embed_where_needed(
    index: ElasticsearchIndex, page: list[dict[str, Any]], reembed: bool
) -> None:
    """Vectors for a new embedder, and wherever the server left them out of `_source`."""
    chunk_hits = [
        h
        for h in page
        if h["_source"].get("kind") == CHUNK and (reembed or "embedding" not in h["_source"])
    ]
    if chunk_hits:
        texts = [embedding_text(chunk_from_source(h["_source"])) for h in chunk_hits]
        vectors = await index.embedder.embed_documents(texts)
        for hit, vector in zip(chunk_hits, vectors, strict=True):
            hit["_source"]["embedding"] = [float(x) for x in vector]


async def _copy(
    index: ElasticsearchIndex,
    old: str,
    new: str,
    reembed: bool,
    total: int,
    on_progress: Callable[[int, int], None] | None,
) -> tuple[int, int]:
    page: list[dict[str, Any]] = []
    counts = [0, 0, 0]  # chunks, documents, done

    async def flush() -> None:
        await _embed_where_needed(index, page, reembed)
        actions = [
            {"_op_type": "index", "_index": new, "_id": h["_id"], "_source": h["_source"]}
            for h in page
        ]
        _, errors = await helpers.async_bulk(
            index.slow_client,
            actions,
            chunk_size=index.settings.bulk_chunk_size,
            max_retries=index.settings.bulk_max_retries,
            initial_backoff=index.settings.bulk_initial_backoff_s,
            raise_on_error=False,
        )
        if isinstance(errors, list) and errors:
            raise SearchIndexError(
                f"copying into {new} failed for {len(errors)} entries: {errors[0]}"
            )
        for h in page:
            counts[0 if h["_source"].get("kind") == CHUNK else 1] += 1
        counts[2] += len(page)
        page.clear()
        if on_progress is not None:
            on_progress(counts[2], total)

    async for hit in index.scan({"match_all": {}}, index=old):
        page.append(hit)
        if len(page) >= index.settings.scan_page_size:
            await flush()
    if page:
        await flush()
    return counts[0], counts[1]
