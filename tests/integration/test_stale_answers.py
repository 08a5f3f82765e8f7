"""Answers re-checked when their sources change, on every backend: after an ingest that edits one
passage and removes another, exactly the answers citing them are stale (and say how); a
re-check re-asks each once and posts only a new answer that differs; the Slack and Discord
notifiers post it in the original thread, never where the answer was private (tests in
`slack/` and `discord/` `test_stale_update.py`)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from core.answer.engine import AnswerEngine
from core.backends.sqlite import SqliteBackend
from core.config import Settings
from core.config_loader import load_settings
from core.domain.conversation import Answer, ChannelKind, Question
from core.ingest.pipeline import Ingestor
from core.insights.stale import UPDATE_PREFACE, recheck, stale_answers
from core.ports import Backend
from core.search.embedder import MiniLMEmbedder
from tests.conftest import REPO
from tests.integration.answers.helpers import cached, engine

runner = CliRunner()

ROTATION = """# Key rotation

Signing keys are rotated every 90 days by the platform team.
"""
ROTATION_EDITED = """# Key rotation

Signing keys are rotated every 30 days by the security team, and on every incident.
"""
RETENTION = """# Log retention

Application logs are kept for 14 days in the central log store.
"""
EXPORTS = """# Exports

Reports can be exported as CSV from the reports page.
"""


class RecordingNotifier:
    def __init__(self, deliverable: bool = True) -> None:
        self.posted: list[tuple[str, str, Answer]] = []
        self.deliverable = deliverable

    async def post_update(self, conversation_key: str, preface: str, answer: Answer) -> bool:
        if self.deliverable:
            self.posted.append((conversation_key, preface, answer))
        return self.deliverable


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "rotation.md").write_text(ROTATION, encoding="utf-8")
    (folder / "retention.md").write_text(RETENTION, encoding="utf-8")
    (folder / "exports.md").write_text(EXPORTS, encoding="utf-8")
    return folder


@pytest.fixture
async def answers(
    backend: Backend, ingestor: Ingestor, settings: Settings, docs: Path
) -> AnswerEngine:
    """The docs indexed, and an engine quoting one passage per answer (one citation each)."""
    await ingestor.ingest([str(docs)], source="docs")
    return engine(settings, backend.index, extractive_passages=1)


async def test_answers_citing_a_changed_or_removed_passage_are_stale_and_updated_once(
    backend: Backend, ingestor: Ingestor, answers: AnswerEngine, docs: Path
) -> None:
    state = backend.platform_state(60)
    asked = {}
    for key, question in (
        ("slack/T1/C1/1.1", "How often are signing keys rotated?"),
        ("slack/T1/C1/1.2", "How long are application logs kept?"),
        ("slack/T1/C1/1.3", "Can reports be exported as CSV?"),
    ):
        answer = await answers.answer(Question("slack", key, "U1", question, ChannelKind.THREAD))
        assert answer.grounded, question
        asked[question] = await state.record_answer(key, question, answer)

    (docs / "rotation.md").write_text(ROTATION_EDITED, encoding="utf-8")
    (docs / "retention.md").unlink()
    await ingestor.ingest([str(docs)], source="docs", prune=True)

    found = await stale_answers(await state.answer_log(0), backend.index)
    changes = {s.entry.question: {c.change for c in s.changes} for s in found}
    assert changes == {
        "How often are signing keys rotated?": {"changed"},
        "How long are application logs kept?": {"removed"},
    }

    slack = RecordingNotifier()
    today = datetime(2026, 11, 25, tzinfo=UTC)
    report = await recheck(found, answers, state, {"slack": slack}, today)
    assert report.posted == [asked["How often are signing keys rotated?"]]
    assert report.not_grounded == [asked["How long are application logs kept?"]]
    [(key, preface, updated)] = slack.posted
    assert key == "slack/T1/C1/1.1"
    assert preface == UPDATE_PREFACE.format(date="2026-11-25")
    assert "30 days" in updated.text
    assert updated.grounded

    again = await recheck(found, answers, state, {"slack": slack}, today)
    assert again.already_checked == 2  # once per answer, whatever the next run finds
    assert again.posted == []
    assert len(slack.posted) == 1


async def test_a_passage_changed_in_form_only_is_not_reposted(
    backend: Backend, ingestor: Ingestor, answers: AnswerEngine, docs: Path
) -> None:
    state = backend.platform_state(60)
    question = "Can reports be exported as CSV?"
    first = await answers.answer(
        Question("slack", "slack/T1/C1/2.1", "U1", question, ChannelKind.THREAD)
    )
    await state.record_answer("slack/T1/C1/2.1", question, first)
    reflowed = EXPORTS.replace("exported as CSV from", "exported as CSV\nfrom")
    (docs / "exports.md").write_text(reflowed, encoding="utf-8")
    await ingestor.ingest([str(docs)], source="docs")
    found = await stale_answers(await state.answer_log(0), backend.index)
    assert [s.entry.question for s in found] == [question]
    slack = RecordingNotifier()
    report = await recheck(found, answers, state, {"slack": slack})
    assert report.unchanged == [found[0].entry.answer_id]
    assert slack.posted == []


def test_the_command_lists_stale_answers_after_an_ingest(
    docs: Path, tmp_path: Path, minilm: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(data))
    for name in ("SLACK_BOT_TOKEN", "DISCORD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    assert runner.invoke(app, ["ingest", str(docs)]).exit_code == 0
    settings = load_settings(REPO / "config.yaml", environ={"BOT_STORAGE__DATA_DIR": str(data)})

    async def answer_and_record() -> None:
        backend = SqliteBackend(settings, cached(settings, minilm))
        try:
            answers = engine(settings, backend.index, extractive_passages=1)
            question = "How often are signing keys rotated?"
            key = "slack/T1/C1/3.1"
            answer = await answers.answer(
                Question("slack", key, "U1", question, ChannelKind.THREAD)
            )
            await backend.platform_state(60).record_answer(key, question, answer)
        finally:
            await backend.close()

    asyncio.run(answer_and_record())
    assert "0 stale answers" in runner.invoke(app, ["stale-answers"]).output
    (docs / "rotation.md").write_text(ROTATION_EDITED, encoding="utf-8")
    assert runner.invoke(app, ["ingest", str(docs)]).exit_code == 0
    listed = runner.invoke(app, ["stale-answers"])
    assert listed.exit_code == 0, listed.output
    assert "1 stale answers" in listed.output
    assert "changed: Key rotation" in " ".join(listed.output.split())
    refused = runner.invoke(app, ["stale-answers", "--notify"])
    assert refused.exit_code == 1
    assert "--notify needs SLACK_BOT_TOKEN or DISCORD_TOKEN" in refused.output
