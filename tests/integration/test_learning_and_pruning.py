"""Learned knowledge and its pruning on every backend (SQLite, Elasticsearch as emulated by
noida-db, a real cluster with ELASTICSEARCH_URL): concurrent saves, what a prune removes and
keeps under a controlled clock, idempotent reruns, and the run lock between two clocks."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
import structlog
import time_machine
from apscheduler.triggers.date import DateTrigger

from bot.clock import PruneJob, build_scheduler
from bot.wiring import build_knowledge, open_backend
from core.backends.elasticsearch.index import ElasticsearchIndex
from core.backends.elasticsearch.schema import hashed_id
from core.config import KeywordSettings, Settings
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, Citation, SourceKind
from core.domain.documents import SearchFilters
from core.domain.web import WebResult, WebSource
from core.learning.knowledge import LearnedKnowledge
from core.learning.pruning import KeywordPruner, StaleReason
from core.ports import Backend, PlatformState
from core.search.embedder import CachedEmbedder
from tests.conftest import Index
from tests.fakes.faults import SaveDuringPrune, SavesBetweenReads, StaleFirstRead

DAY = 86_400
T0 = 1_800_000_000.0


@dataclass
class Process:
    """What one bot process holds: its own connections to the shared backend."""

    backend: Backend
    index: Index
    knowledge: LearnedKnowledge
    platform: PlatformState
    pruner: KeywordPruner


@pytest.fixture
async def processes(
    backend_settings: Settings, embedder: CachedEmbedder
) -> AsyncIterator[tuple[Process, Process]]:
    settings = backend_settings.model_copy(
        update={
            "keywords": backend_settings.keywords.model_copy(
                update={"unused_days": 90, "min_age_days": 30, "min_uses": 2, "down_votes": 2}
            )
        }
    )
    made: list[Process] = []
    for _ in range(2):
        backend = await open_backend(settings, embedder)
        knowledge = build_knowledge(settings, backend)
        platform = backend.platform_state(60)
        made.append(
            Process(
                backend,
                backend.index,  # type: ignore[arg-type]  # one of the two, by `backend_settings`
                knowledge,
                platform,
                KeywordPruner(knowledge, platform, backend.locks, settings.keywords),
            )
        )
    try:
        yield made[0], made[1]
        await made[0].backend.drop()
    finally:
        for p in made:
            await p.backend.close()


def result(topic: str, page: str = "1") -> WebResult:
    return WebResult(
        f"{topic} query",
        (
            WebSource(
                f"https://{topic.replace(' ', '-')}.example/page-{page}",
                f"{topic.title()} guide",
                f"All about {topic}, page {page}: the {topic} settings live under Admin.",
            ),
        ),
    )


async def test_fifty_concurrent_saves_of_one_keyword_lose_nothing(
    processes: tuple[Process, Process],
) -> None:
    a, b = processes
    await asyncio.gather(
        *(
            (a if i % 2 else b).knowledge.learn(
                question=f"question {i} about zephyr?",
                results=[result("zephyr webhooks", page=str(i))],
                keywords=["zephyr webhooks"],
            )
            for i in range(50)
        )
    )
    store = a.knowledge.store
    [keyword] = await store.all()
    assert keyword.keyword == "zephyr webhooks"
    assert keyword.associations == 50
    documents = await store.documents()
    assert len(documents) == 50
    assert {d.question for d in documents} == {f"question {i} about zephyr?" for i in range(50)}
    hits = await a.index.search("zephyr webhooks", k=100, filters=SearchFilters(learned=True))
    assert len({h.chunk.doc_id for h in hits}) == 50
    assert all(h.chunk.keywords == ("zephyr webhooks",) for h in hits)


async def test_concurrent_keywords_for_one_document_all_reach_the_index(
    processes: tuple[Process, Process],
) -> None:
    a, b = processes
    keywords = [f"term {i:02d}" for i in range(10)]
    await asyncio.gather(
        *(
            (a if i % 2 else b).knowledge.learn(
                question=f"q{i}", results=[result("quotas")], keywords=[keyword]
            )
            for i, keyword in enumerate(keywords)
        )
    )
    [document] = await a.knowledge.store.documents()
    assert sorted(document.keywords) == keywords
    [hit] = await b.index.search("quotas", k=5, filters=SearchFilters(learned=True))
    assert sorted(hit.chunk.keywords) == keywords


async def test_one_document_learned_again_and_again_holds_a_bounded_number_of_keywords(
    processes: tuple[Process, Process],
) -> None:
    """The same pages learned by twenty answers with ten keywords each: the document stops
    taking new keywords at its limit (it would otherwise match ever more unrelated
    questions), and a keyword it holds can still be saved again."""
    a, _ = processes
    limit = KeywordSettings().max_per_document
    for n in range(20):
        keywords = [f"quota term {n:02d} {i}" for i in range(10)]
        await a.knowledge.learn(question=f"q{n}", results=[result("quotas")], keywords=keywords)
    [document] = await a.knowledge.store.documents()
    assert len(document.keywords) == limit
    assert "quota term 00 0" in document.keywords
    assert not any(k.startswith("quota term 19") for k in document.keywords)
    [hit] = await a.index.search("quotas", k=5, filters=SearchFilters(learned=True))
    assert len(hit.chunk.keywords) == limit
    await a.knowledge.learn(
        question="again", results=[result("quotas")], keywords=["quota term 00 0"]
    )
    saved = await a.knowledge.store.get("quota term 00 0")
    assert saved is not None
    assert saved.associations == 2


async def test_answers_learning_the_same_pages_at_once_keep_to_the_limit(
    processes: tuple[Process, Process], embedder: CachedEmbedder
) -> None:
    """Six answers of one process learning the same pages at once: the limit is read, then
    keywords added, so each must see what the others added."""
    a, _ = processes
    small = LearnedKnowledge(a.index, embedder, a.knowledge.store, max_keywords_per_document=3)
    await asyncio.gather(
        *(
            small.learn(question=f"q{n}", results=[result("quotas")], keywords=[f"k{n}a", f"k{n}b"])
            for n in range(6)
        )
    )
    [document] = await a.knowledge.store.documents()
    assert len(document.keywords) == 3


async def test_a_writer_with_a_stale_view_of_the_keywords_rewrites_until_current(
    processes: tuple[Process, Process], embedder: CachedEmbedder
) -> None:
    a, b = processes
    slow = LearnedKnowledge(
        a.index,
        embedder,
        StaleFirstRead(a.knowledge.store, 1.0),  # type: ignore[arg-type]
        max_keywords_per_document=KeywordSettings().max_per_document,
    )

    async def later() -> None:
        await asyncio.sleep(0.2)  # after the slow writer has read, before it writes
        await b.knowledge.learn(question="q2", results=[result("quotas")], keywords=["second"])

    await asyncio.gather(
        slow.learn(question="q1", results=[result("quotas")], keywords=["first"]), later()
    )
    [hit] = await b.index.search("quotas", k=5, filters=SearchFilters(learned=True))
    assert sorted(hit.chunk.keywords) == ["first", "second"]


async def test_a_sync_overtaken_by_a_dozen_saves_elsewhere_still_reaches_the_store(
    processes: tuple[Process, Process], embedder: CachedEmbedder
) -> None:
    """Each round of a sync can be overtaken by another process's save; the rounds are
    bounded, and a burst of the same pages learned elsewhere stays inside the bound."""
    a, b = processes
    doc_id = await a.knowledge.learn(question="q", results=[result("quotas")], keywords=["own"])
    busy = LearnedKnowledge(
        a.index,
        embedder,
        SavesBetweenReads(a.knowledge.store, doc_id, times=12),  # type: ignore[arg-type]
        max_keywords_per_document=KeywordSettings().max_per_document,
    )
    assert await busy.sync(doc_id)
    [hit] = await b.index.search("quotas", k=5, filters=SearchFilters(learned=True))
    assert sorted(hit.chunk.keywords) == sorted(["own", *(f"elsewhere {n}" for n in range(12))])


async def test_one_processs_syncs_of_a_document_take_turns(
    processes: tuple[Process, Process],
) -> None:
    """Answers of one process learning the same pages at once: their index writes never
    overlap, so none overtakes another's round."""
    a, _ = processes
    writing, most = 0, 0
    write = a.knowledge.write

    async def counted(document: object) -> None:
        nonlocal writing, most
        writing += 1
        most = max(most, writing)
        try:
            await asyncio.sleep(0.01)  # a write that takes a moment, as a cluster's does
            await write(document)  # type: ignore[arg-type]
        finally:
            writing -= 1

    a.knowledge.write = counted  # type: ignore[method-assign]
    await asyncio.gather(
        *(
            a.knowledge.learn(question=f"q{n}", results=[result("quotas")], keywords=[f"k{n}"])
            for n in range(6)
        )
    )
    assert most == 1
    [document] = await a.knowledge.store.documents()
    assert sorted(document.keywords) == [f"k{n}" for n in range(6)]


async def _learn_at(process: Process, when: float, topic: str, keywords: list[str]) -> str:
    with time_machine.travel(when, tick=False):
        return await process.knowledge.learn(
            question=f"what about {topic}?", results=[result(topic)], keywords=keywords
        )


async def _use_at(process: Process, when: float, doc_id: str, times: int = 1) -> None:
    with time_machine.travel(when, tick=False):
        for _ in range(times):
            document = await process.knowledge.store.document(doc_id)
            assert document is not None
            await process.knowledge.record_use([doc_id], document.keywords)


async def _vote(process: Process, doc_id: str, votes: list[bool]) -> None:
    """One answer citing the learned document, with these users' votes."""
    cited = Citation(1, "t", "https://x.example", "q", True, SourceKind.LEARNED, doc_id)
    answer = Answer("text [1]", AnswerStatus.ANSWERED, AnswerMode.AGENT, citations=[cited])
    answer_id = await process.platform.record_answer("slack/T1/C1/1.1", "q?", answer)
    for n, helpful in enumerate(votes):
        assert await process.platform.record_feedback(answer_id, f"U{n}", helpful)


async def test_prune_removes_what_the_rules_say_and_keeps_the_rest(
    processes: tuple[Process, Process],
) -> None:
    a, b = processes
    alpha = await _learn_at(a, T0, "alpha", ["shared term", "alpha only"])
    echo = await _learn_at(b, T0, "echo", ["shared term"])
    beta = await _learn_at(a, T0, "beta", ["beta sdk"])
    gamma = await _learn_at(b, T0 + 80 * DAY, "gamma", ["gamma cli"])
    fresh = await _learn_at(a, T0 + 110 * DAY, "fresh", ["fresh term"])
    delta = await _learn_at(b, T0 + 100 * DAY, "delta", ["delta tool"])
    await _use_at(a, T0 + 100 * DAY, echo, times=3)  # "shared term": 3 uses, recently
    await _use_at(b, T0 + 115 * DAY, delta, times=2)  # used, but voted down twice
    await _vote(a, delta, [False])
    await _vote(b, delta, [False, False, True])
    await _vote(a, echo, [True])
    now = T0 + 120 * DAY

    with time_machine.travel(now, tick=False):
        planned = await b.pruner.prune(dry_run=True)
        assert {(s.keyword.keyword, s.reason) for s in planned.stale} == {
            ("alpha only", StaleReason.UNUSED),  # never used, created 120 days ago
            ("beta sdk", StaleReason.UNUSED),
            ("gamma cli", StaleReason.RARELY_USED),  # 40 days old, no use
            ("delta tool", StaleReason.DOWN_VOTED),  # net -2 over two answers
        }
        assert sorted(planned.documents_removed) == sorted([beta, gamma, delta])
        assert planned.documents_rewritten == [alpha]
        assert len(await a.knowledge.store.all()) == 6  # a dry run changes nothing

        report = await a.pruner.prune()
        assert {s.keyword.keyword for s in report.stale} == {
            s.keyword.keyword for s in planned.stale
        }

    kept = {k.keyword for k in await b.knowledge.store.all()}
    assert kept == {"shared term", "fresh term"}
    documents = {d.doc_id: d.keywords for d in await b.knowledge.store.documents()}
    assert documents == {alpha: ("shared term",), echo: ("shared term",), fresh: ("fresh term",)}
    in_index = {d for d in await b.index.documents() if d.startswith("learned:")}
    assert in_index == {alpha, echo, fresh}
    [alpha_hit] = await b.index.search(
        "alpha", k=10, filters=SearchFilters(learned=True, doc_ids=(alpha,))
    )
    assert alpha_hit.chunk.keywords == ("shared term",)

    with time_machine.travel(now + 60, tick=False):
        again = await b.pruner.prune()
    assert again.stale == []
    assert again.documents_removed == []
    assert again.documents_rewritten == []
    assert {k.keyword for k in await a.knowledge.store.all()} == kept


async def test_prune_heals_a_crash_between_index_and_store(
    processes: tuple[Process, Process],
) -> None:
    a, _ = processes
    doc = await _learn_at(a, T0, "orphan", ["orphan term"])
    # The store forgot the document but its index copy survived (a crash mid-drop).
    await a.knowledge.store.remove_document(doc)
    await a.knowledge.store.remove_keywords(["orphan term"], saved_before=T0 + 1)
    with time_machine.travel(T0 + DAY, tick=False):
        report = await a.pruner.prune()
    assert report.documents_removed == [doc]
    assert doc not in await a.index.documents()


async def test_one_clock_per_slot_and_never_two_prunes_at_once(
    processes: tuple[Process, Process],
) -> None:
    a, b = processes
    await _learn_at(a, T0, "stale", ["stale term"])
    slot = "2027-01-01T03:17:00Z"
    with time_machine.travel(T0 + 200 * DAY, tick=False):
        first, second = await asyncio.gather(
            a.pruner.prune_claimed("clock-a", slot=slot),
            b.pruner.prune_claimed("clock-b", slot=slot),
        )
        assert [r is None for r in (first, second)].count(True) == 1
        report = first or second
        assert report is not None
        assert [s.keyword.keyword for s in report.stale] == ["stale term"]
        # Later, the same slot again (a clock that fired late): it stands aside.
        assert await a.pruner.prune_claimed("clock-c", slot=slot) is None
        # The next slot runs; a manual prune (no slot) runs too, when nobody is pruning.
        assert await b.pruner.prune_claimed("clock-b", slot="2027-01-02T03:17:00Z") is not None
        assert await a.pruner.prune_claimed("manual") is not None


async def test_two_clocks_firing_for_the_same_run_prune_once(
    processes: tuple[Process, Process], backend_settings: Settings
) -> None:
    """Two real schedulers, each with the job due at the same moment: one prunes, one stands
    aside, and the stale keyword is gone."""
    a, b = processes
    await _learn_at(a, time.time() - 200 * DAY, "stale", ["stale term"])
    settings = backend_settings.keywords
    due = DateTrigger(run_date=datetime.now(UTC) + timedelta(seconds=0.5))
    schedulers = [
        build_scheduler(settings, PruneJob(p.pruner, due, settings, holder=f"clock-{n}"), due)
        for n, p in enumerate((a, b))
    ]
    saved = structlog.get_config()
    # Another test may have configured logging at WARNING; the summary is an INFO event.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    with structlog.testing.capture_logs() as logs:
        for scheduler in schedulers:
            scheduler.start()
        deadline = asyncio.get_running_loop().time() + 20
        while sum(e["event"] in ("keywords_pruned", "prune_skipped") for e in logs) < 2:
            assert asyncio.get_running_loop().time() < deadline, logs
            await asyncio.sleep(0.05)
        for scheduler in schedulers:
            scheduler.shutdown(wait=False)
    structlog.configure(**saved)
    events = sorted(e["event"] for e in logs if e["event"] in ("keywords_pruned", "prune_skipped"))
    assert events == ["keywords_pruned", "prune_skipped"]
    [pruned] = [e for e in logs if e["event"] == "keywords_pruned"]
    assert pruned["keywords_removed"] == 1
    assert pruned["documents_removed"] == 1
    assert await b.knowledge.store.all() == []


async def test_a_keyword_saved_again_is_active_and_keeps_its_new_document(
    processes: tuple[Process, Process],
) -> None:
    a, b = processes
    first = await _learn_at(a, T0, "old", ["zephyr webhooks"])
    second = await _learn_at(b, T0 + 100 * DAY, "new", ["zephyr webhooks"])  # never used yet
    with time_machine.travel(T0 + 100 * DAY + 3_600, tick=False):
        report = await a.pruner.prune()
    assert report.stale == []  # not "unused for 90 days": it was saved an hour ago
    assert {d.doc_id for d in await b.knowledge.store.documents()} == {first, second}
    with time_machine.travel(T0 + 100 * DAY + 31 * DAY, tick=False):
        report = await a.pruner.prune()  # 31 days after the last save, still no use
    assert [(s.keyword.keyword, s.reason) for s in report.stale] == [
        ("zephyr webhooks", StaleReason.RARELY_USED)
    ]
    assert await b.knowledge.store.documents() == []


async def test_an_association_made_during_a_prune_survives_it(
    processes: tuple[Process, Process],
) -> None:
    a, b = processes
    await _learn_at(a, T0, "old", ["zephyr webhooks"])
    snapshot = T0 + 200 * DAY
    fresh = await _learn_at(b, snapshot + 10, "new", ["zephyr webhooks"])  # after the snapshot
    await a.knowledge.store.remove_keywords(["zephyr webhooks"], saved_before=snapshot)
    [keyword] = await b.knowledge.store.all()
    assert (keyword.keyword, keyword.associations) == ("zephyr webhooks", 1)
    documents = {d.doc_id: d.keywords for d in await b.knowledge.store.documents()}
    assert documents[fresh] == ("zephyr webhooks",)


async def test_associations_whose_keyword_is_gone_are_swept(
    processes: tuple[Process, Process],
) -> None:
    a, _ = processes
    doc = await _learn_at(a, T0, "lost", ["lost term"])
    # A keyword record lost while an association to it survived (a race with a save).
    if isinstance(a.index, ElasticsearchIndex):
        await a.index.client.delete(
            index=a.index.names.keywords, id=hashed_id("lost term"), refresh=True
        )
    else:
        a.knowledge.store._db.execute("DELETE FROM keywords WHERE keyword = 'lost term'")  # type: ignore[attr-defined]
    with time_machine.travel(T0 + DAY, tick=False):
        report = await a.pruner.prune()
    assert report.orphaned == ["lost term"]
    assert report.documents_removed == [doc]
    assert await a.knowledge.store.documents() == []


async def _pruned_while_b_saves(
    a: Process, b: Process, embedder: CachedEmbedder, keyword: str, now: float
) -> None:
    """A prune by `a` at `now` while `b` saves `keyword` for the "quotas" pages."""

    async def save() -> None:
        await b.knowledge.learn(question="q2", results=[result("quotas")], keywords=[keyword])

    store = SaveDuringPrune(a.knowledge.store, save)
    knowledge = LearnedKnowledge(
        a.index,
        embedder,
        store,  # type: ignore[arg-type]
        max_keywords_per_document=KeywordSettings().max_per_document,
    )
    pruner = KeywordPruner(knowledge, a.platform, a.backend.locks, a.pruner._settings)
    with time_machine.travel(now, tick=False):
        await pruner.prune()


async def _quotas_keywords(process: Process) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The "quotas" document's keywords in the store and in the index."""
    [document] = await process.knowledge.store.documents()
    [hit] = await process.index.search("quotas", k=5, filters=SearchFilters(learned=True))
    return document.keywords, hit.chunk.keywords


async def test_a_keyword_saved_during_a_prune_reaches_the_rewritten_document(
    processes: tuple[Process, Process], embedder: CachedEmbedder
) -> None:
    a, b = processes
    doc = await _learn_at(a, T0, "quotas", ["stale term", "kept term"])
    now = T0 + 200 * DAY
    with time_machine.travel(now - DAY, tick=False):
        for _ in range(2):
            await a.knowledge.record_use([doc], ["kept term"])
    await _pruned_while_b_saves(a, b, embedder, "fresh term", now)
    stored, indexed = await _quotas_keywords(b)
    assert stored == ("fresh term", "kept term")
    assert sorted(indexed) == ["fresh term", "kept term"]  # searchable by what was just saved


async def test_a_keyword_saved_during_a_prune_keeps_the_document_it_would_drop(
    processes: tuple[Process, Process], embedder: CachedEmbedder
) -> None:
    a, b = processes
    doc = await _learn_at(a, T0, "quotas", ["stale term"])
    await _pruned_while_b_saves(a, b, embedder, "fresh term", T0 + 200 * DAY)
    assert [k.keyword for k in await b.knowledge.store.all()] == ["fresh term"]
    assert await _quotas_keywords(b) == (("fresh term",), ("fresh term",))
    assert doc in await b.index.documents()
