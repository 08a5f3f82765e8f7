"""Conversations in Slack threads as people hold them: files without words, words meant for a
colleague, long threads, a mention in a thread the bot was not part of, a question asked with a
reaction on a reply."""

from __future__ import annotations

import json
import re
from typing import Any

from core.answer.claude import ClaudeModel
from core.answer.tools import RESPOND_TOOL, SEARCH_TOOL
from tests.fakes.anthropic_api import FakeMessagesAPI, message, tool_use
from tests.fakes.slack_api import BOT_USER
from tests.integration.slack.conftest import SlackHarness
from tests.integration.slack.test_channel_policies import reaction_added
from tests.integration.slack.test_slack_app import mention, message_event


def claude() -> tuple[FakeMessagesAPI, ClaudeModel]:
    """A model that searches once, then answers; its API keeps every request it was sent."""
    answer = message(tool_use(RESPOND_TOOL, answer="Re-run it.", citations=[], status="answered"))
    api = FakeMessagesAPI([message(tool_use(SEARCH_TOOL, query="ingest")), answer])
    return api, ClaudeModel(api.client(), model="claude-test", max_tokens=1024)


def conversation(request: dict[str, Any]) -> str:
    """Everything a request to the model says before the tools' results: history, question."""
    return json.dumps(request["messages"])


def posted(slack: SlackHarness) -> list[str]:
    """Every message the bot posted or edited, as text."""
    return [
        str(params.get("text", ""))
        for method, params in slack.emulator.calls
        if method in ("chat.postMessage", "chat.update", "chat.startStream")
    ]


async def test_a_file_without_words_in_a_bot_thread_gets_no_reply(slack) -> None:
    root = "1700000000.120000"
    await slack.state.remember_thread(f"slack/T1/C1/{root}")
    screenshot = message_event(
        "1700000000.120100", "", root, subtype="file_share", files=[{"id": "F1", "name": "a.png"}]
    )
    await slack.event(screenshot, "Ev1")
    await slack.settle(1)
    assert posted(slack) == []


async def test_words_for_a_colleague_and_thanks_in_a_bot_thread_get_no_answer(slack) -> None:
    root = "1700000000.130000"
    await slack.state.remember_thread(f"slack/T1/C1/{root}")
    await slack.event(message_event("1700000000.130100", "<@U7> can you take a look?", root), "E1")
    await slack.event(message_event("1700000000.130200", "thanks, that worked!", root), "E2")
    await slack.event(message_event("1700000000.130300", "👍", root), "E3")
    await slack.settle(1)
    assert posted(slack) == []
    # The next real question in that thread still needs no mention.
    await slack.event(message_event("1700000000.130400", "and with --prune?", root), "E4")
    await slack.until(lambda: len(slack.emulator.called("chat.update")) == 1)


async def test_a_channel_with_followups_all_answers_thanks_but_not_words_for_others(
    slack_factory,
) -> None:
    harness, stop = await slack_factory(BOT_CHANNELS__DEFAULT__FOLLOWUPS="all")
    try:
        root = "1700000000.140000"
        await harness.state.remember_thread(f"slack/T1/C1/{root}")
        await harness.event(message_event("1700000000.140100", "<@U7> over to you", root), "E1")
        await harness.settle(1)
        assert posted(harness) == []
        await harness.event(message_event("1700000000.140200", "thanks, that worked!", root), "E2")
        await harness.until(lambda: len(harness.emulator.called("chat.update")) == 1)
    finally:
        await stop()


def exchange(n: int, base: int = 1700000000) -> list[dict[str, Any]]:
    """The n-th question of a thread and the bot's answer to it."""
    asked = {"user": "U2", "text": f"question number {n}", "ts": f"{base + 2 * n}.000000"}
    said = {"user": BOT_USER, "bot_id": "BBOT", "text": f"answer number {n}"}
    return [asked, {**said, "ts": f"{base + 2 * n + 1}.000000"}]


async def test_a_long_thread_is_read_back_from_its_latest_messages(slack_factory) -> None:
    api, model = claude()
    harness, stop = await slack_factory(model)
    try:
        harness.emulator.replies_page_cap = 50
        harness.emulator.replies = [m for n in range(60) for m in exchange(n)]
        root = harness.emulator.replies[0]["ts"]
        await harness.state.remember_thread(f"slack/T1/C1/{root}")  # its turns were lost
        await harness.event(message_event("1700000200.000000", "and the last one?", root), "E1")
        await harness.until(lambda: len(harness.emulator.called("chat.update")) == 1)
        assert len(harness.emulator.called("conversations.replies")) == 3  # 50 + 50 + 20
        seen = re.findall(r"question number \d+", conversation(api.requests[0]))
        assert seen[-1] == "question number 59", seen
        turns = await harness.store.recent(f"slack/T1/C1/{root}", 100)
        # The latest 49 messages (from answer 35 on): no answer is paired with the thread's
        # first question across the messages left out.
        assert [t.question for t in turns[:2]] == ["question number 36", "question number 37"]
        assert turns[0].answer == "answer number 36"
    finally:
        await stop()


async def test_reading_a_long_thread_stops_after_its_pages(slack_factory) -> None:
    harness, stop = await slack_factory()
    try:
        harness.emulator.replies_page_cap = 15  # apps outside the Marketplace, since 2025
        harness.emulator.replies = [m for n in range(60) for m in exchange(n)]
        root = harness.emulator.replies[0]["ts"]
        await harness.state.remember_thread(f"slack/T1/C1/{root}")
        await harness.event(message_event("1700000200.000000", "and the last one?", root), "E1")
        await harness.until(lambda: len(harness.emulator.called("chat.update")) == 1)
        pages = harness.settings.slack.history_pages
        assert len(harness.emulator.called("conversations.replies")) == pages
    finally:
        await stop()


async def test_a_pasted_log_in_the_thread_does_not_crowd_out_its_history(slack_factory) -> None:
    api, model = claude()
    harness, stop = await slack_factory(model)
    try:
        root = "1700000000.900000"
        await harness.state.remember_thread(f"slack/T1/C1/{root}")
        log = "ERROR ingest failed: checksum mismatch in chunk 4711\n" * 400  # ~21,000 chars
        said = {"user": BOT_USER, "bot_id": "BBOT"}
        harness.emulator.replies = [
            {"user": "U2", "text": f"<@{BOT_USER}> what is prune?", "ts": root},
            {**said, "text": "Prune deletes removed files.", "ts": "1700000000.900100"},
            {"user": "U2", "text": "here is my log:\n" + log, "ts": "1700000000.900200"},
            {**said, "text": "The checksum mismatch means it changed.", "ts": "1700000000.900300"},
        ]
        await harness.event(message_event("1700000000.900400", "do I re-run it?", root), "E1")
        await harness.until(lambda: len(harness.emulator.called("chat.update")) == 1)
        history = conversation(api.requests[0])
        assert "what is prune?" in history
        assert "checksum mismatch means it changed" in history
        limit = harness.settings.slack.history_message_chars
        [pasted] = [
            t
            for t in await harness.store.recent(f"slack/T1/C1/{root}", 10)
            if t.question.startswith("here")
        ]
        assert len(pasted.question) == limit
        assert pasted.question.endswith("…")
    finally:
        await stop()


async def test_a_mention_in_someone_elses_thread_reads_the_discussion(slack_factory) -> None:
    api, model = claude()
    harness, stop = await slack_factory(model)
    try:
        root = "1700000000.100000"
        harness.emulator.replies = [
            {"user": "U3", "text": "Our nightly ingest re-embeds every file", "ts": root},
            {"user": "U4", "text": "Same here since the upgrade", "ts": "1700000000.100100"},
            {"user": "U2", "text": f"<@{BOT_USER}> is this expected?", "ts": "1700000000.100200"},
        ]
        await harness.event(mention("1700000000.100200", "is this expected?", root), "E1")
        await harness.until(lambda: len(harness.emulator.called("chat.update")) == 1)
        assert len(harness.emulator.called("conversations.replies")) == 1
        history = conversation(api.requests[0])
        assert "U3: Our nightly ingest re-embeds every file" in history
        assert "U4: Same here since the upgrade" in history
        turns = await harness.store.recent(f"slack/T1/C1/{root}", 10)
        assert [t.question for t in turns][-1] == "is this expected?"
        # From now on it is the bot's thread: a follow-up is answered from the store.
        await harness.event(message_event("1700000000.100300", "and how do I stop it?", root), "E2")
        await harness.until(lambda: len(harness.emulator.called("chat.update")) == 2)
        assert len(harness.emulator.called("conversations.replies")) == 1
    finally:
        await stop()


async def test_the_discussion_read_is_bounded_and_keeps_the_first_message(slack_factory) -> None:
    harness, stop = await slack_factory(BOT_SLACK__THREAD_CONTEXT_CHARS="1000")
    try:
        root = "1700000000.150000"
        chatter = [
            {"user": "U4", "text": f"message {n:02d} " + "x" * 100, "ts": f"1700000001.{n:06d}"}
            for n in range(30)
        ]
        harness.emulator.replies = [
            {"user": "U3", "text": "Why does ingest re-embed everything?", "ts": root},
            *chatter,
        ]
        await harness.event(mention("1700000002.000000", "any idea?", root), "E1")
        await harness.until(lambda: len(harness.emulator.called("chat.update")) == 1)
        [context, _] = await harness.store.recent(f"slack/T1/C1/{root}", 10)
        lines = context.question.splitlines()
        assert lines[1] == "U3: Why does ingest re-embed everything?"
        assert lines[2] == "…"
        assert lines[-1].startswith("U4: message 29")
        assert sum(len(line) for line in lines[1:] if line != "…") <= 1000
    finally:
        await stop()


async def test_a_bare_mention_in_a_thread_asks_the_threads_question(slack) -> None:
    root = "1700000000.110000"
    slack.emulator.replies = [
        {"user": "U3", "text": "How do I re-ingest changed documents?", "ts": root},
        {"user": "U4", "text": "no idea, let's ask", "ts": "1700000000.110050"},
    ]
    await slack.event(mention("1700000000.110100", "", root), "E1")
    await slack.until(lambda: len(slack.emulator.called("chat.update")) == 1)
    assert "message was empty" not in posted(slack)[-1]
    turns = await slack.store.recent(f"slack/T1/C1/{root}", 10)
    assert turns[-1].question == "How do I re-ingest changed documents?"
    assert "U4: no idea, let's ask" in turns[0].question


async def test_a_bare_mention_outside_a_thread_still_asks_for_a_question(slack) -> None:
    await slack.event(mention("1700000000.111000", ""), "E1")
    await slack.until(lambda: len(slack.emulator.called("chat.update")) == 1)
    assert "message was empty" in posted(slack)[-1]
    assert not slack.emulator.called("conversations.replies")


async def test_the_question_reaction_on_a_thread_reply_is_answered_in_that_thread(slack) -> None:
    root, reply = "1700000000.700000", "1700000000.700100"
    first = {"type": "message", "user": "U2", "text": "debugging ingest", "ts": root}
    slack.emulator.history = [{**first, "thread_ts": root, "reply_count": 1}]  # parents only
    asked = {"type": "message", "user": "U2", "ts": reply, "thread_ts": root}
    slack.emulator.replies = [first, {**asked, "text": "How do I re-ingest changed documents?"}]
    await slack.event(reaction_added(reply), "E1")
    await slack.until(lambda: len(slack.emulator.called("chat.update")) == 1)
    assert slack.emulator.called("chat.postMessage")[0]["thread_ts"] == root
    turns = await slack.store.recent(f"slack/T1/C1/{root}", 10)
    assert turns[-1].question == "How do I re-ingest changed documents?"


async def test_two_follow_ups_fill_a_lost_history_once(slack_factory) -> None:
    """Two follow-ups close together in a thread whose turns were lost: the second waits for
    the first's turn (from before the thread is read back), so the history is read and
    stored once, not once per follow-up, and the turns follow the thread's order."""

    def answered(text: str) -> dict[str, Any]:
        return message(tool_use(RESPOND_TOOL, answer=text, citations=[], status="answered"))

    search = message(tool_use(SEARCH_TOOL, query="ingest"))
    api = FakeMessagesAPI([search, answered("First."), search, answered("Second.")])
    model = ClaudeModel(api.client(), model="claude-test", max_tokens=1024)
    harness, stop = await slack_factory(model)
    try:
        harness.emulator.replies = [m for n in range(3) for m in exchange(n)]
        root = harness.emulator.replies[0]["ts"]
        key = f"slack/T1/C1/{root}"
        await harness.state.remember_thread(key)
        await harness.event(message_event("1700000200.000000", "and the next one?", root), "E1")
        await harness.event(message_event("1700000200.000100", "and the last one?", root), "E2")
        await harness.until(lambda: len(harness.emulator.called("chat.update")) == 2)
        turns = await harness.store.recent(key, 100)
        assert [t.question for t in turns] == [
            "question number 0",
            "question number 1",
            "question number 2",
            "and the next one?",
            "and the last one?",
        ]
        assert len(harness.emulator.called("conversations.replies")) == 1
    finally:
        await stop()
