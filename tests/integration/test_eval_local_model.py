"""`bot eval answers --base-url` scores a local model server against no model at all, on the
same questions and index. Here the server is the stand-in for the recorded llama-server with its
weak model (`tests/fakes/llama_server.py`): whatever the model writes, the bot must cite gold
passages at least as often as with no model, show sources under every answer, and show no
claim without a citation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from tests.conftest import REPO, SHARED_EVAL
from tests.fakes.llama_server import LlamaServer, behaviour, weak_model

runner = CliRunner()
DATASET = SHARED_EVAL / "anthropic_docs_qa"
QUESTIONS = 30


@pytest.fixture
def llama() -> Iterator[LlamaServer]:
    server = LlamaServer(weak_model).start()
    yield server
    server.stop()


@pytest.mark.skipif(not DATASET.exists(), reason=f"{DATASET} is not beside this checkout")
def test_a_weak_local_model_is_never_worse_than_none(
    llama: LlamaServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, eval_embedding_cache: Path
) -> None:
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOT_EMBEDDINGS__CACHE_PATH", str(eval_embedding_cache))
    monkeypatch.setenv("BOT_CONFIG", str(REPO / "config.yaml"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    out = tmp_path / "figures.json"
    args = ["eval", "answers", "--dataset", str(DATASET), "--limit", str(QUESTIONS)]
    args += ["--base-url", llama.url, "--model", "qwen2.5-coder-0.5b", "--versus-extractive"]
    result = runner.invoke(app, [*args, "--json", str(out)])
    assert result.exit_code == 0, result.output
    runs = json.loads(out.read_text())
    model, none = runs["model"], runs["extractive"]
    # The stand-in did what the recorded model did, in every way, on these questions.
    questions = [json.loads(line)["text"] for line in (DATASET / "queries.jsonl").open()]
    assert {behaviour(q) for q in questions[:QUESTIONS]} >= {
        "copied",
        "markers_only",
        "unsupported",
        "invented",
        "repetition",
    }
    assert llama.log  # the tool_choice object it ignored
    assert model["modes"].get("search_then_answer", 0) > 0
    assert model["citation_hit_rate"] >= none["citation_hit_rate"]
    assert model["sources_present_rate"] == 1.0
    assert model["uncited_claims_shown"] == 0
    assert len(model["per_question"]) == QUESTIONS
    assert all(row["seconds"] > 0 for row in model["per_question"])
    assert model["seconds_p95"] is not None
    # Found out once: only the first question offered tools.
    assert sum("tools" in r for r in llama.requests) == 2
