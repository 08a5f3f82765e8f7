"""Shared state on Elasticsearch: conversation turns, delivery de-duplication, bot threads,
answers and feedback, replies in progress, run locks and learned keywords (and, beside this
module, each asker's count), so several bot processes behave as one.

Elasticsearch has no transactions, so every claim is a single-document operation:
- a claim is a `create` (`op_type=create`): of two processes, exactly one gets 201, the other
  409; an expired claim is taken over by an update conditioned on the sequence number seen
  (`if_seq_no` / `if_primary_term`), which again only one process can win;
- a conversation (an asker's count) is one document updated by read-modify-write under the same
  condition, retried on conflict (`_until_written`), so two answers finishing at once both land;
- reads that must see the latest write use GET by id, which is real-time (no refresh needed).

These stores share the index's client and do not close it: the index does.
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import structlog
from elasticsearch import (
    ApiError,
    AsyncElasticsearch,
    ConflictError,
    NotFoundError,
    TransportError,
    helpers,
)
from tenacity import (
    AsyncRetrying,
    RetryError,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from core.backends.elasticsearch.connection import explain, explained
from core.backends.elasticsearch.schema import IndexNames, hashed_id
from core.config import ElasticsearchSettings
from core.domain.conversation import Answer, Turn
from core.domain.feedback import (
    FEEDBACK_REASONS,
    MAX_FEEDBACK_NOTE_CHARS,
    RecordedAnswer,
    recorded_answer,
    votes_by_learned_document,
)
from core.domain.insights import LoggedAnswer, logged_answer
from core.domain.replies import PendingReply
from core.errors import SearchIndexError
from core.ports import Embedder
from core.search.sketch import answer_row

# Read-modify-write of one document (a conversation, an asker's count): on a conflict (another
# process wrote in between) wait a random, growing moment and retry, so racing writers spread
# out and all land.
CAS_ATTEMPTS = 30
CAS_WAIT = wait_random_exponential(multiplier=0.01, max=0.5)


T = TypeVar("T")


class Conflict(Exception):
    """Another writer changed the document between our read and our write."""


# Counted on the server, so concurrent uses never overwrite each other.
COUNT_USE = "ctx._source.uses += 1; ctx._source.last_used_at = params.now"
# An answer's lists, kept as objects ({"items": [...]}): an unindexed field must be an object.
_LISTS = ("citations", "consulted", "question_sketch")
# What an answer recorded before the answer log existed lacks, and reads as.
_LOG_DEFAULTS: dict[str, Any] = {
    "platform": "",
    "channel": "",
    "question_hash": "",
    "mode": "agent",
    "posted": True,
    "model": "",
    "input_tokens": 0,
    "output_tokens": 0,
    "total_s": 0.0,
    "model_s": 0.0,
}
# Answer ids are uuid4 hex (see `record_answer`).
_ANSWER_ID = re.compile(r"[0-9a-f]{32}")
log = structlog.get_logger(__name__)


MS_PER_S = 1000


def now_ms() -> int:
    return int(time.time() * MS_PER_S)


async def ensure_state_indices(
    client: AsyncElasticsearch, names: IndexNames, settings: ElasticsearchSettings
) -> None:
    """Create the state indices that are missing (a race with another process is harmless)
    and give the existing ones the fields added since they were made."""
    with explained(settings):
        for index, properties in names.state_indices().items():
            if await client.indices.exists(index=index):
                # Fields added since the index was made (additive: old documents lack them).
                await client.indices.put_mapping(index=index, properties=properties)
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


class Store:
    def __init__(self, client: AsyncElasticsearch, settings: ElasticsearchSettings) -> None:
        self._client = client
        self._settings = settings
        self._names = IndexNames(settings.index_prefix)
        self._once = client.options(max_retries=0)
        self._next_purges: dict[str, float] = {}

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

    async def _write_unless_changed(
        self, index: str, doc_id: str, current: dict[str, Any] | None, document: dict[str, Any]
    ) -> None:
        """Create the document, or replace `current` as read; `Conflict` when another writer
        came between the read and this write."""
        written = (
            await self._create(index, doc_id, document)
            if current is None
            else await self._take_over(index, current, document)
        )
        if not written:
            raise Conflict

    async def _until_written(self, attempt: Callable[[], Awaitable[T]], what: str) -> T:
        """`attempt`, a read-modify-write, run again after each `Conflict`, a random, growing
        moment later; `what` names the document when it never lands."""
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(Conflict),
            wait=CAS_WAIT,
            stop=stop_after_attempt(CAS_ATTEMPTS),
        )
        try:
            with explained(self._settings):
                return await retrying(attempt)
        except RetryError as exc:
            raise SearchIndexError(f"{what}: {CAS_ATTEMPTS} concurrent writes in a row") from exc

    async def _purge_now_and_then(self, index: str, field: str, before_ms: int) -> None:
        """Delete `index`'s documents whose `field` is before `before_ms`, at most once per
        `state_purge_interval_s` each, so a state index does not grow without end. Housekeeping:
        a failure is logged, never the reason a message goes unanswered."""
        if time.monotonic() < self._next_purges.get(index, 0.0):
            return
        self._next_purges[index] = time.monotonic() + self._settings.state_purge_interval_s
        try:
            await self._client.delete_by_query(
                index=index,
                query={"range": {field: {"lt": before_ms}}},
                conflicts="proceed",
                wait_for_completion=False,
            )
        except (ApiError, TransportError) as exc:
            log.warning("state_purge_failed", index=index, error=str(explain(exc, self._settings)))

    async def close(self) -> None:
        """The client belongs to the index, which closes it."""


class ElasticsearchConversationStore(Store):
    async def recent(self, key: str, limit: int) -> list[Turn]:
        if limit <= 0:
            return []
        with explained(self._settings):
            found = await self._get(self._names.conversations, hashed_id(key))
        turns = (found or {}).get("_source", {}).get("turns", [])
        return [Turn(t["question"], t["answer"]) for t in turns[-limit:]]

    async def append(self, key: str, turn: Turn) -> None:
        index, doc_id = self._names.conversations, hashed_id(key)
        entry = {"question": turn.question, "answer": turn.answer, "at": now_ms()}
        keep = self._settings.conversation_max_turns

        async def attempt() -> None:
            current = await self._get(index, doc_id)
            turns = [*(current or {}).get("_source", {}).get("turns", []), entry][-keep:]
            updated = {"key": key, "turns": turns, "updated_at": entry["at"]}
            await self._write_unless_changed(index, doc_id, current, updated)

        await self._until_written(attempt, f"conversation {key!r}")

    async def expire(self, before: float) -> int:
        """Whole conversations (one document each): one still going keeps its turns."""
        with explained(self._settings):
            await self._client.indices.refresh(index=self._names.conversations)
            done = await self._client.delete_by_query(
                index=self._names.conversations,
                query={"range": {"updated_at": {"lt": int(before * MS_PER_S)}}},
                refresh=True,
                conflicts="proceed",
            )
        return int(done.get("deleted", 0))


class ElasticsearchPlatformState(Store):
    def __init__(
        self,
        client: AsyncElasticsearch,
        settings: ElasticsearchSettings,
        dedup_ttl_s: float,
        store_questions: bool = True,
        embedder: Embedder | None = None,
        max_question_chars: int | None = None,
    ) -> None:
        """`store_questions`: false keeps only a hash of each question in the answer log, and
        a sketch of its embedding by `embedder` (`question_sketch`). `max_question_chars`:
        the longest question the log keeps (`answers.max_question_chars`: an adapter records
        even a message refused as too long)."""
        super().__init__(client, settings)
        self._ttl_ms = int(dedup_ttl_s * 1000)
        self._store_questions = store_questions
        self._embedder = embedder
        self._max_question_chars = max_question_chars

    async def first_delivery(self, *keys: str) -> bool:
        """Claims the keys in order and stops at the first one already held: a process that
        lost a key must not go on to claim the next, or two racing deliveries of the same event
        could each take one key and both give up."""
        index = self._names.deliveries
        now = now_ms()
        with explained(self._settings):
            await self._purge_now_and_then(index, "seen_at", now - self._ttl_ms)
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

    async def remember_thread(self, key: str) -> None:
        with explained(self._settings):
            await self._create(
                self._names.threads, hashed_id(key), {"key": key, "created_at": now_ms()}
            )

    async def is_bot_thread(self, key: str) -> bool:
        with explained(self._settings):
            return bool(await self._client.exists(index=self._names.threads, id=hashed_id(key)))

    async def record_answer(
        self,
        conversation_key: str,
        question: str,
        answer: Answer,
        *,
        posted: bool = True,
        channel: str | None = None,
    ) -> str:
        answer_id = uuid.uuid4().hex
        row = await answer_row(
            conversation_key,
            question,
            answer,
            posted=posted,
            channel=channel,
            store_questions=self._store_questions,
            embedder=self._embedder,
            max_question_chars=self._max_question_chars,
        )
        document = {
            **row,
            **{c: {"items": row[c]} for c in _LISTS},
            "created_at": now_ms(),
        }
        with explained(self._settings):
            await self._client.index(index=self._names.answers, id=answer_id, document=document)
        return answer_id

    async def move_answer(self, answer_id: str, conversation_key: str) -> None:
        with explained(self._settings):
            await self._client.update(
                index=self._names.answers,
                id=answer_id,
                doc={"conversation_key": conversation_key},
            )

    async def answer_log(self, since: float) -> list[LoggedAnswer]:
        pages = self.answer_log_pages(since, self._settings.scan_page_size)
        entries = [entry async for page in pages for entry in page]
        return sorted(entries, key=lambda e: e.at)

    async def answer_log_pages(
        self, since: float, page_size: int
    ) -> AsyncIterator[list[LoggedAnswer]]:
        """Scrolled `page_size` answers at a time; each page's votes and reasons are looked up
        by its answers' ids, not read whole."""
        recent = {"range": {"created_at": {"gte": int(since * MS_PER_S)}}}
        with explained(self._settings):
            await self._client.indices.refresh(index=self._log_indices)
            hits: list[dict[str, Any]] = []
            async for hit in self._scan(self._names.answers, recent, page_size):
                hits.append(hit)
                if len(hits) == page_size:
                    yield await self._logged(hits, page_size)
                    hits = []
            if hits:
                yield await self._logged(hits, page_size)

    async def _logged(self, hits: list[dict[str, Any]], page_size: int) -> list[LoggedAnswer]:
        ids = {"terms": {"answer_id": [h["_id"] for h in hits]}}
        votes: dict[str, list[int]] = {}
        async for vote in self._scan(self._names.feedback, ids, page_size):
            votes.setdefault(vote["_source"]["answer_id"], []).append(int(vote["_source"]["vote"]))
        reasons: dict[str, list[str]] = {}
        async for reason in self._scan(self._names.feedback_reasons, ids, page_size):
            reasons.setdefault(reason["_source"]["answer_id"], []).append(
                reason["_source"]["reason"]
            )
        return [
            logged_answer(
                h["_id"],
                int(h["_source"]["created_at"]) / MS_PER_S,
                _log_fields(h["_source"]),
                votes.get(h["_id"], []),
                reasons.get(h["_id"], []),
            )
            for h in hits
        ]

    async def claim_recheck(self, answer_id: str) -> bool:
        with explained(self._settings):
            return await self._create(
                self._names.rechecks, answer_id, {"answer_id": answer_id, "at": now_ms()}
            )

    async def release_recheck(self, answer_id: str) -> None:
        with explained(self._settings), contextlib.suppress(NotFoundError):
            await self._client.delete(index=self._names.rechecks, id=answer_id)

    async def expire_answers(self, before: float) -> int:
        cutoff = int(before * MS_PER_S)
        with explained(self._settings):
            # A query sees only what a refresh made searchable: the newest answers too.
            await self._client.indices.refresh(index=self._log_indices)
            done = await self._client.delete_by_query(
                index=self._names.answers,
                query={"range": {"created_at": {"lt": cutoff}}},
                refresh=True,
                conflicts="proceed",
            )
            for index in (self._names.feedback, self._names.feedback_reasons, self._names.rechecks):
                await self._client.delete_by_query(
                    index=index,
                    query={"range": {"at": {"lt": cutoff}}},
                    refresh=True,
                    conflicts="proceed",
                )
        return int(done.get("deleted", 0))

    @property
    def _log_indices(self) -> list[str]:
        names = self._names
        return [names.answers, names.feedback, names.feedback_reasons, names.rechecks]

    def _scan(
        self, index: str, query: dict[str, Any], page_size: int | None = None
    ) -> AsyncIterable[dict[str, Any]]:
        return helpers.async_scan(
            self._client,
            index=index,
            query={"query": query},
            size=page_size or self._settings.scan_page_size,
        )

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
                    "at": now_ms(),
                },
                refresh="wait_for",
            )
        return True

    async def recorded_answer(self, answer_id: str) -> RecordedAnswer | None:
        if not _ANSWER_ID.fullmatch(answer_id):  # it came back from a button: untrusted
            return None
        with explained(self._settings):
            found = await self._get(self._names.answers, answer_id)
        if found is None:
            return None
        kept = _log_fields(found["_source"])
        return recorded_answer(
            kept["conversation_key"],
            kept["question"],
            kept["answer"],
            kept["status"],
            kept["citations"],
            kept["mode"],
            kept["consulted"],
        )

    async def record_feedback_reason(
        self, answer_id: str, user: str, reason: str, note: str
    ) -> bool:
        if not _ANSWER_ID.fullmatch(answer_id) or reason not in FEEDBACK_REASONS:
            return False
        with explained(self._settings):
            if not await self._client.exists(index=self._names.answers, id=answer_id):
                return False
            await self._client.index(
                index=self._names.feedback_reasons,
                id=hashed_id(f"{answer_id}\n{user}"),
                document={
                    "answer_id": answer_id,
                    "user": user,
                    "reason": reason,
                    "note": note[:MAX_FEEDBACK_NOTE_CHARS],
                    "at": now_ms(),
                },
                refresh="wait_for",
            )
        return True

    async def feedback_reasons(self, answer_id: str) -> list[tuple[str, str, str]]:
        with explained(self._settings):
            response = await self._client.search(
                index=self._names.feedback_reasons,
                query={"term": {"answer_id": answer_id}},
                size=self._settings.scan_page_size,
            )
        kept = [h["_source"] for h in response["hits"]["hits"]]
        return sorted((k["user"], k["reason"], k["note"]) for k in kept)

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

    async def hold_reply(self, reply: PendingReply) -> None:
        document = {
            "platform": reply.platform,
            "channel": reply.channel,
            "message": reply.message,
            "thread": reply.thread,
            "streamed": reply.streamed,
            "owner": reply.owner,
            "created_at": int(reply.created_at * MS_PER_S),
        }
        with explained(self._settings):
            await self._client.index(
                index=self._names.pending_replies, id=reply.id, document=document
            )

    async def drop_reply(self, reply_id: str) -> None:
        with explained(self._settings), contextlib.suppress(NotFoundError):
            await self._client.delete(index=self._names.pending_replies, id=reply_id)

    async def beat(self, owner: str, forget_after_s: float) -> None:
        now = now_ms()
        with explained(self._settings):
            await self._client.index(
                index=self._names.reply_owners,
                id=hashed_id(owner),
                document={"owner": owner, "beat_at": now},
            )
            await self._purge_now_and_then(
                self._names.reply_owners, "beat_at", now - int(forget_after_s * MS_PER_S)
            )

    async def abandoned_replies(
        self, platform: str, *, silent_s: float, older_than_s: float, limit: int
    ) -> list[PendingReply]:
        """The live owners first (a few: one per running process), then the replies that
        none of them owns, or that are too old to be waited for."""
        now = now_ms()
        quiet_since = now - int(silent_s * MS_PER_S)
        names = self._names
        with explained(self._settings):
            await self._client.indices.refresh(index=[names.pending_replies, names.reply_owners])
            live = [
                hit["_source"]["owner"]
                async for hit in self._scan(
                    names.reply_owners, {"range": {"beat_at": {"gt": quiet_since}}}
                )
            ]
            too_old: dict[str, Any] = {
                "range": {"created_at": {"lt": now - int(older_than_s * MS_PER_S)}}
            }
            unowned: dict[str, Any] = {"bool": {"must_not": [{"terms": {"owner": live}}]}}
            response = await self._client.search(
                index=names.pending_replies,
                query={
                    "bool": {
                        "filter": [
                            {"term": {"platform": platform}},
                            {"range": {"created_at": {"lte": quiet_since}}},
                        ],
                        "should": [too_old, unowned] if live else [{"match_all": {}}],
                        "minimum_should_match": 1,
                    }
                },
                sort=[{"created_at": "asc"}],
                size=limit,
            )
        return [
            PendingReply(
                id=hit["_id"],
                platform=kept["platform"],
                channel=kept["channel"],
                message=kept["message"],
                owner=kept["owner"],
                thread=kept["thread"],
                streamed=bool(kept["streamed"]),
                created_at=int(kept["created_at"]) / MS_PER_S,
            )
            for hit in response["hits"]["hits"]
            for kept in [hit["_source"]]
        ]

    async def claim_reply(self, reply_id: str) -> bool:
        """A delete: of two processes deleting at once, exactly one gets `deleted`, the other
        a 404. Never retried by the client (a retry after a lost reply would see the 404)."""
        with explained(self._settings):
            try:
                await self._once.delete(index=self._names.pending_replies, id=reply_id)
            except NotFoundError:
                return False
        return True


class ElasticsearchRunLocks(Store):
    async def claim(self, name: str, holder: str, ttl_s: float) -> bool:
        index, doc_id = self._names.locks, hashed_id(name)
        now = now_ms()
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
        if current is None or current["_source"]["expires_at"] <= now_ms():
            return None
        held = current["_source"]
        return str(held["holder"]), held["expires_at"] / MS_PER_S

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


class ElasticsearchModelFacts(Store):
    async def get(self, key: str, max_age_s: float) -> str | None:
        with explained(self._settings):
            found = await self._get(self._names.facts, hashed_id(key))
        if found is None:
            return None
        fact = found["_source"]
        fresh = fact["updated_at"] >= now_ms() - int(max_age_s * MS_PER_S)
        return str(fact["value"]) if fresh else None

    async def put(self, key: str, value: str) -> None:
        document = {"key": key, "value": value, "updated_at": now_ms()}
        with explained(self._settings):
            await self._client.index(index=self._names.facts, id=hashed_id(key), document=document)


def _log_fields(kept: dict[str, Any]) -> dict[str, Any]:
    """A stored answer as `log_row` made it: lists unwrapped, older documents' gaps filled."""
    lists = {c: (kept.get(c) or {}).get("items", []) for c in _LISTS}
    return {**_LOG_DEFAULTS, **kept, **lists}
