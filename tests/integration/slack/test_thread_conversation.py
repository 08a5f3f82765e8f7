"""Conversations in Slack threads as people hold them: files without words, words meant for a
colleague, long threads, a mention in a thread the bot was not part of, a question asked with a
reaction on a reply."""

from __future__ import annotations

from tests.integration.slack.conftest import SlackHarness
from tests.integration.slack.test_slack_app import message_event


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
