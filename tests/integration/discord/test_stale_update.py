"""A re-checked answer (its sources changed) posted in its Discord thread or DM by discord.py's
REST client against the emulator; never for an ephemeral answer, nor in a thread of a channel
where the bot is switched off; never pinging anyone."""

from __future__ import annotations

import pytest

from adapters.discord.notify import DiscordNotifier
from core.config import ChannelPolicy
from core.insights.stale import Reach, UpdateFailed
from tests.integration.slack.test_stale_update import logged, updated_answer


async def test_posted_in_the_thread_with_no_pings(discord_factory) -> None:
    harness, stop = await discord_factory(None)
    try:
        notifier = DiscordNotifier(harness.bot.http, harness.bot.settings, harness.bot.policies)
        preface = "The page I quoted changed on 2026-11-25; here is the updated answer."
        assert await notifier.post_update("discord/thread/555", preface, updated_answer())
        assert await notifier.post_update("discord/dm/556", preface, updated_answer())
        [sent] = harness.emulator.called("POST", "/channels/555/messages")
        assert sent["content"] == preface
        assert sent["allowed_mentions"]["parse"] == []
        assert "30 days" in sent["embeds"][0]["description"]
        assert harness.emulator.called("POST", "/channels/556/messages")
        ephemeral = "discord/123/456/789"  # a private /ask: the asker's alone
        assert not await notifier.post_update(ephemeral, preface, updated_answer())
        assert not await notifier.post_update(
            "discord/thread/not-a-number", preface, updated_answer()
        )
        assert len(harness.emulator.called("POST", "/messages")) == 2
    finally:
        await stop()


async def test_a_long_update_is_posted_in_messages_discord_accepts(discord_factory) -> None:
    """The emulator refuses, as Discord does, a message of over ten embeds or 6,000 characters
    of embed text: a 24,000-character answer is posted whole, over several messages."""
    harness, stop = await discord_factory(None)
    try:
        notifier = DiscordNotifier(harness.bot.http, harness.bot.settings, harness.bot.policies)
        long = updated_answer()
        long.text = "\n\n".join(["Keys rotate every 30 days [1]. " * 100] * 8)
        assert await notifier.post_update("discord/thread/555", "Updated:", long)
        sent = harness.emulator.called("POST", "/channels/555/messages")
        assert len(sent) > 1
        assert sent[0]["content"] == "Updated:"
        assert all(not later.get("content") for later in sent[1:])
        text = " ".join(e["description"] or "" for m in sent for e in m["embeds"])
        assert " ".join(text.split()).count("Keys rotate every 30 days") == 800
    finally:
        await stop()


async def test_no_update_in_a_thread_of_a_channel_where_the_bot_is_switched_off(
    discord_factory, settings
) -> None:
    """A thread's key names only the thread: the policy is that of the channel it hangs off,
    as the answer log kept it. A DM is answered whatever the trigger, so it is updated."""
    harness, stop = await discord_factory(None)
    try:
        channels = settings.channels.model_copy(
            update={
                "default": ChannelPolicy(trigger="off"),
                "policies": {
                    "discord/1/10": ChannelPolicy(trigger="mention"),
                    "discord/1/30": ChannelPolicy(trigger="mention", private=True),
                },
            }
        )
        policies = settings.model_copy(update={"channels": channels}).policy
        notifier = DiscordNotifier(harness.bot.http, harness.bot.settings, policies)
        assert notifier.reach(logged("discord/thread/555", "discord/1/10")) is Reach.THREAD
        assert notifier.reach(logged("discord/thread/556", "discord/1/20")) is Reach.SILENCED
        assert notifier.reach(logged("discord/dm/557")) is Reach.THREAD
        assert notifier.reach(logged("discord/1/20/558", "discord/1/20")) is Reach.NOWHERE
        # A channel made private since: the thread's later readers are not its asker.
        assert notifier.reach(logged("discord/thread/559", "discord/1/30")) is Reach.NOWHERE
    finally:
        await stop()


async def test_a_refused_update_says_why_and_whether_trying_again_can_help(discord_factory) -> None:
    """The channel gone (404) or closed to the bot (403), a locked archived thread, an invalid
    message: for good.
    Discord's servers failing: for now. Refused after the first of several messages: for
    good, or a retry would post that part twice."""
    harness, stop = await discord_factory(None)
    try:
        notifier = DiscordNotifier(harness.bot.http, harness.bot.settings, harness.bot.policies)
        harness.emulator.message_failures += [
            (404, 10003),
            (403, 50001),
            (400, 50083),
            (400, 50035),  # a message Discord will never take: retrying would only re-ask
            (503, 0),
        ]
        failures = []
        for _ in range(5):
            with pytest.raises(UpdateFailed) as failed:
                await notifier.post_update("discord/thread/555", "Updated:", updated_answer())
            failures.append((failed.value.reason, failed.value.permanent))
        assert failures == [
            ("HTTP 404 (code 10003)", True),
            ("HTTP 403 (code 50001)", True),
            ("HTTP 400 (code 50083)", True),
            ("HTTP 400 (code 50035)", True),
            ("HTTP 503 (code 0)", False),
        ]

        long = updated_answer()
        long.text = "\n\n".join(["Keys rotate every 30 days [1]. " * 100] * 8)
        harness.emulator.message_failures += [None, (503, 0)]
        with pytest.raises(UpdateFailed) as partly:
            await notifier.post_update("discord/thread/555", "Updated:", long)
        assert partly.value.permanent
        assert partly.value.reason.startswith("HTTP 503 (code 0) after 1 of ")
    finally:
        await stop()
