"""Each channel decides how the bot behaves there (`channels.policies`), through the real
discord.py client against the Discord emulator: questions answered unasked in a thread of their
own (`auto`), only questions, only grounded answers, `/ask` refused where the bot is `off`, a
channel's sources only; and direct messages answered with their own memory."""

from __future__ import annotations

import asyncio
import itertools
import json

import structlog

from adapters.discord.bot import ASK_PRIVATELY, CHANNEL_UNKNOWN
from core.answer.claude import ClaudeModel
from core.answer.tools import RESPOND_TOOL, SEARCH_TOOL
from core.config import ChannelPolicy
from tests.fakes.anthropic_api import FakeMessagesAPI, message, tool_use
from tests.fakes.discord_api import BOT_ID, CHANNEL_ID, FORUM_ID, GUILD_ID, user
from tests.fakes.discord_api import message as discord_message
from tests.integration.discord.conftest import ask_payload, click_payload, thread_message

QUESTION = "How do I re-ingest changed documents?"
OFF_TOPIC = "How is the holiday allowance calculated for part-timers?"  # not in the bundled docs
HERE = f"discord/{GUILD_ID}/{CHANNEL_ID}"
_ids = itertools.count(2_000_000)


def channel_message(text: str, *, channel: str = CHANNEL_ID, guild: str | None = GUILD_ID):
    return discord_message(str(next(_ids)), channel, user("42", "alice"), text, guild_id=guild)


def not_found_model() -> tuple[FakeMessagesAPI, ClaudeModel]:
    not_found = tool_use(RESPOND_TOOL, answer="Not covered.", citations=[], status="not_found")
    api = FakeMessagesAPI([message(tool_use(SEARCH_TOOL, query="flux")), message(not_found)])
    return api, ClaudeModel(api.client(), model="claude-test", max_tokens=256)


def thread_posts(harness, thread_id: str) -> list[dict]:
    return harness.emulator.called("POST", f"/channels/{thread_id}/messages")


async def test_auto_answers_a_question_in_a_thread_of_its_own(discord_factory) -> None:
    harness, stop = await discord_factory(policies={HERE: ChannelPolicy(trigger="auto")})
    try:
        harness.gateway_message(channel_message(QUESTION))
        thread_id = await harness.thread_ready()
        await harness.until(lambda: bool(thread_posts(harness, thread_id)))
        [posted] = thread_posts(harness, thread_id)
        assert "ingesting.md" in json.dumps(posted["embeds"])
        assert harness.emulator.thread_names[thread_id] == QUESTION
        assert posted["allowed_mentions"] == {"parse": []}
    finally:
        await stop()


async def test_auto_answers_in_the_thread_someone_opened_meanwhile(discord_factory) -> None:
    """A person may open a thread from the question while the answer is being written; Discord
    then refuses a second one (400, code 160004), and the answer goes in theirs."""
    harness, stop = await discord_factory(policies={HERE: ChannelPolicy(trigger="auto")})
    question = channel_message(QUESTION)
    harness.emulator.threads.append(question["id"])  # a person's, from the message
    try:
        harness.gateway_message(question)
        await harness.until(lambda: bool(thread_posts(harness, question["id"])))
        [posted] = thread_posts(harness, question["id"])
        assert "ingesting.md" in json.dumps(posted["embeds"])
        assert harness.emulator.threads == [question["id"]]
        assert await harness.state.is_bot_thread(f"discord/thread/{question['id']}")
    finally:
        await stop()


async def test_auto_answers_a_message_that_mentions_the_bot(discord_factory) -> None:
    """The same question with `@docbot` in front got no answer at all: the unasked path left
    mentioned messages alone and nothing else took them."""
    harness, stop = await discord_factory(policies={HERE: ChannelPolicy(trigger="auto")})
    try:
        asked = channel_message(f"<@{BOT_ID}> {QUESTION}")
        asked["mentions"] = [user(BOT_ID, "docbot", bot=True)]
        harness.gateway_message(asked)
        thread_id = await harness.thread_ready()
        await harness.until(lambda: bool(thread_posts(harness, thread_id)))
        [posted] = thread_posts(harness, thread_id)
        assert "ingesting.md" in json.dumps(posted["embeds"])
    finally:
        await stop()


async def test_auto_leaves_chatter_alone(discord_factory) -> None:
    harness, stop = await discord_factory(policies={HERE: ChannelPolicy(trigger="auto")})
    try:
        for text in ("thanks all!", "good morning", "who's up for lunch?"):
            harness.gateway_message(channel_message(text))
        await _settle()
        assert harness.emulator.threads == []
        assert harness.emulator.called("POST", "/messages") == []
    finally:
        await stop()


async def test_auto_posts_nothing_without_a_grounded_answer(discord_factory) -> None:
    api, model = not_found_model()
    # No relevance floor: the model itself finds nothing and says so.
    auto = ChannelPolicy(trigger="auto", min_relevance=0)
    harness, stop = await discord_factory(model, policies={HERE: auto})
    try:
        with structlog.testing.capture_logs() as logs:
            harness.gateway_message(channel_message("How do I calibrate the flux capacitor?"))
            await harness.until(lambda: len(api.requests) == 2)
            await _settle()
        assert harness.emulator.threads == []
        assert harness.emulator.called("POST", "/messages") == []
        assert any(e["event"] == "abstained" and e["status"] == "not_found" for e in logs)
        [held] = await harness.state.answer_log(0)  # the report counts what was held back
        assert (held.status, held.posted, held.platform) == ("not_found", False, "discord")
    finally:
        await stop()


async def test_an_unasked_question_far_from_every_passage_costs_no_model_call(
    discord_factory,
) -> None:
    api, model = not_found_model()
    # The default floor; it holds back even where ungrounded answers may be posted.
    auto = ChannelPolicy(trigger="auto", answer_only_when_grounded=False)
    harness, stop = await discord_factory(model, policies={HERE: auto, FORUM: auto})
    try:
        with structlog.testing.capture_logs() as logs:
            harness.gateway_message(channel_message(OFF_TOPIC))
            harness.gateway_message(forum_post(harness, "890", "Holidays", OFF_TOPIC))
            await harness.until(lambda: sum(e["event"] == "abstained" for e in logs) == 2)
        assert api.requests == []
        assert harness.emulator.threads == []
        assert harness.emulator.called("POST", "/messages") == []
        assert sum(e["event"] == "below_relevance_floor" for e in logs) == 2
        # A forum post that mentions the bot asks it: answered, floor or not.
        asked = forum_post(harness, "891", "Holidays", f"<@{BOT_ID}> {OFF_TOPIC}")
        asked["mentions"] = [user(BOT_ID, "docbot", bot=True)]
        harness.gateway_message(asked)
        await harness.until(lambda: bool(thread_posts(harness, "891")))
        assert len(api.requests) == 2
    finally:
        await stop()


async def test_mention_only_channels_ignore_unasked_questions(discord_factory) -> None:
    harness, stop = await discord_factory()
    try:
        harness.gateway_message(channel_message(QUESTION))
        await _settle()
        assert harness.emulator.threads == []
    finally:
        await stop()


async def test_ask_where_the_bot_is_off_is_refused_privately(discord_factory) -> None:
    harness, stop = await discord_factory(policies={HERE: ChannelPolicy(trigger="off")})
    try:
        harness.interaction(ask_payload(QUESTION))
        await harness.until(lambda: bool(harness.emulator.called("POST", "/callback")))
        [callback] = harness.emulator.called("POST", "/callback")
        assert callback["type"] == 4
        assert callback["data"]["flags"] == 64  # ephemeral: only the asker sees it
        assert "don't answer in this channel" in callback["data"]["content"]
        await _settle()
        assert harness.emulator.called("POST", "/webhooks/") == []
    finally:
        await stop()


async def test_sources_restrict_what_a_channel_is_answered_from(discord_factory) -> None:
    harness, stop = await discord_factory(policies={HERE: ChannelPolicy(sources=["handbook"])})
    try:
        harness.interaction(ask_payload(QUESTION))
        await harness.until(lambda: bool(harness.emulator.called("POST", "/webhooks/")))
        sent = harness.emulator.called("POST", "/webhooks/")[0]
        assert "couldn't find anything" in sent["embeds"][0]["description"]
        assert "ingesting.md" not in json.dumps(sent)
    finally:
        await stop()


async def test_a_private_ask_in_a_thread_obeys_the_channels_sources(discord_factory) -> None:
    """A private answer in a thread is keyed by the thread, whose id no channel's settings
    name: it was searched under the server's, and cited a source the channel may not use."""
    policies = {HERE: ChannelPolicy(private=True, sources=["handbook"])}
    harness, stop = await discord_factory(policies=policies)
    try:
        harness.interaction(ask_payload(QUESTION, thread="123456789"))
        await harness.until(lambda: bool(harness.emulator.called("POST", "/webhooks/")))
        [private] = harness.emulator.called("POST", "/webhooks/")
        assert private["flags"] == 64
        assert "couldn't find anything" in private["embeds"][0]["description"]
        assert "ingesting.md" not in json.dumps(private)
    finally:
        await stop()


async def test_a_follow_up_whose_channel_discord_cant_name_is_not_answered_elsewise(
    discord_factory,
) -> None:
    """The thread's channel unknown (Discord refused the lookup), its follow-up was answered
    under the server's settings: from every source, in public, wherever `off`."""
    harness, stop = await discord_factory(policies={HERE: ChannelPolicy(sources=["handbook"])})
    try:
        harness.interaction(ask_payload(QUESTION))
        thread_id = await harness.thread_ready()
        harness.emulator.hidden_channels.add(thread_id)
        harness.gateway_message(thread_message(thread_id, "And how do I re-ingest with --prune?"))
        await harness.until(lambda: bool(thread_posts(harness, thread_id)))
        await _settle()
        [told] = thread_posts(harness, thread_id)
        assert told["content"] == CHANNEL_UNKNOWN
        assert "embeds" not in told or not told["embeds"]
    finally:
        await stop()


async def test_a_channel_made_private_sends_its_follow_ups_to_ask(discord_factory) -> None:
    """Made private after its threads opened, a channel still answered their follow-ups for
    everyone to read; nor is a re-checked answer posted there."""
    harness, stop = await discord_factory()
    try:
        harness.interaction(ask_payload(QUESTION))
        thread_id = await harness.thread_ready()
    finally:
        await stop()
    harness, stop = await discord_factory(policies={HERE: ChannelPolicy(private=True)})
    harness.emulator.threads.append(thread_id)
    try:
        harness.gateway_message(thread_message(thread_id, "And how do I prune removed files?"))
        await harness.until(lambda: bool(thread_posts(harness, thread_id)))
        await _settle()
        [told] = thread_posts(harness, thread_id)
        assert told["content"] == ASK_PRIVATELY
    finally:
        await stop()


async def test_direct_messages_are_answered_with_their_own_memory(discord_factory) -> None:
    harness, stop = await discord_factory()
    dm = "777"
    try:
        harness.gateway_message(channel_message(QUESTION, channel=dm, guild=None))
        await harness.until(lambda: len(thread_posts(harness, dm)) == 1)
        harness.gateway_message(channel_message("and with --prune?", channel=dm, guild=None))
        await harness.until(lambda: len(thread_posts(harness, dm)) == 2)
        turns = await harness.store.recent(f"discord/dm/{dm}", 10)
        assert [t.question for t in turns] == [QUESTION, "and with --prune?"]
    finally:
        await stop()


async def test_a_direct_message_of_a_file_alone_is_told_to_use_words(discord_factory) -> None:
    """A screenshot sent alone in a DM got nothing back; in a channel it is still left alone."""
    harness, stop = await discord_factory(policies={HERE: ChannelPolicy(trigger="auto")})
    dm = "778"
    picture = {"id": "5", "filename": "error.png", "size": 10, "url": "https://cdn.example/e.png"}
    try:
        for channel, guild in ((CHANNEL_ID, GUILD_ID), (dm, None)):
            sent = channel_message("", channel=channel, guild=guild)
            sent["attachments"] = [{**picture, "proxy_url": picture["url"]}]
            harness.gateway_message(sent)
        await harness.until(lambda: bool(thread_posts(harness, dm)))
        await _settle()
        [told] = thread_posts(harness, dm)
        assert told["content"] == "I can only read text: please write your question in words."
        assert harness.emulator.threads == []
        assert thread_posts(harness, CHANNEL_ID) == []
    finally:
        await stop()


async def test_ask_in_a_direct_message_obeys_the_dm_policy_and_is_never_refused(
    discord_factory,
) -> None:
    """`discord/dm` governs `/ask` in a DM as it does a DM's messages: its sources apply, and
    its `trigger` does not (a DM is always answered). The answer is logged under the DM."""
    dm_policy = ChannelPolicy(sources=["handbook"], trigger="off")
    harness, stop = await discord_factory(policies={"discord/dm": dm_policy})
    try:
        harness.interaction(ask_payload(QUESTION, guild=False))
        await harness.until(lambda: bool(harness.emulator.called("POST", "/webhooks/")))
        sent = harness.emulator.called("POST", "/webhooks/")[0]
        assert "couldn't find anything" in sent["embeds"][0]["description"]
        assert "ingesting.md" not in json.dumps(sent)
        [logged] = await harness.state.answer_log(0)
        assert logged.channel == f"discord/dm/{CHANNEL_ID}"
    finally:
        await stop()


async def _settle(seconds: float = 0.5) -> None:
    """Give background listeners time to do something they should not do."""
    await asyncio.sleep(seconds)


HOSTILE = "Not covered. <@&999> <@U0NOTME> @everyone @here <@123>"
TARGETS = ["user:111", "role:222"]
ESCALATION_SENT = "<@111> <@&222>: someone here still needs help with this question."
EXACTLY_THE_TARGETS = {"parse": [], "users": [111], "roles": [222]}


def help_buttons(sent: dict) -> list[str]:
    return [
        c["custom_id"]
        for row in sent.get("components") or []
        for c in row["components"]
        if c["custom_id"].startswith("docbot:help:")
    ]


async def test_still_need_help_mentions_exactly_the_configured_targets_once(
    discord_factory,
) -> None:
    harness, stop = await discord_factory(policies={HERE: ChannelPolicy(escalate_to=TARGETS)})
    try:
        harness.interaction(ask_payload(QUESTION))
        await harness.until(lambda: bool(harness.emulator.called("POST", "/webhooks/")))
        [button] = help_buttons(harness.emulator.called("POST", "/webhooks/")[0])
        for _ in range(2):
            harness.interaction(click_payload(button))
        await harness.until(lambda: len(harness.emulator.called("POST", "/callback")) == 3)
        first, second = harness.emulator.called("POST", "/callback")[1:]
        assert first["type"] == 4
        assert first["data"]["content"] == ESCALATION_SENT
        assert first["data"]["allowed_mentions"] == EXACTLY_THE_TARGETS
        assert second["data"]["flags"] == 64  # the second click: privately, already called
        assert "already been called" in second["data"]["content"]
    finally:
        await stop()


async def test_not_found_escalates_unasked_and_nothing_else_pings(discord_factory) -> None:
    not_found = tool_use(RESPOND_TOOL, answer=HOSTILE, citations=[], status="not_found")
    api = FakeMessagesAPI([message(tool_use(SEARCH_TOOL, query="flux")), message(not_found)])
    model = ClaudeModel(api.client(), model="claude-test", max_tokens=256)
    harness, stop = await discord_factory(
        model, policies={HERE: ChannelPolicy(escalate_to=TARGETS)}
    )
    try:
        harness.interaction(ask_payload("flux capacitor?"))
        thread_id = await harness.thread_ready()
        await harness.until(lambda: bool(thread_posts(harness, thread_id)))
        [called] = thread_posts(harness, thread_id)
        assert called["content"] == ESCALATION_SENT
        assert called["allowed_mentions"] == EXACTLY_THE_TARGETS
        # Everything else the bot sent may ping no one, whatever its text holds.
        others = [
            body
            for method, path, body in harness.emulator.calls
            if method == "POST" and body and body is not called and "embeds" in body
        ]
        assert others
        assert all(body["allowed_mentions"] == {"parse": []} for body in others)
    finally:
        await stop()


async def test_private_answers_go_to_the_asker_and_can_be_shared_once(discord_factory) -> None:
    harness, stop = await discord_factory(policies={HERE: ChannelPolicy(private=True)})
    try:
        harness.interaction(ask_payload(QUESTION))
        await harness.until(lambda: bool(harness.emulator.called("POST", "/webhooks/")))
        [defer] = harness.emulator.called("POST", "/callback")
        assert defer["data"]["flags"] == 64  # "thinking…" only the asker sees
        [private] = harness.emulator.called("POST", "/webhooks/")
        assert private["flags"] == 64
        assert harness.emulator.threads == []
        [share] = [
            c["custom_id"]
            for row in private["components"]
            for c in row["components"]
            if c["custom_id"].startswith("docbot:share:")
        ]
        for _ in range(2):
            harness.interaction(click_payload(share))
        await harness.until(lambda: len(harness.emulator.called("POST", "/callback")) == 3)
        public, again = harness.emulator.called("POST", "/callback")[1:]
        assert public["type"] == 4
        assert "flags" not in public["data"] or not public["data"]["flags"] & 64
        assert public["data"]["embeds"][0]["description"] == private["embeds"][0]["description"]
        assert public["data"]["allowed_mentions"] == {"parse": []}
        assert again["data"]["flags"] == 64
        assert "already been shared" in again["data"]["content"]
    finally:
        await stop()


async def test_a_private_answer_offers_to_call_a_person_in(discord_factory) -> None:
    """`private` with `escalate_to` showed only "Share": nobody could be called in there."""
    policies = {HERE: ChannelPolicy(private=True, escalate_to=TARGETS)}
    harness, stop = await discord_factory(policies=policies)
    try:
        harness.interaction(ask_payload(QUESTION))
        await harness.until(lambda: bool(harness.emulator.called("POST", "/webhooks/")))
        [private] = harness.emulator.called("POST", "/webhooks/")
        assert private["flags"] == 64
        [escalate] = help_buttons(private)
        harness.interaction(click_payload(escalate))
        await harness.until(lambda: len(harness.emulator.called("POST", "/callback")) == 2)
        called = harness.emulator.called("POST", "/callback")[1]
        assert called["data"]["content"] == ESCALATION_SENT
        assert called["data"]["allowed_mentions"] == EXACTLY_THE_TARGETS
    finally:
        await stop()


def context_menu_payload(target: dict, *, thread: str | None = None, parent: str = CHANNEL_ID):
    """*Ask the docs about this* on `target`, run where it is (in `thread` of `parent`)."""
    payload = ask_payload("", thread=thread, parent=parent)
    payload["data"] = {
        "id": "701",
        "name": "Ask the docs about this",
        "type": 3,
        "target_id": target["id"],
        "resolved": {"messages": {target["id"]: target}},
    }
    return payload


def reaction(target: dict, emoji: str = "❓", user_id: str = "43") -> dict:
    return {
        "user_id": user_id,
        "channel_id": target["channel_id"],
        "message_id": target["id"],
        "guild_id": GUILD_ID,
        "emoji": {"id": None, "name": emoji},
        "burst": False,
        "type": 0,
    }


async def test_asking_about_a_message_answers_it_in_a_thread_from_it(discord_factory) -> None:
    harness, stop = await discord_factory()
    target = channel_message(QUESTION)
    try:
        harness.interaction(context_menu_payload(target))
        thread_id = await harness.thread_ready()
        await harness.until(lambda: bool(thread_posts(harness, thread_id)))
        assert "ingesting.md" in json.dumps(thread_posts(harness, thread_id)[0]["embeds"])
        started = harness.emulator.called("POST", f"/messages/{target['id']}/threads")
        assert started  # the thread hangs off the message asked about
        await harness.until(lambda: bool(harness.emulator.called("POST", "/webhooks/")))
        told = harness.emulator.called("POST", "/webhooks/")[0]
        assert told["flags"] == 64
        assert "answered in a thread" in told["content"]
    finally:
        await stop()


async def test_the_question_reaction_asks_about_a_message_once(discord_factory) -> None:
    harness, stop = await discord_factory()
    target = channel_message(QUESTION)
    harness.emulator.messages[target["id"]] = target
    try:
        harness.bot._connection.parse_message_reaction_add(reaction(target, "👍"))
        for clicker in ("43", "44"):  # a second person's ❓ asks nothing new
            harness.bot._connection.parse_message_reaction_add(reaction(target, user_id=clicker))
        thread_id = await harness.thread_ready()
        await harness.until(lambda: bool(thread_posts(harness, thread_id)))
        await _settle()
        assert len(harness.emulator.threads) == 1
        assert len(thread_posts(harness, thread_id)) == 1
    finally:
        await stop()


async def test_the_menu_on_a_message_already_answered_answers_in_its_thread(
    discord_factory,
) -> None:
    """A ❓ answered the message in a thread from it; the menu on the same message answers
    there again rather than failing on the thread Discord will not open twice."""
    harness, stop = await discord_factory()
    target = channel_message(QUESTION)
    harness.emulator.messages[target["id"]] = target
    try:
        harness.bot._connection.parse_message_reaction_add(reaction(target))
        await harness.until(lambda: bool(thread_posts(harness, target["id"])))
        harness.interaction(context_menu_payload(target))
        await harness.until(lambda: len(thread_posts(harness, target["id"])) == 2)
        await harness.until(lambda: bool(harness.emulator.called("POST", "/webhooks/")))
        [told] = harness.emulator.called("POST", "/webhooks/")
        assert "answered in a thread" in told["content"]
        assert harness.emulator.threads == [target["id"]]
    finally:
        await stop()


async def test_asking_about_a_message_inside_a_thread_answers_it_there(discord_factory) -> None:
    """A thread can't open from a message in a thread (Discord: 50024): the answer is a reply
    to the message in its thread, carrying on the thread's conversation."""
    harness, stop = await discord_factory()
    try:
        harness.interaction(ask_payload(QUESTION))
        thread_id = await harness.thread_ready()
        target = channel_message("and what does --prune delete?", channel=thread_id)
        harness.interaction(context_menu_payload(target, thread=thread_id))
        await harness.until(lambda: len(harness.emulator.called("POST", "/webhooks/")) == 2)
        assert not harness.emulator.called("POST", f"/messages/{target['id']}/threads")
        assert len(harness.emulator.threads) == 1
        [answer] = thread_posts(harness, thread_id)
        assert answer["embeds"]
        assert str(answer["message_reference"]["message_id"]) == target["id"]
        assert answer["allowed_mentions"] == {"parse": []}  # a reply that pings nobody
        told = harness.emulator.called("POST", "/webhooks/")[1]
        assert "in its thread" in told["content"]
        turns = await harness.store.recent(f"discord/thread/{thread_id}", 10)
        assert [t.question for t in turns] == [QUESTION, target["content"]]
    finally:
        await stop()


async def test_the_question_reaction_in_someones_thread_answers_there(discord_factory) -> None:
    harness, stop = await discord_factory()
    post = "4444"
    harness.emulator.forum_posts[post] = {"owner_id": "42", "name": "Ingest trouble"}
    target = channel_message(QUESTION, channel=post)
    harness.emulator.messages[target["id"]] = target
    try:
        harness.bot._connection.parse_message_reaction_add(reaction(target))
        await harness.until(lambda: bool(thread_posts(harness, post)))
        assert not harness.emulator.called("POST", "/threads")
        [answer] = thread_posts(harness, post)
        assert "ingesting.md" in json.dumps(answer["embeds"])
        assert str(answer["message_reference"]["message_id"]) == target["id"]
        await harness.thread_remembered(post)  # its next message is a follow-up
        logged = await harness.state.answer_log(0)
        assert [e.channel for e in logged] == [f"discord/{GUILD_ID}/{FORUM_ID}"]
    finally:
        await stop()


async def test_asking_in_someones_thread_reads_the_discussion_first(discord_factory) -> None:
    """The ❓ on "is this expected?" in a thread the bot was not part of: the model is given
    what people said there before it (the post that opened it, the replies), not the
    message alone, and the message asked about is the question, not part of the discussion."""
    answer = tool_use(RESPOND_TOOL, answer="Re-run it.", citations=[], status="answered")
    api = FakeMessagesAPI([message(tool_use(SEARCH_TOOL, query="ingest")), message(answer)])
    model = ClaudeModel(api.client(), model="claude-test", max_tokens=1024)
    harness, stop = await discord_factory(model)
    post = "4445"
    harness.emulator.forum_posts[post] = {"owner_id": "44", "name": "Re-embedding"}
    opening = discord_message(post, post, user("44", "carol"), "Our nightly ingest re-embeds all")
    reply = channel_message("Same here since the upgrade", channel=post)
    reply["author"] = user("43", "bob")
    target = channel_message("is this expected?", channel=post)
    harness.emulator.messages.update({post: opening, target["id"]: target})
    harness.emulator.history = [opening, reply, target]
    try:
        harness.bot._connection.parse_message_reaction_add(reaction(target))
        await harness.until(lambda: bool(thread_posts(harness, post)))
        sent = json.dumps(api.requests[0]["messages"])
        assert "44: Our nightly ingest re-embeds all" in sent
        assert "43: Same here since the upgrade" in sent
        [discussion, turn] = await harness.store.recent(f"discord/thread/{post}", 10)
        assert "is this expected?" not in discussion.question
        assert turn.question == "is this expected?"
    finally:
        await stop()


async def test_asking_about_a_message_where_no_thread_can_open_costs_no_model_call(
    discord_factory,
) -> None:
    api = FakeMessagesAPI([])  # any model call fails the test
    harness, stop = await discord_factory(
        ClaudeModel(api.client(), model="claude-test", max_tokens=256)
    )
    voice = "6060"  # a voice channel's text chat: no thread opens there
    target = channel_message(QUESTION, channel=voice)
    payload = context_menu_payload(target)
    payload["channel_id"] = payload["channel"]["id"] = voice
    payload["channel"].update(type=2, bitrate=64_000, user_limit=0)  # GUILD_VOICE
    try:
        harness.interaction(payload)
        await harness.until(lambda: bool(harness.emulator.called("POST", "/webhooks/")))
        [told] = harness.emulator.called("POST", "/webhooks/")
        assert told["flags"] == 64
        assert "can't open a thread" in told["content"]
        assert not api.requests
        assert not harness.emulator.called("POST", "/threads")
    finally:
        await stop()


async def test_reactions_can_be_turned_off_per_channel(discord_factory) -> None:
    harness, stop = await discord_factory(policies={HERE: ChannelPolicy(reactions=False)})
    target = channel_message(QUESTION)
    harness.emulator.messages[target["id"]] = target
    try:
        harness.bot._connection.parse_message_reaction_add(reaction(target))
        await _settle()
        assert harness.emulator.threads == []
    finally:
        await stop()


async def test_a_channels_reaction_setting_holds_in_its_threads(discord_factory) -> None:
    """A thread's own id names no policy: the channel it hangs off decides."""
    harness, stop = await discord_factory(policies={HERE: ChannelPolicy(reactions=False)})
    try:
        harness.interaction(ask_payload(QUESTION))
        thread_id = await harness.thread_ready()
        await harness.until(lambda: bool(harness.emulator.called("POST", "/webhooks/")))
        target = channel_message("and what does --prune delete?", channel=thread_id)
        harness.emulator.messages[target["id"]] = target
        harness.bot._connection.parse_message_reaction_add(reaction(target))
        await _settle()
        assert thread_posts(harness, thread_id) == []
        assert not harness.emulator.called("GET", f"/messages/{target['id']}")
    finally:
        await stop()


async def test_a_private_channel_answers_the_message_menu_for_the_asker_alone(
    discord_factory,
) -> None:
    harness, stop = await discord_factory(policies={HERE: ChannelPolicy(private=True)})
    try:
        harness.interaction(context_menu_payload(channel_message(QUESTION)))
        await harness.until(lambda: bool(harness.emulator.called("POST", "/webhooks/")))
        [private] = harness.emulator.called("POST", "/webhooks/")
        assert private["flags"] == 64
        assert "ingesting.md" in json.dumps(private["embeds"])
        buttons = [c["custom_id"] for row in private["components"] for c in row["components"]]
        assert any(b.startswith("docbot:share:") for b in buttons)
        assert harness.emulator.threads == []
    finally:
        await stop()


async def _left_unanswered(harness, what: str, send) -> None:
    """`send` done, and the bot says it left `what` unanswered, having posted nothing."""
    with structlog.testing.capture_logs() as logs:
        send()
        await harness.until(lambda: any(e["event"] == "not_answered" for e in logs))
        await _settle()
    [said] = [e for e in logs if e["event"] == "not_answered"]
    assert said["reason"] == f"{what} in a private channel"
    assert harness.emulator.threads == []
    assert harness.emulator.called("POST", "/messages") == []


async def test_a_private_channel_leaves_what_no_command_asked_unanswered(discord_factory) -> None:
    """Discord shows a message to one person only as a reply to their command, so in a
    `private` channel an unasked question, a reaction and a forum post get no public answer."""
    private = ChannelPolicy(trigger="auto", private=True)
    harness, stop = await discord_factory(policies={HERE: private, FORUM: private})
    target = channel_message(QUESTION)
    harness.emulator.messages[target["id"]] = target
    try:
        await _left_unanswered(
            harness, "unasked question", lambda: harness.gateway_message(channel_message(QUESTION))
        )
        await _left_unanswered(
            harness,
            "reaction",
            lambda: harness.bot._connection.parse_message_reaction_add(reaction(target)),
        )
        post = forum_post(harness, "881", "Re-ingesting", QUESTION)
        await _left_unanswered(harness, "forum post", lambda: harness.gateway_message(post))
    finally:
        await stop()


FORUM = f"discord/{GUILD_ID}/{FORUM_ID}"


def forum_post(harness, thread_id: str, title: str, text: str, owner: str = "42") -> dict:
    harness.emulator.forum_posts[thread_id] = {"owner_id": owner, "name": title}
    return discord_message(thread_id, thread_id, user(owner, "alice"), text, guild_id=GUILD_ID)


def solved_click(thread_id: str, clicker: str, *, moderator: bool = False) -> dict:
    payload = click_payload(f"docbot:solved:{thread_id}")
    payload["member"]["user"] = user(clicker, "someone")
    payload["member"]["permissions"] = "17179869184" if moderator else "0"  # MANAGE_THREADS
    payload["app_permissions"] = "0"
    return payload


async def test_auto_answers_each_new_forum_post_in_its_thread(discord_factory) -> None:
    harness, stop = await discord_factory(policies={FORUM: ChannelPolicy(trigger="auto")})
    try:
        harness.gateway_message(forum_post(harness, "880", "Re-ingesting", QUESTION))
        await harness.until(lambda: bool(thread_posts(harness, "880")))
        [answer] = thread_posts(harness, "880")
        assert "ingesting.md" in json.dumps(answer["embeds"])
        buttons = [c["custom_id"] for row in answer["components"] for c in row["components"]]
        assert "docbot:solved:880" in buttons
        assert await harness.state.is_bot_thread("discord/thread/880")  # follow-ups answered
    finally:
        await stop()


async def test_only_the_poster_or_a_moderator_marks_a_post_solved(discord_factory) -> None:
    harness, stop = await discord_factory(policies={FORUM: ChannelPolicy(trigger="auto")})
    harness.bot.settings = harness.bot.settings.model_copy(update={"lock_solved": True})
    try:
        harness.gateway_message(forum_post(harness, "881", "Re-ingesting", QUESTION))
        await harness.until(lambda: bool(thread_posts(harness, "881")))
        harness.interaction(solved_click("881", clicker="99"))
        await harness.until(lambda: len(harness.emulator.called("POST", "/webhooks/")) == 1)
        [deferred] = harness.emulator.called("POST", "/callback")
        assert deferred["type"] == 5  # deferred at once, ephemeral: the REST calls come after
        refused = harness.emulator.called("POST", "/webhooks/")[0]
        assert "Only the person who posted" in refused["content"]
        assert harness.emulator.called("PATCH", "/channels/881") == []
        harness.interaction(solved_click("881", clicker="42"))  # the poster
        await harness.until(lambda: bool(harness.emulator.called("PATCH", "/channels/881")))
        [edit] = harness.emulator.called("PATCH", "/channels/881")
        assert edit == {"applied_tags": ["901"], "locked": True}
        harness.interaction(solved_click("881", clicker="77", moderator=True))
        await harness.until(lambda: len(harness.emulator.called("PATCH", "/channels/881")) == 2)
        assert harness.emulator.called("PATCH", "/channels/881")[1]["applied_tags"] == ["901"]
    finally:
        await stop()


async def test_marking_solved_without_manage_threads_says_so(discord_factory) -> None:
    """Discord refuses the tag without Manage Threads (optional, says the README): the click
    raised in the callback and the poster saw "This interaction failed"."""
    harness, stop = await discord_factory(policies={FORUM: ChannelPolicy(trigger="auto")})
    try:
        harness.gateway_message(forum_post(harness, "883", "Re-ingesting", QUESTION))
        await harness.until(lambda: bool(thread_posts(harness, "883")))
        harness.emulator.channel_edit_refusal = (403, 50013)
        harness.interaction(solved_click("883", clicker="42"))
        await harness.until(lambda: bool(harness.emulator.called("POST", "/webhooks/")))
        [told] = harness.emulator.called("POST", "/webhooks/")
        assert "needs the Manage Threads permission" in told["content"]
    finally:
        await stop()


async def test_forum_posts_elsewhere_are_left_alone(discord_factory) -> None:
    harness, stop = await discord_factory()  # the forum's policy: mention only
    try:
        harness.gateway_message(forum_post(harness, "882", "Re-ingesting", QUESTION))
        await _settle()
        assert thread_posts(harness, "882") == []
    finally:
        await stop()


async def test_questions_only_off_answers_any_message(discord_factory) -> None:
    auto_all = ChannelPolicy(trigger="auto", questions_only=False)
    harness, stop = await discord_factory(policies={HERE: auto_all})
    try:
        harness.gateway_message(channel_message("re-ingesting documents"))
        thread_id = await harness.thread_ready()
        await harness.until(lambda: bool(thread_posts(harness, thread_id)))
    finally:
        await stop()
