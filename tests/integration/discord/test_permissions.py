"""Where Discord would refuse the answer (the bot lacks a permission there), no model is paid
to write it, and whoever waits is told what is missing; where the refusal comes anyway (the
cache could not tell), it is said as such, not as "something went wrong, try again".

The permissions come from the interaction (`app_permissions`, which Discord sends with every
one) or from the gateway's cache of the server (`GUILD_CREATE`: its roles, channels and the
bot's own member), as in production. Discord's refusals are the emulator's `refuse_*`."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import discord
import pytest
import structlog

from adapters.discord.bot import MISSING_HERE, NO_THREAD_POSTS, REFUSED_HERE
from adapters.discord.permissions import missing_permissions, say_missing
from adapters.discord.reply import APOLOGY
from core.answer.claude import ClaudeModel
from core.answer.tools import RESPOND_TOOL, SEARCH_TOOL
from core.config import ChannelPolicy
from tests.fakes.anthropic_api import FakeMessagesAPI, message, tool_use
from tests.fakes.discord_api import BOT_ID, CHANNEL_ID, FORUM_ID, GUILD_ID, NOW, user
from tests.integration.discord.conftest import ask_payload, click_payload, thread_message
from tests.integration.discord.test_channel_policies import (
    channel_message,
    context_menu_payload,
    forum_post,
    reaction,
)

QUESTION = "How do I re-ingest changed documents?"
HERE = f"discord/{GUILD_ID}/{CHANNEL_ID}"
FORUM = f"discord/{GUILD_ID}/{FORUM_ID}"
EVERYTHING = discord.Permissions(2248473465835073)  # what the test payloads grant the bot


def granted(*without: str) -> discord.Permissions:
    permissions = discord.Permissions(EVERYTHING.value)
    for name in without:
        setattr(permissions, name, False)
    return permissions


def model(answers: int = 1, text: str = "Run `bot ingest` again.", status: str = "answered"):
    """Claude searching then answering, `answers` times; `api.requests` are the paid calls."""
    steps: list[Any] = []
    for _ in range(answers):
        steps += [
            message(tool_use(SEARCH_TOOL, query="ingest")),
            message(tool_use(RESPOND_TOOL, answer=text, citations=[], status=status)),
        ]
    api = FakeMessagesAPI(steps)
    return api, ClaudeModel(api.client(max_retries=0), model="claude-test", max_tokens=512)


def told(harness) -> list[dict[str, Any]]:
    """What went through interactions' webhooks (follow-ups)."""
    return harness.emulator.called("POST", "/webhooks/")


def posts_in(harness, channel: str) -> list[dict[str, Any]]:
    return harness.emulator.called("POST", f"/channels/{channel}/messages")


def cache_server(harness, permissions: discord.Permissions, *threads: str) -> None:
    """The server as the gateway's GUILD_CREATE describes it: @everyone's permissions (the bot
    has no other role), the text channel, the bot's own member, and `threads` of the channel."""
    channel = {
        "id": CHANNEL_ID,
        "type": 0,
        "name": "help",
        "position": 0,
        "permission_overwrites": [],
        "nsfw": False,
        "parent_id": None,
        "rate_limit_per_user": 0,
        "flags": 0,
    }
    metadata = {
        "archived": False,
        "auto_archive_duration": 1440,
        "archive_timestamp": NOW,
        "locked": False,
    }
    harness.bot._connection.parse_guild_create(
        {
            "id": GUILD_ID,
            "name": "Test",
            "owner_id": "1",
            "roles": [
                {
                    "id": GUILD_ID,  # @everyone's id is the server's
                    "name": "@everyone",
                    "permissions": str(permissions.value),
                    "position": 0,
                    "color": 0,
                    "hoist": False,
                    "managed": False,
                    "mentionable": False,
                    "flags": 0,
                }
            ],
            "members": [
                {
                    "user": user(BOT_ID, "docbot", bot=True),
                    "roles": [],
                    "joined_at": NOW,
                    "deaf": False,
                    "mute": False,
                    "flags": 0,
                }
            ],
            "channels": [channel],
            "threads": [
                {
                    "id": thread,
                    "type": 11,
                    "guild_id": GUILD_ID,
                    "parent_id": CHANNEL_ID,
                    "name": "a thread",
                    "owner_id": BOT_ID,
                    "thread_metadata": metadata,
                    "message_count": 1,
                    "member_count": 1,
                    "rate_limit_per_user": 0,
                    "flags": 0,
                }
                for thread in threads
            ],
            "emojis": [],
            "stickers": [],
            "features": [],
            "member_count": 2,
            "large": False,
            "unavailable": False,
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }
    )
    guild = harness.bot.get_guild(int(GUILD_ID))
    assert guild is not None
    assert guild.me is not None


def errors(logs: list[dict[str, Any]]) -> list[str]:
    return [e["event"] for e in logs if e["log_level"] in ("error", "critical")]


async def settle(seconds: float = 0.5) -> None:
    await asyncio.sleep(seconds)


# -- the message menu: known from the interaction, before any model --------------------------


@pytest.mark.parametrize(
    ("where", "without", "missing"),
    [
        ("channel", ("create_public_threads",), "Create Public Threads"),
        ("thread", ("send_messages_in_threads",), "Send Messages in Threads"),
        ("thread", ("read_message_history",), "Read Message History"),  # a reply needs it
        ("locked thread", (), "Manage Threads"),
    ],
)
async def test_the_menu_says_what_is_missing_before_any_model_is_paid(
    discord_factory, where: str, without: tuple[str, ...], missing: str
) -> None:
    """It paid for an answer, lost it at Discord's refusal, and said "try again"."""
    api, claude = model(answers=0)
    harness, stop = await discord_factory(claude)
    try:
        thread = None if where == "channel" else "5555"
        target = channel_message(QUESTION, channel=thread or CHANNEL_ID)
        payload = context_menu_payload(target, thread=thread)
        payload["app_permissions"] = str(granted(*without).value)
        if where == "locked thread":
            payload["channel"]["thread_metadata"]["locked"] = True
        with structlog.testing.capture_logs() as logs:
            harness.interaction(payload)
            await harness.until(lambda: bool(told(harness)))
            await settle()
        [said] = told(harness)
        assert said["content"] == MISSING_HERE.format(missing=f"the {missing} permission")
        assert said["flags"] == 64  # to the person who asked alone
        assert api.requests == []
        assert not harness.emulator.threads
        assert not harness.emulator.called("POST", "/messages")
        assert not errors(logs)
        if thread:  # not the bot's conversation: its messages are not answered
            assert not await harness.state.is_bot_thread(f"discord/thread/{thread}")
    finally:
        await stop()


async def test_the_menu_on_a_message_whose_thread_is_locked_pays_for_nothing(
    discord_factory,
) -> None:
    """Someone opened a thread from the message and a moderator locked it: the answer would go
    there, which the channel's permissions did not tell."""
    api, claude = model(answers=0)
    harness, stop = await discord_factory(claude)
    try:
        cache_server(harness, EVERYTHING)
        target = channel_message(QUESTION)
        target["thread"] = {**ask_payload("", thread=target["id"])["channel"], "owner_id": "42"}
        target["thread"]["thread_metadata"]["locked"] = True
        harness.interaction(context_menu_payload(target))
        await harness.until(lambda: bool(told(harness)))
        await settle()
        [said] = told(harness)
        assert said["content"] == MISSING_HERE.format(missing="the Manage Threads permission")
        assert api.requests == []
    finally:
        await stop()


async def test_a_refusal_the_permissions_could_not_foresee_is_said_as_one(discord_factory) -> None:
    """The message's locked thread unknown to the bot (not cached): the answer is written and
    refused (160005), and the asker was told to try again, which would be refused again."""
    _api, claude = model(answers=1)
    harness, stop = await discord_factory(claude)
    try:
        target = channel_message(QUESTION)
        harness.emulator.threads.append(target["id"])  # Discord numbers it with the message's id
        harness.emulator.refuse_posts[target["id"]] = (403, 160005)
        with structlog.testing.capture_logs() as logs:
            harness.interaction(context_menu_payload(target))
            await harness.until(lambda: bool(told(harness)))
            await settle()
        assert [m.get("content") for m in told(harness)] == [REFUSED_HERE]
        assert [e["code"] for e in logs if e["event"] == "answer_refused"] == [160005]
        assert not errors(logs)
    finally:
        await stop()


# -- /ask: the answer goes through the interaction, which needs no permission ----------------


async def test_ask_where_the_bot_cannot_post_in_threads_answers_whole_through_the_interaction(
    discord_factory,
) -> None:
    """With Create Public Threads but not Send Messages in Threads, a thread opened, the rest
    of a long answer was refused in it, and "try again" followed a cut answer."""
    paragraph = "Unchanged files are skipped when you re-ingest. " * 40
    _api, claude = model(text="\n\n".join([paragraph] * 5))
    harness, stop = await discord_factory(claude)
    try:
        payload = ask_payload(QUESTION)
        payload["app_permissions"] = str(granted("send_messages_in_threads").value)
        harness.interaction(payload)
        await harness.until(lambda: any(m.get("content") for m in told(harness)))
        await settle()
        answer, note = told(harness)[:-1], told(harness)[-1]
        assert len(answer) >= 2  # the whole answer, each part through the interaction
        assert all(m["embeds"] for m in answer)
        assert any(m.get("components") for m in answer)  # its feedback buttons, under the last
        assert "Send Messages in Threads" in note["content"]
        assert APOLOGY not in [m.get("content") for m in told(harness)]
        assert not harness.emulator.threads
    finally:
        await stop()


async def test_ask_not_found_calls_a_person_in_through_the_interaction(discord_factory) -> None:
    _api, claude = model(text="Not covered.", status="not_found")
    policy = ChannelPolicy(escalate_to=("user:77",))
    harness, stop = await discord_factory(claude, policies={HERE: policy})
    try:
        payload = ask_payload(QUESTION)
        payload["app_permissions"] = str(granted("send_messages_in_threads").value)
        harness.interaction(payload)
        await harness.until(lambda: any("<@77>" in (m.get("content") or "") for m in told(harness)))
        assert APOLOGY not in [m.get("content") for m in told(harness)]
    finally:
        await stop()


async def test_ask_in_a_thread_the_bot_may_not_post_in_keeps_the_conversation_out_of_it(
    discord_factory,
) -> None:
    _api, claude = model()
    harness, stop = await discord_factory(claude)
    try:
        payload = ask_payload(QUESTION, thread="5555")
        payload["app_permissions"] = str(granted("send_messages_in_threads").value)
        harness.interaction(payload)
        await harness.until(lambda: len(told(harness)) == 2)
        answer, note = told(harness)
        assert answer["embeds"]
        assert note["content"] == NO_THREAD_POSTS.format(
            missing="the Send Messages in Threads permission"
        )
        assert not await harness.state.is_bot_thread("discord/thread/5555")
    finally:
        await stop()


async def test_ask_in_a_thread_the_bot_cannot_read_is_answered_without_its_history(
    discord_factory,
) -> None:
    """Reading the thread back was refused (403, 50001) and the whole command failed with
    "try again", though its answer goes through the interaction."""
    api, claude = model()
    harness, stop = await discord_factory(claude)
    try:
        harness.emulator.refuse_reads["4444"] = (403, 50001)
        harness.emulator.forum_posts["4444"] = {"owner_id": "42", "name": "Ingest trouble"}
        harness.interaction(ask_payload(QUESTION, thread="4444", parent=FORUM_ID))
        await harness.until(lambda: bool(told(harness)))
        await settle()
        assert told(harness)[0]["embeds"]
        assert APOLOGY not in [m.get("content") for m in told(harness)]
        assert len(api.requests) == 2
        assert harness.emulator.called("GET", "/channels/4444/messages")  # it was tried
    finally:
        await stop()


async def test_a_refused_first_response_is_a_warning_not_a_commands_crash(
    discord_factory, caplog: pytest.LogCaptureFixture
) -> None:
    """In a locked, archived thread Discord refuses the deferral (400, 50083): nobody can be
    told. It escaped to discord.py, which logged the command's crash with its traceback."""
    caplog.set_level(logging.WARNING)
    api, claude = model(answers=0)
    harness, stop = await discord_factory(claude)
    try:
        harness.emulator.callback_refusal = (400, 50083)
        payload = ask_payload(QUESTION, thread="5555")
        payload["channel"]["thread_metadata"].update(archived=True, locked=True)
        with structlog.testing.capture_logs() as logs:
            harness.interaction(payload)
            await harness.until(lambda: bool(harness.emulator.called("POST", "/callback")))
            await settle()
        assert [e["code"] for e in logs if e["event"] == "interaction_refused"] == [50083]
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert api.requests == []
    finally:
        await stop()


# -- events: known from the gateway's cache, before any model --------------------------------


async def test_an_auto_channel_where_no_thread_can_open_pays_for_nothing(discord_factory) -> None:
    api, claude = model(answers=0)
    harness, stop = await discord_factory(claude, policies={HERE: ChannelPolicy(trigger="auto")})
    try:
        cache_server(harness, granted("create_public_threads"))
        with structlog.testing.capture_logs() as logs:
            harness.gateway_message(channel_message(QUESTION))
            await settle()
        assert api.requests == []
        assert not harness.emulator.called("POST", "/threads")
        [skipped] = [e for e in logs if e["event"] == "not_answered"]
        assert "Create Public Threads" in skipped["reason"]
        assert not errors(logs)
    finally:
        await stop()


async def test_a_reaction_where_no_thread_can_open_is_left_for_after_the_fix(
    discord_factory,
) -> None:
    """Nothing is paid for, and the ❓ is not claimed: added again once the server grants the
    permission, it is answered."""
    api, claude = model(answers=1)
    harness, stop = await discord_factory(claude)
    try:
        cache_server(harness, granted("create_public_threads"))
        target = channel_message(QUESTION)
        harness.emulator.messages[target["id"]] = target
        harness.bot._connection.parse_message_reaction_add(reaction(target))
        await settle()
        assert api.requests == []
        cache_server(harness, EVERYTHING)  # the admin grants it (GUILD_UPDATE, here the same)
        harness.bot._connection.parse_message_reaction_add(reaction(target))
        await harness.until(lambda: bool(harness.emulator.threads))
        assert len(api.requests) == 2
    finally:
        await stop()


async def test_a_follow_up_where_the_bot_cannot_embed_is_told_what_is_missing(
    discord_factory,
) -> None:
    api, claude = model(answers=0)
    harness, stop = await discord_factory(claude)
    try:
        cache_server(harness, granted("embed_links"), "7777")
        await harness.state.remember_thread("discord/thread/7777")
        harness.gateway_message(thread_message("7777", "and what does --prune delete?"))
        await harness.until(lambda: bool(posts_in(harness, "7777")))
        await settle()
        [said] = posts_in(harness, "7777")
        assert said["content"] == MISSING_HERE.format(missing="the Embed Links permission")
        assert api.requests == []
    finally:
        await stop()


# -- refusals the cache could not foresee ----------------------------------------------------


async def test_a_refused_follow_up_is_not_told_to_try_again(discord_factory) -> None:
    """Without a cached server, the answer is written and Discord refuses it (no Embed Links):
    "try again" would pay again and fail again; the person is told it was refused."""
    _api, claude = model(answers=2)
    harness, stop = await discord_factory(claude)
    try:
        harness.interaction(ask_payload(QUESTION))
        thread = await harness.thread_ready()
        harness.emulator.refuse_embeds.add(thread)
        with structlog.testing.capture_logs() as logs:
            harness.gateway_message(thread_message(thread, "and what does --prune delete?"))
            await harness.until(lambda: len(posts_in(harness, thread)) == 2)
            await settle()
        assert [m.get("content") for m in posts_in(harness, thread)] == [None, REFUSED_HERE]
        assert [e["code"] for e in logs if e["event"] == "answer_refused"] == [50013]
        assert not errors(logs)
    finally:
        await stop()


async def test_a_forum_post_whose_answer_was_refused_is_not_the_bots_conversation(
    discord_factory,
) -> None:
    """It was recorded as the bot's before the send: each later message there was answered
    (paid) and refused again."""
    api, claude = model(answers=1)
    harness, stop = await discord_factory(claude, policies={FORUM: ChannelPolicy(trigger="auto")})
    try:
        harness.emulator.refuse_posts["880"] = (403, 50013)
        with structlog.testing.capture_logs() as logs:
            harness.gateway_message(forum_post(harness, "880", "Re-ingesting", QUESTION))
            await harness.until(lambda: bool(posts_in(harness, "880")))
            await settle()
            harness.gateway_message(thread_message("880", "and what does --prune delete?"))
            await settle()
        assert not await harness.state.is_bot_thread("discord/thread/880")
        assert len(api.requests) == 2  # the post's answer only
        assert [e["code"] for e in logs if e["event"] == "answer_refused"] == [50013]
        assert not errors(logs)
    finally:
        await stop()


# -- a thread's policy is its channel's, for the share button too ----------------------------


async def test_sharing_in_a_thread_keeps_the_channels_still_need_help(discord_factory) -> None:
    policy = ChannelPolicy(private=True, escalate_to=("user:77",))
    harness, stop = await discord_factory(policies={HERE: policy})
    try:
        harness.interaction(ask_payload(QUESTION, thread="7777"))
        await harness.until(lambda: bool(told(harness)))
        [private] = told(harness)
        ids = [c["custom_id"] for row in private["components"] for c in row["components"]]
        share = next(i for i in ids if i.startswith("docbot:share:"))
        click = click_payload(share)
        click["channel_id"] = "7777"
        click["channel"] = ask_payload("", thread="7777")["channel"]
        harness.interaction(click)
        await harness.until(lambda: len(harness.emulator.called("POST", "/callback")) == 2)
        public = harness.emulator.called("POST", "/callback")[1]["data"]
        shared = [c["custom_id"] for row in public["components"] for c in row["components"]]
        assert any(i.startswith("docbot:help:") for i in shared)
    finally:
        await stop()


def test_the_missing_permissions_are_named_as_discords_settings_name_them() -> None:
    assert say_missing(["Embed Links"]) == "the Embed Links permission"
    assert say_missing(["A", "B", "C"]) == "the A, B and C permissions"
    channel = discord.Object(id=1)  # not a thread: a thread would be opened from the message
    assert missing_permissions(EVERYTHING, channel) == []  # type: ignore[arg-type]
    assert missing_permissions(discord.Permissions.none(), channel) == [  # type: ignore[arg-type]
        "View Channel",
        "Send Messages in Threads",
        "Embed Links",
        "Create Public Threads",
    ]
