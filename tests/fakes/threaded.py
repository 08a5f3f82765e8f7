"""An aiohttp app served from a thread of its own, on loopback: for code under test that runs
its own event loop (a command through CliRunner) or must not share the server's (a bench)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_STOP_WAIT_S = 10  # seconds to start or stop the server


@contextmanager
def served_in_a_thread(app: web.Application) -> Iterator[str]:
    """The base URL (`http://127.0.0.1:PORT`) while the block runs. The server is set up on its
    own loop's thread, so this works from plain code and from inside a running loop alike."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runner = web.AppRunner(app)

    async def start() -> str:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        return f"http://{host}:{port}"

    try:
        yield asyncio.run_coroutine_threadsafe(start(), loop).result(_STOP_WAIT_S)
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(_STOP_WAIT_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=_STOP_WAIT_S)
        loop.close()


def catch_all(handler: Handler) -> web.Application:
    """An app whose one handler answers every GET (a fake site routes by path itself)."""
    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    return app
