"""Structured logging for every process; message contents stay at DEBUG, never at INFO."""

from __future__ import annotations

import logging
import sys

import structlog

from core.config import LoggingSettings

# Libraries that log every request at INFO: one line per search would drown the bot's own logs.
_CHATTY = ("elastic_transport.transport", "elasticsearch")


def configure_logging(settings: LoggingSettings) -> None:
    level = getattr(logging, settings.level)
    logging.basicConfig(level=level, stream=sys.stderr, format="%(message)s")
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
            structlog.processors.TimeStamper(fmt="iso"),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        # Look sys.stderr up per logger: it may be replaced (test runners, daemonisers) after
        # logging is configured, and a cached handle would then point at a closed stream.
        logger_factory=lambda *_: structlog.PrintLogger(sys.stderr),
        cache_logger_on_first_use=False,
    )
