"""Calling a remote JSON API with retries: one set of rules for every HTTP service we call
over httpx (OpenAI-compatible model servers, the web search provider, Confluence).

Retried: timeouts, connection errors and the statuses that mean "try again later" (408, 409,
429, 5xx, 529), with exponential backoff and jitter, or after the server's own `Retry-After`
(seconds or an HTTP date; capped by the policy's longest wait). When the attempts run out,
`RemoteFailure` says why in words the caller completes with its service's name.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)
from tenacity.stop import stop_base

from core.errors import RemoteFailure
from core.http_body import ACCEPT_ENCODING, BodyTooLarge, UndecodableBody, read_body

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
# The services answer in kilobytes (a chat completion, a page of search results); a body past
# this is a broken or hostile server, and is not read into memory.
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
# Headers that describe the body as sent; the response we return holds it decoded.
_ENCODING_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})
# Told each retry, in words (`answered HTTP 503; retry 1 of 2 in 0.6s`), for a trace.
RetryNote = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    retries: int
    initial_s: float  # first wait, and the most jitter added to any wait
    max_s: float


class WaitBudget(stop_base):
    """The seconds of retry waits that many requests share (a sync of a throttled Confluence
    space: each page's five retries, up to a minute apart, would add up to days). A stop
    condition: a retry whose wait would overdraw it is not made, and its request fails as
    it would after its last attempt; one within it is spent from it."""

    def __init__(self, total_s: float) -> None:
        self.total_s = total_s
        self.spent_s = 0.0

    @property
    def exhausted(self) -> bool:
        return self.spent_s >= self.total_s

    def __call__(self, retry_state: RetryCallState) -> bool:
        if self.spent_s + retry_state.upcoming_sleep > self.total_s:
            self.spent_s = self.total_s  # a later, shorter wait must not slip in either
            return True
        self.spent_s += retry_state.upcoming_sleep
        return False


class _Retryable(Exception):
    def __init__(self, status: int, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.retry_after = retry_after


def retry_after_s(value: str | None) -> float | None:
    """A `Retry-After` header in seconds: delta-seconds or an HTTP date; None if neither."""
    if not value:
        return None
    if value.strip().isdigit():
        return float(value.strip())
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _retryable(exc: BaseException) -> bool:
    return isinstance(
        exc, _Retryable | TimeoutError | httpx.TimeoutException | httpx.TransportError
    )


async def _send_once(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    headers: dict[str, str],
    extra: dict[str, Any],
) -> httpx.Response:
    """One attempt, its body read to at most MAX_RESPONSE_BYTES once decompressed (httpx's
    timeout bounds each read, so the caller bounds the whole attempt: a server may drip a byte
    at a time)."""
    headers = {"Accept-Encoding": ACCEPT_ENCODING, **headers}
    async with http.stream(method, url, headers=headers, **extra) as response:
        if response.status_code in RETRY_STATUSES:
            later = retry_after_s(response.headers.get("retry-after"))
            raise _Retryable(response.status_code, later)
        try:
            content = await read_body(response, MAX_RESPONSE_BYTES)
        except BodyTooLarge:
            raise RemoteFailure(
                f"sent a response longer than {MAX_RESPONSE_BYTES:,} bytes"
            ) from None
        except UndecodableBody as exc:
            raise RemoteFailure(f"sent a response that can't be read ({exc})") from None
    kept = [(k, v) for k, v in response.headers.items() if k.lower() not in _ENCODING_HEADERS]
    return httpx.Response(
        response.status_code, headers=kept, content=content, request=response.request
    )


def _retrying(
    policy: RetryPolicy, on_retry: RetryNote | None, budget: WaitBudget | None = None
) -> AsyncRetrying:
    """Attempts as `policy` says, waits within `budget`; each retry told to `on_retry` (for
    the answer's trace)."""

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None and state.next_action is not None:
            on_retry(
                f"{_failure(state.outcome.exception())}; retry {state.attempt_number} of "
                f"{policy.retries} in {state.next_action.sleep:.1f}s"
            )

    backoff = wait_exponential_jitter(
        multiplier=policy.initial_s, max=policy.max_s, jitter=policy.initial_s
    )

    def wait(state: RetryCallState) -> float:
        failed = state.outcome.exception() if state.outcome is not None else None
        if isinstance(failed, _Retryable) and failed.retry_after is not None:
            return min(failed.retry_after, policy.max_s)
        return backoff(state)

    # The budget last: only a retry the attempts allow is charged to it.
    stop = stop_after_attempt(policy.retries + 1)
    return AsyncRetrying(
        stop=stop if budget is None else stop | budget,
        wait=wait,
        retry=retry_if_exception(_retryable),
        before_sleep=before_sleep,
        reraise=True,
    )


def _failure(exc: BaseException | None) -> str:
    if isinstance(exc, _Retryable):
        return f"answered HTTP {exc.status}"
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return "timed out"
    return f"could not be reached ({type(exc).__name__})"


async def post_json(
    http: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    *,
    headers: dict[str, str],
    policy: RetryPolicy,
    timeout_s: float | None = None,
    on_retry: RetryNote | None = None,
) -> httpx.Response:
    """The first response whose status is not worth retrying (it may still be an error)."""
    return await _request(http, "POST", url, {"json": body}, headers, policy, timeout_s, on_retry)


async def get_json(
    http: httpx.AsyncClient,
    url: str,
    *,
    headers: dict[str, str],
    policy: RetryPolicy,
    timeout_s: float | None = None,
    on_retry: RetryNote | None = None,
    budget: WaitBudget | None = None,
) -> httpx.Response:
    """As `post_json`, for a GET (a page of an API's listing); its retries' waits are spent
    from `budget` when one is given."""
    return await _request(http, "GET", url, {}, headers, policy, timeout_s, on_retry, budget)


async def _request(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    extra: dict[str, Any],
    headers: dict[str, str],
    policy: RetryPolicy,
    timeout_s: float | None,
    on_retry: RetryNote | None,
    budget: WaitBudget | None = None,
) -> httpx.Response:
    # No timeout given: the client's own applies, to each read and to the whole attempt.
    if timeout_s is not None:
        extra = {**extra, "timeout": timeout_s}
    attempt_s = http.timeout.read if timeout_s is None else timeout_s
    with _as_remote_failure(timeout_s):
        async for attempt in _retrying(policy, on_retry, budget):
            with attempt:
                async with asyncio.timeout(attempt_s):
                    response = await _send_once(http, method, url, headers, extra)
    return response


@asynccontextmanager
async def streamed_post(
    http: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    *,
    headers: dict[str, str],
    policy: RetryPolicy,
    on_retry: RetryNote | None = None,
) -> AsyncIterator[httpx.Response]:
    """The first response whose status is not worth retrying, its body still to be read (a
    streamed reply). Only the opening is retried: a reply cut off midway is not asked for
    again, since the model would write it all again."""
    with _as_remote_failure(None):
        async for attempt in _retrying(policy, on_retry):
            with attempt:
                request = http.build_request("POST", url, json=body, headers=headers)
                response = await http.send(request, stream=True)
                if response.status_code in RETRY_STATUSES:
                    await response.aclose()
                    raise _Retryable(response.status_code)
    try:
        yield response
    finally:
        await response.aclose()


@contextmanager
def _as_remote_failure(timeout_s: float | None) -> Iterator[None]:
    """What went wrong once the attempts ran out, as a `RemoteFailure`."""
    try:
        yield
    except _Retryable as exc:
        raise RemoteFailure(f"answered HTTP {exc.status}") from None
    except (TimeoutError, httpx.TimeoutException):
        within = "in time" if timeout_s is None else f"within {timeout_s:g}s"
        raise RemoteFailure(f"did not answer {within}") from None
    except httpx.TransportError as exc:
        raise RemoteFailure(f"could not be reached ({exc})") from None
