"""Posting a re-checked answer in its Discord thread or DM (`core.insights.stale.Notifier`):
never for an ephemeral answer, nor in a thread of a channel that answers privately or where the
bot is switched off."""

from __future__ import annotations

from collections.abc import Callable

import aiohttp
import discord
from discord.http import HTTPClient, handle_message_parameters

from adapters.discord.render import answer_embeds, message_groups
from core.config import DiscordSettings, ResolvedPolicy
from core.domain.conversation import Answer
from core.domain.insights import LoggedAnswer
from core.insights.stale import Reach, UpdateFailed

# The conversation keys with a place to post in: a thread the bot opened, or a DM channel.
# Others (an ephemeral `/ask`) were the asker's alone: never posted to.
_POSTABLE = ("thread", "dm")
_KEY_PARTS = 3
# Refusals a later try may get past: the rate limit and Discord's own trouble. Every other
# (the channel gone or closed to the bot, the thread archived, a message Discord will never
# take) is for good: retrying it would re-ask the model at every run for nothing.
_RATE_LIMITED = 429
_SERVER_ERROR = 500


class DiscordNotifier:
    def __init__(
        self,
        http: HTTPClient,
        settings: DiscordSettings,
        policies: Callable[[str], ResolvedPolicy],
    ) -> None:
        """`http`: a logged-in client's REST half (`discord.Client.login`), no gateway."""
        self._http = http
        self._settings = settings
        self._policies = policies

    def reach(self, entry: LoggedAnswer) -> Reach:
        """A thread the bot opened, or a DM. A thread's key names only the thread, so its
        policy is the logged channel's (the one it hangs off), as for a follow-up there; a DM
        is answered whatever the channels' settings, so it is updated too."""
        place = _place(entry.conversation_key)
        if place is None:
            return Reach.NOWHERE
        kind, _ = place
        if kind == "dm":
            return Reach.THREAD
        policy = self._policies(entry.channel or entry.conversation_key)
        if policy.private:  # made private since: its answers are no longer for everyone
            return Reach.NOWHERE
        if policy.trigger == "off":
            return Reach.SILENCED
        return Reach.THREAD

    async def post_update(self, conversation_key: str, preface: str, answer: Answer) -> bool:
        """False for a key with no thread or DM to post in."""
        place = _place(conversation_key)
        if place is None:
            return False
        embeds = answer_embeds(
            answer,
            description_chars=self._settings.description_chars,
            max_sources=self._settings.max_sources,
        )
        groups = message_groups(embeds)
        for n, group in enumerate(groups):
            params = handle_message_parameters(
                content=preface if n == 0 else None,
                embeds=group,
                allowed_mentions=discord.AllowedMentions.none(),
            )
            with params:
                try:
                    await self._http.send_message(place[1], params=params)
                except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
                    raise _failed(exc, posted=n, of=len(groups)) from None
        return True


def _failed(exc: Exception, *, posted: int, of: int) -> UpdateFailed:
    """Discord's status and error code (or the exception's type: a network failure), and
    whether a retry can help: only for a network failure, the rate limit or Discord's own
    trouble, and never once part of the update is in the thread."""
    if isinstance(exc, discord.HTTPException):
        reason = f"HTTP {exc.status} (code {exc.code})"
        for_now = exc.status == _RATE_LIMITED or exc.status >= _SERVER_ERROR
    else:
        reason, for_now = type(exc).__name__, True
    if posted:
        return UpdateFailed(f"{reason} after {posted} of {of} messages", permanent=True)
    return UpdateFailed(reason, permanent=not for_now)


def _place(conversation_key: str) -> tuple[str, int] | None:
    """("thread" or "dm", the channel id to post in), or None for a key naming neither."""
    parts = conversation_key.split("/")
    if len(parts) != _KEY_PARTS or parts[0] != "discord" or parts[1] not in _POSTABLE:
        return None
    if not parts[2].isdigit():
        return None
    return parts[1], int(parts[2])
