"""What the bot learns from the web, kept in the knowledge base so the next person finds it there.

A web search's result becomes a learned document: one chunk per web page it cites (the page's
own URL, so a citation of learned knowledge still lands on the original page), marked learned,
with its keywords in the BM25-searched `keywords` field. The keyword store is the source of truth
for which keywords a document has; the index copy is rewritten from it, and re-checked after the
write, so concurrent saves of one document converge on every keyword instead of the last
writer's view.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
import weakref
from collections.abc import Sequence
from dataclasses import replace

import structlog

from core.domain.documents import (
    LEARNED_SOURCE,
    DocumentRecord,
    DocumentWrite,
    chunk_id,
    embedding_text,
)
from core.domain.learned import (
    LEARNED_PREFIX,
    MAX_KEYWORD_CHARS,
    LearnedDocument,
    normalise_keyword,
    sources_json,
)
from core.domain.text import clip, defuse_pings
from core.domain.web import WebResult, WebSource, page_chunk
from core.errors import InvalidKeyword, SearchIndexError
from core.ports import Embedder, KeywordStore, SearchIndex

# A document's index copy is rewritten until it matches the store. A round is overtaken only
# by another process's save of that document meanwhile (this process's saves and syncs of one
# document take turns), which then syncs itself: the rounds bound what a burst of the same
# pages learned at once by every process may need, with room.
_SYNC_ROUNDS = 10
_TITLE_PARTS = re.compile(r"\s+[-–—]\s+|\s*[|·»]\s*|:\s+")
# Title parts that name a kind of page, not a topic: useless as keywords.
_GENERIC = frozenset(
    {
        "api reference",
        "blog",
        "docs",
        "documentation",
        "faq",
        "guide",
        "help",
        "help center",
        "home",
        "introduction",
        "overview",
        "reference",
        "support",
        "welcome",
        "wikipedia",
    }
)
log = structlog.get_logger(__name__)


def derive_keywords(results: Sequence[WebResult], limit: int) -> list[str]:
    """Keywords taken from the result pages' titles (split at their separators), then from the
    queries: what the loop saves itself when the model will not."""
    candidates = [part for r in results for s in r.sources for part in _TITLE_PARTS.split(s.title)]
    candidates += [r.query for r in results]
    kept: list[str] = []
    for candidate in candidates:
        try:
            keyword = normalise_keyword(clip(candidate, MAX_KEYWORD_CHARS, ellipsis=""))
        except InvalidKeyword:
            continue
        if keyword not in _GENERIC and keyword not in kept:
            kept.append(keyword)
        if len(kept) == limit:
            break
    return kept


def learned_sources(results: Sequence[WebResult]) -> tuple[WebSource, ...]:
    """Every page of the results once, its text and title defused: stored text is shown again
    to other people, in other channels, so it must never be able to ping anyone."""
    seen: dict[str, WebSource] = {}
    for result in results:
        for source in result.sources:
            if source.url not in seen:
                seen[source.url] = WebSource(
                    source.url, defuse_pings(source.title), defuse_pings(source.text)
                )
    return tuple(seen.values())


def learned_doc_id(sources: Sequence[WebSource]) -> str:
    """The same pages with the same text are one learned document, whoever found them."""
    return LEARNED_PREFIX + hashlib.sha256(sources_json(sources).encode()).hexdigest()[:32]


class LearnedKnowledge:
    def __init__(
        self,
        index: SearchIndex,
        embedder: Embedder,
        store: KeywordStore,
        *,
        max_keywords_per_document: int,
    ) -> None:
        """`max_keywords_per_document`: the same web pages learned again and again (a popular
        question) gather every answer's keywords on one document, which then matches ever
        more unrelated questions; past this many, new keywords are not added until the prune
        frees room."""
        self._index = index
        self._embedder = embedder
        self.store = store
        self._max_keywords = max_keywords_per_document
        # Per document, this process's saves and syncs take turns. The limit is a read, then
        # adds: two answers of this process learning the same pages at once would each see the
        # room free (another process still can: the overshoot is at most one save per
        # process). And a sync overtaken by a save must write again.
        self._turns: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    async def learn(
        self, *, question: str, results: Sequence[WebResult], keywords: Sequence[str]
    ) -> str:
        """Store the results as one learned document found by `keywords` (those that fit
        under the document's limit); returns its id."""
        sources = learned_sources(results)
        if not sources or not keywords:
            raise ValueError("learning needs at least one web page and one keyword")
        document = LearnedDocument(
            doc_id=learned_doc_id(sources),
            question=question,
            query="; ".join(dict.fromkeys(r.query for r in results)),
            sources=sources,
            created_at=time.time(),
        )
        await self.store.add_document(document)
        async with self._turn(document.doc_id):
            known = await self.store.document(document.doc_id)
            held = set(known.keywords) if known is not None else set()
            fresh = [k for k in dict.fromkeys(keywords) if k not in held]
            room = max(self._max_keywords - len(held), 0)
            for keyword in [k for k in keywords if k in held] + fresh[:room]:
                await self.store.add(keyword, doc_id=document.doc_id, question=question)
        if len(fresh) > room:
            log.info("keywords_over_limit", skipped=len(fresh) - room, limit=self._max_keywords)
        await self.sync(document.doc_id)
        log.info("knowledge_learned", pages=len(sources), keywords=min(len(fresh), room))
        return document.doc_id

    def _turn(self, doc_id: str) -> asyncio.Lock:
        """The document's lock in this process, held as long as someone holds or awaits it."""
        return self._turns.setdefault(doc_id, asyncio.Lock())

    async def sync(self, doc_id: str) -> bool:
        """Make the index copy carry the store's keywords of the document (or drop it when it
        has none left); False when it was dropped."""
        async with self._turn(doc_id):
            return await self._sync(doc_id)

    async def _sync(self, doc_id: str) -> bool:
        for _ in range(_SYNC_ROUNDS):
            document = await self.store.document(doc_id)
            if document is None or not document.keywords:
                await self.drop(doc_id)
                return False
            await self.write(document)
            again = await self.store.document(doc_id)
            if again is not None and again.keywords == document.keywords:
                return True
        raise SearchIndexError(f"learned document {doc_id} kept changing while it was written")

    async def write(self, document: LearnedDocument) -> None:
        """The document's chunks in the index, with its keywords (vectors come from the cache
        when only the keywords changed: keywords are not part of the embedded text)."""
        chunks = [
            page_chunk(
                page,
                chunk_id=chunk_id(document.doc_id, position),
                doc_id=document.doc_id,
                source=LEARNED_SOURCE,
                position=position,
                learned=True,
                keywords=document.keywords,
            )
            for position, page in enumerate(document.sources)
        ]
        vectors = await self._embedder.embed_documents([embedding_text(c) for c in chunks])
        checksum = hashlib.sha256(
            f"{sources_json(document.sources)}|{'|'.join(document.keywords)}".encode()
        ).hexdigest()
        first = document.sources[0]
        record = DocumentRecord(
            document.doc_id, LEARNED_SOURCE, first.title, first.url, checksum, len(chunks)
        )
        failed = await self._index.write_documents([DocumentWrite(record, chunks, vectors)])
        if failed:
            raise SearchIndexError(f"learned document not written: {failed[document.doc_id]}")

    async def drop(self, doc_id: str) -> None:
        """Out of the index first, then out of the store: a crash in between leaves a record
        with no index copy, which the next prune removes, never an index copy nobody tracks."""
        await self._index.delete_document(doc_id)
        await self.store.remove_document(doc_id)

    async def record_use(self, doc_ids: Sequence[str], keywords: Sequence[str]) -> None:
        """Learned documents were cited in an answer: they, and their keywords, were useful."""
        await self.store.record_document_use(list(doc_ids))
        await self.store.record_use(list(keywords))

    async def drop_untracked(self) -> list[str]:
        """Learned documents in the index that the store no longer knows (a crash between the
        two halves of a drop): removed; returns their ids."""
        # The index first: a document learned meanwhile has its record in the store before
        # its index copy, so it is known by the time the store is read.
        indexed = [d for d in await self._index.documents() if d.startswith(LEARNED_PREFIX)]
        known = {d.doc_id for d in await self.store.documents()}
        untracked = [doc_id for doc_id in indexed if doc_id not in known]
        for doc_id in untracked:
            await self._index.delete_document(doc_id)
        return untracked

    async def forget(self, keywords: Sequence[str]) -> tuple[list[str], list[str]]:
        """Remove `keywords` (wrongly learned: a team's decision, not a rule's) from every
        learned document, in the prune's order: index copies rewritten without them, then the
        store forgets them, then each document is synced from the store (dropped when it has no
        keyword left). Returns the documents (rewritten, dropped)."""
        gone = set(keywords)
        touched = [d for d in await self.store.documents() if gone & set(d.keywords)]
        for document in touched:
            remaining = [k for k in document.keywords if k not in gone]
            if remaining:
                await self.with_keywords(document, remaining)
        await self.store.remove_keywords(sorted(gone), saved_before=time.time())
        rewritten: list[str] = []
        dropped: list[str] = []
        for document in touched:
            kept = await self.sync(document.doc_id)
            (rewritten if kept else dropped).append(document.doc_id)
        return rewritten, dropped

    async def with_keywords(self, document: LearnedDocument, keywords: Sequence[str]) -> None:
        """Rewrite the index copy with only `keywords` (pruning removed the others)."""
        await self.write(replace(document, keywords=tuple(keywords)))
