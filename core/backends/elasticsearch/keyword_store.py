"""Learned keywords and learned documents on Elasticsearch, shared by every process: writes
are compare-and-set (retried on a conflict), so concurrent saves of one keyword converge."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from elasticsearch import NotFoundError, helpers

from core.backends.elasticsearch.connection import explained
from core.backends.elasticsearch.schema import hashed_id
from core.backends.elasticsearch.state import CAS_ATTEMPTS, COUNT_USE, Store, now_ms
from core.domain.insights import question_hash
from core.domain.learned import (
    HASHED_QUESTION,
    LearnedDocument,
    LearnedKeyword,
    sources_from,
    sources_json,
)


class ElasticsearchKeywordStore(Store):
    """A keyword document (created once, `op_type=create`) and one link document per
    association (its id derived from keyword, document and question, so a repeat is a no-op):
    concurrent saves never contend for one document. Uses are counted by a server-side script."""

    async def add(self, keyword: str, *, doc_id: str, question: str) -> None:
        now = now_ms()
        with explained(self._settings):
            document = {"keyword": keyword, "uses": 0, "created_at": now, "last_used_at": None}
            await self._create(self._names.keywords, hashed_id(keyword), document)
            await self._client.index(
                index=self._names.keyword_links,
                id=hashed_id(f"{keyword}\n{doc_id}\n{question}"),
                document={"keyword": keyword, "doc_id": doc_id, "question": question, "at": now},
            )

    async def _learned(self, query: dict[str, Any]) -> list[LearnedKeyword]:
        with explained(self._settings):
            await self._client.indices.refresh(
                index=[self._names.keywords, self._names.keyword_links]
            )
            found = await self._client.search(
                index=self._names.keywords,
                query=query,
                size=_MAX_KEYWORDS,
                sort=[{"keyword": "asc"}],
            )
            counts = await self._client.search(
                index=self._names.keyword_links,
                query={"match_all": {}},
                size=0,
                aggs={
                    "k": {
                        "terms": {"field": "keyword", "size": _MAX_KEYWORDS},
                        "aggs": {"saved": {"max": {"field": "at"}}},
                    }
                },
            )
        buckets = counts["aggregations"]["k"]["buckets"]
        links = {b["key"]: int(b["doc_count"]) for b in buckets}
        saved = {b["key"]: b["saved"]["value"] for b in buckets}
        learned = []
        for hit in found["hits"]["hits"]:
            k = hit["_source"]
            used = k.get("last_used_at")
            learned.append(
                LearnedKeyword(
                    k["keyword"],
                    links.get(k["keyword"], 0),
                    int(k.get("uses", 0)),
                    k["created_at"] / 1000,
                    None if used is None else used / 1000,
                    None if saved.get(k["keyword"]) is None else saved[k["keyword"]] / 1000,
                )
            )
        return learned

    async def get(self, keyword: str) -> LearnedKeyword | None:
        found = await self._learned({"term": {"keyword": keyword}})
        return found[0] if found else None

    async def all(self) -> list[LearnedKeyword]:
        return await self._learned({"match_all": {}})

    async def _count_uses(self, index: str, keys: list[str]) -> None:
        now = now_ms()
        with explained(self._settings):
            for key in keys:
                with contextlib.suppress(NotFoundError):  # pruned meanwhile: nothing to count
                    await self._client.update(
                        index=index,
                        id=hashed_id(key),
                        script={"source": COUNT_USE, "params": {"now": now}},
                        retry_on_conflict=CAS_ATTEMPTS,
                    )

    async def record_use(self, keywords: list[str]) -> None:
        await self._count_uses(self._names.keywords, keywords)

    async def record_document_use(self, doc_ids: list[str]) -> None:
        await self._count_uses(self._names.learned, doc_ids)

    async def add_document(self, document: LearnedDocument) -> None:
        d = document
        with explained(self._settings):
            await self._create(
                self._names.learned,
                hashed_id(d.doc_id),
                {
                    "doc_id": d.doc_id,
                    "question": d.question,
                    "query": d.query,
                    "sources": {"items": json.loads(sources_json(d.sources))},
                    "uses": 0,
                    "created_at": int(d.created_at * 1000),
                    "last_used_at": None,
                },
            )

    async def _scan(self, index: str, query: dict[str, Any]) -> list[dict[str, Any]]:
        hits = helpers.async_scan(
            self._client, index=index, query={"query": query}, size=self._settings.scan_page_size
        )
        return [hit["_source"] async for hit in hits]

    async def documents(self) -> list[LearnedDocument]:
        return await self._documents({"match_all": {}})

    async def document(self, doc_id: str) -> LearnedDocument | None:
        found = await self._documents({"term": {"doc_id": doc_id}})
        return found[0] if found else None

    async def _documents(self, query: dict[str, Any]) -> list[LearnedDocument]:
        with explained(self._settings):
            await self._client.indices.refresh(
                index=[self._names.learned, self._names.keyword_links]
            )
            records = await self._scan(self._names.learned, query)
            links = await self._scan(self._names.keyword_links, query)
        keywords: dict[str, set[str]] = {}
        for link in links:
            keywords.setdefault(link["doc_id"], set()).add(link["keyword"])
        records.sort(key=lambda r: (r["created_at"], r["doc_id"]))
        return [
            LearnedDocument(
                doc_id=r["doc_id"],
                question=r["question"],
                query=r["query"],
                sources=sources_from(r["sources"]["items"]),
                created_at=r["created_at"] / 1000,
                last_used_at=None if r.get("last_used_at") is None else r["last_used_at"] / 1000,
                uses=int(r.get("uses", 0)),
                keywords=tuple(sorted(keywords.get(r["doc_id"], ()))),
            )
            for r in records
        ]

    async def _delete_links(self, query: dict[str, Any]) -> None:
        with explained(self._settings):
            await self._client.delete_by_query(
                index=self._names.keyword_links, query=query, conflicts="proceed", refresh=True
            )

    async def _delete_record(self, index: str, key: str) -> None:
        with explained(self._settings), contextlib.suppress(NotFoundError):
            await self._client.delete(index=index, id=hashed_id(key), refresh=True)

    async def remove_keywords(self, keywords: list[str], *, saved_before: float) -> None:
        await self._delete_links(
            {
                "bool": {
                    "filter": [
                        {"terms": {"keyword": keywords}},
                        {"range": {"at": {"lte": int(saved_before * 1000)}}},
                    ]
                }
            }
        )
        for keyword in keywords:
            with explained(self._settings):
                left = await self._client.count(
                    index=self._names.keyword_links, query={"term": {"keyword": keyword}}
                )
            if not left["count"]:  # saved again meanwhile: the keyword stays
                await self._delete_record(self._names.keywords, keyword)

    async def remove_document(self, doc_id: str) -> None:
        await self._delete_links({"term": {"doc_id": doc_id}})
        await self._delete_record(self._names.learned, doc_id)

    async def forget_questions(self, before: float) -> int:
        """A learned document's question emptied in place; an association, whose id derives
        from its question, written again under its hash's id, then the old one deleted."""
        older = int(before * 1000)
        changed = 0
        with explained(self._settings):
            await self._client.indices.refresh(
                index=[self._names.learned, self._names.keyword_links]
            )
            learned = await self._scan(
                self._names.learned, {"range": {"created_at": {"lt": older}}}
            )
            for record in learned:
                if record["question"]:
                    await self._client.update(
                        index=self._names.learned,
                        id=hashed_id(record["doc_id"]),
                        doc={"question": ""},
                        retry_on_conflict=CAS_ATTEMPTS,
                    )
                    changed += 1
            links = await self._scan(self._names.keyword_links, {"range": {"at": {"lt": older}}})
            for link in links:
                question = link["question"]
                if not question or question.startswith(HASHED_QUESTION):
                    continue
                keyword, doc_id = link["keyword"], link["doc_id"]
                hashed = HASHED_QUESTION + question_hash(question)
                await self._client.index(
                    index=self._names.keyword_links,
                    id=hashed_id(f"{keyword}\n{doc_id}\n{hashed}"),
                    document={**link, "question": hashed},
                )
                with contextlib.suppress(NotFoundError):
                    await self._client.delete(
                        index=self._names.keyword_links,
                        id=hashed_id(f"{keyword}\n{doc_id}\n{question}"),
                    )
                changed += 1
            await self._client.indices.refresh(
                index=[self._names.learned, self._names.keyword_links]
            )
        return changed


# Most keywords one listing returns (pruning keeps the set far smaller).
_MAX_KEYWORDS = 10_000
