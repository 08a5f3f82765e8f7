"""Ten long sources under an answer, posted by the real slack_sdk client to the emulator,
which refuses a text object over Slack's limit as Slack does (invalid_blocks)."""

from __future__ import annotations

from adapters.slack.notify import SlackNotifier
from tests.fakes.slack_api import TEXT_OBJECT_CHARS, text_objects
from tests.unit.adapters.test_slack_render import long_sources_answer


async def test_ten_long_sources_are_accepted_by_slack(slack_factory) -> None:
    harness, stop = await slack_factory(None)
    try:
        settings = harness.settings
        notifier = SlackNotifier(harness.service.bolt.client, settings.slack, settings.policy)
        answer = long_sources_answer()
        assert await notifier.post_update("slack/T1/C1/1700000000.000100", "Updated.", answer)
        [posted] = harness.emulator.called("chat.postMessage")
        texts = [t["text"] for t in text_objects(posted["blocks"])]
        assert all(len(t) <= TEXT_OBJECT_CHARS for t in texts)
        listed = " ".join(texts)
        assert all(f"|[{c.number}] " in listed for c in answer.citations)
    finally:
        await stop()
