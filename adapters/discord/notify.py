"""Posting a re-checked answer in its Discord thread or DM (`core.insights.stale.Notifier`)."""

from __future__ import annotations

import discord
from discord.http import HTTPClient, handle_message_parameters

from adapters.discord.render import answer_embeds, message_groups
from core.config import DiscordSettings
from core.domain.conversation import Answer

# The conversation keys with a place to post in: a thread the bot opened, or a DM channel.
# Others (an ephemeral `/ask`) were the asker's alone: never posted to.
_POSTABLE = ("thread", "dm")
_KEY_PARTS = 3


class DiscordNotifier:
    def __init__(self, http: HTTPClient, settings: DiscordSettings) -> None:
        """`http`: a logged-in client's REST half (`discord.Client.login`), no gateway."""
        self._http = http
        self._settings = settings

    async def post_update(self, conversation_key: str, preface: str, answer: Answer) -> bool:
        parts = conversation_key.split("/")
        if len(parts) != _KEY_PARTS or parts[0] != "discord" or parts[1] not in _POSTABLE:
            return False
        if not parts[2].isdigit():
            return False
        embeds = answer_embeds(
            answer,
            description_chars=self._settings.description_chars,
            max_sources=self._settings.max_sources,
        )
        for n, group in enumerate(message_groups(embeds)):
            params = handle_message_parameters(
                content=preface if n == 0 else None,
                embeds=group,
                allowed_mentions=discord.AllowedMentions.none(),
            )
            with params:
                await self._http.send_message(int(parts[2]), params=params)
        return True
