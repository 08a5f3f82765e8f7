"""Feedback becomes tests: `bot eval export-feedback` writes the voted questions as datasets that
`bot eval answers` replays, and `--baseline` shows the trend against a previous run."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from core.backends.sqlite import SqliteBackend
from core.config import Settings
from core.evaluation.retrieval import load_dataset
from core.search.embedder import MiniLMEmbedder
from tests.fakes.answer_log import over_kb, seed_log
from tests.integration.answers.helpers import cached

runner = CliRunner()


@pytest.fixture
def voted_log(
    kb: Settings, minilm: MiniLMEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A data dir whose state holds 90 seeded answers (some voted on), over the bundled docs."""
    settings = over_kb(kb, tmp_path)

    async def seed() -> None:
        backend = SqliteBackend(settings, cached(settings, minilm), kb.index_path)
        try:
            await seed_log(backend, 90, time.time())
        finally:
            await backend.close()

    asyncio.run(seed())
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BOT_SEARCH__SQLITE_PATH", str(kb.index_path))
    monkeypatch.setenv("BOT_ANSWERS__PROVIDER", "extractive")
    return tmp_path


def test_voted_questions_become_datasets_the_answer_eval_replays(voted_log: Path) -> None:
    out = voted_log / "feedback"
    result = runner.invoke(app, ["eval", "export-feedback", str(out), "--min-votes", "1"])
    assert result.exit_code == 0, result.output
    assert "liked and" in result.output
    assert "left out: no document of the knowledge base cited" in result.output  # not_found
    liked = load_dataset(out / "liked")
    disliked = load_dataset(out / "disliked")
    assert liked.queries
    assert disliked.queries
    assert not set(liked.queries) & set(disliked.queries)
    every_cited = {d for judged in liked.qrels.values() for d in judged}
    assert every_cited <= set(liked.corpus)
    assert all(text for _, text in liked.corpus.values())  # the documents' full text
    references = [json.loads(line) for line in (out / "liked" / "answers.jsonl").open()]
    assert {r["_id"] for r in references} == set(liked.queries)
    meta = [json.loads(line)["metadata"] for line in (out / "disliked" / "queries.jsonl").open()]
    assert all(m["down"] > m["up"] and "missing" in m["reasons"] for m in meta)

    first = runner.invoke(
        app,
        ["eval", "answers", "--dataset", str(out / "liked"), "--json", str(voted_log / "a.json")],
    )
    assert first.exit_code == 0, first.output
    figures = json.loads((voted_log / "a.json").read_text(encoding="utf-8"))
    assert figures["questions"] == len(liked.queries)
    again = runner.invoke(
        app,
        [
            "eval",
            "answers",
            "--dataset",
            str(out / "liked"),
            "--baseline",
            str(voted_log / "a.json"),
        ],
    )
    assert again.exit_code == 0, again.output
    assert "baseline" in again.output
    assert "+0" in again.output  # the same run again: no change


def test_a_bad_baseline_is_one_clear_line(voted_log: Path) -> None:
    bad = voted_log / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    result = runner.invoke(
        app, ["eval", "answers", "--dataset", str(voted_log), "--baseline", str(bad)]
    )
    assert result.exit_code == 1
    assert "--baseline" in result.output
    assert "not JSON" in result.output
