"""Posting a re-checked answer in its Slack thread (`core.insights.stale.Notifier`)."""

from __future__ import annotations

from collections.abc import Callable

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.render import answer_messages, context_block
from core.config import ResolvedPolicy, SlackSettings
from core.domain.conversation import Answer

_KEY_PARTS = 4  # slack/TEAM/CHANNEL/THREAD_TS (or "direct")


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

    async def post_update(self, conversation_key: str, preface: str, answer: Answer) -> bool:
        """In the answer's thread, as a new message (no feedback buttons: the update is not a
        logged answer of its own). Never where the channel answers privately: the thread
        belongs to the asker's message, and the answer was theirs alone."""
        parts = conversation_key.split("/")
        if len(parts) != _KEY_PARTS or parts[0] != "slack":
            return False
        _, team, channel, thread = parts
        if self._policies(f"slack/{team}/{channel}").private:
            return False
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
        for message in messages:
            await self._client.chat_postMessage(
                channel=channel,
                thread_ts=thread_ts,
                text=f"{preface}\n\n{message.text}" if message is messages[0] else message.text,
                blocks=message.blocks,
                unfurl_links=False,
                unfurl_media=False,
            )
        return True
