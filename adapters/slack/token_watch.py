"""Slack refusing the bot token after start: revoked, the app uninstalled, the account
deactivated. The start checks the token once (`auth.test`); after that, every answer would
fail to post and only the logs would say why, so readiness says so (GET /readyz: 503)."""

from __future__ import annotations

from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

# Web API errors that mean the token itself is gone: it never works again, whatever is asked.
TOKEN_GONE = frozenset(
    {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"}
)


class TokenWatch(AsyncRetryHandler):
    """A retry handler that never retries: the Web API client asks one about every response,
    so it sees each call of Bolt's clients (which copy their app client's handlers)."""

    def __init__(self) -> None:
        super().__init__(max_retry_count=0)
        self.refused: str | None = None  # the error Slack last refused the token with

    async def can_retry_async(
        self,
        *,
        state: RetryState,  # noqa: ARG002 (the interface's; only the response is read)
        request: HttpRequest,  # noqa: ARG002
        response: HttpResponse | None = None,
        error: Exception | None = None,  # noqa: ARG002
    ) -> bool:
        body = response.body if response is not None else None
        if isinstance(body, dict) and body.get("error") in TOKEN_GONE:
            self.refused = str(body["error"])
        return False

    def reason(self) -> str | None:
        """Why the bot can't answer, for /readyz (short, no value of the token)."""
        if self.refused is None:
            return None
        return f"Slack refuses the bot token ({self.refused}): set a valid SLACK_BOT_TOKEN"
