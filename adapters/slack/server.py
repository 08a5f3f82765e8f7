"""Running the Slack app: HTTP mode (the Procfile's `web` process) or Socket Mode.

HTTP mode serves POST /slack/events (events and interactivity, signature-checked by Bolt: an
unsigned, wrongly signed or over-five-minutes-old request gets 401 and is not processed) and
GET /healthz for the platform's health checks.
"""

from __future__ import annotations

from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp

EVENTS_PATH = "/slack/events"


async def _healthz(_: web.Request) -> web.Response:
    return web.json_response({"ok": True})


def http_app(app: AsyncApp) -> web.Application:
    server = app.web_app(path=EVENTS_PATH)
    server.router.add_get("/healthz", _healthz)
    return server


async def run_http(app: AsyncApp, port: int) -> None:
    runner = web.AppRunner(http_app(app))
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", port).start()  # noqa: S104 (a server behind the platform's router)
    try:
        await _forever()
    finally:
        await runner.cleanup()


async def run_socket_mode(app: AsyncApp, app_token: str) -> None:
    await AsyncSocketModeHandler(app, app_token).start_async()


async def _forever() -> None:
    import asyncio

    await asyncio.Event().wait()
