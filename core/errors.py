"""The one base of every error whose message is written for the person running the bot.

A command catches `BotError` and prints its message as one line (the traceback only with `-v`):
the message already says what went wrong and what to do, so a traceback would only bury it.
Anything else reaching the command line is a bug and is reported as one, still on one line.
"""

from __future__ import annotations

import errno
import os


class BotError(Exception):
    """A failure the user can act on; the message names the setting, file or service at fault."""


class ConfigError(BotError, ValueError):
    """A setting is missing, malformed or out of range; the message names the key."""


class SearchIndexError(BotError, RuntimeError):
    """The index can't be opened or used as asked; the message says why and what to do."""

    # What failed, when the backend knows it: the row of `bot doctor` that shows this failure
    # ("connection", "version", "index template", "state indices"...), so a refused mapping is
    # not reported as a failed connection.
    check: str | None = None


class IndexUnavailable(SearchIndexError):
    """The index's server can't be reached: not this document's fault, so a batch job stops."""


class EmbedderError(BotError, RuntimeError):
    """The embedding model can't be loaded or run; the message says what to do."""


class DatasetError(BotError, ValueError):
    """The folder is not a readable BEIR dataset; the message says which file and why."""


class RunLockHeld(BotError):
    """Someone else holds the run lock; the message says who, since when, and what to do."""


class MissingSecret(BotError, RuntimeError):
    """A process was started without a credential it needs; the message names the variable."""


class ModelUnavailable(BotError, RuntimeError):
    """The model can't be used right now (after the client's retries): fall back, don't fail."""


class NoResponse(BotError, RuntimeError):
    """The model was reachable but did not produce a valid answer, even when asked again."""


class ToolsUnsupported(BotError, RuntimeError):
    """The model ignored a forced tool call: it can't do tool use, so search for it."""


class ToolInputError(BotError, ValueError):
    """A tool call's input is invalid; the message is written for the model to fix its call."""


class WebSearchError(BotError, RuntimeError):
    """The web search failed; the message is shown to the model, which answers without it."""


class InvalidKeyword(BotError, ValueError):
    """The message says what to change, so a model can correct its call."""


class UnreadableDocument(BotError, ValueError):
    """The content can't be parsed into text; the message is the per-file skip reason."""


class UnreachableDocument(UnreadableDocument):
    """The document could not be had this time (a timeout, a refused connection, HTTP 429 or
    5xx): it may well still exist, so a sync keeps the copy it has rather than prune it."""


class SourceUnavailable(BotError, RuntimeError):
    """A source could not be read as a whole (a clone or fetch failed, an API refused): the
    sync fails with this one line and the index keeps what it had."""


class RemoteFailure(BotError):
    """The service did not give a usable answer in any attempt; `str()` completes a sentence
    such as "the model server ..."."""


def cannot_listen(
    host: str, port: int, exc: OSError, *, port_setting: str, host_setting: str
) -> ConfigError:
    """A failed bind as one line naming the setting to change, worded the same for every
    server the bot runs (Slack's HTTP endpoint, the metrics port): the port taken (another
    process, or a second copy of the bot), or a port or host this machine can't listen on."""
    if exc.errno == errno.EADDRINUSE:
        return ConfigError(
            f"port {port} is in use on {host}: stop what listens there, or choose another "
            f"port ({port_setting})"
        )
    # The system's words for a failed bind, without asyncio's wrapping that repeats the
    # address; a host name that does not resolve has no such errno (a negative EAI code).
    reason = os.strerror(exc.errno) if exc.errno and exc.errno > 0 else exc.strerror
    reason = reason or type(exc).__name__
    return ConfigError(
        f"cannot listen on {host}:{port} ({reason}): check {port_setting} and {host_setting}"
    )
