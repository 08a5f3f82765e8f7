"""Any OpenAI-compatible chat-completions endpoint (Ollama, vLLM, SGLang), over plain httpx.

The same tools and the same loop shape as the Claude path, written by hand against the wire
format. Many local models ignore `tool_choice`: when one answers a forced tool call with plain
text, it can't do tool use, and the engine switches to search-then-answer (`answer_from_sources`),
which needs no tools at all.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel, Field, ValidationError

from core.answer.prompts import NO_TOOLS_PROMPT, RETRY_NUDGE, history_messages
from core.answer.tool_runner import AnswerProgress, ToolResult, ToolRunner
from core.answer.tools import RESPOND_TOOL, RespondInput, tool_definitions
from core.answer.wire import media_type, token_count
from core.domain.conversation import Trace, Turn, Usage
from core.errors import ModelUnavailable, NoResponse, RemoteFailure, ToolsUnsupported
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


@dataclass(frozen=True, slots=True)
class _Call:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Reply:
    content: str | None
    calls: list[_Call]

    def as_message(self) -> dict[str, Any]:
        """The assistant turn as the next request sends it back (arguments as JSON strings,
        as the spec has them)."""
        calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
            }
            for c in self.calls
        ]
        return {"role": "assistant", "content": self.content, "tool_calls": calls}


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


def _reply(response: httpx.Response) -> tuple[_Reply, dict[str, Any]]:
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
        _Call(c.id, c.function.name, _arguments(c.function.arguments))
        for c in message.tool_calls or []
    ]
    return _Reply(message.content, calls), completion.usage or {}


class OpenAICompatibleAgent:
    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str,
        model: str,
        api_key: str | None,
        max_tokens: int,
        max_rounds: int,
        max_retries: int,
        retry_initial_s: float,
        retry_max_s: float,
    ) -> None:
        self._http = http
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._max_tokens = max_tokens
        self._max_rounds = max_rounds
        self._retry = RetryPolicy(max_retries, retry_initial_s, retry_max_s)
        self._tools = {
            web: [_function(t) for t in tool_definitions(web=web)] for web in (False, True)
        }

    async def run(
        self,
        question: str,
        history: list[Turn],
        runner: ToolRunner,
        trace: Trace,
        on_answer: AnswerProgress | None = None,  # noqa: ARG002 (no streaming on this path yet)
    ) -> RespondInput:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": runner.system_prompt()},
            *history_messages(history),
            {"role": "user", "content": question},
        ]
        tools = self._tools[runner.web]
        for round_number in range(1, self._max_rounds + 2):
            tool = runner.required_tool(round_number, self._max_rounds)
            choice: object = _forced(tool) if tool else "required"
            reply = await self._complete(
                {"messages": messages, "tools": tools, "tool_choice": choice}, trace
            )
            if not reply.calls and round_number == 1:
                raise ToolsUnsupported("the model answered a forced tool call with plain text")
            if not reply.calls:  # it can use tools (round 1 did): ask once more, like Claude
                runner.failed("the model answered without the respond tool")
                messages += [
                    {"role": "assistant", "content": reply.content or ""},
                    {"role": "user", "content": RETRY_NUDGE},
                ]
                continue
            messages.append(reply.as_message())
            named = reply.calls
            respond = next((c for c in named if c.name == RESPOND_TOOL), None)
            others = [n for n in named if n is not respond]
            results: list[ToolResult] | None = None
            if respond is not None and runner.keywords_pending:
                # Tools beside the respond (save_keywords, say) run before it is judged.
                results = await runner.run_all([(c.name, c.arguments) for c in others])
            refusal = ""
            if respond is not None:
                verdict = await runner.judge_respond(
                    respond.arguments, final=round_number >= self._max_rounds
                )
                if isinstance(verdict, RespondInput):
                    return verdict
                refusal = verdict
            if results is None:
                results = await runner.run_all([(c.name, c.arguments) for c in others])
            # Matched by position, not by id: servers may send empty or repeated ids.
            pending = iter(results)
            for call in named:
                result = ToolResult(refusal, True) if call is respond else next(pending)
                text = f"ERROR: {result.content}" if result.is_error else result.content
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        raise NoResponse(f"no answer within {self._max_rounds} rounds")

    async def answer_from_sources(
        self, question: str, history: list[Turn], sources_text: str, trace: Trace
    ) -> str:
        """Search-then-answer: the passages go in the prompt and the model just writes."""
        messages = [
            {"role": "system", "content": f"{NO_TOOLS_PROMPT}\n{sources_text}"},
            *history_messages(history),
            {"role": "user", "content": question},
        ]
        content = (await self._complete({"messages": messages}, trace)).content
        if content is None or not content.strip():
            raise NoResponse("the model returned an empty answer")
        return content

    async def _complete(self, body: dict[str, Any], trace: Trace) -> _Reply:
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
