"""Posting a re-checked answer in its Slack thread (`core.insights.stale.Notifier`): never
where the channel answers privately, nor where the bot is switched off."""

from __future__ import annotations

from collections.abc import Callable

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.payloads import is_direct_message
from adapters.slack.progress import slack_error
from adapters.slack.render import answer_messages, context_block
from core.config import ResolvedPolicy, SlackSettings
from core.domain.conversation import Answer
from core.domain.insights import LoggedAnswer
from core.insights.stale import Reach, UpdateFailed

_KEY_PARTS = 4  # slack/TEAM/CHANNEL/THREAD_TS (or "direct")
# chat.postMessage's errors that a later try may get past: Slack's own trouble and its rate
# limit. Every other refusal (the channel gone or archived, the bot removed, a message Slack
# will never take) is for good: retrying it would re-ask the model at every run for nothing.
_FOR_NOW = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
_SERVER_ERROR = 500  # an HTTP status from here on is Slack's (or a proxy's) trouble, not ours


class SlackNotifier:
    def __init__(
        self,
        client: AsyncWebClient,
        settings: SlackSettings,
        policies: Callable[[str], ResolvedPolicy],
    ) -> None:
        self._client = client
        self._settings = settings
        self._policies = policies

    def reach(self, entry: LoggedAnswer) -> Reach:
        """Never where the channel answers privately (the thread belongs to the asker's
        message, and the answer was theirs alone), nor in a channel whose trigger is off (a
        direct message is answered whatever the trigger, so it is updated too)."""
        return self._reach(entry.conversation_key)

    def _reach(self, conversation_key: str) -> Reach:
        parts = conversation_key.split("/")
        if len(parts) != _KEY_PARTS or parts[0] != "slack":
            return Reach.NOWHERE
        _, team, channel, _ = parts
        policy = self._policies(f"slack/{team}/{channel}")
        if policy.private:
            return Reach.NOWHERE
        if policy.trigger == "off" and not is_direct_message(channel):
            return Reach.SILENCED
        return Reach.THREAD

    async def post_update(self, conversation_key: str, preface: str, answer: Answer) -> bool:
        """In the answer's thread, as a new message (no feedback buttons: the update is not a
        logged answer of its own); False wherever `reach` finds no place for it."""
        if self._reach(conversation_key) is not Reach.THREAD:
            return False
        _, _, channel, thread = conversation_key.split("/")
        s = self._settings
        messages = answer_messages(
            answer,
            None,
            section_chars=s.section_chars,
            message_chars=s.message_chars,
            max_blocks=s.max_blocks - 1,
            max_sources=s.max_sources,
        )
        messages[0].blocks.insert(0, context_block(preface))
        thread_ts = None if thread == "direct" else thread
        for n, message in enumerate(messages):
            try:
                await self._client.chat_postMessage(
                    channel=channel,
                    thread_ts=thread_ts,
                    text=f"{preface}\n\n{message.text}" if n == 0 else message.text,
                    blocks=message.blocks,
                    unfurl_links=False,
                    unfurl_media=False,
                )
            except (SlackClientError, aiohttp.ClientError, OSError) as exc:
                raise _failed(exc, posted=n, of=len(messages)) from None
        return True


def _failed(exc: Exception, *, posted: int, of: int) -> UpdateFailed:
    """Slack's error code (or the exception's type: a network failure), and whether a retry
    can help: only for a network failure, Slack's own trouble or its rate limit, and never
    once part of the update is in the thread."""
    if isinstance(exc, SlackApiError):
        reason = slack_error(exc)
        status = exc.response.status_code
        for_now = reason in _FOR_NOW or (isinstance(status, int) and status >= _SERVER_ERROR)
    else:
        reason, for_now = type(exc).__name__, True
    if posted:
        return UpdateFailed(f"{reason} after {posted} of {of} messages", permanent=True)
    return UpdateFailed(reason, permanent=not for_now)
