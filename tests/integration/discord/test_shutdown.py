"""SIGTERM while answers are being written (what Heroku and Docker send to stop `bot discord`):
the answers in progress get `discord.shutdown_grace_s` to finish; those still running then
are cut short with an apology where the asker is waiting (the "thinking…" of a command, the
thread of a follow-up or of a ❓), never left silent; the connection closes after that. While
it drains, nothing new starts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import structlog

from adapters.discord.bot import SHUTDOWN_APOLOGY
from adapters.discord.reply import RESTARTING
from core.answer.claude import ClaudeModel
from core.answer.tools import RESPOND_TOOL, SEARCH_TOOL
from core.config import ChannelPolicy
from tests.fakes.anthropic_api import FakeMessagesAPI, message, reply, tool_use
from tests.integration.discord.conftest import ask_payload, thread_message
from tests.integration.discord.test_channel_policies import (
    FORUM,
    HERE,
    channel_message,
    forum_post,
    reaction,
)

QUESTION = "How do I re-ingest changed documents?"
_SHORT_GRACE = {"shutdown_grace_s": 0.2, "apology_deadline_s": 5}


def _hanging_model() -> tuple[FakeMessagesAPI, asyncio.Event]:
    """A model whose second turn (the answer) never comes: an answer in progress."""
    never = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        await never.wait()
        yield b""

    api = FakeMessagesAPI(
        [
            message(tool_use(SEARCH_TOOL, query="ingest")),
            lambda _: reply(body()),
            lambda _: reply(body()),
        ]
    )
    return api, never


def _sent(harness, prefix: str) -> list[dict]:
    return [b for m, p, b in harness.emulator.calls if m == "POST" and p.startswith(prefix)]


async def test_a_command_still_running_at_sigterm_gets_an_apology_not_thinking_forever(
    discord_factory,
) -> None:
    api, _ = _hanging_model()
    harness, stop = await discord_factory(
        claude=ClaudeModel(api.client(max_retries=0), model="claude-test", max_tokens=256)
    )
    try:
        harness.bot.settings = harness.bot.settings.model_copy(update=_SHORT_GRACE)
        harness.interaction(ask_payload(QUESTION))
        await harness.until(lambda: len(api.requests) >= 2)  # the answer is being written
        await asyncio.wait_for(harness.bot.shutdown(), 10)
        followups = _sent(harness, "/webhooks/")
        assert [f.get("content") for f in followups] == [SHUTDOWN_APOLOGY]
        assert harness.bot.is_closed()
    finally:
        await stop()


async def test_a_command_that_finishes_within_the_grace_is_answered(discord_factory) -> None:
    harness, stop = await discord_factory()  # no model: a quick extractive answer
    try:
        harness.interaction(ask_payload(QUESTION))
        await asyncio.sleep(0)  # the command's task has started
        await asyncio.wait_for(harness.bot.shutdown(), 30)
        followups = _sent(harness, "/webhooks/")
        assert followups
        assert followups[0]["embeds"]
        assert SHUTDOWN_APOLOGY not in str(harness.emulator.calls)
    finally:
        await stop()


async def test_a_follow_up_still_running_at_sigterm_is_apologised_for_in_its_thread(
    discord_factory,
) -> None:
    never = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        await never.wait()
        yield b""

    answered = tool_use(
        RESPOND_TOOL, answer="Run bot ingest again.", citations=[], status="partial"
    )
    api = FakeMessagesAPI(
        [
            message(tool_use(SEARCH_TOOL, query="ingest")),
            message(answered),
            message(tool_use(SEARCH_TOOL, query="prune")),
            lambda _: reply(body()),
        ]
    )
    harness, stop = await discord_factory(
        claude=ClaudeModel(api.client(max_retries=0), model="claude-test", max_tokens=256)
    )
    try:
        harness.bot.settings = harness.bot.settings.model_copy(update=_SHORT_GRACE)
        harness.interaction(ask_payload(QUESTION))
        thread_id = await harness.thread_ready()
        harness.gateway_message(thread_message(thread_id, "and what does --prune delete?"))
        await harness.until(lambda: len(api.requests) >= 4)  # the follow-up's answer is due
        await asyncio.wait_for(harness.bot.shutdown(), 10)
        in_thread = _sent(harness, f"/channels/{thread_id}/messages")
        assert [m.get("content") for m in in_thread] == [SHUTDOWN_APOLOGY]
    finally:
        await stop()


async def test_a_command_arriving_while_shutting_down_is_told_to_ask_again(
    discord_bot,
) -> None:
    """The connection stays up while the answers in progress finish: a command that arrives
    meanwhile is told at once, not started only to be cut short."""
    discord_bot.bot.draining = True
    discord_bot.interaction(ask_payload(QUESTION))
    await discord_bot.until(lambda: bool(discord_bot.emulator.called("POST", "/callback")))
    [told] = discord_bot.emulator.called("POST", "/callback")
    assert told["type"] == 4  # CHANNEL_MESSAGE_WITH_SOURCE, not a deferral
    assert told["data"]["content"] == RESTARTING
    assert told["data"]["flags"] == 64  # ephemeral


async def test_a_reaction_answer_still_running_at_sigterm_is_apologised_for_in_its_thread(
    discord_factory,
) -> None:
    """A ❓ has no interaction to apologise through: the apology goes in the thread the answer
    was to open from the message (opened for it, as the answer had not got that far), and the
    thread is the bot's, so asking again there is answered."""
    api, _ = _hanging_model()
    harness, stop = await discord_factory(
        claude=ClaudeModel(api.client(max_retries=0), model="claude-test", max_tokens=256)
    )
    target = channel_message(QUESTION)
    harness.emulator.messages[target["id"]] = target
    try:
        harness.bot.settings = harness.bot.settings.model_copy(update=_SHORT_GRACE)
        harness.bot._connection.parse_message_reaction_add(reaction(target))
        await harness.until(lambda: len(api.requests) >= 2)  # the answer is being written
        await asyncio.wait_for(harness.bot.shutdown(), 10)
        assert harness.emulator.called("POST", f"/messages/{target['id']}/threads")
        [thread_id] = harness.emulator.threads
        in_thread = _sent(harness, f"/channels/{thread_id}/messages")
        assert [m.get("content") for m in in_thread] == [SHUTDOWN_APOLOGY]
        assert await harness.state.is_bot_thread(f"discord/thread/{thread_id}")
        assert harness.bot.is_closed()
    finally:
        await stop()


async def test_an_answer_that_joins_during_the_grace_is_waited_for_then_cut_short(
    discord_factory,
) -> None:
    """`shutdown` reads the answers in progress again while it waits: one that joins after the
    drain began (an event discord.py dispatched just before) is cancelled with the rest before
    the connection closes, not left running past it."""
    api, _ = _hanging_model()
    harness, stop = await discord_factory(
        claude=ClaudeModel(api.client(max_retries=0), model="claude-test", max_tokens=256)
    )
    never = asyncio.Event()

    async def joins_late() -> None:
        with harness.bot._answering():
            await never.wait()

    target = channel_message(QUESTION)
    harness.emulator.messages[target["id"]] = target
    try:
        harness.bot.settings = harness.bot.settings.model_copy(update=_SHORT_GRACE)
        harness.bot._connection.parse_message_reaction_add(reaction(target))
        await harness.until(lambda: len(api.requests) >= 2)  # an answer in progress
        shutting_down = asyncio.create_task(harness.bot.shutdown())
        await asyncio.sleep(0)  # the drain has begun
        late = asyncio.create_task(joins_late())
        await asyncio.wait_for(shutting_down, 10)
        assert late.cancelled()
        assert harness.bot.is_closed()
    finally:
        never.set()
        await stop()


async def test_while_shutting_down_what_no_command_asked_starts_no_answer(
    discord_factory,
) -> None:
    """A ❓, an unasked question in an `auto` channel and a forum post arriving while the bot
    drains have no interaction to be told through: nothing starts (no thread, no post), each
    is logged, and none is claimed, so the same ❓ after the restart is answered."""
    auto = ChannelPolicy(trigger="auto")
    harness, stop = await discord_factory(policies={HERE: auto, FORUM: auto})
    target = channel_message(QUESTION)
    harness.emulator.messages[target["id"]] = target
    harness.bot.draining = True
    try:
        for what, send in (
            (
                "reaction",
                lambda: harness.bot._connection.parse_message_reaction_add(reaction(target)),
            ),
            ("unasked question", lambda: harness.gateway_message(channel_message(QUESTION))),
            (
                "forum post",
                lambda: harness.gateway_message(forum_post(harness, "882", "Re-ingest", QUESTION)),
            ),
        ):
            with structlog.testing.capture_logs() as logs:
                send()
                await harness.until(lambda: any(e["event"] == "not_answered" for e in logs))
            [said] = [e for e in logs if e["event"] == "not_answered"]
            assert said["reason"] == f"{what} while restarting"
        assert harness.emulator.threads == []
        assert harness.emulator.called("POST", "/messages") == []
        assert await harness.state.first_delivery(f"discord-reaction:{target['id']}")
    finally:
        await stop()


async def test_readiness_says_whether_discord_is_connected_and_not_stopping(
    discord_factory,
) -> None:
    harness, stop = await discord_factory()
    try:
        # The harness logs in over REST only: no gateway, so not connected yet.
        assert harness.bot.not_ready() == "not connected to Discord"
        harness.bot._ready.set()  # what discord.py does on the gateway's READY
        assert harness.bot.not_ready() is None
        harness.bot.draining = True
        assert harness.bot.not_ready() == "shutting down"
        harness.bot.draining = False
        await harness.bot.close()
        assert harness.bot.not_ready() == "not connected to Discord"
    finally:
        await stop()


async def test_a_follow_up_during_a_rolling_deploy_gets_one_reply(discord_bot) -> None:
    """Every connected process gets a follow-up: the draining one said "restarting" before it
    claimed the message, and the new one answered it too, so the thread got both."""
    discord_bot.interaction(ask_payload(QUESTION))
    thread_id = await discord_bot.thread_ready()
    follow_up = thread_message(thread_id, "and what does --prune delete?")
    discord_bot.bot.draining = True  # the old process, told to stop
    discord_bot.gateway_message(follow_up)
    await discord_bot.until(lambda: bool(_posted_in(discord_bot, thread_id)))
    discord_bot.bot.draining = False  # the new process gets the same message
    discord_bot.gateway_message(follow_up)
    await asyncio.sleep(1.0)
    [told] = _posted_in(discord_bot, thread_id)
    assert told["content"] == RESTARTING


def _posted_in(harness, thread_id: str) -> list[dict]:
    return harness.emulator.called("POST", f"/channels/{thread_id}/messages")
