"""POSTing JSON to a remote API with retries: one set of rules for every HTTP service we call
over httpx (OpenAI-compatible model servers, the web search provider).

Retried: timeouts, connection errors and the statuses that mean "try again later" (408, 409,
429, 5xx, 529), with exponential backoff and jitter. When the attempts run out, `RemoteFailure`
says why in words the caller completes with its service's name.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from core.errors import RemoteFailure

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
# The services answer in kilobytes (a chat completion, a page of search results); a body past
# this is a broken or hostile server, and is not read into memory.
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
# Headers that describe the body as sent; the response we return holds it decoded.
_ENCODING_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    retries: int
    initial_s: float  # first wait, and the most jitter added to any wait
    max_s: float


class _Retryable(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def _retryable(exc: BaseException) -> bool:
    return isinstance(
        exc, _Retryable | TimeoutError | httpx.TimeoutException | httpx.TransportError
    )


async def _post_once(
    http: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    extra: dict[str, Any],
) -> httpx.Response:
    """One attempt, its body read to at most MAX_RESPONSE_BYTES (httpx's timeout bounds each
    read, so the caller bounds the whole attempt: a server may drip a byte at a time)."""
    async with http.stream("POST", url, json=body, headers=headers, **extra) as response:
        if response.status_code in RETRY_STATUSES:
            raise _Retryable(response.status_code)
        content = bytearray()
        async for chunk in response.aiter_bytes():
            content += chunk
            if len(content) > MAX_RESPONSE_BYTES:
                raise RemoteFailure(f"sent a response longer than {MAX_RESPONSE_BYTES:,} bytes")
    kept = [(k, v) for k, v in response.headers.items() if k.lower() not in _ENCODING_HEADERS]
    return httpx.Response(
        response.status_code, headers=kept, content=bytes(content), request=response.request
    )


async def post_json(
    http: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    *,
    headers: dict[str, str],
    policy: RetryPolicy,
    timeout_s: float | None = None,
) -> httpx.Response:
    """The first response whose status is not worth retrying (it may still be an error)."""
    # No timeout given: the client's own applies, to each read and to the whole attempt.
    extra: dict[str, Any] = {} if timeout_s is None else {"timeout": timeout_s}
    attempt_s = http.timeout.read if timeout_s is None else timeout_s
    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(policy.retries + 1),
            wait=wait_exponential_jitter(
                multiplier=policy.initial_s, max=policy.max_s, jitter=policy.initial_s
            ),
            retry=retry_if_exception(_retryable),
            reraise=True,
        ):
            with attempt:
                async with asyncio.timeout(attempt_s):
                    response = await _post_once(http, url, body, headers, extra)
    except _Retryable as exc:
        raise RemoteFailure(f"answered HTTP {exc.status}") from None
    except (TimeoutError, httpx.TimeoutException):
        within = "in time" if timeout_s is None else f"within {timeout_s:g}s"
        raise RemoteFailure(f"did not answer {within}") from None
    except httpx.TransportError as exc:
        raise RemoteFailure(f"could not be reached ({exc})") from None
    return response
