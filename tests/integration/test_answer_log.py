"""The answer log on every backend: what `bot report` reads. Every answer is kept with its
status, mode, citations, model, tokens and timings, held-back answers too; votes and 👎 reasons
come back with it; retention deletes what is older; privacy mode keeps no question text."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import structlog
import time_machine

from bot.clock import ExpireJob
from core.backends.elasticsearch.index import ElasticsearchIndex
from core.backends.sqlite.platform_state import SqlitePlatformState
from core.config import InsightSettings, Settings
from core.domain.conversation import (
    Answer,
    AnswerMode,
    AnswerStatus,
    Citation,
    SourceKind,
    Trace,
    Turn,
    Usage,
)
from core.domain.insights import SKETCH_DIMENSIONS, question_hash
from core.domain.learned import LearnedDocument
from core.domain.web import WebSource
from core.insights.report import build_report
from core.ports import Backend
from tests.fakes.memory import ConstantEmbedder, InMemoryIndex

DAY_S = 86_400


def _answer(status: AnswerStatus = AnswerStatus.ANSWERED, *, web: bool = False) -> Answer:
    kind = SourceKind.WEB if web else SourceKind.KNOWLEDGE_BASE
    cited = Citation(1, "Guide", "https://x/guide#setup", "quote", True, kind, "guide.md")
    consulted = Citation(2, "FAQ", "https://x/faq", "", False, SourceKind.KNOWLEDGE_BASE, "faq.md")
    trace = Trace(model_calls=2, model_seconds=1.5, total_seconds=2.0, model="claude-test")
    trace.usage = Usage(input_tokens=1200, output_tokens=300)
    return Answer(
        "Run `bot ingest` again [1].",
        status,
        AnswerMode.SEARCH_THEN_ANSWER,
        citations=[cited],
        trace=trace,
        consulted=[consulted],
    )


async def test_every_answer_is_logged_with_what_the_report_needs(backend: Backend) -> None:
    state = backend.platform_state(60)
    started = time.time()
    kept = await state.record_answer("slack/T1/C1/1700.1", "How do I re-ingest?", _answer())
    held = await state.record_answer(
        "discord/9/8/7", "is staging down?", _answer(AnswerStatus.NOT_FOUND), posted=False
    )
    await state.record_feedback(kept, "U1", helpful=False)
    await state.record_feedback(kept, "U2", helpful=True)
    await state.record_feedback_reason(kept, "U1", "outdated", "renamed in v2")

    log = await state.answer_log(started - 1)
    assert [e.answer_id for e in log] == [kept, held]
    first, second = log
    assert (first.platform, first.channel) == ("slack", "slack/T1/C1")
    assert (second.platform, second.channel) == ("discord", "discord/9/8")
    assert first.question == "How do I re-ingest?"
    assert first.question_hash == question_hash("how do I  re-ingest?")
    assert (first.status, first.mode, first.posted) == ("answered", "search_then_answer", True)
    assert (second.status, second.posted) == ("not_found", False)
    assert (first.model, first.input_tokens, first.output_tokens) == ("claude-test", 1200, 300)
    assert (first.total_seconds, first.model_seconds) == (2.0, 1.5)
    assert [(c.doc_id, c.verified, c.web) for c in first.citations] == [("guide.md", True, False)]
    assert (first.up, first.down, first.reasons) == (1, 1, ("outdated",))
    assert (second.up, second.down, second.reasons) == (0, 0, ())
    assert await state.answer_log(time.time() + 1) == []


async def test_the_log_reads_a_page_at_a_time(backend: Backend) -> None:
    """`bot report` folds the log page by page: every entry once, with its votes and reasons,
    never more than a page in hand."""
    state = backend.platform_state(60)
    now = time.time()
    ids = []
    for n in range(5):
        with time_machine.travel(now - (10 - n) * DAY_S, tick=False):
            ids.append(await state.record_answer(f"slack/T1/C1/{n}", f"q{n}", _answer()))
    await state.record_feedback(ids[3], "U1", helpful=False)
    await state.record_feedback_reason(ids[3], "U1", "missing", "")
    pages = [page async for page in state.answer_log_pages(now - 30 * DAY_S, 2)]
    assert [len(page) for page in pages] == [2, 2, 1]
    read = [entry for page in pages for entry in page]
    assert sorted(e.answer_id for e in read) == sorted(ids)
    assert sorted(read, key=lambda e: e.at) == await state.answer_log(now - 30 * DAY_S)
    [voted] = [e for e in read if e.answer_id == ids[3]]
    assert (voted.down, voted.reasons) == (1, ("missing",))
    assert [page async for page in state.answer_log_pages(now, 2)] == []


async def test_the_log_keeps_a_question_as_the_engine_reads_it(
    backend: Backend, backend_settings: Settings
) -> None:
    """An adapter records the message as it came, even one refused as too long: the log keeps
    it without control characters and no longer than the engine answers."""
    state = backend.platform_state(60)
    limit = backend_settings.answers.max_question_chars
    message = "  How do I \x1b[2Jrotate keys\x00? " + "A" * (limit * 8)
    refused = Answer("That question is too long.", AnswerStatus.ERROR, AnswerMode.AGENT)
    await state.record_answer("slack/T1/C1/9", message, refused)
    [entry] = await state.answer_log(0)
    assert entry.question == ("How do I [2Jrotate keys? " + "A" * limit)[:limit]
    assert entry.question_hash == question_hash(entry.question)
    recorded = await state.recorded_answer(entry.answer_id)
    assert recorded is not None
    assert recorded.question == entry.question


async def test_an_answer_keeps_its_channel_and_moves_to_its_thread(backend: Backend) -> None:
    state = backend.platform_state(60)
    answer_id = await state.record_answer("discord/9/8/111", "q", _answer(), channel="discord/9/8")
    await state.move_answer(answer_id, "discord/thread/222")
    [entry] = await state.answer_log(0)
    assert (entry.conversation_key, entry.channel) == ("discord/thread/222", "discord/9/8")


async def test_a_shared_answer_comes_back_with_its_mode_and_consulted_sources(
    backend: Backend,
) -> None:
    state = backend.platform_state(60)
    answer_id = await state.record_answer("slack/T1/C1/1700.2", "q", _answer())
    recorded = await state.recorded_answer(answer_id)
    assert recorded is not None
    assert recorded.answer.mode is AnswerMode.SEARCH_THEN_ANSWER
    assert [c.doc_id for c in recorded.answer.consulted] == ["faq.md"]


async def test_retention_deletes_older_answers_with_their_votes(backend: Backend) -> None:
    state = backend.platform_state(60)
    now = time.time()
    with time_machine.travel(now - 100 * DAY_S, tick=False):
        old = await state.record_answer("slack/T1/C1/1", "old question", _answer())
        await state.record_feedback(old, "U1", helpful=False)
        await state.record_feedback_reason(old, "U1", "wrong", "")
    with time_machine.travel(now - 10 * DAY_S, tick=False):
        recent = await state.record_answer("slack/T1/C1/2", "recent question", _answer())
    assert await state.expire_answers(now - 30 * DAY_S) == 1
    assert [e.answer_id for e in await state.answer_log(0)] == [recent]
    assert await state.feedback_for(old) == []
    assert await state.feedback_reasons(old) == []
    assert await state.recorded_answer(old) is None


async def test_privacy_mode_keeps_no_question_text(
    backend: Backend, backend_settings: Settings
) -> None:
    state = backend.platform_state(60, store_questions=False)
    secret = "Why is Zanzibar-7 payroll export failing for Maria?"
    answer_id = await state.record_answer("slack/T1/C1/3", secret, _answer())
    [entry] = [e for e in await state.answer_log(0) if e.answer_id == answer_id]
    assert entry.question == ""
    assert entry.question_hash == question_hash(secret)
    assert len(entry.sketch) == SKETCH_DIMENSIONS  # its meaning, for the report's gaps
    recorded = await state.recorded_answer(answer_id)
    assert recorded is not None
    assert recorded.question == ""
    if backend_settings.search.backend == "sqlite":  # nothing of it on disk either
        path = backend_settings.state_path
        files = [p for p in (path, Path(f"{path}-wal")) if p.exists()]
        assert files
        assert b"Zanzibar" not in b"".join(p.read_bytes() for p in files)


# The answers table as an earlier version wrote it, before the log's columns.
_ANSWERS_BEFORE_THE_LOG = (
    "CREATE TABLE answers (id TEXT PRIMARY KEY, conversation_key TEXT NOT NULL,"
    " question TEXT NOT NULL, answer TEXT NOT NULL, status TEXT NOT NULL,"
    " citations TEXT NOT NULL, created_at REAL NOT NULL)"
)


async def test_an_answers_table_from_before_the_log_gains_its_columns(tmp_path: Path) -> None:
    """A state file written by an earlier version: its answers stay readable (and shareable),
    with what was not known then left at neutral values."""
    path = tmp_path / "state.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(_ANSWERS_BEFORE_THE_LOG)
        db.execute(
            "INSERT INTO answers VALUES ('a' || hex(randomblob(15)), 'slack/T1/C1/1', 'q',"
            " 'text', 'answered', '[]', 1700000000)"
        )
    state = SqlitePlatformState(path, 1000, 60)
    try:
        [old] = await state.answer_log(0)
        assert (old.question, old.status, old.mode, old.posted) == ("q", "answered", "agent", True)
        assert (old.model, old.input_tokens, old.citations) == ("", 0, ())
        assert (await state.recorded_answer(old.answer_id)) is not None
        await state.record_answer("slack/T1/C1/2", "new", _answer())
        assert [e.question for e in await state.answer_log(0)] == ["q", "new"]
    finally:
        await state.close()


async def test_rows_from_before_the_log_get_their_channel_from_their_key(
    tmp_path: Path,
) -> None:
    """Bringing an older state file up to date fills in where each answer was given, on which
    platform, and its question's hash: `bot report --channel` and the re-check go by them."""
    path = tmp_path / "state.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(_ANSWERS_BEFORE_THE_LOG)
        db.executemany(
            "INSERT INTO answers VALUES (?, ?, ?, 'text', 'not_found', '[]', 1700000000)",
            [
                ("a1", "slack/T1/C1/1700000000.0001", "Where is the VPN?"),
                ("a2", "discord/42/77/9", "How do refunds work?"),
            ],
        )
    state = SqlitePlatformState(path, 1000, 60)
    try:
        with sqlite3.connect(path) as db:  # on disk, for every reader
            assert db.execute(
                "SELECT platform, channel, question_hash FROM answers ORDER BY id"
            ).fetchall() == [
                ("slack", "slack/T1/C1", question_hash("Where is the VPN?")),
                ("discord", "discord/42/77", question_hash("How do refunds work?")),
            ]
        log = await state.answer_log(0)
        assert [(e.platform, e.channel) for e in log] == [
            ("slack", "slack/T1/C1"),
            ("discord", "discord/42/77"),
        ]
        report = await build_report(
            log,
            since=0,
            until=time.time(),
            channel="C1",
            settings=InsightSettings(),
            embedder=ConstantEmbedder(),
            index=InMemoryIndex(),
            learned=[],
        )
        assert (report.answers, report.per_channel) == (1, {"slack/T1/C1": 1})
    finally:
        await state.close()


async def test_an_entry_logged_without_its_channel_reads_it_from_its_key(
    backend: Backend, backend_settings: Settings
) -> None:
    """A state file brought up to date before such rows were filled in (their channel left
    empty), or an Elasticsearch answer indexed before the log had channels: the entry still
    says where it was given."""
    state = backend.platform_state(60)
    answer_id = await state.record_answer("slack/T1/C1/1700.5", "Where is the VPN?", _answer())
    if backend_settings.search.backend == "sqlite":
        with sqlite3.connect(backend_settings.state_path) as db:
            db.execute("UPDATE answers SET platform = '', channel = '', question_hash = ''")
    else:
        index = backend.index
        assert isinstance(index, ElasticsearchIndex)
        await index.client.index(
            index=index.names.answers,
            id=answer_id,
            document={
                "conversation_key": "slack/T1/C1/1700.5",
                "question": "Where is the VPN?",
                "answer": "text",
                "status": "answered",
                "citations": {"items": []},
                "created_at": int(time.time() * 1000),
            },
            refresh=True,
        )
    [entry] = await state.answer_log(0)
    assert (entry.platform, entry.channel) == ("slack", "slack/T1/C1")
    assert entry.question_hash == question_hash("Where is the VPN?")


async def test_retention_forgets_finished_conversations_too(backend: Backend) -> None:
    """Questions live in the follow-up memory as well: a conversation nobody added to within
    the retention goes whole; one still going keeps its earlier turns."""
    store = backend.conversations
    now = time.time()
    with time_machine.travel(now - 100 * DAY_S, tick=False):
        await store.append("slack/T1/C1/old", Turn("old question", "old answer"))
        await store.append("slack/T1/C1/going", Turn("first question", "first answer"))
    with time_machine.travel(now - 1 * DAY_S, tick=False):
        await store.append("slack/T1/C1/going", Turn("follow-up", "second answer"))
    assert await store.expire(now - 30 * DAY_S) == 1
    assert await store.recent("slack/T1/C1/old", 10) == []
    assert [t.question for t in await store.recent("slack/T1/C1/going", 10)] == [
        "first question",
        "follow-up",
    ]


async def test_the_clocks_expiry_job_deletes_what_retention_says(backend: Backend) -> None:
    state = backend.platform_state(60)
    now = time.time()
    with time_machine.travel(now - 40 * DAY_S, tick=False):
        await state.record_answer("slack/T1/C1/9", "old", _answer())
        await backend.conversations.append("slack/T1/C1/9", Turn("old", "answer"))
    kept = await state.record_answer("slack/T1/C1/10", "new", _answer())
    keywords = backend.keywords
    with time_machine.travel(now - 40 * DAY_S, tick=False):
        await keywords.add_document(_learned("learned:old", "what is our secret plan?"))
        await keywords.add("secret plan", doc_id="learned:old", question="what is our secret plan?")
        await keywords.add("secret plan", doc_id="learned:old", question="and the other plan?")
    await keywords.add_document(_learned("learned:new", "what is the new plan?"))
    await keywords.add("new plan", doc_id="learned:new", question="what is the new plan?")
    job = ExpireJob(state, backend.conversations, keywords, InsightSettings(retention_days=30))
    with structlog.testing.capture_logs() as logs:
        await job.run()
    assert [e.answer_id for e in await state.answer_log(0)] == [kept]
    assert await backend.conversations.recent("slack/T1/C1/9", 10) == []
    said = {"event": "answer_log_expired", "answers": 1, "conversations": 1, "learned_questions": 3}
    assert said.items() <= logs[-1].items()
    # What was learned then keeps no question, and its keyword still counts two saves.
    questions = {d.doc_id: d.question for d in await keywords.documents()}
    assert questions == {"learned:old": "", "learned:new": "what is the new plan?"}
    assert (await keywords.get("secret plan")).associations == 2  # type: ignore[union-attr]
    assert (await keywords.get("new plan")).associations == 1  # type: ignore[union-attr]
    with structlog.testing.capture_logs() as again:
        await job.run()  # nothing more to forget
    assert again[-1]["learned_questions"] == 0


def _learned(doc_id: str, question: str) -> LearnedDocument:
    source = WebSource("https://example.com/plan", "Plan", "The plan is secret.")
    return LearnedDocument(doc_id, question, "plan", (source,), time.time())
