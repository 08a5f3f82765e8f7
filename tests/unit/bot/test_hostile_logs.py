"""Log lines never carry the credentials of a URL, whoever writes them: our structlog events,
a library's stdlib logging (httpx logs every request's URL at INFO), or a traceback."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import structlog

from bot.logs import configure_logging
from core.config import LoggingSettings

SECRET = "hunter2secret"


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_no_log_line_carries_url_credentials(
    fmt: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    configure_logging(LoggingSettings(format=fmt))  # type: ignore[arg-type]
    logging.getLogger("httpx").warning(
        'HTTP Request: GET %s "HTTP/1.1 200 OK"', f"http://elastic:{SECRET}@es.internal:9200/x"
    )
    log = structlog.get_logger("test")
    log.warning("fetch_failed", url=f"https://user:{SECRET}@wiki.example/page")
    try:
        raise ValueError(f"can't connect to https://u:{SECRET}@host/")
    except ValueError:
        log.exception("crashed")
    # Under pytest the root logger's handler is pytest's: the filter is on it all the same.
    written = capsys.readouterr().err + caplog.text
    assert SECRET not in written
    assert "http://es.internal:9200/x" in written
    assert "https://wiki.example/page" in written
    assert "ValueError: can't connect to https://host/" in written
    if fmt == "json":
        events = [json.loads(line) for line in written.splitlines() if line.startswith("{")]
        assert [e["event"] for e in events] == ["fetch_failed", "crashed"]


@contextmanager
def as_in_a_bot_process() -> Iterator[None]:
    """The root logger as in a `bot` process: no handler of pytest's (which it adds for each
    test's run, after the fixtures), then pytest's back and the default configuration."""
    root = logging.getLogger()
    kept = root.handlers
    root.handlers = []
    try:
        yield
    finally:
        root.handlers = kept
        configure_logging(LoggingSettings())


def _events(written: str) -> list[dict[str, object]]:
    """Each JSON line, without its timestamp."""
    return [
        {k: v for k, v in json.loads(line).items() if k != "timestamp"}
        for line in written.splitlines()
        if line.strip()
    ]


@pytest.mark.parametrize("level", ["INFO", "WARNING"])
def test_libraries_bookkeeping_is_left_out_and_their_warnings_are_json_lines(
    level: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """discord.py's "logging in using static token" and APScheduler's "Adding job
    tentatively" are INFO lines of no use to whoever runs the bot; a warning of theirs is
    still shown, in the bot's format. pypdf's warnings (about damage in a file it reads,
    without naming the file) are left to the ingest report; the Elasticsearch node pool's, to
    the transport's own line for each retry."""
    with as_in_a_bot_process():
        configure_logging(LoggingSettings(level=level, format="json"))  # type: ignore[arg-type]
        logging.getLogger("discord.client").info("logging in using static token")
        logging.getLogger("apscheduler.scheduler").info("Adding job tentatively")
        logging.getLogger("pypdf._reader").warning("EOF marker not found")
        logging.getLogger("elastic_transport.node_pool").warning(
            "Node <Urllib3HttpNode(http://es:9200)> has failed for 1 times in a row, putting on "
            "1 second timeout"
        )
        logging.getLogger("discord.gateway").warning(
            "heartbeat blocked; reconnecting to %s", f"wss://bot:{SECRET}@gateway.discord.gg/"
        )
    assert _events(capsys.readouterr().err) == [
        {
            "event": "heartbeat blocked; reconnecting to wss://gateway.discord.gg/",
            "logger": "discord.gateway",
            "level": "warning",
        }
    ]


def test_at_debug_a_parsers_warning_names_the_document(capsys: pytest.CaptureFixture[str]) -> None:
    with as_in_a_bot_process():
        configure_logging(LoggingSettings(level="DEBUG", format="json"))
        with structlog.contextvars.bound_contextvars(document="docs/broken.pdf"):
            logging.getLogger("pypdf._reader").warning("EOF marker not found")
        logging.getLogger("apscheduler.scheduler").info("Adding job tentatively")
    assert _events(capsys.readouterr().err) == [
        {
            "event": "EOF marker not found",
            "document": "docs/broken.pdf",
            "logger": "pypdf._reader",
            "level": "warning",
        },
        {"event": "Adding job tentatively", "logger": "apscheduler.scheduler", "level": "info"},
    ]


def _retried(logger: logging.Logger) -> None:
    """elastic_transport's way: a warning with the failure it is about to retry."""
    try:
        raise TimeoutError(f"no reply from https://elastic:{SECRET}@es.internal:9200")
    except TimeoutError:
        logger.warning("Retrying request after failure (attempt %d of %d)", 0, 3, exc_info=True)


@pytest.mark.parametrize("level", ["INFO", "WARNING"])
def test_a_librarys_retry_warning_is_one_line_without_its_traceback(
    level: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with as_in_a_bot_process():
        configure_logging(LoggingSettings(level=level, format="json"))  # type: ignore[arg-type]
        _retried(logging.getLogger("elastic_transport.transport"))
    assert _events(capsys.readouterr().err) == [
        {
            "event": "Retrying request after failure (attempt 0 of 3) "
            "(TimeoutError: no reply from https://es.internal:9200)",
            "logger": "elastic_transport.transport",
            "level": "warning",
        }
    ]


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
def test_a_one_shot_command_shows_a_retry_only_at_debug(
    level: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its outcome is its own one line: when the retries fail, three warnings above it only
    bury it; a service's operator keeps them (the test above)."""
    with as_in_a_bot_process():
        configure_logging(
            LoggingSettings(level=level, format="json"),  # type: ignore[arg-type]
            retries_logged=False,
        )
        _retried(logging.getLogger("elastic_transport.transport"))
    loggers = [e["logger"] for e in _events(capsys.readouterr().err)]
    assert loggers == (["elastic_transport.transport"] if level == "DEBUG" else [])


def test_at_debug_and_for_our_own_loggers_the_traceback_stays(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with as_in_a_bot_process():
        configure_logging(LoggingSettings(format="json"))
        _retried(logging.getLogger("core.backends.elasticsearch.index"))
        configure_logging(LoggingSettings(level="DEBUG", format="json"))
        _retried(logging.getLogger("elastic_transport.transport"))
    written = capsys.readouterr().err
    events = _events(written)
    assert [e["logger"] for e in events] == [
        "core.backends.elasticsearch.index",
        "elastic_transport.transport",
    ]
    assert all("Traceback (most recent call last)" in str(e["exception"]) for e in events)
    assert SECRET not in written
