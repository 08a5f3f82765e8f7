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
from core.domain.conversation import Turn, discussion_turn
from core.domain.text import head

log = structlog.get_logger(__name__)

Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Thread:
    """What was read of a thread, oldest first: its first message and the latest ones, with
    `left_out` messages between them dropped (0: the two parts follow each other)."""

    first: Message | None
    latest: tuple[Message, ...]
    left_out: int
    # The reading stopped before the thread's end (its page limit, or Slack refusing a page):
    # `latest` is then the last read, not the thread's newest.
    cut_short: bool = False

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
            return Thread(first, tuple(latest), kept - len(latest), cut_short=page > 0)
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
        return Thread(first, tuple(latest), kept - len(latest), cut_short=True)
    return Thread(first, tuple(latest), kept - len(latest))


def answered_turns(
    thread: Thread, bot_user: str | None, max_chars: int, placeholder: str
) -> list[Turn]:
    """The bot's earlier turns in a thread: each answer of the bot with the person's message
    before it (never across the messages left out); every text cut to `max_chars`. A
    `placeholder` still standing is an answer being written, not one."""
    messages = thread.messages
    parts = [messages[:1], messages[1:]] if thread.left_out else [messages]
    turns: list[Turn] = []
    for part in parts:
        question: str | None = None
        for message in part:
            text = str(message.get("text") or "")
            if message.get("user") == bot_user:
                if question is not None and text and text != placeholder:
                    turns.append(Turn(head(question, max_chars), head(text, max_chars)))
                    question = None
            elif not message.get("bot_id"):
                question = without_mention(text, bot_user)
    return turns


def asked_in(thread: Thread, bot_user: str | None) -> Message | None:
    """What a bare mention in a thread asks about: the thread's first message, which is what
    people reply under, or when it has no words (a file alone) or is not a person's, the
    latest person's message with words before the mention."""
    said = [m for m in thread.messages if _by_a_person(m, bot_user) and _words(m, bot_user)]
    if said and said[0] is thread.first:
        return said[0]
    return said[-1] if said else None


def discussion(
    thread: Thread,
    bot_user: str | None,
    *,
    leave_out: object,
    message_chars: int,
    max_chars: int,
) -> Turn | None:
    """What people said in a thread the bot was not part of, as one turn of the conversation
    (the engine takes the history as turns): the first message and the latest that fit in
    `max_chars`, each cut to `message_chars`, with the message `leave_out` (the one asked
    about) left out. The turn's answer says what the bot did with it, nothing more. None
    when nobody said anything."""
    lines = [
        f"{m.get('user')}: {head(_words(m, bot_user), message_chars)}"
        for m in thread.messages
        if _by_a_person(m, bot_user) and _words(m, bot_user) and m.get("ts") != leave_out
    ]
    if not lines:
        return None
    first, *rest = lines
    return discussion_turn(
        first, rest, max_chars=max_chars, left_out=bool(thread.left_out), cut_short=thread.cut_short
    )


def without_mention(text: str, bot_user: str | None) -> str:
    """The text without the bot's own mentions (`<@UBOT>` or `<@UBOT|name>`)."""
    if bot_user:
        text = re.sub(rf"<@{re.escape(bot_user)}(?:\|[^>]*)?>", "", text)
    return text.strip()


def _by_a_person(message: Message, bot_user: str | None) -> bool:
    return (
        bool(message.get("user")) and message.get("user") != bot_user and not message.get("bot_id")
    )


def _words(message: Message, bot_user: str | None) -> str:
    return without_mention(str(message.get("text") or ""), bot_user)


def _timestamp(ts: object) -> float:
    try:
        return float(str(ts))
    except ValueError:
        return float("inf")  # unknown: treat as newer, so it is never taken as history
