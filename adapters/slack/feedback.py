"""The buttons under a Slack answer that are about the answer, not a new question: 👍/👎 (a 👎
opens "what was wrong?") and "Still need help?".

A click carries only what Slack signs (the answer id in the button's value, the person, the
channel), so each listener looks the answer up before it acts: a forged or stale id finds
nothing and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.answer_labels import NO_LONGER_KNOWN
from adapters.slack.payloads import id_of, team_of
from adapters.slack.progress import slack_error
from adapters.slack.render import FEEDBACK, FEEDBACK_UP, escalation_text, escape, reason_modal
from core.config import ResolvedPolicy
from core.domain.feedback import FEEDBACK_REASONS
from core.ports import PlatformState

log = structlog.get_logger(__name__)


class FeedbackListeners:
    """Bolt listeners for the feedback and escalation buttons (registered by `SlackBot`)."""

    def __init__(self, state: PlatformState, policies: Callable[[str], ResolvedPolicy]) -> None:
        self._state = state
        self._policies = policies

    async def on_feedback(
        self, ack: Any, body: dict[str, Any], action: dict[str, Any], client: AsyncWebClient
    ) -> None:
        await ack()
        user = id_of(body, "user")
        answer_id = str(action.get("value", ""))
        if action.get("action_id") == FEEDBACK:  # Slack's own buttons: "up:ID" or "down:ID"
            vote, _, answer_id = answer_id.partition(":")
            helpful = vote == "up"
        else:
            helpful = action.get("action_id") == FEEDBACK_UP
        stored = await self._state.record_feedback(answer_id, user, helpful)
        if stored and not helpful and body.get("trigger_id"):
            # A 👎 asks what was wrong (the form can be skipped; the vote stands).
            try:
                await client.views_open(trigger_id=body["trigger_id"], view=reason_modal(answer_id))
            except SlackApiError as exc:
                log.info("slack_reason_form_failed", error=slack_error(exc))
        channel = id_of(body, "channel")
        if channel and user:
            text = "Thanks for the feedback." if stored else NO_LONGER_KNOWN
            try:
                await client.chat_postEphemeral(channel=channel, user=user, text=escape(text))
            except SlackApiError as exc:
                log.info("slack_ephemeral_failed", error=slack_error(exc))

    async def on_feedback_reason(
        self, ack: Any, body: dict[str, Any], view: dict[str, Any]
    ) -> None:
        """The 👎 form sent: the reason and note kept with the answer."""
        values = view.get("state", {}).get("values", {})
        chosen = values.get("reason", {}).get("reason", {}).get("selected_option") or {}
        note = values.get("note", {}).get("note", {}).get("value") or ""
        reason = str(chosen.get("value", ""))
        if reason not in FEEDBACK_REASONS:  # Slack requires the choice; anything else is forged
            await ack(response_action="errors", errors={"reason": "Please pick one."})
            return
        await ack()
        user = id_of(body, "user")
        answer_id = str(view.get("private_metadata", ""))
        await self._state.record_feedback_reason(answer_id, user, reason, str(note))

    async def on_escalate(
        self, ack: Any, body: dict[str, Any], action: dict[str, Any], client: AsyncWebClient
    ) -> None:
        """ "Still need help?": the channel's escalation targets are mentioned in the thread,
        once per answer, whoever clicks and however often."""
        await ack()
        team = team_of(body)
        channel = id_of(body, "channel")
        container = body.get("container", {})
        message = body.get("message", {})
        thread_ts = container.get("thread_ts") or message.get("thread_ts") or message.get("ts")
        targets = self._policies(f"slack/{team}/{channel}").escalate_to
        answer_id = str(action.get("value", ""))
        if channel and targets and await self._state.recorded_answer(answer_id) is not None:
            await self.escalate(client, channel, thread_ts, targets, answer_id)

    async def escalate(
        self,
        client: AsyncWebClient,
        channel: str,
        thread_ts: str | None,
        targets: tuple[str, ...],
        answer_id: str,
    ) -> None:
        """The targets mentioned in the thread, unless this answer already called them (a
        click, or the channel's escalation of an answer the docs could not give)."""
        if not await self._state.first_delivery(f"slack-escalation:{answer_id}"):
            return
        try:
            await client.chat_postMessage(
                channel=channel, thread_ts=thread_ts, text=escalation_text(targets)
            )
        except SlackApiError as exc:
            log.warning("escalation_failed", platform="slack", error=slack_error(exc))
