"""Claude as a `ChatModel`: the Messages API's wire format, streaming and usage.

Each turn is streamed: the `respond` tool's partial answer is passed on as it grows, and whatever
arrives instead of a well-formed event stream is `ModelUnavailable` with a short reason. The
system prompt and the tool list carry `cache_control`, so every request after the first reads
them from the prompt cache. The rules of a turn are `core.answer.agent`'s.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx2

from core.answer.prompts import opening_messages
from core.answer.tools import RESPOND_TOOL, tool_definitions
from core.answer.wire import media_type, partial_answer, token_count
from core.domain.agent import AnswerProgress, ModelTurn, ToolResults, ToolUse, TurnRequest
from core.domain.conversation import Trace, Turn, Usage
from core.errors import ModelUnavailable

_CACHE = {"type": "ephemeral"}
_EVENT_STREAM = "text/event-stream"
# A streamed reply's size is bounded by max_tokens on a real server, not on a broken proxy. An
# SSE delta event wraps at least one token in ~150 bytes of framing; a ceiling of 512 bytes per
# allowed token, plus room for the message start, block starts and stops, never cuts a real
# reply and stops an endless one after a few MB.
_REPLY_BYTES_PER_TOKEN = 512
_REPLY_BYTES_FIXED = 65_536
# Errors the SDK's stream helper raises on input it does not expect (it assumes a well-formed
# stream): events before `message_start`, JSON or UTF-8 it can't decode, a delta for a block
# that was never started, an event missing a field.
_SDK_PARSE_FAILURES = (
    AssertionError,
    AttributeError,
    LookupError,
    RuntimeError,
    TypeError,
    ValueError,
)
_ERROR_TYPE = re.compile(r"[a-z_]{1,60}")


class _Malformed(Exception):
    """What arrived is not a complete Messages API event stream; `str()` completes the sentence
    "Claude sent ...", and never quotes the body (it may be anything, of any size)."""


class _ByteBudget(httpx2.AsyncByteStream):
    """The body of a streamed reply, cut off past `limit` bytes as they arrive (before the SSE
    decoder buffers a line of unbounded length)."""

    def __init__(self, inner: httpx2.AsyncByteStream | httpx2.SyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if not isinstance(self._inner, httpx2.AsyncByteStream):
            raise TypeError("a streamed reply needs an async body")
        received = 0
        async for chunk in self._inner:
            received += len(chunk)
            if received > self._limit:
                raise _Malformed(f"a reply longer than {self._limit:,} bytes")
            yield chunk

    async def aclose(self) -> None:
        if isinstance(self._inner, httpx2.AsyncByteStream):
            await self._inner.aclose()


def _require_event_stream(response: httpx2.Response) -> None:
    """A 200 that is not an event stream (a proxy's HTML page, a JSON error object, an empty
    body) is refused before the SDK tries to read events from it."""
    media = media_type(response.headers.get("content-type"))
    if media != _EVENT_STREAM:
        raise _Malformed(f"{media} (HTTP {response.status_code}), not an event stream")


def _status_reason(exc: anthropic.APIStatusError) -> str:
    """An HTTP error status, or an `error` event inside a 200 stream (the API reports an
    overload that way once the stream has started), named by its error type only."""
    if exc.status_code >= 400:
        return f"Claude answered HTTP {exc.status_code}"
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error")
    kind = error.get("type") if isinstance(error, dict) else None
    named = f" ({kind})" if isinstance(kind, str) and _ERROR_TYPE.fullmatch(kind) else ""
    return f"Claude's stream reported an error{named}"


def _whole_object(raw: str) -> bool:
    """Whether a tool input, as streamed, is one complete JSON object (no input at all is the
    empty object)."""
    try:
        return isinstance(json.loads(raw or "{}"), dict)
    except ValueError:
        return False


async def _consume(stream: Any, on_answer: AnswerProgress | None) -> Any:
    """The final message of a stream read to its end, once it is known to be complete: it
    started and stopped, and every tool input is whole JSON (an input cut off mid-string would
    otherwise reach us parsed "as far as it goes", an answer silently truncated)."""
    started = stopped = False
    names: dict[int, str] = {}
    inputs: dict[int, str] = {}
    async for event in stream:
        if event.type == "message_start":
            started = True
        elif event.type == "message_stop":
            stopped = True
        elif event.type == "content_block_start" and event.content_block.type == "tool_use":
            names[event.index] = event.content_block.name
            inputs[event.index] = ""
        elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
            inputs[event.index] += event.delta.partial_json
            if on_answer and names[event.index] == RESPOND_TOOL:
                partial = partial_answer(inputs[event.index])
                if partial:
                    await on_answer(partial)
    if not (started and stopped):
        raise _Malformed("a stream that ended before its message was complete")
    message = await stream.get_final_message()
    content = getattr(message, "content", None)
    if not isinstance(content, list):
        raise _Malformed("a message without content")
    for index, block in enumerate(content):
        if getattr(block, "type", None) != "tool_use":
            continue
        named = isinstance(getattr(block, "id", None), str) and isinstance(names[index], str)
        if not named or not _whole_object(inputs[index]):
            stop = getattr(message, "stop_reason", None)
            why = " (it stopped at max_tokens)" if stop == "max_tokens" else ""
            raise _Malformed(f"a tool call that is not complete{why}")
    return message


def _turn(message: Any) -> ModelTurn:
    """The response's content blocks as a provider-neutral turn (only the kinds we enable)."""
    content: list[str | ToolUse] = []
    for block in message.content:
        if block.type == "tool_use":
            content.append(ToolUse(block.id, block.name, block.input))
        else:
            content.append(getattr(block, "text", ""))
    return ModelTurn(tuple(content))


def _assistant(turn: ModelTurn) -> dict[str, Any] | None:
    """The turn as an assistant message; None when it has nothing the API accepts (it refuses
    empty assistant turns and empty text blocks)."""
    blocks: list[dict[str, Any]] = []
    for part in turn.content:
        if isinstance(part, ToolUse):
            blocks.append(
                {"type": "tool_use", "id": part.id, "name": part.name, "input": part.input}
            )
        elif part.strip():
            blocks.append({"type": "text", "text": part})
    return {"role": "assistant", "content": blocks} if blocks else None


def _tool_results(results: ToolResults) -> dict[str, Any]:
    """One tool_result per tool_use (the API requires it), in one user message."""
    content = [
        {
            "type": "tool_result",
            "tool_use_id": use.id,
            "content": result.content,
            "is_error": result.is_error,
        }
        for use, result in results.results
    ]
    return {"role": "user", "content": content}


def _messages(request: TurnRequest) -> list[dict[str, Any]]:
    messages = opening_messages(request.history, request.question)
    for exchange in request.transcript:
        if isinstance(exchange, ModelTurn):
            assistant = _assistant(exchange)
            if assistant is not None:
                messages.append(assistant)
        elif isinstance(exchange, ToolResults):
            messages.append(_tool_results(exchange))
        else:
            messages.append({"role": "user", "content": exchange})
    return messages


def _read_timeout_s(timeout: float | httpx2.Timeout | None) -> float | None:
    """How long a whole streamed reply may take: the client's timeout (`anthropic.timeout_s`),
    which httpx applies to each read alone, so a server that drips a byte at a time would
    never hit it."""
    return timeout.read if isinstance(timeout, httpx2.Timeout) else timeout


@contextmanager
def _unavailable_on_failure(reply_timeout_s: float | None) -> Iterator[None]:
    """Whatever arrives instead of a well-formed reply, as `ModelUnavailable` with a short
    reason in our words (never the body), so the engine falls back to quoted passages."""
    try:
        yield
    except _Malformed as exc:
        raise ModelUnavailable(f"Claude sent {exc}") from None
    except TimeoutError:
        raise ModelUnavailable(
            f"Claude's reply did not finish within {reply_timeout_s:g}s"
        ) from None
    except anthropic.AuthenticationError:
        raise ModelUnavailable("Claude rejected the API key") from None
    except anthropic.APIStatusError as exc:
        raise ModelUnavailable(_status_reason(exc)) from None
    except (anthropic.APITimeoutError, httpx2.TimeoutException):
        raise ModelUnavailable("Claude did not answer in time") from None
    except anthropic.APIConnectionError:
        raise ModelUnavailable("Claude could not be reached") from None
    except (anthropic.APIError, httpx2.HTTPError) as exc:
        raise ModelUnavailable(f"Claude's reply broke off ({type(exc).__name__})") from None
    except _SDK_PARSE_FAILURES as exc:
        # The SDK's stream helper assumes a well-formed stream: out-of-order events, bad
        # JSON or bytes in an event, a delta for a block never started raise these.
        raise ModelUnavailable(
            f"Claude sent a stream that could not be read ({type(exc).__name__})"
        ) from None


def _usage(response: Any) -> Usage:
    usage = getattr(response, "usage", None)
    return Usage(
        input_tokens=token_count(getattr(usage, "input_tokens", None)),
        output_tokens=token_count(getattr(usage, "output_tokens", None)),
        cache_read_tokens=token_count(getattr(usage, "cache_read_input_tokens", None)),
        cache_write_tokens=token_count(getattr(usage, "cache_creation_input_tokens", None)),
    )


class ClaudeModel:
    """Claude over the Messages API, streamed. A forced tool call is guaranteed by the API."""

    forced_calls_guaranteed = True

    def __init__(self, client: anthropic.AsyncAnthropic, *, model: str, max_tokens: int) -> None:
        self.client = client
        self._model = model
        self._max_tokens = max_tokens
        self._max_reply_bytes = _REPLY_BYTES_FIXED + max_tokens * _REPLY_BYTES_PER_TOKEN
        self._reply_timeout_s = _read_timeout_s(client.timeout)
        # One fixed tool list per variant (with or without the web), byte-identical between
        # requests, so it stays in the prompt cache.
        self._tools: dict[bool, list[dict[str, Any]]] = {}
        for web in (False, True):
            tools = tool_definitions(web=web)
            tools[-1] = {**tools[-1], "cache_control": _CACHE}
            self._tools[web] = tools

    async def turn(
        self, request: TurnRequest, trace: Trace, on_answer: AnswerProgress | None
    ) -> ModelTurn:
        tool = request.required
        params: dict[str, Any] = {
            "tools": self._tools[request.web],
            "tool_choice": {"type": "tool", "name": tool} if tool else {"type": "any"},
        }
        return _turn(await self._call(request.system, _messages(request), params, trace, on_answer))

    async def write(self, system: str, history: Sequence[Turn], question: str, trace: Trace) -> str:
        messages = opening_messages(history, question)
        return _turn(await self._call(system, messages, {}, trace, None)).text

    async def _call(
        self,
        system: str,
        messages: list[dict[str, Any]],
        tools: dict[str, Any],
        trace: Trace,
        on_answer: AnswerProgress | None,
    ) -> Any:
        """One model turn, streamed: the `respond` tool's partial `answer` is passed on as it
        grows. Whatever arrives instead of a well-formed event stream (an error page, JSON, a
        stream cut short or stalled, events the SDK can't parse) is `ModelUnavailable` with a
        short reason and none of the body, so the engine falls back to the extractive answer."""
        started = time.perf_counter()
        params: dict[str, Any] = {
            "model": self._model,
            "max_tokens": self._max_tokens,
            "system": [{"type": "text", "text": system, "cache_control": _CACHE}],
            "messages": messages,
            **tools,
        }
        try:
            with _unavailable_on_failure(self._reply_timeout_s):
                async with self.client.messages.stream(**params) as stream:
                    _require_event_stream(stream.response)
                    stream.response.stream = _ByteBudget(
                        stream.response.stream, self._max_reply_bytes
                    )
                    async with asyncio.timeout(self._reply_timeout_s):
                        response = await _consume(stream, on_answer)
        finally:
            trace.model_calls += 1
            trace.model = self._model
            trace.model_seconds += time.perf_counter() - started
        trace.usage.add(_usage(response))
        return response
