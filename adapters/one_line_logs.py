"""Library log records cut to one short line: what an HTTP server library logs about a request
it could not handle (aiohttp's "Error handling request" for a header that is not HTTP) is the
sender's doing, and a traceback of the parser's frames per such request only buries the bot's
own lines (and its values may hold the request)."""

from __future__ import annotations

import logging

from aiohttp.http_exceptions import HttpProcessingError


class OneShortLine(logging.Filter):
    """A record reduced to one short line: the message's first line up to its first
    parenthesised detail (where Bolt puts request bodies), and the exception's type instead of
    a traceback; `detail` may add the part of a failure that helps (Slack's error code)."""

    def detail(self, failure: BaseException) -> str | None:  # noqa: ARG002 (a subclass's hook)
        return None

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage().split("\n", 1)[0].split(" (", 1)[0]
        if record.exc_info and record.exc_info[1] is not None:
            failure = record.exc_info[1]
            text = f"{text}: {type(failure).__name__}"
            if (extra := self.detail(failure)) is not None:
                text = f"{text} ({extra})"
            if isinstance(failure, HttpProcessingError) and record.levelno > logging.INFO:
                # A request that is not HTTP (a scanner, a bad Content-Length) was answered 400:
                # the sender's mistake, not the bot's error; every scan would page someone.
                record.levelno, record.levelname = logging.INFO, logging.getLevelName(logging.INFO)
        record.msg, record.args, record.exc_info, record.exc_text = text, None, None, None
        return True


def one_line_logger(name: str, kind: type[OneShortLine] = OneShortLine) -> logging.Logger:
    """The library logger `name`, its records one short line each (a `kind` filter, added
    once). Bolt copies the filters of the logger it is given to every logger it creates."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, kind) for f in logger.filters):
        logger.addFilter(kind())
    return logger
