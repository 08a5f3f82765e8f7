"""Why the Discord bot could not start or keep its connection, said in one line.

discord.py raises its own and aiohttp's exceptions from `login` and `start`; each has a usual
cause with a usual fix (a wrong token, the Message Content intent not turned on, no route to
Discord), which is what the person starting the bot needs instead of a 277-line traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp
import discord

from core.errors import BotError


class DiscordStartError(BotError):
    """The Discord connection failed for a reason the person running the bot can fix."""


@contextmanager
def explained_connection_failures() -> Iterator[None]:
    try:
        yield
    except discord.LoginFailure:
        raise DiscordStartError(
            "DISCORD_TOKEN was refused by Discord: copy the bot token again from the Developer "
            "Portal (Bot > Reset Token) into DISCORD_TOKEN"
        ) from None
    except discord.PrivilegedIntentsRequired:
        raise DiscordStartError(
            "Discord refused the Message Content intent, which thread follow-ups need: turn it "
            "on in the Developer Portal (Bot > Privileged Gateway Intents)"
        ) from None
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        reason = str(exc) or type(exc).__name__
        raise DiscordStartError(
            f"can't reach Discord ({reason}): check the network, DNS and any proxy"
        ) from None
    except discord.HTTPException as exc:
        raise DiscordStartError(f"Discord answered HTTP {exc.status}: {exc.text}") from None
