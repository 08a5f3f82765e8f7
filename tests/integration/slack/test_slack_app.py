"""The Slack adapter end to end: signed HTTP requests into the real Bolt AsyncApp, answers out
through the real slack_sdk client to the local Web API emulator."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from typing import Any

from adapters.answer_labels import TEXT_ONLY
from adapters.slack.render import FEEDBACK, FEEDBACK_DOWN, FEEDBACK_UP
from core.answer.claude import ClaudeModel
from core.answer.tools import RESPOND_TOOL, SEARCH_TOOL
from tests.fakes.anthropic_api import FakeMessagesAPI, message, text, tool_use
from tests.fakes.slack_api import BOT_USER
from tests.integration.slack.conftest import SlackHarness

QUESTION = "how do I re-ingest changed documents?"


def mention(ts: str, text: str = QUESTION, thread_ts: str | None = None) -> dict[str, Any]:
    event = {
        "type": "app_mention",
        "user": "U2",
        "text": f"<@{BOT_USER}> {text}",
        "ts": ts,
        "channel": "C1",
        "event_ts": ts,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


def message_event(ts: str, text: str, thread_ts: str | None = None, **extra: Any) -> dict:
    event = {
        "type": "message",
        "user": "U2",
        "text": text,
        "ts": ts,
        "channel": "C1",
        "channel_type": "channel",
        "event_ts": ts,
        **extra,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


def answers(slack: SlackHarness) -> list[dict[str, Any]]:
    """Final answers: the updates that replaced a placeholder."""
    return slack.emulator.called("chat.update")


async def test_mention_is_answered_in_a_thread_with_sources_and_feedback(slack) -> None:
    assert await slack.event(mention("1700000000.000100"), "Ev1") == 200
    await slack.until(lambda: len(answers(slack)) == 1)
    placeholder = slack.emulator.called("chat.postMessage")[0]
    assert placeholder["thread_ts"] == "1700000000.000100"
    assert "Looking through the docs" in placeholder["text"]
    final = answers(slack)[0]
    kinds = [b["type"] for b in final["blocks"]]
    assert kinds[0] == "section"
    assert kinds[-1] == "context_actions"  # Slack's own 👍/👎, the default
    sources = next(b for b in final["blocks"] if "Sources" in json.dumps(b))
    assert "ingesting.md#" in json.dumps(sources)
    [buttons] = final["blocks"][-1]["elements"]
    assert (buttons["type"], buttons["action_id"]) == ("feedback_buttons", FEEDBACK)


def answer_id_of(sent: dict[str, Any]) -> str:
    """The answer's id, as its native feedback buttons carry it ("up:ID" / "down:ID")."""
    [buttons] = sent["blocks"][-1]["elements"]
    return str(buttons["negative_button"]["value"]).split(":", 1)[1]


async def test_follow_ups_in_the_thread_need_no_mention(slack) -> None:
    root = "1700000000.000200"
    await slack.event(mention(root), "Ev1")
    await slack.until(lambda: len(answers(slack)) == 1)
    await slack.event(message_event("1700000000.000300", "and what does --prune do?", root), "Ev2")
    await slack.until(lambda: len(answers(slack)) == 2)
    assert slack.emulator.called("chat.postMessage")[-1]["thread_ts"] == root
    turns = await slack.store.recent(f"slack/T1/C1/{root}", 10)
    assert [t.question for t in turns] == [QUESTION, "and what does --prune do?"]


async def test_messages_the_bot_must_ignore(slack) -> None:
    await slack.event(message_event("1.1", "no mention, no thread"), "Ev1")
    await slack.event(message_event("1.2", "a thread that isn't ours", "1.0"), "Ev2")
    await slack.event(message_event("1.3", "from a bot", bot_id="B9"), "Ev3")
    await slack.event(message_event("1.4", "mine", user=BOT_USER), "Ev4")
    edit = message_event("1.5", "", subtype="message_changed")
    await slack.event(edit, "Ev5")
    await slack.event(message_event("1.6", "", subtype="channel_join"), "Ev6")
    await slack.event(message_event("1.7", "", subtype="message_deleted"), "Ev7")
    await slack.settle()
    posted = [m for m in slack.emulator.calls if m[0].startswith("chat.")]
    assert posted == []


async def test_direct_messages_are_answered_directly(slack) -> None:
    dm = message_event(
        "1700000000.000400", "what is hybrid search?", channel="D1", channel_type="im"
    )
    await slack.event(dm, "Ev1")
    await slack.until(lambda: len(answers(slack)) == 1)
    placeholder = slack.emulator.called("chat.postMessage")[0]
    assert placeholder["channel"] == "D1"
    assert "thread_ts" not in placeholder or placeholder["thread_ts"] is None


async def test_a_mention_in_a_thread_is_answered_once(slack) -> None:
    ts, root = "1700000000.000600", "1700000000.000500"
    await slack.event(mention(ts, thread_ts=root), "EvA")
    await slack.event(message_event(ts, f"<@{BOT_USER}> {QUESTION}", root), "EvB")
    await slack.until(lambda: len(answers(slack)) == 1)
    await slack.settle()
    assert len(answers(slack)) == 1
    assert slack.emulator.called("chat.postMessage")[0]["thread_ts"] == root


async def test_a_mention_sent_to_the_channel_from_a_thread_is_answered_once(slack) -> None:
    """ "Also send to channel" makes both events carry `subtype: thread_broadcast`: the mention
    listener dropped any subtype and the message listener left mentions to it, so no answer."""
    ts, root = "1700000000.000610", "1700000000.000510"
    broadcast = {**mention(ts, thread_ts=root), "subtype": "thread_broadcast"}
    await slack.event(broadcast, "EvTB1")
    text = f"<@{BOT_USER}> {QUESTION}"
    await slack.event(message_event(ts, text, root, subtype="thread_broadcast"), "EvTB2")
    await slack.until(lambda: len(answers(slack)) == 1)
    await slack.settle()
    assert len(answers(slack)) == 1
    assert slack.emulator.called("chat.postMessage")[0]["thread_ts"] == root


async def test_a_mention_with_a_file_is_answered_without_an_app_mention(slack) -> None:
    """Slack may send only the `message` event (subtype `file_share`) for a message with a
    file; it was left to an app_mention that never came."""
    ts = "1700000000.000620"
    text = f"<@{BOT_USER}> {QUESTION}"
    event = message_event(ts, text, subtype="file_share", files=[{"id": "F1"}])
    await slack.event(event, "EvFS")
    await slack.until(lambda: len(answers(slack)) == 1)
    assert slack.emulator.called("chat.postMessage")[0]["thread_ts"] == ts


async def test_a_direct_message_of_a_file_alone_is_told_to_use_words(slack) -> None:
    """A screenshot sent alone in a DM got nothing back; in a channel it is still left alone."""
    picture = {"files": [{"id": "F1", "name": "error.png"}], "subtype": "file_share"}
    await slack.event(message_event("1700000000.000630", "", **picture), "EvF1")
    dm = message_event("1700000000.000640", "", channel="D1", channel_type="im", **picture)
    await slack.event(dm, "EvF2")
    await slack.until(lambda: bool(slack.emulator.called("chat.postMessage")))
    await slack.settle()
    [told] = slack.emulator.called("chat.postMessage")
    assert (told["channel"], told["text"]) == ("D1", TEXT_ONLY)


async def test_slack_retries_never_produce_a_second_answer(slack) -> None:
    await slack.event(mention("1700000000.000700"), "EvR")
    await slack.event(
        mention("1700000000.000700"),
        "EvR",
        headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"},
    )
    await slack.until(lambda: len(answers(slack)) == 1)
    await slack.settle()
    assert len(slack.emulator.called("chat.postMessage")) == 1


async def test_unsigned_wrongly_signed_and_stale_requests_get_401(slack) -> None:
    body = json.dumps(
        {"type": "event_callback", "event_id": "Ev1", "team_id": "T1", "event": mention("1.1")}
    )
    async with slack.http.post(slack.url + "/slack/events", data=body) as r:
        assert r.status == 401
    assert await slack.post(body, secret="wrong-secret") == 401
    assert await slack.post(body, timestamp=int(time.time()) - 6 * 60) == 401
    await slack.settle()
    assert [c for c in slack.emulator.calls if c[0] != "auth.test"] == []


async def test_healthz(slack) -> None:
    async with slack.http.get(slack.url + "/healthz") as r:
        assert r.status == 200
        assert (await r.json()) == {"ok": True}


async def test_feedback_click_is_stored_with_the_answer(slack) -> None:
    await slack.event(mention("1700000000.000800"), "Ev1")
    await slack.until(lambda: len(answers(slack)) == 1)
    answer_id = answer_id_of(answers(slack)[0])
    assert await slack.click(FEEDBACK, f"down:{answer_id}") == 200
    await slack.until(lambda: bool(slack.emulator.called("chat.postEphemeral")))
    assert await slack.state.feedback_for(answer_id) == [("U2", -1)]
    assert await slack.click(FEEDBACK, f"up:{answer_id}") == 200  # a changed mind replaces it
    await slack.until(lambda: len(slack.emulator.called("chat.postEphemeral")) == 2)
    assert await slack.state.feedback_for(answer_id) == [("U2", 1)]


async def test_refused_blocks_fall_back_to_plain_text(slack) -> None:
    slack.emulator.fail("chat.update", "invalid_blocks")
    await slack.event(mention("1700000000.000900"), "Ev1")
    await slack.until(lambda: len(answers(slack)) == 2)
    refused, plain = answers(slack)
    assert refused["blocks"]
    assert plain["blocks"] == []
    assert "Sources" in plain["text"]


async def test_even_the_fallback_failing_ends_in_a_visible_message(slack) -> None:
    slack.emulator.fail("chat.update", "invalid_blocks", "msg_too_long")
    await slack.event(mention("1700000000.001000"), "Ev1")
    await slack.until(lambda: len(slack.emulator.called("chat.postMessage")) == 2)
    assert "something went wrong" in slack.emulator.called("chat.postMessage")[-1]["text"]


def _long_answer_model(answer: str) -> ClaudeModel:
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        return message(tool_use(RESPOND_TOOL, answer=answer, citations=[], status="answered"))

    api = FakeMessagesAPI([message(tool_use(SEARCH_TOOL, query="ingest")), respond])
    return ClaudeModel(api.client(), model="claude-test", max_tokens=1024)


async def test_long_answers_are_split_and_pings_neutralised(slack_factory) -> None:
    paragraph = "Re-ingesting is cheap because unchanged files are skipped [1]. " * 36
    text = "\n\n".join([paragraph] * 5) + "\n\n<!channel> <@U999> @here done"  # ~11.4k chars
    harness, stop = await slack_factory(_long_answer_model(text))
    try:
        await harness.event(mention("1700000000.001100"), "Ev1")

        def last_part_sent() -> bool:  # the last message carries the feedback buttons
            sent = harness.emulator.called("chat.update") + harness.emulator.called(
                "chat.postMessage"
            )
            blocks = (b for m in sent for b in m.get("blocks") or [])
            return any(b["type"] == "context_actions" for b in blocks)

        await harness.until(last_part_sent)
        final = [u for u in harness.emulator.called("chat.update") if u.get("blocks")]
        parts = final + harness.emulator.called("chat.postMessage")[1:]
        assert len(parts) >= 2
        for part in parts:
            assert len(part["blocks"]) <= 50
            for block in part["blocks"]:
                if block["type"] == "section":
                    assert len(block["text"]["text"]) <= 3000
        everything = json.dumps(parts)
        assert "<!channel>" not in everything
        assert "<@U999>" not in everything
        assert "<!here>" not in everything
        section_texts = [
            b["text"]["text"] for p in parts for b in p["blocks"] if b["type"] == "section"
        ]
        for section in section_texts:  # no link is ever cut in two
            assert section.count("<") == section.count(">")
        sections = " ".join(" ".join(t.split()) for t in section_texts)  # cuts fall between words
        assert sections.count("unchanged files are skipped") == 180  # nothing lost
        assert sections.rstrip().endswith("done")
    finally:
        await stop()


async def test_a_model_failure_produces_the_quoted_passages_with_the_reason(
    slack_factory,
) -> None:
    api = FakeMessagesAPI(
        [
            message(tool_use(SEARCH_TOOL, query="x y")),
            message(text("hmm")),
            message(text("still no tool")),
        ]
    )
    agent = ClaudeModel(api.client(), model="claude-test", max_tokens=256)
    harness, stop = await slack_factory(agent)
    try:
        await harness.event(mention("1700000000.001200"), "Ev1")
        await harness.until(lambda: len(harness.emulator.called("chat.update")) == 1)
        final = harness.emulator.called("chat.update")[0]
        assert "The language model gave no usable answer" in final["text"]
        assert "quoted as written" in final["text"]
        assert any("*Sources:*" in str(b) for b in final["blocks"])
    finally:
        await stop()


async def test_thread_history_comes_from_slack_only_when_the_store_has_none(slack) -> None:
    root = "1700000000.001300"
    await slack.state.remember_thread(f"slack/T1/C1/{root}")
    slack.emulator.replies = [
        {"user": "U2", "text": f"<@{BOT_USER}> what is prune?", "ts": root},
        {
            "user": BOT_USER,
            "bot_id": "BBOT",
            "text": "Prune deletes removed files.",
            "ts": "1700000000.001350",
        },
        {"user": "U2", "text": "and how do I turn it off?", "ts": "1700000000.001400"},
        {"user": BOT_USER, "text": "_Looking through the docs…_", "ts": "1700000000.001450"},
    ]
    await slack.event(message_event("1700000000.001400", "and how do I turn it off?", root), "Ev1")
    await slack.until(lambda: len(answers(slack)) == 1)
    assert len(slack.emulator.called("conversations.replies")) == 1
    turns = await slack.store.recent(f"slack/T1/C1/{root}", 10)
    assert turns[0].question == "what is prune?"
    assert turns[0].answer == "Prune deletes removed files."


async def test_rate_limited_history_is_skipped_not_fatal(slack) -> None:
    root = "1700000000.001500"
    await slack.state.remember_thread(f"slack/T1/C1/{root}")
    slack.emulator.fail("conversations.replies", "ratelimited")
    await slack.event(message_event("1700000000.001600", "what is hybrid search?", root), "Ev1")
    await slack.until(lambda: len(answers(slack)) == 1)


def _streaming_model() -> ClaudeModel:
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        from tests.fakes.anthropic_api import tool_results
        from tests.integration.answers.helpers import first_sentence, sources_in

        number, passage = next(iter(sources_in(tool_results(body)[0]["content"]).items()))
        answer = "Run `bot ingest` again on the same folder. " * 6
        answer += f"Unchanged files are skipped [{number}]."
        return message(
            tool_use(
                RESPOND_TOOL,
                answer=answer,
                status="answered",
                citations=[{"source": number, "quote": first_sentence(passage)}],
            )
        )

    api = FakeMessagesAPI([message(tool_use(SEARCH_TOOL, query="re-ingest")), respond])
    return ClaudeModel(api.client(), model="claude-test", max_tokens=1024)


def _final(harness: SlackHarness) -> list[dict[str, Any]]:
    return [u for u in harness.emulator.called("chat.update") if u.get("blocks")]


async def test_the_answer_streams_then_ends_with_sources(slack_factory) -> None:
    harness, stop = await slack_factory(_streaming_model(), BOT_SLACK__UPDATE_INTERVAL_S="0")
    try:
        await harness.event(mention("1700000000.002000"), "Ev1")
        await harness.until(lambda: bool(_final(harness)))
        names = [name for name, _ in harness.emulator.calls if name.startswith("chat.")]
        assert names[:3] == ["chat.postMessage", "chat.startStream", "chat.delete"]
        assert names[-2:] == ["chat.stopStream", "chat.update"]
        appends = harness.emulator.called("chat.appendStream")
        assert len(appends) >= 2
        assert all(n == "chat.appendStream" for n in names[3:-2])
        start = harness.emulator.called("chat.startStream")[0]
        assert start["thread_ts"] == "1700000000.002000"
        assert start["recipient_user_id"] == "U2"
        streamed = start["markdown_text"] + "".join(a["markdown_text"] for a in appends)
        assert streamed.startswith("Run `bot ingest` again")
        stream_ts = harness.emulator.called("chat.stopStream")[0]["ts"]
        final = _final(harness)[0]
        assert final["ts"] == stream_ts  # the streamed message becomes the checked answer
        assert final["blocks"][-1]["type"] == "context_actions"
        assert "Sources" in json.dumps(final["blocks"])
    finally:
        await stop()


async def test_without_streaming_the_placeholder_is_edited_progressively(slack_factory) -> None:
    harness, stop = await slack_factory(_streaming_model(), BOT_SLACK__UPDATE_INTERVAL_S="0")
    harness.emulator.fail("chat.startStream", "not_allowed_token_type")
    try:
        await harness.event(mention("1700000000.002100"), "Ev1")
        await harness.until(lambda: bool(_final(harness)))
        updates = harness.emulator.called("chat.update")
        progress, final = updates[:-1], updates[-1]
        assert len(progress) >= 3
        assert all(u["text"].endswith(" …") and not u.get("blocks") for u in progress)
        lengths = [len(u["text"]) for u in progress]
        assert lengths == sorted(lengths)
        assert all(u["ts"] == final["ts"] for u in progress)  # one message, edited in place
        assert final["blocks"][-1]["type"] == "context_actions"
        assert not harness.emulator.called("chat.appendStream")
    finally:
        await stop()


async def test_edited_mentions_are_not_answered_again(slack) -> None:
    edited = mention("1700000000.003000")
    edited["edited"] = {"user": "U2", "ts": "1700000001.000000"}
    await slack.event(edited, "EvE")
    await slack.settle()
    assert not slack.emulator.called("chat.postMessage")


async def test_broadcast_replies_and_file_shares_in_a_bot_thread_are_answered(slack) -> None:
    root = "1700000000.003100"
    await slack.state.remember_thread(f"slack/T1/C1/{root}")
    await slack.event(
        message_event(
            "1700000000.003200", "what is hybrid search?", root, subtype="thread_broadcast"
        ),
        "Ev1",
    )
    await slack.until(lambda: len(answers(slack)) == 1)
    await slack.event(
        message_event("1700000000.003300", "and this file?", root, subtype="file_share"), "Ev2"
    )
    await slack.until(lambda: len(answers(slack)) == 2)


async def test_a_network_failure_still_ends_in_a_visible_message(slack) -> None:
    # The SDK retries a dropped connection once; both attempts fail, so the answer goes out
    # through the plain-text fallback.
    slack.emulator.fail("chat.update", "disconnect", "disconnect")
    await slack.event(mention("1700000000.003400"), "Ev1")
    await slack.until(lambda: any(u.get("blocks") == [] for u in answers(slack)))
    assert "Sources" in answers(slack)[-1]["text"]


async def test_when_every_update_fails_an_apology_is_posted(slack) -> None:
    slack.emulator.fail("chat.update", *["disconnect"] * 4)
    await slack.event(mention("1700000000.003500"), "Ev1")
    await slack.until(
        lambda: any(
            "went wrong" in m.get("text", "") for m in slack.emulator.called("chat.postMessage")
        )
    )


def view_submission(answer_id: str, reason: str, note: str | None) -> str:
    payload = {
        "type": "view_submission",
        "team": {"id": "T1"},
        "user": {"id": "U2"},
        "api_app_id": "A1",
        "trigger_id": "t2",
        "view": {
            "id": "V1",
            "type": "modal",
            "callback_id": "feedback_reason",
            "private_metadata": answer_id,
            "state": {
                "values": {
                    "reason": {
                        "reason": {
                            "type": "radio_buttons",
                            "selected_option": {"value": reason},
                        }
                    },
                    "note": {"note": {"type": "plain_text_input", "value": note}},
                }
            },
        },
    }
    return "payload=" + urllib.parse.quote(json.dumps(payload))


async def test_a_down_vote_asks_what_was_wrong_and_keeps_the_reason(slack) -> None:
    await slack.event(mention("1700000000.000850"), "Ev1")
    await slack.until(lambda: len(answers(slack)) == 1)
    answer_id = answer_id_of(answers(slack)[0])
    assert await slack.click(FEEDBACK, f"down:{answer_id}") == 200
    await slack.until(lambda: bool(slack.emulator.called("views.open")))
    [opened] = slack.emulator.called("views.open")
    view = json.loads(opened["view"]) if isinstance(opened["view"], str) else opened["view"]
    assert opened["trigger_id"] == "t1"
    assert view["private_metadata"] == answer_id
    form = "application/x-www-form-urlencoded"
    sent = view_submission(answer_id, "outdated", "The flag was renamed in v2.")
    assert await slack.post(sent, content_type=form) == 200
    await poll_reasons(slack, answer_id)
    assert await slack.state.feedback_reasons(answer_id) == [
        ("U2", "outdated", "The flag was renamed in v2.")
    ]
    # A forged reason is refused in the form, and nothing is stored.
    assert await slack.post(view_submission(answer_id, "lies", None), content_type=form) == 200
    assert [r for _, r, _ in await slack.state.feedback_reasons(answer_id)] == ["outdated"]


async def poll_reasons(slack: SlackHarness, answer_id: str) -> None:
    for _ in range(200):
        if await slack.state.feedback_reasons(answer_id):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the reason was not stored")


async def test_plain_feedback_buttons_store_the_last_vote(slack_factory) -> None:
    """`slack.native_feedback: false`: plain 👍/👎 buttons, for a client without Slack's own."""
    harness, stop = await slack_factory(None, BOT_SLACK__NATIVE_FEEDBACK="false")
    try:
        await harness.event(mention("1700000000.000870"), "Ev1")
        await harness.until(lambda: len(answers(harness)) == 1)
        actions = answers(harness)[0]["blocks"][-1]
        assert actions["type"] == "actions"
        assert [b["action_id"] for b in actions["elements"]] == [FEEDBACK_UP, FEEDBACK_DOWN]
        answer_id = actions["elements"][0]["value"]
        assert await harness.click(FEEDBACK_UP, answer_id) == 200
        await harness.until(lambda: len(harness.emulator.called("chat.postEphemeral")) == 1)
        assert await harness.state.feedback_for(answer_id) == [("U2", 1)]
        assert await harness.click(FEEDBACK_DOWN, answer_id) == 200  # the last vote wins
        await harness.until(lambda: bool(harness.emulator.called("views.open")))
        assert await harness.state.feedback_for(answer_id) == [("U2", -1)]
    finally:
        await stop()


async def test_one_person_over_the_question_cap_is_told_when_to_ask_again(
    slack_factory,
) -> None:
    """`answers.limits.per_asker`: the bot's engine in `bot slack` is bounded; the third
    question within the minute is answered with when to ask again, not with a model call."""
    harness, stop = await slack_factory(None, BOT_ANSWERS__LIMITS__PER_ASKER="2")
    try:
        for n in range(3):
            await harness.event(mention(f"1700000000.00{n}500"), f"EvCap{n}")
        await harness.until(lambda: len(answers(harness)) == 3)
        texts = [json.dumps(a) for a in answers(harness)]
        assert sum("ingesting.md" in t for t in texts) == 2
        [told] = [a for a in answers(harness) if "ask again in" in json.dumps(a)]
        assert told["channel"] == "C1"
        assert "ingesting.md" not in json.dumps(told)
    finally:
        await stop()
