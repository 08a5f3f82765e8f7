"""The Discord adapter with real discord.py objects: raw interaction and message payloads in,
real REST and webhook calls out to the local emulator."""

from __future__ import annotations

from tests.integration.discord.conftest import DiscordHarness, ask_payload

QUESTION = "How do I re-ingest changed documents?"


async def test_ask_defers_answers_and_opens_a_thread(discord_bot: DiscordHarness) -> None:
    discord_bot.interaction(ask_payload(QUESTION))
    await discord_bot.until(lambda: bool(discord_bot.emulator.called("POST", "/threads")))
    paths = [p for _, p, _ in discord_bot.emulator.calls]
    callback = next(i for i, p in enumerate(paths) if p.endswith("/callback"))
    followup = next(i for i, p in enumerate(paths) if p.startswith("/webhooks/"))
    assert callback < followup  # deferred before any work was posted
    defer = discord_bot.emulator.called("POST", "/callback")[0]
    assert defer["type"] == 5  # DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE: "thinking…"
    sent = discord_bot.emulator.called("POST", "/webhooks/")[0]
    embed = sent["embeds"][0]
    assert "Sources" in str(embed["fields"])
    assert sent["allowed_mentions"] == {"parse": []}
    thread = discord_bot.emulator.called("POST", "/threads")[0]
    assert thread["name"] == QUESTION
