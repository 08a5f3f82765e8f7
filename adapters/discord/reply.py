"""Replying to a Discord command that may outlive its interaction token.

A deferred command's reply goes through the interaction's webhook, authorised by a token that
Discord honours for 15 minutes only. An answer can take longer (a local model's timeout times
the agent loop's rounds is about 25 minutes), and then every follow-up is refused: 401 with
code 50027 (invalid webhook token), or 404 with 10015 (unknown webhook). The asker would see
"The application did not respond" though the answer was computed. So past
`discord.interaction_reply_s` after the command arrived, or on either refusal, the reply goes
in the command's channel with the bot token instead, mentioning the asker (and only them: the
"thinking…" message they watch will never change, so a ping is how they learn the answer is
there). A private (ephemeral) reply has no such way: only the interaction can show a message
to one person, so it is given up, and logged.
"""

from __future__ import annotations

import time
from typing import Any

import discord
import structlog

from adapters.discord.components import NO_MENTIONS

log = structlog.get_logger(__name__)

APOLOGY = "Sorry, something went wrong while answering. Please try again in a moment."
RESTARTING = "The bot is restarting. Please ask again in a moment."
SHUTDOWN_APOLOGY = (
    "Sorry, the bot was restarted before this answer was finished. Please ask again in a moment."
)
LATE_REPLY = "{asker}, about your question:"  # before the answer, or the apology
# Discord's refusals of an interaction webhook whose token has expired or that is gone.
_TOKEN_EXPIRED = 50027  # 401 Invalid Webhook Token
_UNKNOWN_WEBHOOK = 10015  # 404 Unknown Webhook
_TOKEN_GONE = frozenset({_TOKEN_EXPIRED, _UNKNOWN_WEBHOOK})


class ReplyUndeliverable(Exception):
    """The token no longer works and the reply can't go elsewhere: it is private (only the
    interaction shows a message to one person), or the command came from no channel."""


class InteractionReply:
    """Where one command's messages go: its interaction's follow-ups while the token is good,
    then its channel with the bot token (the first message there mentions the asker). Made
    when the command arrives: the token's time is counted from then (by this process's
    monotonic clock, which a wrong system clock can't shift, unlike the interaction id's
    timestamp)."""

    def __init__(
        self, interaction: discord.Interaction[Any], token_s: float, *, private: bool = False
    ) -> None:
        """`token_s`: how long after now the interaction's token is still used
        (`discord.interaction_reply_s`); `private`: ephemeral messages."""
        self._interaction = interaction
        self._token_until = time.monotonic() + token_s
        self._private = private
        self._asker_told = False
        self.late = False  # the token was given up: the reply is in the channel

    async def send(self, content: str | None = None, **kwargs: Any) -> discord.Message:
        """One message of the reply (`content` and whatever `Webhook.send` and
        `Messageable.send` both take: embed, view, allowed_mentions), by the token while it
        works, else by the bot in the channel (`ReplyUndeliverable` when it can't go there)."""
        allowed: discord.AllowedMentions = kwargs.pop("allowed_mentions", NO_MENTIONS)
        if content is not None:
            kwargs["content"] = content
        if not self.late and time.monotonic() < self._token_until:
            try:
                return await self._interaction.followup.send(
                    wait=True, ephemeral=self._private, allowed_mentions=allowed, **kwargs
                )
            except discord.HTTPException as exc:
                if exc.code not in _TOKEN_GONE:
                    raise
                log.warning(
                    "interaction_token_refused",
                    platform="discord",
                    status=exc.status,
                    code=exc.code,
                )
        if not self.late:
            log.info("replying_with_bot_token", platform="discord", private=self._private)
            self.late = True
        channel = self._interaction.channel
        if self._private or not isinstance(channel, discord.abc.Messageable):
            raise ReplyUndeliverable
        if not self._asker_told:
            asker = self._interaction.user
            kwargs["content"] = "\n".join(
                part for part in (LATE_REPLY.format(asker=asker.mention), content) if part
            )
            allowed = allowed.merge(discord.AllowedMentions(users=[asker]))
        sent = await channel.send(allowed_mentions=allowed, **kwargs)
        self._asker_told = True
        return sent

    async def apologise(self, text: str = APOLOGY) -> None:
        """The apology, the same way as the reply; if it can't be sent either, that is logged
        and the command ends: nothing is left to tell the asker with."""
        try:
            await self.send(text)
        except Exception:
            log.warning("apology_not_sent", platform="discord", exc_info=True)
