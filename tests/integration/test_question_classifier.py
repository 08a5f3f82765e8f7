"""The `auto` channels' question classifier on the real embedder: the packaged model is the one
`bot eval questions` trains from the committed messages, and on the set it never saw it keeps
the precision a busy channel needs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import structlog
from typer.testing import CliRunner

from bot.cli import app, main
from core.answer.question_gate import QuestionGate
from core.domain.question_model import QuestionModel
from core.evaluation.questions import (
    TrainingOptions,
    load_messages,
    precision_recall,
    train_question_model,
)
from core.search.embedder import MiniLMEmbedder
from tests.conftest import REPO

MESSAGES = REPO / "tests" / "data" / "chat_messages.jsonl"
# The options `bot eval questions` trains the packaged model with (its defaults).
OPTIONS = TrainingOptions(
    held_out="held-out-7", regularisation=10.0, folds=10, target_precision=0.98, seed=0
)
runner = CliRunner()


async def test_on_messages_it_never_saw_it_keeps_the_precision_a_busy_channel_needs(
    minilm: MiniLMEmbedder,
) -> None:
    model = QuestionModel.packaged()
    gate = QuestionGate(minilm, model)
    held_out = [m for m in load_messages(MESSAGES) if m.set == model.held_out]
    assert model.held_out not in model.trained_on
    assert len(held_out) >= 80
    said = [await gate(m.text) for m in held_out]
    precision, recall = precision_recall(said, [m.answer for m in held_out])
    print(f"{model.held_out}: precision {precision:.3f}, recall {recall:.3f}")
    assert precision >= 0.95  # 0.976 when trained (the model before: 0.933 on this set)
    assert recall >= 0.90  # 0.930 (the model before: 0.977)


async def test_status_checks_and_favours_shaped_like_questions_are_not_for_the_docs(
    minilm: MiniLMEmbedder,
) -> None:
    """What the rules alone let through: each of these reads as a question."""
    gate = QuestionGate(minilm, QuestionModel.packaged())
    rules_only = QuestionGate(minilm, None)
    for text in (
        "Is the staging env down again?",
        "did the deploy go out?",
        "Who is on call this week?",
    ):
        assert await rules_only(text)
        assert not await gate(text), text
    # It is not "staging" it turns down: a docs question about staging, from a set it never saw.
    assert await gate("How do I request a new staging environment?")
    # The pair the rules cannot tell apart is far apart here (0.019 and 0.526), though the docs
    # question falls just short of the threshold (0.55) since tuning-2 taught it more status checks.
    model = QuestionModel.packaged()
    status, docs = await minilm.embed_documents(
        ["Is the staging env down again?", "Is the staging database refreshed nightly?"]
    )
    assert model.probability(docs.tolist()) - model.probability(status.tolist()) > 0.4


async def test_the_packaged_model_is_the_one_the_committed_messages_train(
    minilm: MiniLMEmbedder,
) -> None:
    """Edit the messages without retraining (`bot eval questions --write
    core/domain/question_model.json`) and this fails."""
    trained = await train_question_model(load_messages(MESSAGES), minilm, OPTIONS)
    packaged = QuestionModel.packaged()
    assert trained.model.trained_on == packaged.trained_on
    assert trained.model.threshold == packaged.threshold
    assert np.allclose(trained.model.weights, packaged.weights, atol=1e-4)
    figures = {f.name: f for f in trained.figures}
    assert figures["held-out-7"].measured == "held out"
    assert all(f.measured == "cross-validated" for n, f in figures.items() if n != "held-out-7")
    # The classifier adds precision where the rules were weakest, on sets they never shaped.
    for name in ("held-out-3", "held-out-4", "held-out-5", "held-out-6", "held-out-7"):
        assert figures[name].precision > figures[name].rules_precision + 0.25, name


async def test_a_model_for_another_embedder_leaves_the_rules_alone(
    minilm: MiniLMEmbedder,
) -> None:
    foreign = QuestionModel.packaged().model_copy(update={"embedder": "another/model"})
    with structlog.testing.capture_logs() as logs:
        gate = QuestionGate(minilm, foreign)
    assert not gate.classifier
    assert [e["event"] for e in logs] == ["question_model_unusable"]
    assert await gate("Is the staging env down again?")  # the rules say yes; nothing overrules


def test_the_command_reports_each_set_and_writes_a_model_that_loads(tmp_path: Path) -> None:
    out = tmp_path / "model.json"
    figures = tmp_path / "figures.json"
    result = runner.invoke(
        app,
        [
            "eval",
            "questions",
            "--messages",
            str(MESSAGES),
            "--write",
            str(out),
            "--json",
            str(figures),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "held out" in result.output
    model = QuestionModel.model_validate_json(out.read_text(encoding="utf-8"))
    assert model.held_out == "held-out-7"
    sets = {s["name"]: s for s in json.loads(figures.read_text(encoding="utf-8"))["sets"]}
    assert sets["held-out-7"]["precision"] >= 0.95


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"text": "hi", "answer": "maybe", "set": "x"}\n', ":1: not a labelled message"),
        ('{"text": "hi", "answer": true, "set": "tuning"}\n', "no labelled set named"),
        ("", "no labelled messages"),
    ],
)
def test_bad_messages_are_one_clear_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: str,
    reason: str,
) -> None:
    path = tmp_path / "messages.jsonl"
    path.write_text(content, encoding="utf-8")
    monkeypatch.setenv("BOT_CONFIG", str(REPO / "config.yaml"))
    monkeypatch.setattr("sys.argv", ["bot", "eval", "questions", "--messages", str(path)])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code != 0
    said = capsys.readouterr().err.strip()
    assert reason in said
    assert len(said.splitlines()) == 1
    assert "Traceback" not in said
