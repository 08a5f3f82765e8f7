"""The `bot` command end to end, in-process, against the real model and a temp data dir."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from datetime import date
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app, main
from tests.conftest import REPO

runner = CliRunner()


def _main(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int | str | None, str]:
    """The command line as a user runs it (errors become exit codes): its code and stderr."""
    monkeypatch.setattr("sys.argv", ["bot", *args])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code, capsys.readouterr().err


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOT_CONFIG", str(REPO / "config.yaml"))
    return {}


def test_ingest_then_search_the_bundled_docs(env: dict[str, str]) -> None:
    result = runner.invoke(app, ["ingest", str(REPO / "docs")])
    assert result.exit_code == 0, result.output
    assert "added" in result.output
    assert "chunks written" in result.output

    result = runner.invoke(app, ["search", "how do I re-ingest changed documents?", "--explain"])
    assert result.exit_code == 0, result.output
    first = result.output.split("\n2.")[0]
    assert "Ingesting documents" in first
    assert "ingesting.md#re-ingesting" in first
    assert "fused" in first
    assert "bm25 #" in first
    assert "vector #" in first

    result = runner.invoke(app, ["search", "reciprocal rank fusion", "-k", "2", "--json"])
    hits = json.loads(result.output)
    assert len(hits) == 2
    assert {"title", "url", "snippet", "bm25_rank", "vector_rank", "score"} <= hits[0].keys()

    again = runner.invoke(app, ["ingest", str(REPO / "docs")])
    assert "0 added" in again.output
    assert "unchanged" in again.output


def test_search_on_an_empty_index_says_what_to_do(env: dict[str, str]) -> None:
    result = runner.invoke(app, ["search", "anything"])
    assert result.exit_code == 2
    assert "bot ingest" in result.output


def test_empty_query_is_refused(env: dict[str, str]) -> None:
    result = runner.invoke(app, ["search", "   "])
    assert result.exit_code == 2
    assert "empty" in result.output


def test_skips_are_listed(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"\x00")
    (tmp_path / "ok.md").write_text("# Ok\n\nfine")
    result = runner.invoke(app, ["ingest", str(tmp_path / "a.bin"), str(tmp_path / "ok.md")])
    assert result.exit_code == 0
    assert "1 added" in result.output
    assert "1 skipped" in result.output
    assert "unsupported file type '.bin'" in result.output


def test_ingest_never_connects_to_a_metadata_address(env: dict[str, str], tmp_path: Path) -> None:
    """The command's fetcher judges addresses before connecting: the cloud metadata endpoint is
    skipped with its reason, in any spelling, not tried (here: no route, a connect timeout)."""
    (tmp_path / "ok.md").write_text("# Ok\n\nfine")
    urls = ["http://169.254.169.254/latest/meta-data/", "http://[::ffff:a9fe:a9fe]/latest/"]
    result = runner.invoke(
        app,
        ["ingest", *urls, str(tmp_path / "ok.md")],
        env={"BOT_INGEST__URL_TIMEOUT_S": "30", "COLUMNS": "300"},
    )
    assert result.exit_code == 0, result.output
    assert "1 added" in result.output
    assert "2 skipped" in result.output
    flat = " ".join(result.output.split())
    assert flat.count("169.254.169.254, a metadata address") == 2
    assert "timed out" not in flat


def test_config_error_exits_2_naming_the_key(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BOT_SEARCH__RRF_K", "-5")
    code, err = _main(monkeypatch, capsys, "search", "x")
    assert code == 2
    assert "search.rrf_k" in err


def _tiny_beir(tmp_path: Path) -> Path:
    data = tmp_path / "tiny"
    (data / "qrels").mkdir(parents=True)
    corpus = [
        {"_id": "d1", "title": "Cats", "text": "Cats purr when they are content."},
        {"_id": "d2", "title": "Rockets", "text": "Rockets burn fuel to reach orbit."},
        {"_id": "d3", "title": "Bread", "text": "Bread rises because yeast makes gas."},
    ]
    (data / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus))
    queries = [
        {"_id": "q1", "text": "why do cats purr"},
        {"_id": "q2", "text": "reach orbit"},
        {"_id": "q3", "text": "unjudged"},
    ]
    (data / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries))
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    return data


def test_eval_retrieval_on_a_tiny_beir_set(env: dict[str, str], tmp_path: Path) -> None:
    data = _tiny_beir(tmp_path)
    out = tmp_path / "result.json"
    result = runner.invoke(app, ["eval", "retrieval", "--dataset", str(data), "--json", str(out)])
    assert result.exit_code == 0, result.output
    figures = json.loads(out.read_text())
    assert figures["queries"] == 2
    assert figures["documents"] == 3
    modes = {m["mode"]: m["metrics"] for m in figures["modes"]}
    assert set(modes) == {"bm25", "vector", "hybrid"}
    assert modes["hybrid"]["ndcg@10"] == 1.0
    assert modes["hybrid"]["mrr@10"] == 1.0
    assert "hybrid" in result.output
    assert "nDCG@10" in result.output


def test_eval_keeps_its_index_apart_from_the_knowledge_base(
    env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = _tiny_beir(tmp_path)
    assert runner.invoke(app, ["ingest", str(REPO / "docs")]).exit_code == 0
    live = tmp_path / "data" / "index.sqlite"
    before = runner.invoke(app, ["search", "cats purr", "--json"]).output
    evaluate = ["eval", "retrieval", "--dataset", str(data), "--index"]

    code, err = _main(monkeypatch, capsys, *evaluate, str(live))
    assert code == 2
    assert "is the knowledge base's own index: give the evaluation a new path" in err
    assert runner.invoke(app, ["search", "cats purr", "--json"]).output == before

    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(live.read_bytes())
    code, err = _main(monkeypatch, capsys, *evaluate, str(copy))
    assert code == 2
    assert "document(s) that are not tiny's" in err
    assert "give --index a new path" in err

    for own, what in [
        ("state.sqlite", "the bot's state file"),
        ("embedding-cache.sqlite", "the embedding cache"),
    ]:
        code, err = _main(monkeypatch, capsys, *evaluate, str(tmp_path / "data" / own))
        assert code == 2
        assert f"is {what}: give the evaluation a new path" in err
    other_sqlite = tmp_path / "other.sqlite"
    with contextlib.closing(sqlite3.connect(other_sqlite)) as db:
        db.execute("CREATE TABLE mine (x)")
    code, err = _main(monkeypatch, capsys, *evaluate, str(other_sqlite))
    assert code == 2
    assert "exists and is not an SQLite index" in err

    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    code, err = _main(monkeypatch, capsys, *evaluate, str(notes))
    assert code == 2
    assert "exists and is not an SQLite index" in err
    assert "damaged" not in err
    assert notes.read_text() == "my notes\n"

    kept = tmp_path / "kept.sqlite"
    for _ in range(2):  # the second run reuses the index the first one made
        again = runner.invoke(
            app, ["eval", "retrieval", "--dataset", str(data), "--index", str(kept)]
        )
        assert again.exit_code == 0, again.output


def test_eval_on_a_folder_without_qrels_is_a_clear_error(
    env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = _main(monkeypatch, capsys, "eval", "retrieval", "--dataset", str(tmp_path))
    assert code == 2
    assert "no qrels.tsv or qrels/test.tsv" in err


def test_ask_without_a_key_gives_a_labelled_extractive_answer(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert runner.invoke(app, ["ingest", str(REPO / "docs")]).exit_code == 0
    result = runner.invoke(app, ["ask", "How do I re-ingest changed documents?"])
    assert result.exit_code == 0, result.output
    assert "Extractive answer" in result.output
    assert "Sources" in result.output
    assert "ingesting.md#" in result.output

    result = runner.invoke(app, ["ask", "What does --prune delete?", "--json"])
    payload = json.loads(result.stdout)  # logs go to stderr; stdout is the JSON alone
    assert payload["mode"] == "extractive"
    assert payload["citations"][0]["verified"] is True
    first = payload["citations"][0]
    assert first["link"].startswith(first["url"] + ":~:text=")  # opens at the quote
    assert {"tool_calls", "model_calls", "own_seconds", "usage"} <= payload["trace"].keys()


def test_ask_warns_when_the_policy_searches_a_source_nobody_ingested(
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert runner.invoke(app, ["ingest", str(REPO / "docs")]).exit_code == 0
    monkeypatch.setenv("BOT_CHANNELS__DEFAULT__SOURCES", '["handbok"]')
    monkeypatch.setenv("COLUMNS", "400")
    code, err = _main(monkeypatch, capsys, "ask", "How do I re-ingest changed documents?")
    assert code in (0, None)
    assert (
        "warning: answers here search only handbok: source handbok has no document in the "
        "index and no entry in `sources:` (a typo?"
    ) in err
    monkeypatch.setenv("BOT_CHANNELS__DEFAULT__SOURCES", '["docs"]')
    code, err = _main(monkeypatch, capsys, "ask", "How do I re-ingest changed documents?")
    assert "warning" not in err


def test_chat_holds_a_conversation_until_an_empty_line(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sqlite3

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert runner.invoke(app, ["ingest", str(REPO / "docs")]).exit_code == 0
    result = runner.invoke(
        app,
        ["chat", "--conversation", "c1"],
        input="what is hybrid search?\nand the rrf constant?\n\n",
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("Sources") == 2
    with sqlite3.connect(tmp_path / "data" / "state.sqlite") as db:
        rows = db.execute("SELECT key, question FROM turns ORDER BY id").fetchall()
    assert [q for _, q in rows] == ["what is hybrid search?", "and the rrf constant?"]
    assert len({k for k, _ in rows}) == 1
    assert rows[0][0].endswith("/c1")


def test_eval_answers_in_extractive_mode(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    data = tmp_path / "qa"
    data.mkdir()
    corpus = [
        {"_id": "https://d/x#cats", "title": "Cats", "text": "Cats purr when content."},
        {"_id": "https://d/x#rockets", "title": "Rockets", "text": "Rockets burn fuel."},
    ]
    (data / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus))
    (data / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "why do cats purr"}))
    (data / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\thttps://d/x#cats\t1\n")
    out = tmp_path / "answers.json"
    result = runner.invoke(app, ["eval", "answers", "--dataset", str(data), "--json", str(out)])
    assert result.exit_code == 0, result.output
    figures = json.loads(out.read_text())
    assert figures["citation_hit_rate"] == 1.0
    assert figures["retrieval_hit_rate_same_depth"] == 1.0
    assert figures["modes"] == {"extractive": 1}
    assert figures["answer_correctness"] is None  # no judge without a key


@pytest.mark.parametrize(
    ("args", "unset", "message"),
    [
        (["slack", "--http"], "SLACK_BOT_TOKEN", "SLACK_BOT_TOKEN is not set"),
        (["slack", "--socket"], "SLACK_APP_TOKEN", "SLACK_APP_TOKEN is not set"),
    ],
)
def test_slack_without_its_tokens_says_which_is_missing(
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    unset: str,
    message: str,
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "secret")
    monkeypatch.delenv(unset, raising=False)
    code, err = _main(monkeypatch, capsys, *args)
    assert code == 2
    assert message in err


def test_slack_needs_exactly_one_mode(env: dict[str, str]) -> None:
    result = runner.invoke(app, ["slack"])
    assert result.exit_code == 2
    assert "exactly one of --socket and --http" in result.output


def test_keywords_list_shows_learned_keywords(env: dict[str, str]) -> None:
    import asyncio

    from core.backends.sqlite.keyword_store import SqliteKeywordStore
    from core.config_loader import load_settings

    result = runner.invoke(app, ["keywords", "list"])
    assert result.exit_code == 0, result.output
    assert "No learned keywords yet." in result.output

    settings = load_settings()

    async def save() -> None:
        store = SqliteKeywordStore(settings.state_path, settings.search.busy_timeout_ms)
        await store.add("stripe webhooks", doc_id="web:1", question="why 400?")
        await store.add("stripe webhooks", doc_id="web:2", question="retries?")
        await store.close()

    asyncio.run(save())
    result = runner.invoke(app, ["keywords", "list"])
    assert result.exit_code == 0, result.output
    assert "stripe webhooks" in result.output
    result = runner.invoke(app, ["keywords", "list", "--json"])
    listed = json.loads(result.output)
    assert [(k["keyword"], k["associations"], k["uses"]) for k in listed] == [
        ("stripe webhooks", 2, 0)
    ]


def test_keywords_stale_listing_dry_run_and_prune(env: dict[str, str]) -> None:
    import asyncio
    import time

    import time_machine

    from bot.wiring import build_embedder, build_knowledge, open_backend
    from core.config_loader import load_settings
    from core.domain.documents import SearchFilters
    from core.domain.web import WebResult, WebSource

    settings = load_settings()

    def page(name: str) -> WebResult:
        source = WebSource(f"https://{name}.example/widgets", f"{name} widgets", f"{name} widgets.")
        return WebResult(f"{name} widgets", (source,))

    async def learn() -> None:
        backend = await open_backend(settings, build_embedder(settings))
        knowledge = build_knowledge(settings, backend)
        with time_machine.travel(time.time() - 200 * 86_400, tick=False):
            await knowledge.learn(question="old?", results=[page("old")], keywords=["old widgets"])
        await knowledge.learn(question="new?", results=[page("new")], keywords=["new widgets"])
        await backend.close()

    async def learned_urls() -> set[str]:
        backend = await open_backend(settings, build_embedder(settings))
        hits = await backend.index.search("widgets", k=10, filters=SearchFilters(learned=True))
        await backend.close()
        return {h.chunk.url for h in hits}

    asyncio.run(learn())
    result = runner.invoke(app, ["keywords", "list", "--stale", "--json"])
    assert result.exit_code == 0, result.output
    assert [(k["keyword"], k["stale"]) for k in json.loads(result.output)] == [
        ("old widgets", "unused")
    ]

    result = runner.invoke(app, ["keywords", "prune", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert (
        "Would remove 1 keyword(s); learned documents: 1 to delete, 0 to rewrite." in result.output
    )
    assert "old widgets  (unused)" in result.output
    assert asyncio.run(learned_urls()) == {
        "https://old.example/widgets",
        "https://new.example/widgets",
    }

    result = runner.invoke(app, ["keywords", "prune"])
    assert result.exit_code == 0, result.output
    assert "Removed 1 keyword(s); learned documents: 1 deleted, 0 rewritten." in result.output
    listed = json.loads(runner.invoke(app, ["keywords", "list", "--json"]).output)
    assert [k["keyword"] for k in listed] == ["new widgets"]
    assert asyncio.run(learned_urls()) == {"https://new.example/widgets"}
    assert "No stale keywords." in runner.invoke(app, ["keywords", "list", "--stale"]).output


def test_keywords_show_where_a_keyword_came_from_and_forget_removes_it(
    env: dict[str, str],
) -> None:
    import asyncio

    from bot.wiring import build_embedder, build_knowledge, open_backend
    from core.config_loader import load_settings
    from core.domain.documents import SearchFilters
    from core.domain.web import WebResult, WebSource

    settings = load_settings()

    def page(name: str) -> WebResult:
        source = WebSource(f"https://{name}.example/widgets", f"{name} widgets", f"{name} widgets.")
        return WebResult(f"{name} widgets query", (source,))

    async def learn() -> None:
        backend = await open_backend(settings, build_embedder(settings))
        knowledge = build_knowledge(settings, backend)
        await knowledge.learn(
            question="how do blue widgets work?",
            results=[page("blue")],
            keywords=["wrong term", "blue widgets"],
        )
        await knowledge.learn(
            question="red widgets?", results=[page("red")], keywords=["wrong term"]
        )
        await backend.close()

    async def learned() -> dict[str, tuple[str, ...]]:
        backend = await open_backend(settings, build_embedder(settings))
        hits = await backend.index.search("widgets", k=10, filters=SearchFilters(learned=True))
        await backend.close()
        return {h.chunk.url: h.chunk.keywords for h in hits}

    asyncio.run(learn())
    result = runner.invoke(app, ["keywords", "show", "Wrong Term"])
    assert result.exit_code == 0, result.output
    for said in (
        "question: how do blue widgets work?",
        "web query: blue widgets query",
        "keywords: blue widgets, wrong term",
        "<https://blue.example/widgets>",
        "question: red widgets?",
        "<https://red.example/widgets>",
    ):
        assert said in result.output
    shown = json.loads(runner.invoke(app, ["keywords", "show", "wrong term", "--json"]).output)
    assert sorted(d["question"] for d in shown) == ["how do blue widgets work?", "red widgets?"]

    result = runner.invoke(app, ["keywords", "forget", "Wrong Term"])
    assert result.exit_code == 0, result.output
    assert "Forgot 1 keyword(s); learned documents: 1 deleted, 1 rewritten." in result.output
    assert asyncio.run(learned()) == {"https://blue.example/widgets": ("blue widgets",)}
    listed = json.loads(runner.invoke(app, ["keywords", "list", "--json"]).output)
    assert [k["keyword"] for k in listed] == ["blue widgets"]
    result = runner.invoke(app, ["keywords", "show", "wrong term"])
    assert result.exit_code == 1
    assert "No learned document has the keyword 'wrong term'." in result.output


def test_the_clock_process_starts_reports_its_schedule_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    env = {
        **os.environ,
        "BOT_STORAGE__DATA_DIR": str(tmp_path / "data"),
        "BOT_CONFIG": str(REPO / "config.yaml"),
        "BOT_KEYWORDS__PRUNE_SCHEDULE": "5 4 * * 1",
    }
    bot = Path(sys.executable).with_name("bot")
    process = subprocess.Popen(
        [str(bot), "clock"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        lines: list[str] = []
        assert process.stderr is not None
        while not any("clock_started" in line for line in lines):
            assert time.monotonic() < deadline, lines
            lines.append(process.stderr.readline())
        started = next(line for line in lines if "clock_started" in line)
        assert "schedule='5 4 * * 1'" in started
        [next_run] = re.findall(r"(\d{4}-\d\d-\d\d) 04:05:00\+00:00", started)
        assert date.fromisoformat(next_run).strftime("%A") == "Monday"  # cron's 1, not Tuesday
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()


def test_doctor_shows_a_channels_resolved_policy(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    policies = {
        "slack/T1": {"sources": ["handbook"]},
        "slack/T1/C9": {
            "trigger": "auto",
            "private": True,
            "escalate_to": ["S0SUPPORT"],
            "min_relevance": 0.45,
        },
    }
    monkeypatch.setenv("BOT_CHANNELS__POLICIES", json.dumps(policies))
    result = runner.invoke(app, ["doctor", "--channel", "slack/T1/C9"])
    flat = " ".join(result.output.replace("│", " ").split())  # the table wraps its cells
    assert "trigger auto" in flat
    assert "questions_only true (rules + classifier)" in flat
    assert "sources handbook" in flat
    assert "min_relevance 0.45" in flat
    assert "private true" in flat
    assert "escalate_to S0SUPPORT" in flat
    assert "(from slack/T1, slack/T1/C9)" in flat
    bad = runner.invoke(app, ["doctor", "--channel", "#general"])
    assert bad.exit_code == 1
    assert "is not a channel key" in bad.output


def test_ingest_saves_the_vector_graph_and_rebuild_vectors_remakes_it(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_SEARCH__APPROXIMATE__MIN_CHUNKS", "1")
    graph = tmp_path / "data" / "index.sqlite.vectors"
    assert runner.invoke(app, ["ingest", str(REPO / "docs")]).exit_code == 0
    assert graph.is_file()  # saved by the ingest: the bot's first search loads, not builds
    before = runner.invoke(app, ["search", "how do I re-ingest changed documents?", "--json"])
    graph.unlink()
    assert "not saved yet" in runner.invoke(app, ["doctor"]).output
    result = runner.invoke(app, ["index", "rebuild-vectors"])
    assert result.exit_code == 0, result.output
    assert "The vector graph holds" in result.output
    assert "approximate (" in result.output
    assert graph.is_file()
    assert "graph of i8 vectors" in runner.invoke(app, ["doctor"]).output
    after = runner.invoke(app, ["search", "how do I re-ingest changed documents?", "--json"])
    assert json.loads(after.output) == json.loads(before.output)


def test_keywords_learned_before_todays_rules_can_be_shown_and_forgotten(
    env: dict[str, str],
) -> None:
    """A keyword an older release learned with a mention in it (refused as a new keyword
    now) is still in the store: show and forget find it as stored. Forgetting a keyword no
    document has says so, and fails."""
    import asyncio

    from bot.wiring import build_embedder, build_knowledge, open_backend
    from core.config_loader import load_settings
    from core.domain.web import WebResult, WebSource

    settings = load_settings()
    old = "<!channel> deploy guide"

    async def learn_the_old_way() -> None:
        backend = await open_backend(settings, build_embedder(settings))
        knowledge = build_knowledge(settings, backend)
        page = WebSource("https://acme.example/deploy", "Deploy guide", "How to deploy.")
        doc_id = await knowledge.learn(
            question="how to deploy?",
            results=[WebResult("deploy guide", (page,))],
            keywords=["deploy guide"],
        )
        await backend.keywords.add(old, doc_id=doc_id, question="how to deploy?")
        await knowledge.sync(doc_id)
        await backend.close()

    asyncio.run(learn_the_old_way())
    shown = runner.invoke(app, ["keywords", "show", old])
    assert shown.exit_code == 0, shown.output
    assert "https://acme.example/deploy" in shown.output
    forgot = runner.invoke(app, ["keywords", "forget", old.upper(), "no such term"])
    assert forgot.exit_code == 1
    said = " ".join(forgot.output.split())
    assert "Forgot 1 keyword(s); learned documents: 0 deleted, 1 rewritten." in said
    assert "error: not a learned keyword: 'no such term'" in said
    listed = json.loads(runner.invoke(app, ["keywords", "list", "--json"]).output)
    assert [k["keyword"] for k in listed] == ["deploy guide"]


def test_links_longer_than_the_terminal_are_printed_whole(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped (80 columns), a source's link was cut at the width and went on on the next line:
    neither half opens, and a copy of it takes only one."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    base = "https://docs.example.com/engineering/handbook/knowledge-base/published/version-2026/"
    ingested = runner.invoke(app, ["ingest", str(REPO / "docs"), "--base-url", base])
    assert ingested.exit_code == 0, ingested.output
    link = f"{base}ingesting.md#re-ingesting"
    assert len(link) > 80
    searched = runner.invoke(app, ["search", "How do I re-ingest changed documents?"])
    assert link in searched.output.splitlines()[1]
    asked = runner.invoke(app, ["ask", "How do I re-ingest changed documents?"])
    assert asked.exit_code == 0, asked.output
    assert any(line.strip() == link for line in asked.output.splitlines())


def test_rebuild_vectors_where_no_graph_is_searched_builds_none_and_says_why(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With approximate search off (or an index under its threshold) it built a graph anyway
    and called it the vector side, where `bot doctor` said "exact scan"."""
    assert runner.invoke(app, ["ingest", str(REPO / "docs")]).exit_code == 0
    monkeypatch.setenv("BOT_SEARCH__APPROXIMATE__ENABLED", "false")
    result = runner.invoke(app, ["index", "rebuild-vectors"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == (
        "Nothing to build: this index searches by exact scan (search.approximate off)"
    )
    assert not (tmp_path / "data" / "index.sqlite.vectors").exists()
