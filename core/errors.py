"""The one base of every error whose message is written for the person running the bot.

A command catches `BotError` and prints its message as one line (the traceback only with `-v`):
the message already says what went wrong and what to do, so a traceback would only bury it.
Anything else reaching the command line is a bug and is reported as one, still on one line.
"""

from __future__ import annotations


class BotError(Exception):
    """A failure the user can act on; the message names the setting, file or service at fault."""
