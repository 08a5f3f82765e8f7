"""How a failed Slack call is named in a log line or a start-up failure: by Slack's own error
code, or by the HTTP status when the answer carried none (a proxy's HTML page, which the SDK
reads as an empty object: "auth.test failed (None)" told the operator nothing)."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.slack_response import SlackResponse

from adapters.slack.progress import slack_error


def _failure(data: object, status: int) -> SlackApiError:
    response = SlackResponse(
        client=None,
        http_verb="POST",
        api_url="https://slack.example/api/auth.test",
        req_args={},
        data=data,
        headers={},
        status_code=status,
    )
    return SlackApiError("failed", response)


@pytest.mark.parametrize(
    ("data", "status", "named"),
    [
        ({"ok": False, "error": "invalid_auth"}, 200, "invalid_auth"),
        ({}, 502, "HTTP 502"),  # an HTML error page
        ({"ok": False}, 500, "HTTP 500"),
        ({"ok": False, "error": ""}, 503, "HTTP 503"),
        ("<html>Bad gateway</html>", 502, "HTTP 502"),
    ],
)
def test_a_failure_is_named_by_slacks_code_or_its_status(
    data: object, status: int, named: str
) -> None:
    assert slack_error(_failure(data, status)) == named
