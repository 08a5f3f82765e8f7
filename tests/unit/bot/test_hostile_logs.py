"""Log lines never carry the credentials of a URL, whoever writes them: our structlog events,
a library's stdlib logging (httpx logs every request's URL at INFO), or a traceback."""

from __future__ import annotations

import json
import logging

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
