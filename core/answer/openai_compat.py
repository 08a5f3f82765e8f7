"""Any OpenAI-compatible chat-completions endpoint (Ollama, vLLM, SGLang), over plain httpx.

The wire format written by hand: the same tools as Claude's, run by the same agent loop. Many
local models ignore `tool_choice`: when one answers a forced tool call with plain text, it can't
do tool use, and the engine switches to search-then-answer (`write`), which needs no tools.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import httpx
from pydantic import BaseModel, Field, ValidationError

from core.answer.prompts import opening_messages
from core.answer.tools import tool_definitions
from core.answer.wire import media_type, token_count
from core.domain.agent import AnswerProgress, ModelTurn, ToolResults, ToolUse, TurnRequest
from core.domain.conversation import Trace, Turn, Usage
from core.errors import ModelUnavailable, RemoteFailure, ToolsUnsupported
from core.http_retry import RetryPolicy, post_json


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": tool["description"],
            "parameters": tool["input_schema"],
        },
    }


def _forced(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


class _Function(BaseModel):
    name: str
    # A JSON string by the spec; Ollama sends the object itself.
    arguments: str | dict[str, Any] = "{}"


class _ToolCall(BaseModel):
    id: str = ""
    function: _Function


class _Message(BaseModel):
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(BaseModel):
    message: _Message


class _Completion(BaseModel):
    """The part of a chat completion we use; anything else in the body is ignored."""

    choices: list[_Choice] = Field(min_length=1)
    usage: dict[str, Any] | None = None


def _assistant(turn: ModelTurn) -> dict[str, Any]:
    """The turn as the next request sends it back (arguments as JSON strings, as the spec has
    them); a turn without calls is plain content."""
    if not turn.uses:
        return {"role": "assistant", "content": turn.text}
    calls = [
        {
            "id": use.id,
            "type": "function",
            "function": {"name": use.name, "arguments": json.dumps(use.input)},
        }
        for use in turn.uses
    ]
    return {"role": "assistant", "content": turn.text or None, "tool_calls": calls}


def _messages(request: TurnRequest) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": request.system},
        *opening_messages(request.history, request.question),
    ]
    for exchange in request.transcript:
        if isinstance(exchange, ModelTurn):
            messages.append(_assistant(exchange))
        elif isinstance(exchange, ToolResults):
            messages += [
                {
                    "role": "tool",
                    "tool_call_id": use.id,
                    "content": f"ERROR: {result.content}" if result.is_error else result.content,
                }
                for use, result in exchange.results
            ]
        else:
            messages.append({"role": "user", "content": exchange})
    return messages


def _arguments(raw: str | dict[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as an object; anything else means the server's reply is
    broken (not a model's mistake to argue about), so the answer falls back."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ModelUnavailable("the model server sent tool call arguments that are not JSON")
    return value


def _reply(response: httpx.Response) -> tuple[ModelTurn, dict[str, Any]]:
    """The message of a 200 chat completion and its usage, or `ModelUnavailable` saying what
    was wrong with it (in our words and the field's name: never the body)."""
    try:
        completion = _Completion.model_validate_json(response.content)
    except ValidationError as exc:
        media = media_type(response.headers.get("content-type"))
        if not media.endswith("json"):
            raise ModelUnavailable(
                f"the model server sent {media} (HTTP {response.status_code}), "
                "not a chat completion"
            ) from None
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the body"
        raise ModelUnavailable(
            f"the model server sent a malformed chat completion ({where}: {first['msg']})"
        ) from None
    message = completion.choices[0].message
    calls = [
        ToolUse(c.id, c.function.name, _arguments(c.function.arguments))
        for c in message.tool_calls or []
    ]
    return ModelTurn((message.content or "", *calls)), completion.usage or {}


class OpenAICompatibleModel:
    """A chat-completions server as a `ChatModel`. Servers may ignore `tool_choice`, so a forced
    call is not guaranteed: plain text in answer to one means the model can't use tools."""

    forced_calls_guaranteed = False

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str,
        model: str,
        api_key: str | None,
        max_tokens: int,
        max_retries: int,
        retry_initial_s: float,
        retry_max_s: float,
    ) -> None:
        self._http = http
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._max_tokens = max_tokens
        self._retry = RetryPolicy(max_retries, retry_initial_s, retry_max_s)
        self._tools = {
            web: [_function(t) for t in tool_definitions(web=web)] for web in (False, True)
        }

    async def turn(
        self,
        request: TurnRequest,
        trace: Trace,
        on_answer: AnswerProgress | None,  # noqa: ARG002 (no streaming on this path yet)
    ) -> ModelTurn:
        tool = request.required
        body = {
            "messages": _messages(request),
            "tools": self._tools[request.web],
            "tool_choice": _forced(tool) if tool else "required",
        }
        return await self._complete(body, trace)

    async def write(self, system: str, history: Sequence[Turn], question: str, trace: Trace) -> str:
        """Search-then-answer: the passages are in `system` and the model just writes."""
        messages = [
            {"role": "system", "content": system},
            *opening_messages(history, question),
        ]
        return (await self._complete({"messages": messages}, trace)).text

    async def _complete(self, body: dict[str, Any], trace: Trace) -> ModelTurn:
        payload = {"model": self._model, "max_tokens": self._max_tokens, **body}
        started = time.perf_counter()
        try:
            response = await post_json(
                self._http, self._url, payload, headers=self._headers, policy=self._retry
            )
        except RemoteFailure as exc:
            raise ModelUnavailable(f"the model server {exc}") from None
        finally:
            trace.model_calls += 1
            trace.model_seconds += time.perf_counter() - started
        if response.status_code == 400 and "tools" in body:
            # Ollama ("does not support tools") and vLLM without tool parsing refuse outright.
            raise ToolsUnsupported(
                f"the model server refused tools: HTTP 400 {response.text[:200]}"
            )
        if response.status_code >= 400:
            raise ModelUnavailable(f"the model server answered HTTP {response.status_code}")
        reply, usage = _reply(response)
        trace.usage.add(
            Usage(
                input_tokens=token_count(usage.get("prompt_tokens")),
                output_tokens=token_count(usage.get("completion_tokens")),
            )
        )
        return reply
