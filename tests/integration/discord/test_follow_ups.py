"""Which messages in the bot's Discord thread it answers without a mention: one more question,
not thanks or words meant for someone else."""

from __future__ import annotations

import asyncio

from tests.fakes.discord_api import BOT_ID, user
from tests.integration.discord.conftest import DiscordHarness, ask_payload, thread_message


async def test_words_for_a_colleague_and_thanks_in_the_thread_get_no_answer(
    discord_bot: DiscordHarness,
) -> None:
    discord_bot.interaction(ask_payload("How do I re-ingest changed documents?"))
    thread_id = await discord_bot.thread_ready()
    to_bob = thread_message(thread_id, "<@43> can you check this on your machine?", author_id="44")
    to_bob["mentions"] = [user("43", "bob")]
    discord_bot.gateway_message(to_bob)
    discord_bot.gateway_message(thread_message(thread_id, "thanks, that worked!"))
    await asyncio.sleep(1)
    sent = f"/channels/{thread_id}/messages"
    assert not discord_bot.emulator.called("POST", sent)
    discord_bot.gateway_message(thread_message(thread_id, "and --prune?"))
    await discord_bot.until(lambda: bool(discord_bot.emulator.called("POST", sent)))


async def test_thanks_in_a_reply_to_the_bot_is_no_mention_of_it(
    discord_bot: DiscordHarness,
) -> None:
    """Discord's reply pings the author replied to by default, which puts the bot in the
    message's mentions: a "thanks!" sent as a reply to its answer is still only thanks. A
    mention written in the message still asks, whatever it says."""
    discord_bot.interaction(ask_payload("How do I re-ingest changed documents?"))
    thread_id = await discord_bot.thread_ready()
    reply = thread_message(thread_id, "thanks, that worked!")
    reply["mentions"] = [user(BOT_ID, "docbot", bot=True)]  # the reply's ping, not in the text
    discord_bot.gateway_message(reply)
    await asyncio.sleep(1)
    sent = f"/channels/{thread_id}/messages"
    assert not discord_bot.emulator.called("POST", sent)
    tagged = thread_message(thread_id, f"<@{BOT_ID}> thanks!")
    tagged["mentions"] = [user(BOT_ID, "docbot", bot=True)]
    discord_bot.gateway_message(tagged)
    await discord_bot.until(lambda: bool(discord_bot.emulator.called("POST", sent)))
