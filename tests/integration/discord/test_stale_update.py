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


async def test_a_long_update_is_posted_in_messages_discord_accepts(discord_factory) -> None:
    """The emulator refuses, as Discord does, a message of over ten embeds or 6,000 characters
    of embed text: a 24,000-character answer is posted whole, over several messages."""
    harness, stop = await discord_factory(None)
    try:
        notifier = DiscordNotifier(harness.bot.http, harness.bot.settings)
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
