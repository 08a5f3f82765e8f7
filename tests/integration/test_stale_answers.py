"""Answers re-checked when their sources change, on every backend: after an ingest that edits one
passage and removes another, exactly the answers citing them are stale (and say how); a
re-check re-asks each once, under the policy of the channel it was asked in, and posts only a
new answer that differs; nothing is re-asked for a channel where the bot is switched off; the
Slack and Discord notifiers post it in the original thread, never where the answer was private
nor where the bot is off (tests in `slack/` and `discord/` `test_stale_update.py`)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import structlog
from typer.testing import CliRunner

from bot.cli import app
from bot.runtime import opened
from core.answer.engine import AnswerEngine
from core.backends.sqlite import SqliteBackend
from core.backends.sqlite.conversation_store import SqliteConversationStore
from core.config import ChannelPolicy, Settings
from core.config_loader import load_settings
from core.domain.conversation import Answer, ChannelKind, Question
from core.domain.insights import LoggedAnswer
from core.ingest.pipeline import Ingestor
from core.insights.stale import UPDATE_PREFACE, Reach, UpdateFailed, recheck, stale_answers
from core.ports import Backend, SearchIndex
from core.search.embedder import MiniLMEmbedder
from tests.conftest import REPO
from tests.fakes.slack_api import SlackEmulator
from tests.fakes.threaded import served_in_a_thread
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


# A team's runbook in another source, which a channel scoped to `alpha` must never quote.
ALPHA = """# Re-ingesting

## Re-ingesting changed documents

To re-ingest changed documents, run the ingest command again on the same folder.
"""
ALPHA_EDITED = """# Re-ingesting

## Re-ingesting changed documents

To re-ingest changed documents, run the ingest command again with --prune on the same folder.
"""
BETA = """# Team B internal runbook

## Re-ingesting changed documents (team B only)

To re-ingest changed documents in team B, run the ingest command again with the SECRET-B-ONLY
flag against the restricted folder.
"""
REINGEST = "How do I re-ingest changed documents?"


class RecordingNotifier:
    def __init__(self, deliverable: bool = True, reach: Reach = Reach.THREAD) -> None:
        self.posted: list[tuple[str, str, Answer]] = []
        self.deliverable = deliverable
        self.where = reach

    def reach(self, entry: LoggedAnswer) -> Reach:
        return self.where

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


class NeverAsked:
    """An engine for a re-check that must not re-ask anything (it would cost a model's answer)."""

    async def answer(self, question: Question, **_: Any) -> Answer:
        raise AssertionError(f"re-asked: {question.text}")


def scoped_engine(
    settings: Settings, index: SearchIndex, policies: dict[str, ChannelPolicy]
) -> AnswerEngine:
    """An engine as the wiring builds one for the chat adapters: each channel's policy (by
    channel key) scopes the search."""
    channels = settings.channels.model_copy(update={"policies": policies})
    scoped = settings.model_copy(update={"channels": channels})
    return AnswerEngine(
        index=index,
        store=SqliteConversationStore(scoped.state_path, 5_000),
        settings=scoped.answers,
        top_k=scoped.search.top_k,
        policies=scoped.policy,
    )


@pytest.fixture
def two_teams(tmp_path: Path) -> tuple[Path, Path]:
    """Two sources' folders: `alpha` (public docs) and `beta` (team B's runbook)."""
    alpha, beta = tmp_path / "docs-a", tmp_path / "docs-b"
    alpha.mkdir()
    beta.mkdir()
    (alpha / "alpha.md").write_text(ALPHA, encoding="utf-8")
    (beta / "beta.md").write_text(BETA, encoding="utf-8")
    return alpha, beta


async def test_a_recheck_asks_under_the_policy_of_the_channel_it_was_asked_in(
    backend: Backend, ingestor: Ingestor, settings: Settings, two_teams: tuple[Path, Path]
) -> None:
    """The channel may search only `alpha`: its answer was scoped so, and so is the update,
    which quoted team B's runbook when the re-check asked under the default policy."""
    alpha, beta = two_teams
    await ingestor.ingest([str(alpha)], source="alpha")
    await ingestor.ingest([str(beta)], source="beta")
    answers = scoped_engine(
        settings, backend.index, {"slack/T1/C1": ChannelPolicy(sources=["alpha"])}
    )
    state = backend.platform_state(60)
    key = "slack/T1/C1/4.1"
    first = await answers.answer(Question("slack", key, "U1", REINGEST, ChannelKind.THREAD))
    assert first.citations
    assert all("alpha.md" in c.url for c in first.citations)
    answer_id = await state.record_answer(key, REINGEST, first)

    (alpha / "alpha.md").write_text(ALPHA_EDITED, encoding="utf-8")
    await ingestor.ingest([str(alpha)], source="alpha")
    found = await stale_answers(await state.answer_log(0), backend.index)
    slack = RecordingNotifier()
    report = await recheck(found, answers, state, {"slack": slack})

    assert report.posted == [answer_id]
    [(_, _, updated)] = slack.posted
    assert "--prune" in updated.text
    assert updated.citations
    assert all("alpha.md" in c.url for c in [*updated.citations, *updated.consulted])
    assert "SECRET-B-ONLY" not in updated.text


async def test_nothing_is_reasked_or_posted_where_the_bot_is_switched_off(
    backend: Backend, ingestor: Ingestor, answers: AnswerEngine, docs: Path
) -> None:
    """An answer given before its channel's trigger was turned off: the update would be the
    bot speaking where it was told not to. It is counted, and not re-checked again."""
    state = backend.platform_state(60)
    question = "How often are signing keys rotated?"
    key = "slack/T1/C9/5.1"
    given = await answers.answer(Question("slack", key, "U1", question, ChannelKind.THREAD))
    answer_id = await state.record_answer(key, question, given)
    (docs / "rotation.md").write_text(ROTATION_EDITED, encoding="utf-8")
    await ingestor.ingest([str(docs)], source="docs")
    found = await stale_answers(await state.answer_log(0), backend.index)

    slack = RecordingNotifier(reach=Reach.SILENCED)
    report = await recheck(found, NeverAsked(), state, {"slack": slack})  # type: ignore[arg-type]
    assert report.silenced == [answer_id]
    assert report.posted == report.unchanged == report.not_grounded == []
    assert slack.posted == []
    again = await recheck(found, NeverAsked(), state, {"slack": slack})  # type: ignore[arg-type]
    assert again.already_checked == 1
    assert again.silenced == []


def test_stale_answers_notify_keeps_each_channel_to_its_policy(
    two_teams: tuple[Path, Path],
    tmp_path: Path,
    minilm: MiniLMEmbedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The audit's run, through the command and the real Slack client against the emulator:
    C1 may search only `alpha`, and the bot is switched off in C2. One update is posted, in
    C1, quoting only `alpha`; nothing is posted in C2."""
    alpha, beta = two_teams
    policies = {"slack/T1/C1": {"sources": ["alpha"]}, "slack/T1/C2": {"trigger": "off"}}
    env = {
        "BOT_STORAGE__DATA_DIR": str(tmp_path / "data"),
        "BOT_CHANNELS__POLICIES": json.dumps(policies),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("DISCORD_TOKEN", raising=False)
    for folder, source in ((alpha, "alpha"), (beta, "beta")):
        ingested = runner.invoke(app, ["ingest", str(folder), "--source", source])
        assert ingested.exit_code == 0, ingested.output
    settings = load_settings(REPO / "config.yaml", environ=env)

    async def answer_and_record() -> None:
        """As the Slack app does: the wired engine, the question in its thread."""
        async with opened(settings, embedder=cached(settings, minilm)) as rt:
            log = rt.backend.platform_state(60)
            for key in ("slack/T1/C1/1700000000.000100", "slack/T1/C2/1700000000.000200"):
                question = Question("slack", key, "U2", REINGEST, ChannelKind.THREAD)
                await log.record_answer(key, REINGEST, await rt.engine().answer(question))

    asyncio.run(answer_and_record())
    (alpha / "alpha.md").write_text(ALPHA_EDITED, encoding="utf-8")
    assert runner.invoke(app, ["ingest", str(alpha), "--source", "alpha"]).exit_code == 0

    emulator = SlackEmulator()
    with served_in_a_thread(emulator.app) as base:
        monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
        monkeypatch.setenv("BOT_SLACK__BASE_URL", f"{base}/api/")
        notified = runner.invoke(app, ["stale-answers", "--notify"])
    assert notified.exit_code == 0, notified.output
    assert "2 stale answers" in notified.output
    [posted] = emulator.called("chat.postMessage")
    assert posted["channel"] == "C1"
    assert "--prune" in posted["text"]
    assert "SECRET-B-ONLY" not in json.dumps(posted)
    assert "beta.md" not in json.dumps(posted)


EXPORTS_EDITED = """# Exports

Reports can be exported as CSV or as JSON from the reports page.
"""
TWO_QUESTIONS = (
    ("slack/T1/C1/6.1", "How often are signing keys rotated?"),
    ("slack/T1/C1/6.2", "Can reports be exported as CSV?"),
)


class RefusingNotifier(RecordingNotifier):
    """Posts as the platform would, except that the update for `refused_key` is not taken."""

    def __init__(self, refused_key: str, *, permanent: bool) -> None:
        super().__init__()
        self.refused_key = refused_key
        self.permanent = permanent

    async def post_update(self, conversation_key: str, preface: str, answer: Answer) -> bool:
        if conversation_key == self.refused_key:
            raise UpdateFailed("internal_error", permanent=self.permanent)
        return await super().post_update(conversation_key, preface, answer)


async def two_stale(
    backend: Backend, ingestor: Ingestor, answers: AnswerEngine, docs: Path
) -> tuple[list[str], list[Any]]:
    """Two answers whose passages then changed: their ids, and what `stale_answers` finds."""
    state = backend.platform_state(60)
    ids = []
    for key, question in TWO_QUESTIONS:
        given = await answers.answer(Question("slack", key, "U1", question, ChannelKind.THREAD))
        ids.append(await state.record_answer(key, question, given))
    (docs / "rotation.md").write_text(ROTATION_EDITED, encoding="utf-8")
    (docs / "exports.md").write_text(EXPORTS_EDITED, encoding="utf-8")
    await ingestor.ingest([str(docs)], source="docs")
    found = await stale_answers(await state.answer_log(0), backend.index)
    assert sorted(s.entry.answer_id for s in found) == sorted(ids)
    return ids, found


async def test_a_failed_post_is_one_line_and_the_batch_goes_on(
    backend: Backend, ingestor: Ingestor, answers: AnswerEngine, docs: Path
) -> None:
    """Slack refusing the first update ended the batch with its error, and the other answers
    waited for the next run."""
    first, second = (key for key, _ in TWO_QUESTIONS)
    ids, found = await two_stale(backend, ingestor, answers, docs)
    state = backend.platform_state(60)
    slack = RefusingNotifier(first, permanent=False)
    with structlog.testing.capture_logs() as logs:
        report = await recheck(found, answers, state, {"slack": slack})
    assert report.failed == [ids[0]]
    assert report.posted == [ids[1]]
    assert [key for key, _, _ in slack.posted] == [second]
    [line] = [e for e in logs if e["log_level"] == "warning"]
    assert line["event"] == "update_not_posted"
    assert line["reason"] == "internal_error"
    assert line["answer_id"] == ids[0]
    assert line["permanent"] is False
    said = " ".join(str(v) for v in line.values())
    assert "rotated" not in said  # not the question
    assert "days" not in said  # nor the answer
    assert "exc_info" not in line


async def test_an_update_that_failed_for_now_is_tried_again_by_the_next_run(
    backend: Backend,
    ingestor: Ingestor,
    answers: AnswerEngine,
    docs: Path,
) -> None:
    state = backend.platform_state(60)
    first, _ = (key for key, _ in TWO_QUESTIONS)
    ids, found = await two_stale(backend, ingestor, answers, docs)
    with structlog.testing.capture_logs() as logs:
        await recheck(found, answers, state, {"slack": RefusingNotifier(first, permanent=False)})
    assert [e["retry"] for e in logs if e["event"] == "update_not_posted"] == [True]
    slack = RecordingNotifier()
    again = await recheck(found, answers, state, {"slack": slack})
    assert again.posted == [ids[0]]
    assert again.already_checked == 1  # the one posted the first time
    assert [key for key, _, _ in slack.posted] == [first]


async def test_a_recheck_cancelled_while_it_asks_leaves_the_answer_to_the_next_run(
    backend: Backend,
    ingestor: Ingestor,
    answers: AnswerEngine,
    docs: Path,
) -> None:
    """A stopping clock cancels a re-check waiting on the model: nothing was posted, so the
    claim is given back rather than the update lost."""
    state = backend.platform_state(60)
    ids, found = await two_stale(backend, ingestor, answers, docs)
    asking = asyncio.Event()

    class Stuck:
        async def answer(self, question: Question, **_: Any) -> Answer:
            asking.set()
            await asyncio.sleep(3_600)
            raise AssertionError("not cancelled")

    slack = RecordingNotifier()
    run = asyncio.create_task(recheck(found, Stuck(), state, {"slack": slack}))  # type: ignore[arg-type]
    await asking.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    again = await recheck(found, answers, state, {"slack": slack})
    assert sorted(again.posted) == sorted(ids)


async def test_an_update_refused_for_good_is_not_tried_again(
    backend: Backend, ingestor: Ingestor, answers: AnswerEngine, docs: Path
) -> None:
    """The channel archived or gone: a retry can only fail the same way."""
    state = backend.platform_state(60)
    first, _ = (key for key, _ in TWO_QUESTIONS)
    ids, found = await two_stale(backend, ingestor, answers, docs)
    report = await recheck(
        found, answers, state, {"slack": RefusingNotifier(first, permanent=True)}
    )
    assert report.refused == [ids[0]]
    assert report.posted == [ids[1]]
    slack = RecordingNotifier()
    again = await recheck(found, answers, state, {"slack": slack})
    assert again.already_checked == 2
    assert slack.posted == []


def test_stale_answers_notify_goes_on_past_a_refused_post_and_the_next_run_retries_it(
    docs: Path, tmp_path: Path, minilm: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audit's run: Slack refuses the first update. The command posts the other one
    (it stopped at the first, "unexpected SlackApiError"), and the next run posts the first."""
    env = {"BOT_STORAGE__DATA_DIR": str(tmp_path / "data")}
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", env["BOT_STORAGE__DATA_DIR"])
    monkeypatch.delenv("DISCORD_TOKEN", raising=False)
    assert runner.invoke(app, ["ingest", str(docs)]).exit_code == 0
    settings = load_settings(REPO / "config.yaml", environ=env)

    async def answer_and_record() -> None:
        async with opened(settings, embedder=cached(settings, minilm)) as rt:
            log = rt.backend.platform_state(60)
            for key, question in TWO_QUESTIONS:
                asked = Question("slack", key, "U2", question, ChannelKind.THREAD)
                await log.record_answer(key, question, await rt.engine().answer(asked))

    asyncio.run(answer_and_record())
    (docs / "rotation.md").write_text(ROTATION_EDITED, encoding="utf-8")
    (docs / "exports.md").write_text(EXPORTS_EDITED, encoding="utf-8")
    assert runner.invoke(app, ["ingest", str(docs)]).exit_code == 0

    emulator = SlackEmulator()
    emulator.fail("chat.postMessage", "internal_error")
    with served_in_a_thread(emulator.app) as base:
        monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
        monkeypatch.setenv("BOT_SLACK__BASE_URL", f"{base}/api/")
        first_run = runner.invoke(app, ["stale-answers", "--notify"])
        assert "unexpected" not in first_run.output, first_run.output
        said = " ".join(first_run.output.split())
        assert "1 updated in their threads" in said
        assert "error: not every update was posted: 1 failed for now" in said
        assert "0 refused for good" in said
        assert first_run.exit_code == 1  # not everything was done
        refused, posted = emulator.called("chat.postMessage")
        assert refused["thread_ts"] == "6.1"
        assert posted["thread_ts"] == "6.2"
        second_run = runner.invoke(app, ["stale-answers", "--notify"])
        assert second_run.exit_code == 0, second_run.output
        assert "1 re-checked before" in " ".join(second_run.output.split())
    [retried] = emulator.called("chat.postMessage")[2:]
    assert retried["thread_ts"] == "6.1"
    assert "30 days" in retried["text"]
