"""A re-checked answer (its sources changed) posted in its Discord thread or DM by discord.py's
REST client against the emulator; never for an ephemeral answer; never pinging anyone."""

from __future__ import annotations

from adapters.discord.notify import DiscordNotifier
from tests.integration.slack.test_stale_update import updated_answer


async def test_posted_in_the_thread_with_no_pings(discord_factory) -> None:
    harness, stop = await discord_factory(None)
    try:
        notifier = DiscordNotifier(harness.bot.http, harness.bot.settings)
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
