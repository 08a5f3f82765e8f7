"""A Discord thread the bot was not part of, read back as the discussion so far.

Asked about a message in someone's thread (the message menu, the ❓ reaction), the bot would
otherwise answer it alone, without what "is this expected?" refers to. Slack's adapter reads
the thread the same way (`adapters.slack.threads`); both hand the core one turn
(`discussion_turn`). Discord pages a channel newest first, so one call gives the latest
messages; the thread's first one (what it is about) is the message it was opened from, whose
id is the thread's: in the thread for a forum post, in the parent channel otherwise.
"""

from __future__ import annotations

import contextlib

import discord

from core.config import DiscordSettings
from core.domain.conversation import Turn, discussion_turn
from core.domain.text import head


async def thread_discussion(
    thread: discord.Thread, asked: discord.Message, bot_id: int | None, settings: DiscordSettings
) -> Turn | None:
    """What people said in `thread` before `asked` (left out: it is the question), the first
    message and the latest that fit `settings.thread_context_chars`; None when nobody said
    anything or Discord refuses the reading."""
    try:
        latest = [m async for m in thread.history(limit=settings.history_messages, before=asked)]
    except discord.HTTPException:
        return None
    latest.reverse()  # oldest first
    first = await _opening(thread)
    if first is not None and latest and latest[0].id == first.id:
        latest = latest[1:]
    # A full page may have stopped short of the thread's start.
    left_out = first is not None and len(latest) >= settings.history_messages
    lines = [
        _line(m, bot_id, settings.history_message_chars)
        for m in ([first] if first is not None else []) + latest
        if m.id != asked.id and _said(m, bot_id)
    ]
    if not lines:
        return None
    first_line, *rest = lines
    return discussion_turn(
        first_line,
        rest,
        max_chars=settings.thread_context_chars,
        left_out=left_out,
        cut_short=False,
    )


async def _opening(thread: discord.Thread) -> discord.Message | None:
    """The message the thread was opened from (it has the thread's id), where Discord keeps
    it: a forum post's in the thread, a message thread's in its parent channel."""
    places: list[discord.abc.Messageable] = [thread]
    if isinstance(thread.parent, discord.TextChannel):
        places.insert(0, thread.parent)
    for place in places:
        with contextlib.suppress(discord.HTTPException):
            return await place.fetch_message(thread.id)
    return None


def _said(message: discord.Message, bot_id: int | None) -> bool:
    """A person's message with words (not a bot's, not the bot's own, not a system note)."""
    return not message.author.bot and message.author.id != bot_id and bool(_words(message, bot_id))


def _line(message: discord.Message, bot_id: int | None, chars: int) -> str:
    return f"{message.author.id}: {head(_words(message, bot_id), chars)}"


def _words(message: discord.Message, bot_id: int | None) -> str:
    text = message.content
    if bot_id is not None:
        text = text.replace(f"<@{bot_id}>", "").replace(f"<@!{bot_id}>", "")
    return text.strip()
