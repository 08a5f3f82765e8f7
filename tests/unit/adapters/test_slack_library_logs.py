"""Bolt's and the Socket Mode client's log lines are cut to one short line (no request body,
no traceback whose values could hold one); a Slack API failure keeps Slack's error code, the one
part of it that tells an operator what is wrong."""

from __future__ import annotations

import logging

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from adapters.slack.server import one_line_logger

BODY = '{"token": "xoxb-secret", "event": {"text": "our launch date is March 3"}}'


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def kept() -> Kept:
    logger = one_line_logger("test.slack_library")
    handler = Kept()
    logger.addHandler(handler)
    logger.propagate = False
    return handler


def _refused(error: str) -> SlackApiError:
    response = AsyncSlackResponse(
        client=None,
        http_verb="POST",
        api_url="https://slack.com/api/apps.connections.open",
        req_args={},
        data={"ok": False, "error": error},
        headers={},
        status_code=200,
    )
    return SlackApiError(f"The request to the Slack API failed. ({BODY})", response)


def test_a_slack_api_failure_keeps_its_error_code_and_nothing_else(kept: Kept) -> None:
    logger = logging.getLogger("test.slack_library")
    try:
        raise _refused("invalid_auth")
    except SlackApiError:
        logger.exception("Failed to connect (body: %s)", BODY)
    assert kept.lines == ["Failed to connect: SlackApiError (invalid_auth)"]


def test_other_failures_keep_only_their_type(kept: Kept) -> None:
    logger = logging.getLogger("test.slack_library")
    try:
        raise ConnectionResetError(BODY)
    except ConnectionResetError:
        logger.exception("Failed to connect\nTraceback ...")
    assert kept.lines == ["Failed to connect: ConnectionResetError"]
