"""Shared state on Elasticsearch: conversation turns, delivery de-duplication, bot threads,
answers and feedback, run locks and learned keywords, so several bot processes behave as one.

Elasticsearch has no transactions, so every claim is a single-document operation:
- a claim is a `create` (`op_type=create`): of two processes, exactly one gets 201, the other
  409; an expired claim is taken over by an update conditioned on the sequence number seen
  (`if_seq_no` / `if_primary_term`), which again only one process can win;
- a conversation is one document updated by read-modify-write under the same condition, retried
  on conflict, so two answers finishing at once both land;
- reads that must see the latest write use GET by id, which is real-time (no refresh needed).

These stores share the index's client and do not close it: the index does.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from typing import Any

import structlog
from elasticsearch import ApiError, AsyncElasticsearch, ConflictError, NotFoundError, helpers
from tenacity import (
    AsyncRetrying,
    RetryError,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from core.backends.elasticsearch.connection import explained
from core.backends.elasticsearch.schema import IndexNames, hashed_id
from core.config import ElasticsearchSettings
from core.domain.conversation import Answer, Turn
from core.domain.feedback import citations_json, votes_by_learned_document
from core.domain.learned import LearnedDocument, LearnedKeyword, sources_from, sources_json
from core.errors import SearchIndexError

# Read-modify-write of a conversation: on a conflict (another process wrote in between) wait a
# random, growing moment and retry, so writers racing on one thread spread out and all land.
_CAS_ATTEMPTS = 30
_CAS_WAIT = wait_random_exponential(multiplier=0.01, max=0.5)


class _Conflict(Exception):
    """Another writer changed the document between our read and our write."""


# Counted on the server, so concurrent uses never overwrite each other.
_COUNT_USE = "ctx._source.uses += 1; ctx._source.last_used_at = params.now"
# Most keywords one listing returns (pruning keeps the set far smaller).
_MAX_KEYWORDS = 10_000
# Answer ids are uuid4 hex (see `record_answer`).
_ANSWER_ID = re.compile(r"[0-9a-f]{32}")
log = structlog.get_logger(__name__)


_MS_PER_S = 1000


def _now_ms() -> int:
    return int(time.time() * _MS_PER_S)


async def ensure_state_indices(
    client: AsyncElasticsearch, names: IndexNames, settings: ElasticsearchSettings
) -> None:
    """Create the state indices that are missing (a race with another process is harmless)."""
    with explained(settings):
        for index, properties in names.state_indices().items():
            if await client.indices.exists(index=index):
                continue
            try:
                await client.indices.create(
                    index=index,
                    settings={
                        "number_of_shards": 1,
                        "number_of_replicas": settings.number_of_replicas,
                    },
                    mappings={"dynamic": "strict", "properties": properties},
                )
            except ApiError as exc:
                if exc.error != "resource_already_exists_exception":
                    raise


class _Store:
    def __init__(self, client: AsyncElasticsearch, settings: ElasticsearchSettings) -> None:
        self._client = client
        self._settings = settings
        self._names = IndexNames(settings.index_prefix)
        self._once = client.options(max_retries=0)

    async def _get(self, index: str, doc_id: str) -> dict[str, Any] | None:
        try:
            return dict((await self._client.get(index=index, id=doc_id)).body)
        except NotFoundError:
            return None

    async def _create(self, index: str, doc_id: str, document: dict[str, Any]) -> bool:
        """True when this call created the document; False when it already existed."""
        try:
            # Never retried by the client: a retry after a lost reply would see our own
            # document as someone else's (409) and drop the claim.
            await self._once.create(index=index, id=doc_id, document=document)
        except ConflictError:
            return False
        return True

    async def _take_over(
        self, index: str, current: dict[str, Any], document: dict[str, Any]
    ) -> bool:
        """Replace `current` only if nobody changed it since it was read."""
        try:
            await self._once.index(
                index=index,
                id=current["_id"],
                document=document,
                if_seq_no=current["_seq_no"],
                if_primary_term=current["_primary_term"],
            )
        except ConflictError:
            return False
        return True

    async def close(self) -> None:
        """The client belongs to the index, which closes it."""


class ElasticsearchConversationStore(_Store):
    async def recent(self, key: str, limit: int) -> list[Turn]:
        if limit <= 0:
            return []
        with explained(self._settings):
            found = await self._get(self._names.conversations, hashed_id(key))
        turns = (found or {}).get("_source", {}).get("turns", [])
        return [Turn(t["question"], t["answer"]) for t in turns[-limit:]]

    async def append(self, key: str, turn: Turn) -> None:
        index, doc_id = self._names.conversations, hashed_id(key)
        entry = {"question": turn.question, "answer": turn.answer, "at": _now_ms()}
        keep = self._settings.conversation_max_turns

        async def attempt() -> None:
            current = await self._get(index, doc_id)
            if current is None:
                fresh = {"key": key, "turns": [entry], "updated_at": entry["at"]}
                if not await self._create(index, doc_id, fresh):
                    raise _Conflict
                return
            turns = [*current["_source"].get("turns", []), entry][-keep:]
            updated = {"key": key, "turns": turns, "updated_at": entry["at"]}
            if not await self._take_over(index, current, updated):
                raise _Conflict

        try:
            with explained(self._settings):
                async for trying in AsyncRetrying(
                    retry=retry_if_exception_type(_Conflict),
                    wait=_CAS_WAIT,
                    stop=stop_after_attempt(_CAS_ATTEMPTS),
                ):
                    with trying:
                        await attempt()
        except RetryError as exc:
            raise SearchIndexError(
                f"conversation {key!r}: {_CAS_ATTEMPTS} concurrent writes in a row"
            ) from exc


class ElasticsearchPlatformState(_Store):
    def __init__(
        self, client: AsyncElasticsearch, settings: ElasticsearchSettings, dedup_ttl_s: float
    ) -> None:
        super().__init__(client, settings)
        self._ttl_ms = int(dedup_ttl_s * 1000)
        self._next_purge = 0.0

    async def first_delivery(self, *keys: str) -> bool:
        """Claims the keys in order and stops at the first one already held: a process that
        lost a key must not go on to claim the next, or two racing deliveries of the same event
        could each take one key and both give up."""
        index = self._names.deliveries
        now = _now_ms()
        with explained(self._settings):
            await self._purge_expired(now)
            for key in keys:
                if not await self._claim_key(index, key, now):
                    return False
        return True

    async def _claim_key(self, index: str, key: str, now: int) -> bool:
        doc = {"key": key, "seen_at": now}
        if await self._create(index, hashed_id(key), doc):
            return True
        current = await self._get(index, hashed_id(key))
        if current is None:  # purged between our create and our read: claim again
            return await self._create(index, hashed_id(key), doc)
        expired = current["_source"]["seen_at"] < now - self._ttl_ms
        return expired and await self._take_over(index, current, doc)

    async def _purge_expired(self, now: int) -> None:
        """Delete expired keys now and then, so the index does not grow without end."""
        if time.monotonic() < self._next_purge:
            return
        self._next_purge = time.monotonic() + self._settings.state_purge_interval_s
        try:
            await self._client.delete_by_query(
                index=self._names.deliveries,
                query={"range": {"seen_at": {"lt": now - self._ttl_ms}}},
                conflicts="proceed",
                wait_for_completion=False,
            )
        except ApiError as exc:  # housekeeping: never the reason a message goes unanswered
            log.warning("delivery_purge_failed", error=str(exc.message))

    async def remember_thread(self, key: str) -> None:
        with explained(self._settings):
            await self._create(
                self._names.threads, hashed_id(key), {"key": key, "created_at": _now_ms()}
            )

    async def is_bot_thread(self, key: str) -> bool:
        with explained(self._settings):
            return bool(await self._client.exists(index=self._names.threads, id=hashed_id(key)))

    async def record_answer(self, conversation_key: str, question: str, answer: Answer) -> str:
        answer_id = uuid.uuid4().hex
        document = {
            "conversation_key": conversation_key,
            "question": question,
            "answer": answer.text,
            "status": answer.status.value,
            "citations": {"items": citations_json(answer)},
            "created_at": _now_ms(),
        }
        with explained(self._settings):
            await self._client.index(index=self._names.answers, id=answer_id, document=document)
        return answer_id

    async def record_feedback(self, answer_id: str, user: str, helpful: bool) -> bool:
        if not _ANSWER_ID.fullmatch(answer_id):  # it came back from a button: untrusted
            return False
        with explained(self._settings):
            if not await self._client.exists(index=self._names.answers, id=answer_id):
                return False
            await self._client.index(
                index=self._names.feedback,
                id=hashed_id(f"{answer_id}\n{user}"),
                document={
                    "answer_id": answer_id,
                    "user": user,
                    "vote": 1 if helpful else -1,
                    "at": _now_ms(),
                },
                refresh="wait_for",
            )
        return True

    async def feedback_for(self, answer_id: str) -> list[tuple[str, int]]:
        with explained(self._settings):
            response = await self._client.search(
                index=self._names.feedback,
                query={"term": {"answer_id": answer_id}},
                size=self._settings.scan_page_size,
            )
        return [(h["_source"]["user"], int(h["_source"]["vote"])) for h in response["hits"]["hits"]]

    async def learned_votes(self) -> dict[str, int]:
        net: dict[str, int] = {}
        with explained(self._settings):
            await self._client.indices.refresh(index=self._names.feedback)
            async for hit in helpers.async_scan(
                self._client,
                index=self._names.feedback,
                query={"query": {"match_all": {}}},
                size=self._settings.scan_page_size,
            ):
                vote = hit["_source"]
                net[vote["answer_id"]] = net.get(vote["answer_id"], 0) + int(vote["vote"])
            ids = list(net)
            answers: list[tuple[list[Any], int]] = []
            for start in range(0, len(ids), self._settings.scan_page_size):
                page = ids[start : start + self._settings.scan_page_size]
                found = await self._client.mget(index=self._names.answers, ids=page)
                answers += [
                    (d["_source"]["citations"]["items"], net[d["_id"]])
                    for d in found["docs"]
                    if d.get("found")
                ]
        return votes_by_learned_document(answers)


class ElasticsearchRunLocks(_Store):
    async def claim(self, name: str, holder: str, ttl_s: float) -> bool:
        index, doc_id = self._names.locks, hashed_id(name)
        now = _now_ms()
        document = {"name": name, "holder": holder, "expires_at": now + int(ttl_s * 1000)}
        with explained(self._settings):
            if await self._create(index, doc_id, document):
                return True
            current = await self._get(index, doc_id)
            if current is None:  # released between our create and our read
                return await self._create(index, doc_id, document)
            held = current["_source"]
            if held["holder"] != holder and held["expires_at"] > now:
                return False
            return await self._take_over(index, current, document)

    async def held(self, name: str) -> tuple[str, float] | None:
        with explained(self._settings):
            current = await self._get(self._names.locks, hashed_id(name))
        if current is None or current["_source"]["expires_at"] <= _now_ms():
            return None
        held = current["_source"]
        return str(held["holder"]), held["expires_at"] / _MS_PER_S

    async def release(self, name: str, holder: str) -> None:
        index, doc_id = self._names.locks, hashed_id(name)
        with explained(self._settings), contextlib.suppress(ConflictError, NotFoundError):
            current = await self._get(index, doc_id)
            if current is None or current["_source"]["holder"] != holder:
                return
            await self._client.delete(
                index=index,
                id=doc_id,
                if_seq_no=current["_seq_no"],
                if_primary_term=current["_primary_term"],
            )


class ElasticsearchKeywordStore(_Store):
    """A keyword document (created once, `op_type=create`) and one link document per
    association (its id derived from keyword, document and question, so a repeat is a no-op):
    concurrent saves never contend for one document. Uses are counted by a server-side script."""

    async def add(self, keyword: str, *, doc_id: str, question: str) -> None:
        now = _now_ms()
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
        now = _now_ms()
        with explained(self._settings):
            for key in keys:
                with contextlib.suppress(NotFoundError):  # pruned meanwhile: nothing to count
                    await self._client.update(
                        index=index,
                        id=hashed_id(key),
                        script={"source": _COUNT_USE, "params": {"now": now}},
                        retry_on_conflict=_CAS_ATTEMPTS,
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
