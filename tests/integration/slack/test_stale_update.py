"""A re-checked answer (its sources changed) posted in its Slack thread by the real slack_sdk
client against the emulator; never in a channel whose answers are private."""

from __future__ import annotations

from adapters.slack.notify import SlackNotifier
from core.config import ChannelPolicy
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, Citation


def updated_answer() -> Answer:
    cited = Citation(1, "Keys", "https://docs.example.com/keys#rotation", "every 30 days", True)
    return Answer(
        "Keys rotate every 30 days [1]. <!channel>",
        AnswerStatus.ANSWERED,
        AnswerMode.EXTRACTIVE,
        citations=[cited],
    )


async def test_posted_in_the_thread_but_never_where_answers_are_private(slack_factory) -> None:
    harness, stop = await slack_factory(None)
    try:
        policies = {"slack/T1/CPRIV": ChannelPolicy(private=True)}
        settings = harness.settings.model_copy(
            update={"channels": harness.settings.channels.model_copy(update={"policies": policies})}
        )
        notifier = SlackNotifier(harness.service.bolt.client, settings.slack, settings.policy)
        preface = "The page I quoted changed on 2026-11-25; here is the updated answer."
        assert await notifier.post_update(
            "slack/T1/C1/1700000000.000100", preface, updated_answer()
        )
        [posted] = harness.emulator.called("chat.postMessage")
        assert posted["channel"] == "C1"
        assert posted["thread_ts"] == "1700000000.000100"
        blocks = str(posted["blocks"])
        assert preface in blocks
        assert "30 days" in blocks
        assert "keys#rotation" in blocks  # its sources, linked
        assert "<!channel>" not in blocks  # pings defused as in any answer
        assert not await notifier.post_update(
            "slack/T1/CPRIV/1700000000.000200", preface, updated_answer()
        )
        assert not await notifier.post_update("discord/thread/1", preface, updated_answer())
        assert len(harness.emulator.called("chat.postMessage")) == 1
    finally:
        await stop()
