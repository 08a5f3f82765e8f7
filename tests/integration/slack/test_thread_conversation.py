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
