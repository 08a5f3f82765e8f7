"""A re-checked answer (its sources changed) posted in its Slack thread by the real slack_sdk
client against the emulator; never in a channel whose answers are private, nor in one where the
bot is switched off (a direct message is answered, and updated, whatever the trigger)."""

from __future__ import annotations

import pytest

from adapters.slack.notify import SlackNotifier
from core.config import ChannelPolicy
from core.domain.conversation import Answer, AnswerMode, AnswerStatus, Citation
from core.domain.insights import LoggedAnswer, channel_of
from core.insights.stale import Reach, UpdateFailed
from tests.fakes.answer_log import logged_answer


def logged(conversation_key: str, channel: str = "") -> LoggedAnswer:
    """An answer of the log given in `conversation_key` (logged in `channel`, by default the
    channel the key names)."""
    platform, from_key = channel_of(conversation_key)
    return logged_answer(
        conversation_key=conversation_key,
        platform=platform,
        channel=channel or from_key,
        question="How often are keys rotated?",
        text="Keys rotate every 90 days [1].",
        mode="extractive",
    )


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


async def test_no_update_where_the_bot_is_switched_off_but_direct_messages_still_get_theirs(
    slack_factory,
) -> None:
    """`trigger: off` everywhere but C1: the bot says nothing in C2, updates included; a
    direct message (a D… channel) is answered whatever the trigger, so it is updated."""
    harness, stop = await slack_factory(None)
    try:
        channels = harness.settings.channels.model_copy(
            update={
                "default": ChannelPolicy(trigger="off"),
                "policies": {"slack/T1/C1": ChannelPolicy(trigger="mention")},
            }
        )
        settings = harness.settings.model_copy(update={"channels": channels})
        notifier = SlackNotifier(harness.service.bolt.client, settings.slack, settings.policy)
        assert notifier.reach(logged("slack/T1/C1/1700000000.000100")) is Reach.THREAD
        assert notifier.reach(logged("slack/T1/C2/1700000000.000200")) is Reach.SILENCED
        assert notifier.reach(logged("slack/T1/D0DM/direct")) is Reach.THREAD
        preface = "The page I quoted changed on 2026-11-25; here is the updated answer."
        assert not await notifier.post_update(
            "slack/T1/C2/1700000000.000200", preface, updated_answer()
        )
        assert harness.emulator.called("chat.postMessage") == []
        assert await notifier.post_update("slack/T1/D0DM/direct", preface, updated_answer())
        [posted] = harness.emulator.called("chat.postMessage")
        assert posted["channel"] == "D0DM"
        assert not posted.get("thread_ts")
    finally:
        await stop()


async def test_a_refused_update_says_why_and_whether_trying_again_can_help(slack_factory) -> None:
    """The channel archived, a message Slack won't take: for good. Slack busy, the network
    down: for now. Refused after
    the first of several messages: for good, or a retry would post that part twice. The reason
    names the error, never the update's words."""
    harness, stop = await slack_factory(None)
    try:
        notifier = SlackNotifier(
            harness.service.bolt.client, harness.settings.slack, harness.settings.policy
        )
        key = "slack/T1/C1/1700000000.000100"
        # The SDK retries a dropped connection once: both attempts fail.
        harness.emulator.fail(
            "chat.postMessage",
            "is_archived",
            "invalid_blocks",  # a message Slack will never take: retrying would only re-ask
            "internal_error",
            "disconnect",
            "disconnect",
        )
        failures = []
        for _ in range(4):
            with pytest.raises(UpdateFailed) as failed:
                await notifier.post_update(key, "Updated:", updated_answer())
            failures.append((failed.value.reason, failed.value.permanent))
        assert failures[:3] == [
            ("is_archived", True),
            ("invalid_blocks", True),
            ("internal_error", False),
        ]
        assert failures[3][1] is False

        long = updated_answer()
        long.text = "\n\n".join(["Keys rotate every 30 days [1]. " * 100] * 8)
        harness.emulator.fail("chat.postMessage", "ok", "internal_error")
        with pytest.raises(UpdateFailed) as partly:
            await notifier.post_update(key, "Updated:", long)
        assert partly.value.permanent
        assert partly.value.reason.startswith("internal_error after 1 of ")
        assert all("Keys rotate" not in reason for reason, _ in failures)
    finally:
        await stop()
