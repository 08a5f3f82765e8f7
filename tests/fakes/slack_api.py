"""A local Slack Web API emulator (aiohttp) that answers the methods the app calls and records
every call, for the real slack_sdk client pointed at it with `base_url`."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

from aiohttp import web

BOT_USER = "UBOT"
TEAM = "T1"
# Slack's limit on one text object in a block: a message with a longer one is refused whole.
TEXT_OBJECT_CHARS = 3_000
_POSTING = ("chat.postMessage", "chat.update", "chat.postEphemeral")


class SlackEmulator:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        # method -> errors to answer with, in order ("ok": that call is answered as usual)
        self.failures: dict[str, list[str]] = {}
        self.refusals: dict[str, str] = {}  # method -> the error it answers every call with
        # What apps.connections.open hands out for Socket Mode: by default a port where nothing
        # listens, so the WebSocket connection fails (and the SDK tries again).
        self.socket_url = "ws://127.0.0.1:9/link"
        # A thread, oldest first, as conversations.replies pages it (`_replies`).
        self.replies: list[dict[str, Any]] = []
        # Messages per page at most, whatever `limit` asks: 1,000 is Slack's own ceiling; apps
        # outside the Marketplace get 15 since 2025.
        self.replies_page_cap = 1_000
        self.history: list[dict[str, Any]] = []  # a channel's messages, newest first
        self.posted_ts: list[str] = []  # the ts of each new message, in order
        self._ts = itertools.count(1)
        self.retry_after: str | None = "30"  # the Retry-After of a 429 (None: no header)
        self.app = web.Application()
        self.app.router.add_route("*", "/api/{method}", self._handle)
        # A shortcut's or a command's `response_url` (Slack's hooks.slack.com/actions/...):
        # recorded as calls of "response_url", answered as Slack answers them.
        self.app.router.add_post("/actions/{path:.+}", self._respond)

    def fail(self, method: str, *errors: str) -> None:
        self.failures.setdefault(method, []).extend(errors)

    def refuse(self, method: str, error: str) -> None:
        """Every call of `method` answered with `error` (a refused token stays refused)."""
        self.refusals[method] = error

    def called(self, method: str) -> list[dict[str, Any]]:
        return [params for name, params in self.calls if name == method]

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        if request.method == "GET":
            params: dict[str, Any] = dict(request.query)
        elif request.content_type == "application/json":
            params = await request.json()
        else:  # a form body, and what the SDK sends as query parameters (`params=`)
            params = {**dict(request.query), **dict(await request.post())}
        if isinstance(params.get("blocks"), str):
            params["blocks"] = json.loads(params["blocks"])
        self.calls.append((method, params))
        queued = self.failures.get(method)
        error = queued.pop(0) if queued else self.refusals.get(method)
        if error is None and method in _POSTING and _over_limit(params.get("blocks")):
            error = "invalid_blocks"
        if error is not None and error != "ok":
            if error == "disconnect":  # the network fails: no HTTP answer at all
                assert request.transport is not None
                request.transport.abort()
                raise ConnectionResetError(method)
            status = 429 if error == "ratelimited" else 200
            wait = self.retry_after if status == 429 else None
            headers = {"Retry-After": wait} if wait is not None else {}
            return web.json_response({"ok": False, "error": error}, status=status, headers=headers)
        return web.json_response(self._answer(method, params))

    async def _respond(self, request: web.Request) -> web.Response:
        self.calls.append(("response_url", await request.json()))
        return web.Response(text="ok")

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {
                "ok": True,
                "user_id": BOT_USER,
                "bot_id": "BBOT",
                "team_id": TEAM,
                "user": "docbot",
                "team": "Test",
                "url": "https://test.slack.com/",
            }
        if method in ("chat.postMessage", "chat.update", "chat.startStream"):
            ts = params.get("ts")
            if not ts:
                ts = f"1700000100.{next(self._ts):06d}"
                self.posted_ts.append(ts)
            return {
                "ok": True,
                "channel": params.get("channel"),
                "ts": ts,
                "message": {"text": params.get("text", ""), "ts": ts},
            }
        if method == "apps.connections.open":
            return {"ok": True, "url": self.socket_url}
        if method == "conversations.replies":
            return self._replies(params)
        if method == "conversations.history":  # `latest` inclusive, newest first, as Slack
            latest = str(params.get("latest") or "9999999999.999999")
            older = [m for m in self.history if m["ts"] <= latest]
            return {"ok": True, "messages": older[: int(params.get("limit") or 100)]}
        return {"ok": True}

    def _replies(self, params: dict[str, Any]) -> dict[str, Any]:
        """As Slack answers it: the thread's messages between `oldest` and `latest` (the ends
        themselves only with `inclusive`), oldest first, `limit` a page (Slack's default is
        1,000), the next page behind `response_metadata.next_cursor`."""
        inclusive = str(params.get("inclusive", "")).lower() in ("1", "true")
        oldest, latest = params.get("oldest"), params.get("latest")

        def in_range(message: dict[str, Any]) -> bool:
            ts = float(message["ts"])
            after = oldest is None or ts > float(oldest) or (inclusive and ts == float(oldest))
            before = latest is None or ts < float(latest) or (inclusive and ts == float(latest))
            return after and before

        messages = [m for m in self.replies if in_range(m)]
        limit = min(int(params.get("limit") or 1_000), self.replies_page_cap)
        start = int(params.get("cursor") or 0)
        more = start + limit < len(messages)
        return {
            "ok": True,
            "messages": messages[start : start + limit],
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }


def text_objects(blocks: Any) -> Iterator[dict[str, Any]]:
    """Every text object in `blocks` (a section's text, a context element, a button's label)."""
    if isinstance(blocks, list):
        for item in blocks:
            yield from text_objects(item)
    elif isinstance(blocks, dict):
        if blocks.get("type") in ("mrkdwn", "plain_text"):
            yield blocks
        else:
            for value in blocks.values():
                yield from text_objects(value)


def _over_limit(blocks: Any) -> bool:
    """Whether a text object in `blocks` is over Slack's limit (Slack: `invalid_blocks`)."""
    return any(len(str(t.get("text", ""))) > TEXT_OBJECT_CHARS for t in text_objects(blocks))
