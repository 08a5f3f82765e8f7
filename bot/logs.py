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


def configure_logging(settings: LoggingSettings) -> None:
    level = getattr(logging, settings.level)
    logging.basicConfig(level=level, stream=sys.stderr, format="%(message)s")
    logging.getLogger().setLevel(level)  # basicConfig sets it only the first time
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _RedactUrlCredentials) for f in handler.filters):
            handler.addFilter(_RedactUrlCredentials())
    for name in _CHATTY:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    renderer = (
        structlog.processors.JSONRenderer()
        if settings.format == "json"
        # Plain tracebacks: rich's would print every frame's local variables, which include
        # tokens in HTTP clients' request arguments and users' message texts.
        else structlog.dev.ConsoleRenderer(
            colors=sys.stderr.isatty(), exception_formatter=structlog.dev.plain_traceback
        )
    )
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
