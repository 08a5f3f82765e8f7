"""Showing an answer while it is being written.

Preferred: Slack's streaming messages (`chat.startStream` / `appendStream` / `stopStream`), which
Slack renders as text arriving. Where the workspace or the token can't stream (Slack answers
`ok: false`), the placeholder message is edited instead, at most once per `update_interval_s`
(chat.update is rate-limited). Either way, the message that ends up in the thread is then
replaced by the final, checked answer with its sources.
"""

from __future__ import annotations

import html
import time
from collections.abc import Awaitable, Callable

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.render import escape, to_mrkdwn
from core.answer.citations import check_links

log = structlog.get_logger(__name__)


def slack_error(exc: SlackApiError) -> str:
    """Slack's error code, also when the response was not JSON (a proxy's HTML page, a 405) or
    said no code (the SDK reads an HTML page as an empty object)."""
    data = getattr(exc.response, "data", None)
    code = data.get("error") if isinstance(data, dict) else None
    return str(code) if code else f"HTTP {exc.response.status_code}"


class AnswerProgressMessage:
    def __init__(
        self,
        client: AsyncWebClient,
        *,
        channel: str,
        thread_ts: str | None,
        placeholder: str | None,
        team: str,
        user: str,
        use_stream_api: bool,
        update_interval_s: float,
        preview_chars: int,
        on_stream: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        """`on_stream` hears the streaming message's ts once a stream replaced the placeholder
        (before the placeholder is deleted): the message an answer cut short must replace."""
        self._client = client
        self._on_stream = on_stream
        self._channel = channel
        self._thread_ts = thread_ts
        self._placeholder = placeholder
        self._team = team
        self._user = user
        self._try_stream = use_stream_api and thread_ts is not None
        self._interval = update_interval_s
        self._preview_chars = preview_chars
        self._stream_ts: str | None = None
        self._sent = ""  # what the stream already shows
        self._last_update = 0.0

    @property
    def message_ts(self) -> str | None:
        """The message the final answer should replace."""
        return self._stream_ts or self._placeholder

    async def update(self, text_so_far: str) -> None:
        now = time.monotonic()
        if now - self._last_update < self._interval or not text_so_far.strip():
            return
        self._last_update = now
        # Model output, shown before its sources are known: no link or URL may be live (not even
        # until the checked answer replaces it), no `<...>` may reach Slack as a control sequence.
        text_so_far = escape(check_links(text_so_far, set()))
        if self._try_stream and await self._stream(text_so_far):
            return
        await self._edit(text_so_far)

    async def finish(self) -> None:
        """End a stream, so the final answer can replace the streamed message."""
        if self._stream_ts is None:
            return
        try:
            await self._client.chat_stopStream(channel=self._channel, ts=self._stream_ts)
        except SlackApiError as exc:
            log.info("slack_stop_stream_failed", error=slack_error(exc))

    async def _stream(self, text: str) -> bool:
        try:
            if self._stream_ts is None:
                response = await self._client.chat_startStream(
                    channel=self._channel,
                    thread_ts=str(self._thread_ts),
                    markdown_text=text,
                    recipient_team_id=self._team or None,
                    recipient_user_id=self._user or None,
                )
                self._stream_ts = str(response["ts"])
                self._sent = text
                if self._on_stream is not None:
                    await self._on_stream(self._stream_ts)
                await self._drop_placeholder()
            elif text.startswith(self._sent) and len(text) > len(self._sent):
                await self._client.chat_appendStream(
                    channel=self._channel,
                    ts=self._stream_ts,
                    markdown_text=text[len(self._sent) :],
                )
                self._sent = text
            return True
        except SlackApiError as exc:
            log.info("slack_stream_unavailable", error=slack_error(exc))
            self._try_stream = False
            return self._stream_ts is not None  # a started stream stays; the final replaces it

    async def _drop_placeholder(self) -> None:
        if self._placeholder is None:
            return
        try:
            await self._client.chat_delete(channel=self._channel, ts=self._placeholder)
            self._placeholder = None
        except SlackApiError as exc:
            log.info("slack_placeholder_not_deleted", error=slack_error(exc))

    async def _edit(self, text: str) -> None:
        if self._placeholder is None:
            return
        preview = to_mrkdwn(html.unescape(text), [])[: self._preview_chars].rstrip()
        try:
            await self._client.chat_update(
                channel=self._channel, ts=self._placeholder, text=preview + " …"
            )
        except SlackApiError as exc:
            log.info("slack_progress_update_failed", error=slack_error(exc))
