"""Structured logging for every process; message contents stay at DEBUG, never at INFO."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

from core import metrics
from core.config import LoggingSettings
from core.domain.urls import redact_urls_in

# Libraries that log every request at INFO: one line per search would drown the bot's own logs.
_CHATTY = ("elastic_transport.transport", "elasticsearch", "httpx", "httpx2")
# Libraries whose INFO lines are their own bookkeeping (discord.py's "logging in using static
# token", APScheduler's "Adding job tentatively" and a line per job run): only at DEBUG.
_NOISY = ("apscheduler", "discord")
# Libraries that warn about the damage in a file they read without naming the file (pypdf's
# "EOF marker not found"): the ingest report names it, and why it was skipped. Only at DEBUG.
_FILE_READERS = ("pypdf",)
# A second warning for every retry the transport already reports ("Node ... has failed for 1
# times in a row, putting on 1 second timeout"): only at DEBUG.
_RETRY_BOOKKEEPING = ("elastic_transport.node_pool",)
# The transport's "Retrying request after failure": a service's operator wants each one (a
# cluster flapping under the bot); a one-shot command ends in one error line when the retries
# fail, and three warnings above it only bury it.
_RETRIES = ("elastic_transport.transport",)


# Our own packages: their tracebacks are ours to decide. A library's warning with a traceback
# (elastic_transport's "Retrying request after failure" at every retry) is one line below DEBUG.
_OURS = ("core", "bot", "adapters")


class _OneLineLibraryWarnings(logging.Filter):
    """A library's warning about a failure it is handling (a retried request) keeps the
    failure's type and message on its line; its traceback is for DEBUG, where it is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.exc_info
            and record.levelno < logging.ERROR
            and not record.name.startswith(_OURS)
            and logging.getLogger().level > logging.DEBUG
        ):
            _, exc, _ = record.exc_info
            record.msg = f"{record.getMessage()} ({type(exc).__name__}: {exc})"
            record.args, record.exc_info, record.exc_text = None, None, None
        return True


class _RedactUrlCredentials(logging.Filter):
    """Libraries log URLs as they were given (httpx's "HTTP Request: GET http://user:pass@..."),
    so every record leaves without the userinfo of any URL in it, whoever wrote it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_urls_in(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def _redact_event(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key, value in event.items():
        if isinstance(value, str):
            event[key] = redact_urls_in(value)
    return event


def count_errors(_: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Every error the bot logs is a failure a dashboard should see: counted in
    `docbot_errors` by platform and by the event's name (where it happened)."""
    if method in ("error", "exception", "critical"):
        metrics.ERRORS.labels(str(event.get("platform", "none")), str(event.get("event"))).inc()
    return event


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is when a record comes (see `logger_factory` below)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _: Any) -> None:
        """The stream is looked up per record, never kept."""


def configure_logging(settings: LoggingSettings, *, retries_logged: bool = True) -> None:
    """Our events and every library's log records, in one format (JSON lines with
    `format: json`), on stderr. Calling it again replaces the previous configuration.

    `retries_logged` is for the long-running processes; a one-shot command passes False and
    shows a client library's retries only at DEBUG."""
    level = getattr(logging, settings.level)
    root = logging.getLogger()
    root.setLevel(level)
    for name in _CHATTY:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    for names, floor in (
        (_NOISY, logging.WARNING),
        (_FILE_READERS, logging.ERROR),
        (_RETRY_BOOKKEEPING, logging.ERROR),
        (_RETRIES, logging.WARNING if retries_logged else logging.ERROR),
    ):
        for name in names:
            logging.getLogger(name).setLevel(level if level == logging.DEBUG else max(level, floor))
    renderer = (
        structlog.processors.JSONRenderer()
        if settings.format == "json"
        # Plain tracebacks: rich's would print every frame's local variables, which include
        # tokens in HTTP clients' request arguments and users' message texts.
        else structlog.dev.ConsoleRenderer(
            colors=sys.stderr.isatty(), exception_formatter=structlog.dev.plain_traceback
        )
    )
    for old in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(old)
    if not root.handlers:  # as basicConfig: a host that set up logging (pytest) keeps its own
        root.addHandler(_library_handler(renderer))
    for each in root.handlers:
        for kind in (_OneLineLibraryWarnings, _RedactUrlCredentials):  # redaction last
            if not any(isinstance(f, kind) for f in each.filters):
                each.addFilter(kind())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            count_errors,
            structlog.processors.TimeStamper(fmt="iso"),
            # Tracebacks become text here, so they are redacted too (and JSON logs get them).
            structlog.processors.format_exc_info,
            _redact_event,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        # Look sys.stderr up per logger: it may be replaced (test runners, daemonisers) after
        # logging is configured, and a cached handle would then point at a closed stream.
        logger_factory=lambda *_: structlog.PrintLogger(sys.stderr),
        cache_logger_on_first_use=False,
    )


def _library_handler(renderer: structlog.typing.Processor) -> logging.Handler:
    """Libraries' log records, through the same steps as our events: the same format (a JSON
    line with `format: json`), the context bound to our events (the document being parsed),
    URLs redacted. Not counted as the bot's errors: a library's message is no event name to
    label a metric with."""
    handler = _StderrHandler()
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.contextvars.merge_contextvars,
                structlog.stdlib.add_logger_name,
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso"),
            ],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                _redact_event,
                renderer,
            ],
        )
    )
    return handler
