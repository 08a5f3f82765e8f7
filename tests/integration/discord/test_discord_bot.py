"""The Discord adapter with real discord.py objects: raw interaction and message payloads in,
real REST and webhook calls out to the local emulator."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from core.answer.claude import ClaudeModel
from core.answer.tools import RESPOND_TOOL, SEARCH_TOOL
from tests.fakes.anthropic_api import FakeMessagesAPI, message, text, tool_use
from tests.fakes.discord_api import BOT_ID, CHANNEL_ID, FORUM_ID, GUILD_ID, user
from tests.fakes.discord_api import message as message_payload
from tests.integration.discord.conftest import (
    DiscordHarness,
    ask_payload,
    click_payload,
    modal_submit,
    thread_message,
)

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


def _sent_to(discord_bot: DiscordHarness, channel_id: str) -> list[dict[str, Any]]:
    return discord_bot.emulator.called("POST", f"/channels/{channel_id}/messages")


async def test_follow_ups_in_the_thread_need_no_mention(discord_bot: DiscordHarness) -> None:
    discord_bot.interaction(ask_payload(QUESTION))
    thread_id = await discord_bot.thread_ready()
    discord_bot.gateway_message(thread_message(thread_id, "and what does --prune delete?"))
    await discord_bot.until(lambda: bool(_sent_to(discord_bot, thread_id)))
    reply = _sent_to(discord_bot, thread_id)[0]
    assert reply["embeds"][0]["description"]
    assert reply["allowed_mentions"] == {"parse": []}
    turns = await discord_bot.store.recent(f"discord/thread/{thread_id}", 10)
    assert [t.question for t in turns] == [QUESTION, "and what does --prune delete?"]
    # The answer log: both in the thread (where an update would go), both of the channel.
    logged = await discord_bot.state.answer_log(0)
    assert [e.question for e in logged] == [QUESTION, "and what does --prune delete?"]
    assert {e.conversation_key for e in logged} == {f"discord/thread/{thread_id}"}
    assert {e.channel for e in logged} == {f"discord/{GUILD_ID}/{CHANNEL_ID}"}


async def test_bots_and_other_channels_are_ignored(discord_bot: DiscordHarness) -> None:
    discord_bot.interaction(ask_payload(QUESTION))
    thread_id = await discord_bot.thread_ready()
    discord_bot.gateway_message(thread_message(thread_id, "beep", author_id="77", bot=True))
    discord_bot.gateway_message(thread_message(thread_id, "mine", author_id=BOT_ID, bot=True))
    discord_bot.gateway_message(thread_message("123456", "a thread that isn't ours"))
    await asyncio.sleep(0.5)
    assert not [
        c
        for c in discord_bot.emulator.calls
        if "/channels/" in c[1] and c[1].endswith("/messages") and c[0] == "POST"
    ]


async def test_without_a_thread_the_bot_answers_in_place_and_says_why(
    discord_bot: DiscordHarness,
) -> None:
    discord_bot.emulator.refuse_threads = 403
    discord_bot.interaction(ask_payload(QUESTION))
    await discord_bot.until(lambda: len(discord_bot.emulator.called("POST", "/webhooks/")) == 2)
    answer, note = discord_bot.emulator.called("POST", "/webhooks/")
    assert answer["embeds"]
    assert "no permission to create threads" in note["content"]
    assert "/ask" in note["content"]


async def test_in_a_dm_ask_joins_the_dms_conversation_without_a_thread(
    discord_bot: DiscordHarness,
) -> None:
    """A DM is a conversation already: no thread, no note saying there is none, and the
    answer is a turn of the DM's conversation, which its next message continues."""
    discord_bot.interaction(ask_payload(QUESTION, guild=False))
    dm = f"discord/dm/{CHANNEL_ID}"
    await discord_bot.until(lambda: bool(discord_bot.emulator.called("POST", "/webhooks/")))
    alice = user("42", "alice")
    follow_up = message_payload("31001", CHANNEL_ID, alice, "and what does --prune delete?")
    discord_bot.gateway_message(follow_up)
    await discord_bot.until(lambda: bool(_sent_to(discord_bot, CHANNEL_ID)))
    [answer] = discord_bot.emulator.called("POST", "/webhooks/")  # the answer, and no note
    assert answer["embeds"]
    assert not discord_bot.emulator.called("POST", "/threads")
    turns = await discord_bot.store.recent(dm, 10)
    assert [t.question for t in turns] == [QUESTION, "and what does --prune delete?"]


def _answering_twice(first: str, second: str) -> tuple[FakeMessagesAPI, ClaudeModel]:
    """A model that searches and answers, twice: the requests show what it was given."""
    steps = [
        message(tool_use(SEARCH_TOOL, query="ingest")),
        message(tool_use(RESPOND_TOOL, answer=first, citations=[], status="answered")),
        message(tool_use(SEARCH_TOOL, query="prune")),
        message(tool_use(RESPOND_TOOL, answer=second, citations=[], status="answered")),
    ]
    api = FakeMessagesAPI(steps)
    return api, ClaudeModel(api.client(), model="claude-test", max_tokens=1024)


async def test_ask_inside_the_bots_thread_continues_its_conversation(discord_factory) -> None:
    """`/ask` in the thread an earlier `/ask` opened: the thread's turns are the model's
    context, the new turn joins them, and nobody is told (falsely) that no thread could open."""
    api, model = _answering_twice("Run bot ingest again.", "It deletes removed files.")
    harness, stop = await discord_factory(model)
    try:
        harness.interaction(ask_payload(QUESTION))
        thread_id = await harness.thread_ready()
        harness.interaction(ask_payload("and what does --prune delete?", thread=thread_id))
        thread = f"discord/thread/{thread_id}"
        await harness.until(lambda: len(harness.emulator.called("POST", "/webhooks/")) == 2)
        await harness.until(lambda: len(api.requests) == 4)
        api.check()
        assert QUESTION in json.dumps(api.requests[2]["messages"])  # the thread's first turn
        webhook_posts = harness.emulator.called("POST", "/webhooks/")
        assert all(p.get("embeds") and not p.get("content") for p in webhook_posts)
        assert len(harness.emulator.threads) == 1  # no thread of a thread
        turns = await harness.store.recent(thread, 10)
        assert [t.question for t in turns] == [QUESTION, "and what does --prune delete?"]
        logged = await harness.state.answer_log(0)
        assert {e.conversation_key for e in logged} == {thread}
        assert {e.channel for e in logged} == {f"discord/{GUILD_ID}/{CHANNEL_ID}"}
    finally:
        await stop()


async def test_ask_in_a_forum_post_answers_there_and_its_follow_ups_too(
    discord_bot: DiscordHarness,
) -> None:
    """A forum post (or anyone's thread) where someone runs `/ask` becomes a conversation
    with the bot: the answer stays in the post, and the next message there is answered."""
    post = "4444"
    discord_bot.emulator.forum_posts[post] = {"owner_id": "42", "name": "Ingest trouble"}
    discord_bot.interaction(ask_payload(QUESTION, thread=post, parent=FORUM_ID))
    await discord_bot.until(lambda: bool(discord_bot.emulator.called("POST", "/webhooks/")))
    await discord_bot.thread_remembered(post)
    discord_bot.gateway_message(thread_message(post, "and what does --prune delete?"))
    await discord_bot.until(lambda: bool(_sent_to(discord_bot, post)))
    [answer] = discord_bot.emulator.called("POST", "/webhooks/")
    assert answer["embeds"]
    assert not discord_bot.emulator.called("POST", "/threads")
    turns = await discord_bot.store.recent(f"discord/thread/{post}", 10)
    assert [t.question for t in turns] == [QUESTION, "and what does --prune delete?"]


def _answering(text: str) -> ClaudeModel:
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        return message(tool_use(RESPOND_TOOL, answer=text, citations=[], status="answered"))

    api = FakeMessagesAPI([message(tool_use(SEARCH_TOOL, query="ingest")), respond])
    return ClaudeModel(api.client(), model="claude-test", max_tokens=1024)


async def test_long_answers_continue_in_the_thread_with_mentions_suppressed(
    discord_factory,
) -> None:
    paragraph = "Unchanged files are skipped on re-ingest [1]. " * 40
    text = "\n\n".join([paragraph] * 5) + "\n\n@everyone <@&123> <@456> done"
    harness, stop = await discord_factory(_answering(text))
    try:
        harness.interaction(ask_payload(QUESTION))
        await harness.until(lambda: bool(harness.emulator.threads))
        thread_id = harness.emulator.threads[0]
        # The last part carries the feedback buttons: wait for it, not for any two parts.
        await harness.until(lambda: any(p.get("components") for p in _sent_to(harness, thread_id)))
        first = harness.emulator.called("POST", "/webhooks/")[0]
        parts = [first, *_sent_to(harness, thread_id)]
        descriptions = [p["embeds"][0]["description"] for p in parts]
        assert all(len(d) <= 4096 for d in descriptions)
        joined = " ".join(" ".join(d.split()) for d in descriptions)  # cuts fall between words
        assert joined.count("Unchanged files are skipped") == 200
        assert all(p["allowed_mentions"] == {"parse": []} for p in parts)
        everything = json.dumps(parts)
        assert "@everyone" not in everything
        assert "<@&123>" not in everything
        assert "<@456>" not in everything
        assert parts[-1]["components"]  # the buttons come with the last part
        assert not first.get("components")
    finally:
        await stop()


async def test_a_feedback_click_after_a_restart_is_stored(discord_factory) -> None:
    harness, stop = await discord_factory()
    harness.interaction(ask_payload(QUESTION))
    await harness.until(lambda: bool(harness.emulator.threads))  # the /ask has finished
    buttons = harness.emulator.called("POST", "/webhooks/")[0]["components"][0]["components"]
    down = next(b["custom_id"] for b in buttons if ":down:" in b["custom_id"])
    answer_id = down.rsplit(":", 1)[1]
    await stop()

    restarted, stop = await discord_factory()  # a new process: same store, new client
    try:
        restarted.interaction(click_payload(down))
        await restarted.until(lambda: bool(restarted.emulator.called("POST", "/callback")))
        response = restarted.emulator.called("POST", "/callback")[0]
        assert await restarted.state.feedback_for(answer_id) == [("43", -1)]
        # A 👎 asks what was wrong: a form with the reasons and a note.
        assert response["type"] == 9  # MODAL
        assert response["data"]["custom_id"] == f"docbot:reason:{answer_id}"
        restarted.interaction(
            modal_submit(f"docbot:reason:{answer_id}", "missing", "It skips the --prune flag.")
        )
        await restarted.until(lambda: len(restarted.emulator.called("POST", "/callback")) == 2)
        thanks = restarted.emulator.called("POST", "/callback")[1]
        assert thanks["data"]["flags"] == 64  # ephemeral
        assert "Thanks" in thanks["data"]["content"]
        assert await restarted.state.feedback_reasons(answer_id) == [
            ("43", "missing", "It skips the --prune flag.")
        ]
    finally:
        await stop()


async def test_a_model_failure_produces_the_quoted_passages_with_the_reason(
    discord_factory,
) -> None:
    api = FakeMessagesAPI(
        [
            message(tool_use(SEARCH_TOOL, query="x y")),
            message(text("hm")),
            message(text("still text")),
        ]
    )
    agent = ClaudeModel(api.client(), model="claude-test", max_tokens=256)
    harness, stop = await discord_factory(agent)
    try:
        harness.interaction(ask_payload(QUESTION))
        await harness.until(lambda: bool(harness.emulator.called("POST", "/webhooks/")))
        sent = harness.emulator.called("POST", "/webhooks/")[0]
        description = sent["embeds"][0]["description"]
        assert "The language model gave no usable answer" in description
        assert "quoted as written" in description
        assert "hm" not in description.split("\n")[0]
        assert any(f["name"] == "Sources" for f in sent["embeds"][-1]["fields"])
    finally:
        await stop()


async def test_an_error_is_visible_and_has_no_feedback_buttons(discord_bot) -> None:
    discord_bot.interaction(ask_payload("   "))
    await discord_bot.until(lambda: bool(discord_bot.emulator.called("POST", "/webhooks/")))
    sent = discord_bot.emulator.called("POST", "/webhooks/")[0]
    assert "the message was empty" in sent["embeds"][0]["description"]
    assert not sent.get("components")  # no feedback on errors


async def test_starting_and_answering_never_syncs_commands(discord_bot: DiscordHarness) -> None:
    discord_bot.interaction(ask_payload(QUESTION))
    await discord_bot.until(lambda: bool(discord_bot.emulator.threads))
    assert not [c for c in discord_bot.emulator.calls if "/commands" in c[1]]


async def test_sync_registers_ask_in_one_guild(discord_bot: DiscordHarness) -> None:
    import discord

    guild = discord.Object(id=500)
    discord_bot.bot.tree.copy_global_to(guild=guild)
    commands = await discord_bot.bot.tree.sync(guild=guild)
    assert [c.name for c in commands] == ["ask", "Ask the docs about this"]
    put = discord_bot.emulator.called("PUT", "/guilds/500/commands")[0]
    assert put[0]["options"][0]["name"] == "question"
    assert put[1]["type"] == 3  # a message context-menu command


async def test_thread_history_is_read_when_the_store_has_none(discord_bot: DiscordHarness) -> None:
    from tests.fakes.discord_api import message as msg
    from tests.fakes.discord_api import user

    await discord_bot.state.remember_thread("discord/thread/777")
    discord_bot.emulator.threads.append("777")  # Discord names the channel it hangs off
    discord_bot.emulator.history = [
        msg("1", "777", user("42", "alice"), "what is prune?"),
        msg(
            "2",
            "777",
            user(BOT_ID, "docbot", bot=True),
            embeds=[{"type": "rich", "description": "Prune deletes removed files."}],
        ),
    ]
    discord_bot.gateway_message(thread_message("777", "and how do I turn it off?"))
    await discord_bot.until(lambda: bool(_sent_to(discord_bot, "777")))
    turns = await discord_bot.store.recent("discord/thread/777", 10)
    assert turns[0].question == "what is prune?"
    assert turns[0].answer == "Prune deletes removed files."


async def test_system_and_empty_messages_in_a_bot_thread_are_ignored(
    discord_bot: DiscordHarness,
) -> None:
    await discord_bot.state.remember_thread("discord/thread/888")
    renamed = thread_message("888", "New thread name")
    renamed["type"] = 4  # CHANNEL_NAME_CHANGE
    discord_bot.gateway_message(renamed)
    discord_bot.gateway_message(thread_message("888", "   "))
    await asyncio.sleep(0.5)
    assert not _sent_to(discord_bot, "888")


async def test_a_follow_up_carries_the_channel_its_thread_hangs_off(
    discord_bot: DiscordHarness,
) -> None:
    """Per-channel settings (web search) key on guild/channel; a thread's key names only the
    thread, so the follow-up says which channel it belongs to."""
    asked = []
    answer = discord_bot.bot.engine.answer

    async def recording(question, on_progress=None):  # a spy: the real engine answers
        asked.append(question)
        return await answer(question, on_progress)

    discord_bot.bot.engine.answer = recording  # type: ignore[method-assign]
    discord_bot.interaction(ask_payload(QUESTION))
    thread_id = await discord_bot.thread_ready()
    discord_bot.gateway_message(thread_message(thread_id, "and --prune?"))
    await discord_bot.until(lambda: bool(_sent_to(discord_bot, thread_id)))
    first, follow_up = asked
    assert first.conversation_key.startswith(f"discord/{GUILD_ID}/{CHANNEL_ID}/")
    assert first.scope == f"discord/{GUILD_ID}/{CHANNEL_ID}"
    assert follow_up.conversation_key == f"discord/thread/{thread_id}"
    assert follow_up.scope == f"discord/{GUILD_ID}/{CHANNEL_ID}"
