"""Each channel decides how the bot behaves there (`channels.policies`), through the real Bolt
app against the Slack emulator: answer questions unasked (`auto`), only questions, only
grounded answers, never (`off`), and only from the channel's sources."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.parse
from typing import Any

import pytest
import structlog

from adapters.answer_labels import NOT_HERE, NOTHING_TO_ASK
from adapters.slack.payloads import team_of
from adapters.slack.render import ESCALATE, SHARE_ANSWER
from core.answer.claude import ClaudeModel
from core.answer.tools import RESPOND_TOOL, SEARCH_TOOL
from tests.fakes.anthropic_api import FakeMessagesAPI, message, tool_use
from tests.fakes.slack_api import BOT_USER
from tests.integration.slack.test_slack_app import mention, message_event

QUESTION = "How do I re-ingest changed documents?"
OFF_TOPIC = "How is the holiday allowance calculated for part-timers?"  # not in the bundled docs


def policy(**fields: Any) -> dict[str, str]:
    return {"BOT_CHANNELS__POLICIES": json.dumps({"slack/T1/C1": fields})}


def not_found_model() -> tuple[FakeMessagesAPI, ClaudeModel]:
    """Claude searching, then saying the docs do not cover the question."""
    not_found = tool_use(RESPOND_TOOL, answer="Not covered.", citations=[], status="not_found")
    api = FakeMessagesAPI([message(tool_use(SEARCH_TOOL, query="flux")), message(not_found)])
    return api, ClaudeModel(api.client(), model="claude-test", max_tokens=256)


def posted(harness: Any) -> list[dict[str, Any]]:
    return harness.emulator.called("chat.postMessage")


async def test_auto_answers_a_question_nobody_asked_the_bot_in_its_thread(slack_factory) -> None:
    harness, stop = await slack_factory(None, **policy(trigger="auto"))
    try:
        await harness.event(message_event("1700000000.000100", QUESTION), "Ev1")
        await harness.until(lambda: bool(posted(harness)))
        [answer] = posted(harness)
        assert answer["thread_ts"] == "1700000000.000100"
        assert "ingesting.md" in json.dumps(answer["blocks"])  # the sources are there
        # Follow-ups in that thread need no mention, as after an @mention.
        await harness.event(
            message_event("1700000000.000200", "and with --prune?", "1700000000.000100"), "Ev2"
        )
        await harness.until(
            lambda: len(posted(harness)) + len(harness.emulator.called("chat.update")) >= 2
        )
    finally:
        await stop()


async def test_auto_leaves_chatter_alone(slack_factory) -> None:
    harness, stop = await slack_factory(None, **policy(trigger="auto"))
    try:
        for n, text in enumerate(["thanks everyone!", "good morning :wave:", "lunch anyone?"]):
            await harness.event(message_event(f"1700000000.00030{n}", text), f"Ev{n}")
        await harness.settle()
        assert posted(harness) == []
    finally:
        await stop()


async def test_questions_only_off_answers_any_message(slack_factory) -> None:
    harness, stop = await slack_factory(None, **policy(trigger="auto", questions_only=False))
    try:
        await harness.event(message_event("1700000000.000400", "re-ingesting documents"), "Ev1")
        await harness.until(lambda: bool(posted(harness)))
    finally:
        await stop()


async def test_auto_posts_nothing_without_a_grounded_answer(slack_factory) -> None:
    api, model = not_found_model()
    # No relevance floor: the model itself finds nothing and says so.
    harness, stop = await slack_factory(model, **policy(trigger="auto", min_relevance=0))
    try:
        with structlog.testing.capture_logs() as logs:
            await harness.event(
                message_event("1700000000.000500", "How do I calibrate the flux capacitor?"),
                "Ev1",
            )
            await harness.until(lambda: len(api.requests) == 2)
            await harness.settle()
        assert posted(harness) == []
        assert harness.emulator.called("chat.update") == []
        assert any(e["event"] == "abstained" and e["status"] == "not_found" for e in logs)
        [held] = await harness.state.answer_log(0)  # the report counts what was held back
        assert (held.status, held.posted, held.channel) == ("not_found", False, "slack/T1/C1")
    finally:
        await stop()


@pytest.mark.parametrize("grounded_only", [True, False])
async def test_an_unasked_question_far_from_every_passage_costs_no_model_call(
    slack_factory, grounded_only: bool
) -> None:
    api, model = not_found_model()
    # The default floor; it holds back even where ungrounded answers may be posted.
    auto = policy(trigger="auto", answer_only_when_grounded=grounded_only)
    harness, stop = await slack_factory(model, **auto)
    try:
        with structlog.testing.capture_logs() as logs:
            await harness.event(message_event("1700000000.000550", OFF_TOPIC), "Ev1")
            await harness.until(lambda: any(e["event"] == "abstained" for e in logs))
        assert api.requests == []
        assert posted(harness) == []
        assert any(e["event"] == "below_relevance_floor" for e in logs)
        [held] = await harness.state.answer_log(0)
        assert (held.status, held.posted) == ("not_found", False)
        # Asked by name in that message's thread, it goes to the model (the floor is for
        # unasked questions), with no trace of the held-back reply in the conversation.
        await harness.event(mention("1700000000.000560", OFF_TOPIC, "1700000000.000550"), "Ev2")
        await harness.until(lambda: len(api.requests) == 2)
        assert "close enough" not in json.dumps(api.requests[0]["messages"])
        assert len(api.requests[0]["messages"]) == 1
    finally:
        await stop()


async def logged(harness: Any, count: int, timeout: float = 15.0) -> list[Any]:
    """The answer log, once it holds `count` answers (listeners log them in the background)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while len(entries := await harness.state.answer_log(0)) < count:
        assert asyncio.get_running_loop().time() < deadline, f"{len(entries)} of {count} logged"
        await asyncio.sleep(0.05)
    return entries


def auto_limited(per_asker: int) -> dict[str, str]:
    return {
        **policy(trigger="auto"),
        "BOT_ANSWERS__LIMITS": json.dumps({"per_asker": per_asker}),
    }


async def test_chatter_held_back_unsearched_counts_against_no_one(slack_factory) -> None:
    """Off-topic messages of an `auto` channel that the relevance floor held back (no model,
    nothing posted) counted against their sender's `per_asker`: their first @mention was
    then refused with "ask again in 57 s"."""
    harness, stop = await slack_factory(None, **auto_limited(2))
    try:
        chatter = [OFF_TOPIC, "What is the parental leave policy for contractors?"]
        for n, text in enumerate(chatter):
            await harness.event(message_event(f"1700000000.00080{n}", text), f"EvU{n}")
        assert not any(e.posted for e in await logged(harness, 2))
        await harness.event(mention("1700000000.000900", QUESTION), "EvM")
        await harness.until(lambda: bool(harness.emulator.called("chat.update")))
        final = harness.emulator.called("chat.update")[-1]["text"]
        assert "ask again" not in final
        assert "ingesting.md" in json.dumps(harness.emulator.called("chat.update")[-1])
    finally:
        await stop()


async def test_an_unasked_question_over_the_askers_limit_is_no_gap_in_the_docs(
    slack_factory,
) -> None:
    """Held back unsearched because its sender was over the limit, it was logged "not found",
    and the report listed it as a question the docs could not answer."""
    harness, stop = await slack_factory(None, **auto_limited(1))
    try:
        asked = [QUESTION, "How do I remove a wrong ingest?"]
        for n, text in enumerate(asked):
            await harness.event(message_event(f"1700000000.00070{n}", text), f"EvL{n}")
        statuses = sorted(e.status for e in await logged(harness, 2))
        assert statuses == ["error", "partial"]  # the second: limited, never searched
    finally:
        await stop()


async def test_a_mention_is_always_answered_even_when_not_grounded(slack_factory) -> None:
    _, model = not_found_model()
    harness, stop = await slack_factory(model, **policy(trigger="auto"))
    try:
        await harness.event(mention("1700000000.000600", "flux capacitor?"), "Ev1")
        await harness.until(lambda: bool(harness.emulator.called("chat.update")))
        assert "Not covered." in harness.emulator.called("chat.update")[-1]["text"]
    finally:
        await stop()


async def test_mention_only_channels_ignore_unasked_questions(slack_factory) -> None:
    harness, stop = await slack_factory(None)  # the default policy
    try:
        await harness.event(message_event("1700000000.000700", QUESTION), "Ev1")
        await harness.settle()
        assert posted(harness) == []
    finally:
        await stop()


async def test_off_channels_ignore_even_mentions(slack_factory) -> None:
    harness, stop = await slack_factory(None, **policy(trigger="off"))
    try:
        await harness.event(mention("1700000000.000800"), "Ev1")
        await harness.settle()
        assert posted(harness) == []
        assert harness.emulator.called("chat.update") == []
    finally:
        await stop()


async def test_a_default_of_off_leaves_direct_messages_answered(slack_factory) -> None:
    # An opt-in bot (`channels.default.trigger: off`, a policy per channel it may answer in)
    # still answers its direct messages, as the Discord bot does.
    harness, stop = await slack_factory(None, BOT_CHANNELS__DEFAULT__TRIGGER="off")
    try:
        await harness.event(mention("1700000000.000810"), "Ev1")
        dm = message_event("1700000000.000820", QUESTION, channel="D1", channel_type="im")
        await harness.event(dm, "Ev2")
        await harness.until(lambda: bool(harness.emulator.called("chat.update")))
        await harness.settle()
        assert [m["channel"] for m in posted(harness)] == ["D1"]
        assert "ingesting.md" in json.dumps(harness.emulator.called("chat.update")[-1])
        # "Ask the docs about this" on a message in the DM is answered too, not refused.
        form = "application/x-www-form-urlencoded"
        ask = shortcut_payload("1700000000.000830", QUESTION, channel="D1")
        assert await harness.post(ask, content_type=form) == 200
        await harness.until(lambda: len(posted(harness)) == 2)
        assert harness.emulator.called("chat.postEphemeral") == []
    finally:
        await stop()


async def test_sources_restrict_what_a_channel_is_answered_from(slack_factory) -> None:
    # The knowledge base's documents are all of source "kb": a channel scoped to another
    # source finds none of them, even for the question they answer best.
    harness, stop = await slack_factory(None, **policy(sources=["handbook"]))
    try:
        await harness.event(mention("1700000000.000900"), "Ev1")
        await harness.until(lambda: bool(harness.emulator.called("chat.update")))
        final = harness.emulator.called("chat.update")[-1]
        assert "couldn't find anything" in final["text"]
        assert "ingesting.md" not in json.dumps(final)
    finally:
        await stop()


THREAD = "1700000000.001000"
HOSTILE = "Not covered. <!subteam^SEVIL99> <@&123456> <@U0NOTME> @everyone <!channel>"
TARGETS = ["U0ESC1", "S0GRP1"]
ESCALATION_SENT = "<@U0ESC1> <!subteam^S0GRP1>: someone here still needs help with this question."


def escalations(harness: Any) -> list[dict[str, Any]]:
    return [m for m in posted(harness) if m["text"] == ESCALATION_SENT]


def mentions_sent(harness: Any) -> list[str]:
    """Every mention anything the bot posted or edited would notify."""
    bodies = json.dumps(posted(harness) + harness.emulator.called("chat.update"))
    return re.findall(r"<(?:@|!)[^>]*>|@everyone|@here", bodies)


async def test_still_need_help_mentions_exactly_the_configured_targets_once(
    slack_factory,
) -> None:
    harness, stop = await slack_factory(None, **policy(escalate_to=TARGETS))
    try:
        await harness.event(mention(THREAD), "Ev1")
        await harness.until(lambda: bool(harness.emulator.called("chat.update")))
        final = harness.emulator.called("chat.update")[-1]
        buttons = [e for b in final["blocks"] if b["type"] == "actions" for e in b["elements"]]
        [help_button] = [b for b in buttons if b["action_id"] == ESCALATE]
        assert escalations(harness) == []  # found: nobody is called in unasked
        for _ in range(2):  # a second click does not ping again
            assert await harness.click(ESCALATE, help_button["value"], thread_ts=THREAD) == 200
        await harness.until(lambda: bool(escalations(harness)))
        await harness.settle()
        [sent] = escalations(harness)
        assert sent["thread_ts"] == THREAD
        assert sorted(set(mentions_sent(harness))) == ["<!subteam^S0GRP1>", "<@U0ESC1>"]
    finally:
        await stop()


async def test_not_found_escalates_unasked_and_nothing_else_pings(slack_factory) -> None:
    not_found = tool_use(RESPOND_TOOL, answer=HOSTILE, citations=[], status="not_found")
    api = FakeMessagesAPI([message(tool_use(SEARCH_TOOL, query="flux")), message(not_found)])
    model = ClaudeModel(api.client(), model="claude-test", max_tokens=256)
    harness, stop = await slack_factory(model, **policy(escalate_to=TARGETS))
    try:
        await harness.event(mention("1700000000.001100", "flux capacitor?"), "Ev1")
        await harness.until(lambda: bool(escalations(harness)))
        assert escalations(harness)[0]["thread_ts"] == "1700000000.001100"
        assert sorted(set(mentions_sent(harness))) == ["<!subteam^S0GRP1>", "<@U0ESC1>"]
    finally:
        await stop()


async def test_a_private_channel_calls_a_person_in_at_the_askers_click_only(
    slack_factory,
) -> None:
    """`private` with `escalate_to` (README's #support) offered no "Still need help?" at all:
    nobody could be called in there. The docs falling short calls nobody by itself either: a
    post for everyone is the asker's to make."""
    _, model = not_found_model()
    harness, stop = await slack_factory(model, **policy(private=True, escalate_to=TARGETS))
    try:
        await harness.event(mention("1700000000.001200", "flux capacitor?"), "Ev1")
        await harness.until(lambda: bool(harness.emulator.called("chat.postEphemeral")))
        [private] = harness.emulator.called("chat.postEphemeral")
        buttons = [e for b in private["blocks"] if b["type"] == "actions" for e in b["elements"]]
        [help_button] = [b for b in buttons if b["action_id"] == ESCALATE]
        await harness.settle()
        assert escalations(harness) == []
        status = await harness.click(ESCALATE, help_button["value"], thread_ts="1700000000.001200")
        assert status == 200
        await harness.until(lambda: bool(escalations(harness)))
        assert escalations(harness)[0]["thread_ts"] == "1700000000.001200"
    finally:
        await stop()


async def test_no_targets_no_button_and_no_escalation(slack_factory) -> None:
    harness, stop = await slack_factory(None)
    try:
        await harness.event(mention("1700000000.001200"), "Ev1")
        await harness.until(lambda: bool(harness.emulator.called("chat.update")))
        assert ESCALATE not in json.dumps(harness.emulator.called("chat.update")[-1])
    finally:
        await stop()


async def test_private_answers_go_to_the_asker_and_can_be_shared_once(slack_factory) -> None:
    harness, stop = await slack_factory(None, **policy(private=True))
    thread = "1700000000.001300"
    try:
        await harness.event(mention(thread), "Ev1")
        await harness.until(lambda: bool(harness.emulator.called("chat.postEphemeral")))
        [private] = harness.emulator.called("chat.postEphemeral")
        assert (private["user"], private["thread_ts"]) == ("U2", thread)
        assert posted(harness) == []  # nothing public, not even a placeholder
        buttons = [e for b in private["blocks"] if b["type"] == "actions" for e in b["elements"]]
        [share] = [b for b in buttons if b["action_id"] == SHARE_ANSWER]
        for _ in range(2):
            assert await harness.click(SHARE_ANSWER, share["value"], thread_ts=thread) == 200
        await harness.until(lambda: bool(posted(harness)))
        await harness.until(lambda: len(harness.emulator.called("chat.postEphemeral")) == 2)
        [public] = posted(harness)
        assert public["thread_ts"] == thread
        assert public["text"] == private["text"]  # the same checked answer, for everyone
        assert "already been shared" in harness.emulator.called("chat.postEphemeral")[1]["text"]
    finally:
        await stop()


async def test_a_follow_up_in_a_private_channels_thread_is_answered_privately(
    slack_factory,
) -> None:
    """The thread of a private answer was never remembered as the bot's, so a follow-up there
    went unanswered unless it mentioned the bot again."""
    harness, stop = await slack_factory(None, **policy(private=True))
    thread = "1700000000.001350"
    try:
        await harness.event(mention(thread), "Ev1")
        await harness.until(lambda: len(harness.emulator.called("chat.postEphemeral")) == 1)
        follow_up = message_event("1700000000.001360", "and what does --prune delete?", thread)
        await harness.event(follow_up, "Ev2")
        await harness.until(lambda: len(harness.emulator.called("chat.postEphemeral")) == 2)
        second = harness.emulator.called("chat.postEphemeral")[1]
        assert (second["user"], second["thread_ts"]) == ("U2", thread)
        assert posted(harness) == []
    finally:
        await stop()


async def test_a_private_auto_channel_answers_the_poster_alone(slack_factory) -> None:
    harness, stop = await slack_factory(None, **policy(trigger="auto", private=True))
    ts = "1700000000.001400"
    try:
        await harness.event(message_event(ts, QUESTION), "Ev1")
        await harness.until(lambda: bool(harness.emulator.called("chat.postEphemeral")))
        [private] = harness.emulator.called("chat.postEphemeral")
        assert (private["user"], private["thread_ts"]) == ("U2", ts)
        assert "ingesting.md" in json.dumps(private["blocks"])
        buttons = [e for b in private["blocks"] if b["type"] == "actions" for e in b["elements"]]
        assert SHARE_ANSWER in [b["action_id"] for b in buttons]
        await harness.settle()
        assert posted(harness) == []  # nothing public
    finally:
        await stop()


def shortcut_payload(
    message_ts: str,
    text: str,
    trigger: str = "t-1",
    channel: str = "C1",
    response_url: str | None = None,
) -> str:
    """A message shortcut's form; with no `response_url`, the payload has none."""
    payload: dict[str, Any] = {
        "type": "message_action",
        "callback_id": "ask_docs",
        "trigger_id": trigger,
        "action_ts": "1700000001.0",
        "team": {"id": "T1"},
        "user": {"id": "U3"},
        "channel": {"id": channel},
        "message_ts": message_ts,
        "message": {"type": "message", "user": "U2", "text": text, "ts": message_ts},
    }
    if response_url is not None:
        payload["response_url"] = response_url
    return "payload=" + urllib.parse.quote(json.dumps(payload))


def reaction_added(ts: str, reaction: str = "question", user: str = "U3") -> dict[str, Any]:
    return {
        "type": "reaction_added",
        "user": user,
        "reaction": reaction,
        "item": {"type": "message", "channel": "C1", "ts": ts},
        "item_user": "U2",
        "event_ts": "1700000002.0",
    }


async def test_asking_about_a_message_answers_it_in_its_thread(slack_factory) -> None:
    harness, stop = await slack_factory(None)
    ts = "1700000000.001400"
    try:
        form = "application/x-www-form-urlencoded"
        assert await harness.post(shortcut_payload(ts, QUESTION), content_type=form) == 200
        await harness.until(lambda: bool(harness.emulator.called("chat.update")))
        assert posted(harness)[0]["thread_ts"] == ts  # the placeholder, then the answer
        assert "ingesting.md" in json.dumps(harness.emulator.called("chat.update")[-1])
    finally:
        await stop()


@pytest.mark.parametrize("part", ["channel", "user", "team"])
async def test_a_shortcut_with_a_null_part_is_acknowledged_and_never_crashes(
    slack_factory, part: str
) -> None:
    """Slack sends a null team for org-wide installs; a null channel or user can't be answered
    in, and is ignored with a warning. None of them is a listener's crash."""
    harness, stop = await slack_factory(None)
    ts = "1700000000.001500"
    try:
        body = json.loads(urllib.parse.unquote(shortcut_payload(ts, QUESTION).split("=", 1)[1]))
        body[part] = None
        form = "payload=" + urllib.parse.quote(json.dumps(body))
        status = await harness.post(form, content_type="application/x-www-form-urlencoded")
        assert status == 200
        if part == "team":  # answerable: the channel and the person are known
            await harness.until(lambda: bool(harness.emulator.called("chat.update")))
            assert posted(harness)[0]["thread_ts"] == ts
        else:
            await harness.settle()
            assert not posted(harness)
            assert not harness.emulator.called("chat.postEphemeral")
    finally:
        await stop()


def org_wide(form: str) -> str:
    """An interaction's form as an org-wide (Enterprise Grid) install gets it: a null team, the
    workspace named only as the clicking user's."""
    body = json.loads(urllib.parse.unquote(form.split("=", 1)[1]))
    body["team"] = None
    body["user"] = {**body["user"], "team_id": "T1"}
    body["is_enterprise_install"] = True
    body["enterprise"] = {"id": "E1"}
    return "payload=" + urllib.parse.quote(json.dumps(body))


@pytest.mark.parametrize("setting", [{"private": True}, {"trigger": "off"}])
async def test_an_org_wide_installs_shortcut_obeys_the_channels_policy(
    slack_factory, setting: dict[str, Any]
) -> None:
    """Read as "", the null team named a channel no policy matched: a `private` channel's
    answer was posted for everyone, and a channel turned `off` was answered."""
    harness, stop = await slack_factory(None, **policy(**setting))
    ts = "1700000000.001600"
    try:
        form = org_wide(shortcut_payload(ts, QUESTION, response_url=harness.response_url))
        assert await harness.post(form, content_type="application/x-www-form-urlencoded") == 200
        if setting.get("private"):
            await harness.until(lambda: len(harness.emulator.called("chat.postEphemeral")) == 2)
            looking, told = harness.emulator.called("chat.postEphemeral")
            assert looking["text"] == harness.settings.slack.placeholder  # the clicker's alone
            assert "ingesting.md" in json.dumps(told["blocks"])
        else:  # "not here", to the clicker alone, not an answer
            await harness.until(lambda: bool(harness.emulator.called("response_url")))
            [told] = harness.emulator.called("response_url")
            assert (told["text"], told["response_type"]) == (NOT_HERE, "ephemeral")
        await harness.settle()
        assert not posted(harness)
    finally:
        await stop()


@pytest.mark.parametrize("error", ["not_in_channel", "channel_not_found"])
@pytest.mark.parametrize("setting", [{}, {"private": True}])
async def test_a_shortcut_where_the_bot_is_no_member_says_so_before_any_answer(
    slack_factory, error: str, setting: dict[str, Any]
) -> None:
    """Slack offers the shortcut in every conversation, and refuses every post of the bot
    where it is no member (a channel it was never added to, a DM between two people): the
    answer was paid for, then lost without a word. The bot's first post, made before any
    answer (the placeholder; in a `private` channel "looking…" for the clicker), is the check:
    refused, the clicker is told through the shortcut's response_url (which Slack takes
    there), and no model is asked. No read of Slack's history is spent on it."""
    api, claude = not_found_model()
    harness, stop = await slack_factory(claude, **policy(**setting))
    harness.emulator.refuse("chat.postMessage", error)
    harness.emulator.refuse("chat.postEphemeral", error)
    ts = "1700000000.001700"
    try:
        form = shortcut_payload(ts, QUESTION, response_url=harness.response_url)
        assert await harness.post(form, content_type="application/x-www-form-urlencoded") == 200
        await harness.until(lambda: bool(harness.emulator.called("response_url")))
        await harness.settle()
        [told] = harness.emulator.called("response_url")
        assert told["response_type"] == "ephemeral"
        assert "not in this conversation" in told["text"]
        assert f"<@{BOT_USER}>" in told["text"]
        assert api.requests == []  # nothing paid for
        tried = "chat.postEphemeral" if setting else "chat.postMessage"
        assert [p["text"] for p in harness.emulator.called(tried)] == [
            harness.settings.slack.placeholder
        ]
        assert not harness.emulator.called("conversations.replies")
    finally:
        await stop()


@pytest.mark.parametrize("url", ["not a url", "http://127.0.0.1:9/closed", "ftp://x/y"])
async def test_a_response_url_that_takes_nothing_costs_a_log_line(slack_factory, url: str) -> None:
    """A refusal whose response_url can't be reached (or isn't one) is logged, never a crash
    of the listener; the request was acknowledged all the same."""
    harness, stop = await slack_factory(None, **policy(trigger="off"))
    try:
        with structlog.testing.capture_logs() as logs:
            form = shortcut_payload("1700000000.001950", QUESTION, response_url=url)
            status = await harness.post(form, content_type="application/x-www-form-urlencoded")
            assert status == 200
            await harness.until(
                lambda: any(e["event"] == "slack_refusal_not_delivered" for e in logs)
            )
        assert not [e for e in logs if e["log_level"] in ("error", "critical")]
        assert not posted(harness)
    finally:
        await stop()


async def test_a_lost_looking_message_in_a_private_channel_does_not_stop_the_answer(
    slack_factory,
) -> None:
    """The network dropping "looking…" (the check where answers are private) said nothing of
    membership, and escaped the listener: the clicker got nothing."""
    harness, stop = await slack_factory(None, **policy(private=True))
    harness.emulator.fail("chat.postEphemeral", "disconnect", "disconnect")  # and its retry
    try:
        form = shortcut_payload("1700000000.001850", QUESTION, response_url=harness.response_url)
        assert await harness.post(form, content_type="application/x-www-form-urlencoded") == 200
        await harness.until(
            lambda: "ingesting.md" in json.dumps(harness.emulator.called("chat.postEphemeral"))
        )
    finally:
        await stop()


async def test_a_placeholder_refused_for_another_reason_does_not_stop_the_answer(
    slack_factory,
) -> None:
    """Only "no member" stops it: Slack's own error on the placeholder tells nothing about the
    channel, and the answer is posted as usual."""
    harness, stop = await slack_factory(None)
    harness.emulator.fail("chat.postMessage", "internal_error")
    ts = "1700000000.001800"
    try:
        form = shortcut_payload(ts, QUESTION, response_url=harness.response_url)
        assert await harness.post(form, content_type="application/x-www-form-urlencoded") == 200
        await harness.until(lambda: len(posted(harness)) == 2)
        assert "ingesting.md" in json.dumps(posted(harness)[-1])
        assert not harness.emulator.called("response_url")
    finally:
        await stop()


async def test_a_shortcut_without_a_response_url_is_refused_by_an_ephemeral_message(
    slack_factory,
) -> None:
    harness, stop = await slack_factory(None)
    try:
        form = shortcut_payload("1700000000.001900", "   ")
        assert await harness.post(form, content_type="application/x-www-form-urlencoded") == 200
        await harness.until(lambda: bool(harness.emulator.called("chat.postEphemeral")))
        [told] = harness.emulator.called("chat.postEphemeral")
        assert (told["text"], told["user"]) == (NOTHING_TO_ASK, "U3")
    finally:
        await stop()


def test_an_interactions_team_is_read_as_bolt_reads_it() -> None:
    assert team_of({"team": {"id": "T1"}, "user": {"id": "U", "team_id": "T2"}}) == "T1"
    assert team_of({"team": None, "user": {"id": "U", "team_id": "T2"}}) == "T2"
    assert team_of({"team": None, "team_id": "T3", "user": {"team_id": "T2"}}) == "T3"
    assert team_of({"team": None, "user": None}) == ""
    assert team_of({"team": 5, "user": {"team_id": 7}}) == ""


async def test_the_question_reaction_asks_about_a_message_once(slack_factory) -> None:
    harness, stop = await slack_factory(None)
    ts = "1700000000.001500"
    harness.emulator.history = [{"type": "message", "user": "U2", "text": QUESTION, "ts": ts}]
    try:
        await harness.event(reaction_added(ts, "thumbsup"), "Ev0")
        await harness.event(reaction_added(ts), "Ev1")
        await harness.event(reaction_added(ts, user="U4"), "Ev2")  # asks nothing new
        await harness.until(lambda: bool(harness.emulator.called("chat.update")))
        await harness.settle()
        assert [m["thread_ts"] for m in posted(harness)] == [ts]
    finally:
        await stop()


async def test_reactions_can_be_turned_off_per_channel(slack_factory) -> None:
    harness, stop = await slack_factory(None, **policy(reactions=False))
    ts = "1700000000.001600"
    harness.emulator.history = [{"type": "message", "user": "U2", "text": QUESTION, "ts": ts}]
    try:
        await harness.event(reaction_added(ts), "Ev1")
        await harness.settle()
        assert posted(harness) == []
    finally:
        await stop()


async def test_forged_button_values_change_nothing(slack_factory) -> None:
    harness, stop = await slack_factory(None, **policy(private=True, escalate_to=TARGETS))
    try:
        for action in (SHARE_ANSWER, ESCALATE):
            for forged in ("0" * 32, "../../etc", "x" * 5_000, ""):
                assert await harness.click(action, forged, thread_ts=THREAD) == 200
        await harness.until(lambda: len(harness.emulator.called("chat.postEphemeral")) >= 4)
        await harness.settle()
        assert posted(harness) == []  # nothing made public, nobody called in, from a forged id
        assert all(
            "no longer known" in m["text"] for m in harness.emulator.called("chat.postEphemeral")
        )
    finally:
        await stop()


async def test_a_private_answer_is_no_one_elses_history_in_the_thread(slack_factory) -> None:
    """Two members ask in one thread of a `private` channel: the second one's model request
    holds nothing of the first one's private question or answer."""
    first_answer = "Run bot ingest with the folder again."

    def respond(answer: str) -> dict[str, Any]:
        return message(tool_use(RESPOND_TOOL, answer=answer, citations=[], status="partial"))

    api = FakeMessagesAPI(
        [
            message(tool_use(SEARCH_TOOL, query="re-ingest")),
            respond(first_answer),
            message(tool_use(SEARCH_TOOL, query="prune")),
            respond("Prune drops what is gone."),
        ]
    )
    model = ClaudeModel(api.client(), model="claude-test", max_tokens=256)
    harness, stop = await slack_factory(model, **policy(private=True))
    thread = "1700000000.001500"
    try:
        await harness.event(mention(thread, "my secret payroll folder: how do I re-ingest?"), "Ev1")
        await harness.until(lambda: len(harness.emulator.called("chat.postEphemeral")) == 1)
        other = {**mention("1700000000.001600", "and prune?", thread_ts=thread), "user": "U3"}
        await harness.event(other, "Ev2")
        await harness.until(lambda: len(harness.emulator.called("chat.postEphemeral")) == 2)
        second_ask = json.dumps(api.requests[2]["messages"])
        assert "payroll" not in second_ask
        assert first_answer not in second_ask
        assert "payroll" in json.dumps(api.requests[1]["messages"])  # the asker's own turn
    finally:
        await stop()
