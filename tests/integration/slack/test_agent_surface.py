"""Slack's agent surface (`manifest.agent.yml`), through the real Bolt app against the Slack
emulator: suggested prompts when the Messages tab opens, a status and a title in a direct-message
thread, and the channel the person is looking at deciding the policy of their questions."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.slack.payloads import viewed_channel
from tests.integration.slack.conftest import SlackHarness

QUESTION = "How do I re-ingest changed documents?"
ROOT = "1700000500.000100"


def dm(ts: str, text: str, thread_ts: str | None = ROOT) -> dict[str, Any]:
    event = {
        "type": "message",
        "channel_type": "im",
        "channel": "D1",
        "user": "U2",
        "text": text,
        "ts": ts,
        "event_ts": ts,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


async def test_the_messages_tab_offers_the_suggested_prompts(slack: SlackHarness) -> None:
    event = {"type": "app_home_opened", "user": "U2", "channel": "D1", "tab": "messages"}
    await slack.event(event, "EvHome")
    await slack.until(lambda: bool(slack.emulator.called("assistant.threads.setSuggestedPrompts")))
    [call] = slack.emulator.called("assistant.threads.setSuggestedPrompts")
    prompts = json.loads(call["prompts"]) if isinstance(call["prompts"], str) else call["prompts"]
    assert [p["title"] for p in prompts] == slack.settings.slack.suggested_prompts
    await slack.event({**event, "tab": "home"}, "EvHome2")  # the Home tab: nothing
    await slack.settle()
    assert len(slack.emulator.called("assistant.threads.setSuggestedPrompts")) == 1


async def test_a_direct_thread_shows_a_status_and_is_titled_once(slack: SlackHarness) -> None:
    await slack.event(dm("1700000500.000200", QUESTION), "EvDm1")
    await slack.until(lambda: bool(slack.emulator.called("chat.update")))
    [status] = slack.emulator.called("assistant.threads.setStatus")
    assert (status["channel_id"], status["thread_ts"]) == ("D1", ROOT)
    assert status["status"] == slack.settings.slack.agent_status
    [title] = slack.emulator.called("assistant.threads.setTitle")
    assert title["title"] == QUESTION
    await slack.event(dm("1700000500.000300", "and with --prune?"), "EvDm2")
    await slack.until(lambda: len(slack.emulator.called("chat.update")) == 2)
    assert len(slack.emulator.called("assistant.threads.setStatus")) == 2
    assert len(slack.emulator.called("assistant.threads.setTitle")) == 1  # titled once


async def test_the_viewed_channel_decides_the_policy_of_direct_questions(slack_factory) -> None:
    policies = {"slack/T1/C9": {"sources": ["handbook"]}}
    harness, stop = await slack_factory(None, BOT_CHANNELS__POLICIES=json.dumps(policies))
    try:
        changed = {  # as Slack's event reference shows it, with the user the SDK types name
            "type": "app_context_changed",
            "user": "U2",
            "context": {
                "entities": [{"type": "slack#/types/channel_id", "value": "C9", "team_id": "T1"}]
            },
        }
        await harness.event(changed, "EvCtx")
        await harness.settle(0.2)
        await harness.event(dm("1700000600.000200", QUESTION, thread_ts=None), "EvDm")
        await harness.until(lambda: bool(harness.emulator.called("chat.update")))
        final = harness.emulator.called("chat.update")[-1]
        assert "couldn't find anything" in final["text"]  # only the handbook, which has none
        # Logged under that channel, so a re-check of it asks under the same policy.
        [logged] = await harness.state.answer_log(0)
        assert logged.channel == "slack/T1/C9"
        assert logged.conversation_key.startswith("slack/T1/D1/")
    finally:
        await stop()


@pytest.mark.parametrize(
    ("context", "viewed"),
    [
        (
            {"entities": [{"type": "slack#/types/channel_id", "value": "C9", "team_id": "T2"}]},
            ("C9", "T2"),
        ),
        (
            {
                "entities": [
                    {"type": "slack#/types/canvas_id", "value": "F1"},
                    {
                        "type": "slack#/types/message_context",
                        "value": {"channel_id": "C7", "message_ts": "1.2"},
                    },
                ]
            },
            ("C7", ""),
        ),
        ({"channel_id": "C5", "team_id": "T1"}, ("C5", "T1")),  # the older assistant events'
        ({"entities": [{"type": "slack#/types/list_id", "value": "L1"}]}, None),
        ({}, None),
        ({"entities": [None, 5, {"type": "slack#/types/channel_id", "value": 7}]}, None),
        ("not an object", None),
    ],
)
def test_the_viewed_channel_is_read_from_the_context_slack_sends(
    context: object, viewed: tuple[str, str] | None
) -> None:
    """The listener read `context.channel_id`, which Slack's `app_context_changed` does not
    carry (its `entities` name what is in view): a DM never followed the viewed channel."""
    assert viewed_channel(context) == viewed
