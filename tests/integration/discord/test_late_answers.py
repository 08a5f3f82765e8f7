"""An answer that outlives the command's interaction token (15 minutes: a slow local model
over several rounds) is still shown: in the channel with the bot token, mentioning the asker
alone, with its thread opened from it; the apology goes the same way; a private answer is
never posted publicly; and nothing escapes to discord.py as an unhandled error."""

from __future__ import annotations

import asyncio
import logging

import pytest

from adapters.discord.bot import REFUSED_HERE
from core.config import ChannelPolicy
from tests.fakes.discord_api import CHANNEL_ID, GUILD_ID
from tests.integration.discord.conftest import DiscordHarness, ask_payload

QUESTION = "How do I re-ingest changed documents?"
ASKER_ONLY = {"parse": [], "users": [42]}  # the asker, "42" in ask_payload, and nobody else
TOKEN_EXPIRED = (401, 50027)
UNKNOWN_WEBHOOK = (404, 10015)
SEND_REFUSED = (403, 50013)  # Missing Permissions: refused for good, not retried


def _in_channel(harness: DiscordHarness) -> list[dict]:
    """The messages posted in the channel (not the threads opened from them)."""
    posted = f"/channels/{CHANNEL_ID}/messages"
    return [body for m, path, body in harness.emulator.calls if m == "POST" and path == posted]


def _escaped(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What discord.py logged as an error a command's callback let out."""
    return [r.getMessage() for r in caplog.records if r.name.startswith("discord.app_commands")]


@pytest.mark.parametrize("refusal", [TOKEN_EXPIRED, UNKNOWN_WEBHOOK], ids=["expired", "unknown"])
async def test_an_answer_the_token_no_longer_carries_goes_out_with_the_bot_token(
    discord_bot: DiscordHarness, refusal: tuple[int, int], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    discord_bot.emulator.webhook_refusal = refusal
    discord_bot.interaction(ask_payload(QUESTION))
    thread_id = await discord_bot.thread_ready()
    [answer] = _in_channel(discord_bot)
    assert answer["embeds"]
    assert "<@42>" in answer["content"]
    assert answer["allowed_mentions"] == ASKER_ONLY
    [opened] = [p for m, p, _ in discord_bot.emulator.calls if m == "POST" and "/threads" in p]
    assert opened.startswith(f"/channels/{CHANNEL_ID}/messages/")  # from the answer's message
    turns = await discord_bot.store.recent(f"discord/thread/{thread_id}", 10)
    assert [t.question for t in turns] == [QUESTION]
    assert not _escaped(caplog)


async def test_near_the_tokens_end_the_answer_does_not_wait_for_a_refusal(
    discord_bot: DiscordHarness,
) -> None:
    """Past `discord.interaction_reply_s` the token isn't tried at all: a send Discord
    refuses at the deadline's edge would cost the time the answer has left."""
    settings = discord_bot.bot.settings
    discord_bot.bot.settings = settings.model_copy(update={"interaction_reply_s": 0.001})
    discord_bot.interaction(ask_payload(QUESTION))
    await discord_bot.thread_ready()
    assert discord_bot.emulator.called("POST", "/callback")  # deferred in time, as ever
    assert not discord_bot.emulator.called("POST", "/webhooks/")
    [answer] = _in_channel(discord_bot)
    assert answer["embeds"]
    assert answer["allowed_mentions"] == ASKER_ONLY


async def test_the_apology_falls_back_to_the_bot_token_too(
    discord_bot: DiscordHarness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    discord_bot.emulator.webhook_refusal = TOKEN_EXPIRED
    discord_bot.emulator.message_failures = [SEND_REFUSED]  # the answer's post, in the channel
    discord_bot.interaction(ask_payload(QUESTION))
    await discord_bot.until(lambda: len(_in_channel(discord_bot)) == 2)
    _, apology = _in_channel(discord_bot)
    # Refused for a permission (403, 50013): said as a refusal, not "try again".
    assert REFUSED_HERE in apology["content"]
    assert "<@42>" in apology["content"]  # the refused answer told nobody
    assert apology["allowed_mentions"] == ASKER_ONLY
    assert not _escaped(caplog)


async def test_when_nothing_can_be_posted_nothing_escapes(
    discord_bot: DiscordHarness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    discord_bot.emulator.webhook_refusal = TOKEN_EXPIRED
    discord_bot.emulator.message_failures = [SEND_REFUSED, SEND_REFUSED]
    discord_bot.interaction(ask_payload(QUESTION))
    await discord_bot.until(lambda: len(_in_channel(discord_bot)) == 2)
    await asyncio.sleep(0.3)  # time for an error to reach discord.py
    assert not _escaped(caplog)


async def test_a_private_answer_past_the_token_is_never_posted_publicly(
    discord_factory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    here = f"discord/{GUILD_ID}/{CHANNEL_ID}"
    harness, stop = await discord_factory(policies={here: ChannelPolicy(private=True)})
    try:
        harness.emulator.webhook_refusal = TOKEN_EXPIRED
        harness.interaction(ask_payload(QUESTION))
        await harness.until(lambda: bool(harness.emulator.called("POST", "/webhooks/")))
        await asyncio.sleep(0.3)
        # Tried through the interaction only, once: the token is given up at its refusal.
        assert len(harness.emulator.called("POST", "/webhooks/")) == 1
        assert not _in_channel(harness)
        assert not _escaped(caplog)
    finally:
        await stop()
