"""A Slack thread read back from Slack: for a thread whose turns our store lost (or never kept).

`conversations.replies` returns a thread oldest first, a page at a time, so the messages that
matter most (what is being discussed now) come last. The reading keeps the thread's first
message (what it is about) and its latest ones, within `slack.history_messages`, paging with
the cursor for at most `slack.history_pages` calls. Slack's rate limits (about one call a
minute for apps outside the Marketplace) end the reading early: what was read is used, and an
answer never waits for it.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from typing import Any

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.progress import slack_error
from core.domain.conversation import Turn

log = structlog.get_logger(__name__)

Message = dict[str, Any]
ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class Thread:
    """What was read of a thread, oldest first: its first message and the latest ones, with
    `left_out` messages between them dropped (0: the two parts follow each other)."""

    first: Message | None
    latest: tuple[Message, ...]
    left_out: int

    @property
    def messages(self) -> list[Message]:
        return [self.first, *self.latest] if self.first is not None else []


async def read_thread(
    client: AsyncWebClient,
    channel: str,
    thread_ts: str,
    *,
    before_ts: str,
    max_messages: int,
    max_pages: int,
) -> Thread:
    """The thread's messages older than `before_ts` (the one being answered, and our own
    placeholder after it, are not history): its first message, then the latest, at most
    `max_messages` in all. Nothing when Slack refuses the first page."""
    first: Message | None = None
    latest: deque[Message] = deque(maxlen=max_messages - 1)
    seen: set[str] = set()
    kept = 0  # messages the thread had after its first, before the cut: `latest` holds the last
    cursor: str | None = None
    for page in range(max_pages):
        try:
            response = await client.conversations_replies(
                channel=channel, ts=thread_ts, limit=max_messages, cursor=cursor
            )
        except SlackApiError as exc:
            event = "slack_history_unavailable" if page == 0 else "slack_history_cut_short"
            log.info(event, error=slack_error(exc), pages_read=page)
            break
        for message in response.get("messages") or []:
            ts = str(message.get("ts"))
            if _timestamp(ts) >= _timestamp(before_ts):
                return Thread(first, tuple(latest), kept - len(latest))
            if ts in seen:  # a page may repeat the thread's first message
                continue
            seen.add(ts)
            if first is None:
                first = message
            else:
                latest.append(message)
                kept += 1
        cursor = (response.get("response_metadata") or {}).get("next_cursor") or None
        if cursor is None:
            break
    else:
        log.info("slack_history_cut_short", pages_read=max_pages)
    return Thread(first, tuple(latest), kept - len(latest))


def answered_turns(thread: Thread, bot_user: str | None, max_chars: int) -> list[Turn]:
    """The bot's earlier turns in a thread: each answer of the bot with the person's message
    before it (never across the messages left out); every text cut to `max_chars`."""
    messages = thread.messages
    parts = [messages[:1], messages[1:]] if thread.left_out else [messages]
    turns: list[Turn] = []
    for part in parts:
        question: str | None = None
        for message in part:
            text = str(message.get("text") or "")
            if message.get("user") == bot_user:
                if question is not None and text:
                    turns.append(Turn(clipped(question, max_chars), clipped(text, max_chars)))
                    question = None
            elif not message.get("bot_id"):
                question = without_mention(text, bot_user)
    return turns


def clipped(text: str, max_chars: int) -> str:
    """`text`, cut to `max_chars` with an ellipsis where it was cut."""
    if len(text) <= max_chars:
        return text
    return text[: max_chars - len(ELLIPSIS)].rstrip() + ELLIPSIS


def without_mention(text: str, bot_user: str | None) -> str:
    """The text without the bot's own mentions (`<@UBOT>` or `<@UBOT|name>`)."""
    if bot_user:
        text = re.sub(rf"<@{re.escape(bot_user)}(?:\|[^>]*)?>", "", text)
    return text.strip()


def _timestamp(ts: object) -> float:
    try:
        return float(str(ts))
    except ValueError:
        return float("inf")  # unknown: treat as newer, so it is never taken as history
