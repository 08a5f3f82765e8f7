"""A sender that starts a request body, gets refused, then neither finishes nor hangs up: how
long the server holds its connection (aiohttp drains a refused body for its `lingering_time`,
10 s unless set)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

PART_BYTES = 65_536
READ_TIMEOUT_S = 5  # over aiohttp's own 10 s lingering, a failing run waits this out


async def held_after_refusal(
    url: str,
    path: str,
    headers: Mapping[str, str],
    *,
    body_bytes: int,
    declared: bool,
    status: int,
) -> float:
    """Sends a POST of at least `body_bytes` (its Content-Length declaring a hundred times
    more, or chunked), reads the status line (it must be `status`), then stalls: the seconds
    until the server closes the connection."""
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        length = f"Content-Length: {100 * body_bytes}" if declared else "Transfer-Encoding: chunked"
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\n{head}{length}\r\n\r\n".encode())
        part = b"x" * PART_BYTES
        for _ in range(body_bytes // PART_BYTES + 2):
            writer.write(part if declared else b"%x\r\n%s\r\n" % (len(part), part))
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout=READ_TIMEOUT_S)
        assert line.startswith(f"HTTP/1.1 {status}".encode()), line
        started = time.monotonic()
        await asyncio.wait_for(reader.read(), timeout=READ_TIMEOUT_S)  # the rest, then the close
        return time.monotonic() - started
    finally:
        writer.close()
