"""Socket Mode's connection request (`apps.connections.open`) rate limited: the bot waits as
long as Slack's Retry-After says (else `slack.rate_limited_wait_s`) and asks again, instead of
the SDK's retry at its ping interval, which would keep the limit in force. Driven through the
real slack_bolt/slack_sdk clients against the Slack emulator."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestServer
from slack_bolt.async_app import AsyncApp

from adapters.slack.server import _SocketConnection
from tests.fakes.slack_api import SlackEmulator

BOUND_S = 20  # far above the waits below, on a busy 2-core machine


@pytest.fixture
async def slack() -> AsyncIterator[tuple[SlackEmulator, AsyncApp]]:
    emulator = SlackEmulator()
    server = TestServer(emulator.app, host="127.0.0.1")
    await server.start_server()
    bolt = AsyncApp(token="xoxb-test", request_verification_enabled=False)
    bolt.client.base_url = str(server.make_url("/api/"))  # as the bot's wiring does
    yield emulator, bolt
    await server.close()


@pytest.mark.parametrize(("header", "fallback_s", "waited_s"), [("1", 60.0, 1.0), (None, 0.5, 0.5)])
async def test_a_rate_limited_connection_request_waits_as_slack_says(
    slack: tuple[SlackEmulator, AsyncApp],
    header: str | None,
    fallback_s: float,
    waited_s: float,
) -> None:
    emulator, bolt = slack
    emulator.retry_after = header
    emulator.fail("apps.connections.open", "ratelimited")
    socket = _SocketConnection(bolt, "xapp-1-test", asyncio.Event(), fallback_s)
    started = time.monotonic()
    url = await asyncio.wait_for(socket._first_url(), BOUND_S)
    elapsed = time.monotonic() - started
    assert url is not None
    assert url.startswith("ws")
    assert len(emulator.called("apps.connections.open")) == 2
    assert waited_s <= elapsed < BOUND_S
