"""The agent loop with Claude's native tool use.

Round 1 forces the knowledge-base search (the model writes the query); later rounds let the model
choose (`any`: search again or respond); the last allowed round forces `respond`. A turn that
fails to respond (plain text, or an invalid respond call) is asked again once; a second failure
is an error for the user, never a guess. Tool failures go back to the model as `is_error`
results. The system prompt and the tool list carry `cache_control`, so every request after the
first reads them from the prompt cache.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2
import jiter

from core.answer.prompts import RETRY_NUDGE, history_messages, system_prompt
from core.answer.tool_runner import AnswerProgress, ToolResult, ToolRunner
from core.answer.tools import RESPOND_TOOL, RespondInput, tool_definitions
from core.answer.wire import media_type, token_count
from core.domain.conversation import Trace, Turn, Usage
from core.errors import ModelUnavailable, NoResponse

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
                partial = _partial_answer(inputs[event.index])
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


def _partial_answer(raw_json: str) -> str | None:
    """The `answer` field of a tool input still being written, including its unfinished last
    string (the SDK's own snapshot leaves unfinished strings out, which would show nothing until
    the whole answer is written)."""
    try:
        value = jiter.from_json(raw_json.encode(), partial_mode="trailing-strings")
    except ValueError:
        return None
    answer = value.get("answer") if isinstance(value, dict) else None
    return answer if isinstance(answer, str) else None


def _block_param(block: Any) -> dict[str, Any]:
    """A response content block as a request parameter (only the kinds we enable)."""
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return {"type": "text", "text": getattr(block, "text", "")}


async def _run(runner: ToolRunner, uses: list[Any]) -> dict[str, ToolResult]:
    found = await runner.run_all([(b.name, b.input) for b in uses])
    return {b.id: r for b, r in zip(uses, found, strict=True)}


def _results_message(
    uses: list[Any], respond: Any, respond_error: str, results: dict[str, ToolResult]
) -> dict[str, Any]:
    """One tool_result per tool_use (the API requires it): why the respond was not accepted,
    and the others' results."""
    content = []
    for b in uses:
        result = ToolResult(respond_error, True) if b is respond else results[b.id]
        content.append(
            {
                "type": "tool_result",
                "tool_use_id": b.id,
                "content": result.content,
                "is_error": result.is_error,
            }
        )
    return {"role": "user", "content": content}


def _read_timeout_s(timeout: float | httpx2.Timeout | None) -> float | None:
    """How long a whole streamed reply may take: the client's timeout (`anthropic.timeout_s`),
    which httpx applies to each read alone, so a server that drips a byte at a time would
    never hit it."""
    return timeout.read if isinstance(timeout, httpx2.Timeout) else timeout


class ClaudeAgent:
    def __init__(
        self,
        client: anthropic.AsyncAnthropic,
        *,
        model: str,
        max_tokens: int,
        max_rounds: int,
    ) -> None:
        self.client = client
        self._model = model
        self._max_tokens = max_tokens
        self._max_rounds = max_rounds
        self._max_reply_bytes = _REPLY_BYTES_FIXED + max_tokens * _REPLY_BYTES_PER_TOKEN
        self._reply_timeout_s = _read_timeout_s(client.timeout)
        # One fixed tool list and system block per variant (with or without the web), each
        # byte-identical between requests, so both stay in the prompt cache.
        self._tools: dict[bool, list[dict[str, Any]]] = {}
        self._system: dict[bool, list[dict[str, Any]]] = {}
        for web in (False, True):
            tools = tool_definitions(web=web)
            tools[-1] = {**tools[-1], "cache_control": _CACHE}
            self._tools[web] = tools
            self._system[web] = [
                {"type": "text", "text": system_prompt(web=web), "cache_control": _CACHE}
            ]

    async def run(
        self,
        question: str,
        history: list[Turn],
        runner: ToolRunner,
        trace: Trace,
        on_answer: AnswerProgress | None = None,
    ) -> RespondInput:
        messages = [*history_messages(history), {"role": "user", "content": question}]
        for round_number in range(1, self._max_rounds + 2):
            tool = runner.required_tool(round_number, self._max_rounds)
            choice = {"type": "tool", "name": tool} if tool else {"type": "any"}
            # A respond that may yet be refused (keywords pending) is not shown while written.
            stream = None if runner.keywords_pending else on_answer
            response = await self._call(messages, choice, runner.web, trace, stream)
            uses = [b for b in response.content if b.type == "tool_use"]
            blocks = [_block_param(b) for b in response.content]
            blocks = [b for b in blocks if b["type"] != "text" or b["text"].strip()]
            if blocks:  # the API refuses empty assistant turns and empty text blocks
                messages.append({"role": "assistant", "content": blocks})
            if not uses:
                runner.failed("the model answered without the respond tool")
                messages.append({"role": "user", "content": RETRY_NUDGE})
                continue
            respond = next((b for b in uses if b.name == RESPOND_TOOL), None)
            others = [b for b in uses if b is not respond]
            results: dict[str, ToolResult] = {}
            if respond is not None and runner.keywords_pending:
                # Tools beside the respond (save_keywords, say) run before it is judged.
                results = await _run(runner, others)
            refusal = ""
            if respond is not None:
                verdict = await runner.judge_respond(
                    respond.input, final=round_number >= self._max_rounds
                )
                if isinstance(verdict, RespondInput):
                    return verdict
                refusal = verdict
            if not results:
                results = await _run(runner, others)
            messages.append(_results_message(uses, respond, refusal, results))
        raise NoResponse(f"no answer within {self._max_rounds} rounds")

    async def _call(
        self,
        messages: list[dict[str, Any]],
        choice: dict[str, str],
        web: bool,
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
            "system": self._system[web],
            "tools": self._tools[web],
            "tool_choice": choice,
            "messages": messages,
        }
        try:
            async with self.client.messages.stream(**params) as stream:
                _require_event_stream(stream.response)
                stream.response.stream = _ByteBudget(stream.response.stream, self._max_reply_bytes)
                async with asyncio.timeout(self._reply_timeout_s):
                    response = await _consume(stream, on_answer)
        except _Malformed as exc:
            raise ModelUnavailable(f"Claude sent {exc}") from None
        except TimeoutError:
            raise ModelUnavailable(
                f"Claude's reply did not finish within {self._reply_timeout_s:g}s"
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
        finally:
            trace.model_calls += 1
            trace.model_seconds += time.perf_counter() - started
        usage = getattr(response, "usage", None)
        trace.usage.add(
            Usage(
                input_tokens=token_count(getattr(usage, "input_tokens", None)),
                output_tokens=token_count(getattr(usage, "output_tokens", None)),
                cache_read_tokens=token_count(getattr(usage, "cache_read_input_tokens", None)),
                cache_write_tokens=token_count(getattr(usage, "cache_creation_input_tokens", None)),
            )
        )
        return response
