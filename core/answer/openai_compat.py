"""Any OpenAI-compatible chat-completions endpoint (Ollama, llama.cpp, vLLM, SGLang), over httpx.

The wire format written by hand: the same tools as Claude's, run by the same agent loop. Local
servers differ in what they honour, and say nothing when they ignore it: llama.cpp's server
accepts `tool_choice` as an object with HTTP 200 and ignores it, and a small model may answer
even `"required"` in prose. So the first forced call finds out (`ToolSupport`): the named form,
then `"required"`, then neither; the finding is kept for the process and in the backend's
`ModelFacts` so other processes skip the probing, and a model known not to call tools goes
straight to search-then-answer without a request.

Replies are streamed, so a reply that loops (`RepetitionGuard`) is cut and its stream closed,
which stops the server generating too. A server that answers a streamed request with a plain
JSON completion is read just as well.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, TypeVar

import httpx
import structlog
from pydantic import BaseModel, Field, ValidationError

from core.answer.prompts import opening_messages
from core.answer.repetition import RepetitionGuard
from core.answer.tools import RESPOND_TOOL, SEARCH_TOOL, tool_definitions
from core.answer.wire import media_type, partial_answer, token_count
from core.config import OpenAICompatibleSettings, RepetitionSettings
from core.domain.agent import AnswerProgress, ModelTurn, ToolResults, ToolUse, TurnRequest
from core.domain.conversation import Trace, Turn, Usage
from core.domain.text import finished_sentences
from core.errors import ModelUnavailable, RemoteFailure, ToolsUnsupported
from core.http_retry import MAX_RESPONSE_BYTES, RetryPolicy, streamed_post
from core.ports import ModelFacts

log = structlog.get_logger(__name__)
_SSE_DATA = "data:"
_SSE_DONE = "[DONE]"
_TOO_LONG = f"the model server sent a response longer than {MAX_RESPONSE_BYTES:,} bytes"


_Shape = TypeVar("_Shape", bound=BaseModel)


class ToolSupport(StrEnum):
    """Which `tool_choice` a server honours, learned from its replies."""

    NAMED = "named"  # {"type": "function", "function": {"name": ...}}: the spec's form
    REQUIRED = "required"  # only the string "required": some tool, the model's pick
    NONE = "none"  # no tool call ever comes back: search-then-answer


def tool_support_key(settings: OpenAICompatibleSettings) -> str:
    """Where the finding about a server's model is kept in `ModelFacts`."""
    return f"tool_choice {(settings.base_url or '').rstrip('/')} {settings.model}"


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": tool["description"],
            "parameters": tool["input_schema"],
        },
    }


class _Function(BaseModel):
    name: str = ""
    # A JSON string by the spec (streamed in pieces); Ollama sends the object itself.
    arguments: str | dict[str, Any] = ""


class _ToolCall(BaseModel):
    # Streamed pieces of one call share its index; a whole message's calls often carry none
    # (OpenAI's own non-streamed format): their place in the list tells them apart.
    index: int | None = None
    id: str | None = None
    function: _Function = _Function()


class _Message(BaseModel):
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(BaseModel):
    message: _Message
    finish_reason: str | None = None


class _Completion(BaseModel):
    """The part of a whole chat completion we use; anything else in the body is ignored."""

    choices: list[_Choice] = Field(min_length=1)
    usage: dict[str, Any] | None = None


class _Delta(BaseModel):
    delta: _Message = _Message()
    finish_reason: str | None = None


class _Chunk(BaseModel):
    """One streamed piece of a completion (the last may hold only the usage)."""

    choices: list[_Delta] = Field(default_factory=list)
    usage: dict[str, Any] | None = None


class _Reply:
    """A reply put together from a whole completion or from its streamed chunks."""

    def __init__(self, guard: RepetitionGuard) -> None:
        self.text = ""
        self.calls: dict[int, tuple[str, str, str | dict[str, Any]]] = {}
        self.usage: dict[str, Any] = {}
        self.stopped = ""  # why the reply was cut short, when it was
        # How the server said the reply ended ("stop", "length", "tool_calls"), and whether a
        # stream was closed by its `[DONE]`: neither, and the reply was cut off on the way.
        self.finish_reason: str | None = None
        self.done = False
        self._guard = guard
        # The answer is written into the `respond` call's arguments, where the text's guard
        # never looked: a looping answer ran to max_tokens (minutes on a CPU model).
        self._answer_guard = RepetitionGuard(guard.settings)

    def add(
        self, message: _Message | None, usage: dict[str, Any] | None, finish: str | None = None
    ) -> bool:
        """Take a whole message or one streamed piece in; False once the reply degenerated."""
        if usage is not None:
            self.usage = usage
        self.finish_reason = finish or self.finish_reason
        if message is None:
            return True
        self.text += message.content or ""
        for position, call in enumerate(message.tool_calls or []):
            key = position if call.index is None else call.index
            old_id, old_name, old_args = self.calls.get(key, ("", "", ""))
            args = call.function.arguments
            merged = args if isinstance(args, dict) else f"{old_args}{args}"
            self.calls[key] = (
                call.id or old_id,
                old_name or call.function.name,
                old_args if isinstance(old_args, dict) and not args else merged,
            )
        if self._guard.feed(self.text):
            self.text = self.text[: self._guard.cut]
            self.stopped = self._guard.reason
            return False
        if self._answer_guard.feed(self._answer_arguments()):
            # Cut JSON is no answer: the call is dropped, and the turn counts as one without one.
            self.calls = {k: c for k, c in self.calls.items() if c[1] != RESPOND_TOOL}
            self.stopped = f"{self._answer_guard.reason} (in its answer)"
            return False
        return True

    def _answer_arguments(self) -> str:
        """The answer the `respond` call holds so far, decoded from its partial JSON (escaped,
        its line breaks would be `\\n` and no repeated line would ever be seen)."""
        return "".join(
            (partial_answer(raw) or "")
            for _, name, raw in self.calls.values()
            if name == RESPOND_TOOL
        )

    @property
    def cut_off(self) -> str:
        """Why the reply's text ended before the model finished it ("" when it did not): the
        server's token limit, or a stream that stopped with neither an end nor `[DONE]` (a
        dropped connection, a crashed server). Not the repetition guard's cut, which is clean."""
        if self.stopped:
            return ""
        if self.finish_reason == "length":
            return "it reached max_tokens"
        if self.finish_reason is None and not self.done:
            return "the stream ended before the reply did"
        return ""

    def turn(self) -> ModelTurn:
        uses = [
            ToolUse(call_id or f"call_{index}", name, _arguments(raw))
            for index, (call_id, name, raw) in sorted(self.calls.items())
        ]
        return ModelTurn((self.text, *uses))


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
        value = json.loads(raw or "{}")
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ModelUnavailable("the model server sent tool call arguments that are not JSON")
    return value


def _parsed(raw: bytes | str, shape: type[_Shape]) -> _Shape:
    """A completion or chunk, or `ModelUnavailable` saying what was wrong with it (in our
    words and the field's name: never the body)."""
    try:
        return shape.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the body"
        raise ModelUnavailable(
            f"the model server sent a malformed chat completion ({where}: {first['msg']})"
        ) from None


class OpenAICompatibleModel:
    """A chat-completions server as a `ChatModel`. Servers may ignore `tool_choice`, so a forced
    call is not guaranteed: plain text in answer to one means the model can't use tools."""

    forced_calls_guaranteed = False

    def __init__(
        self,
        http: httpx.AsyncClient,
        settings: OpenAICompatibleSettings,
        repetition: RepetitionSettings,
        *,
        api_key: str | None,
        facts: ModelFacts | None = None,
    ) -> None:
        """`http` carries the per-read timeout; `settings.request_timeout_s` bounds a whole
        reply. `facts` shares what was learned about the server with other processes."""
        if not settings.base_url or not settings.model:
            raise ValueError("an OpenAI-compatible model needs openai.base_url and openai.model")
        self._http = http
        self._settings = settings
        self._repetition = repetition
        self._url = settings.base_url.rstrip("/") + "/chat/completions"
        self._model = settings.model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._retry = RetryPolicy(
            settings.max_retries, settings.retry_initial_s, settings.retry_max_s
        )
        self._tools = {
            web: [_function(t) for t in tool_definitions(web=web)] for web in (False, True)
        }
        self._facts = facts
        self._fact_key = tool_support_key(settings)
        self._support: ToolSupport | None = (
            None if settings.tool_support == "auto" else ToolSupport(settings.tool_support)
        )

    async def turn(
        self,
        request: TurnRequest,
        trace: Trace,
        on_answer: AnswerProgress | None,  # noqa: ARG002 (the respond tool is not previewed here)
    ) -> ModelTurn:
        support = await self._known_support(trace)
        if support is ToolSupport.NONE:
            raise ToolsUnsupported("the model is known not to call tools")
        body: dict[str, Any] = {"messages": _messages(request), "tools": self._tools[request.web]}
        if request.required == SEARCH_TOOL:
            # A search call is short; a model answering it in prose is cut off early.
            body["max_tokens"] = self._settings.probe_max_tokens
        if request.required is None or support is ToolSupport.REQUIRED:
            return await self._complete({**body, "tool_choice": "required"}, trace)
        named = {"type": "function", "function": {"name": request.required}}
        reply = await self._complete({**body, "tool_choice": named}, trace)
        # Another tool than the one named is the choice ignored, not honoured: the agent loop
        # refuses an answer before a search, and "required" is tried as for no call at all.
        honoured = any(use.name == request.required for use in reply.uses)
        if honoured or support is ToolSupport.NAMED:
            await self._learned(ToolSupport.NAMED, trace)
            return reply
        trace.notes.append('the model server ignored a named tool_choice: trying "required"')
        reply = await self._complete({**body, "tool_choice": "required"}, trace)
        if reply.uses:
            await self._learned(ToolSupport.REQUIRED, trace)
        elif reply.text.strip():
            await self._learned(ToolSupport.NONE, trace)
        else:
            # An empty reply is a glitch, not prose: this answer goes without tools, but the
            # server is not written off for `tool_support_ttl_s` on its account.
            trace.notes.append("the model sent an empty reply to a forced call: not remembered")
        return reply

    async def write(self, system: str, history: Sequence[Turn], question: str, trace: Trace) -> str:
        """Search-then-answer: the passages are in `system` and the model just writes."""
        messages = [
            {"role": "system", "content": system},
            *opening_messages(history, question),
        ]
        return (await self._complete({"messages": messages}, trace)).text

    async def _known_support(self, trace: Trace) -> ToolSupport | None:
        if self._support is None and self._facts is not None:
            try:
                known = await self._facts.get(self._fact_key, self._settings.tool_support_ttl_s)
            except Exception as exc:  # noqa: BLE001 (a hint: never why an answer fails)
                log.warning("model_facts_unreadable", error=type(exc).__name__)
                known = None
            if known in set(ToolSupport):
                self._support = ToolSupport(str(known))
                trace.notes.append(f"tool calls: {known} (remembered)")
        return self._support

    async def _learned(self, support: ToolSupport, trace: Trace) -> None:
        if self._support is support:
            return
        self._support = support
        trace.notes.append(f"tool calls: the model server honours {support.value}")
        log.info("model_tool_support", model=self._model, support=support.value)
        if self._facts is not None:
            try:
                await self._facts.put(self._fact_key, support.value)
            except Exception as exc:  # noqa: BLE001 (only the other processes lose the hint)
                log.warning("model_facts_unwritable", error=type(exc).__name__)

    async def _complete(self, body: dict[str, Any], trace: Trace) -> ModelTurn:
        payload = {"model": self._model, "max_tokens": self._settings.max_tokens, **body}
        payload["stream"] = True
        started = time.perf_counter()
        reply = _Reply(RepetitionGuard(self._repetition))
        deadline_s = self._settings.request_timeout_s
        try:
            async with asyncio.timeout(deadline_s):
                await self._read(payload, reply, trace)
        except TimeoutError:
            raise ModelUnavailable(
                f"the model server did not finish its reply within {deadline_s:g}s"
            ) from None
        except RemoteFailure as exc:
            raise ModelUnavailable(f"the model server {exc}") from None
        finally:
            trace.model_calls += 1
            trace.model = self._model
            trace.model_seconds += time.perf_counter() - started
        if reply.stopped:
            trace.notes.append(f"stopped the model's reply: {reply.stopped}")
        if reply.cut_off and not reply.calls:
            # "The maximum timeout is [1]": a claim cut in half can still pass the sentence
            # check on its remaining words, so what follows the last finished sentence goes.
            reply.text = finished_sentences(reply.text)
            trace.notes.append(
                f"the model's reply was cut off ({reply.cut_off}): its unfinished end left out"
            )
        trace.usage.add(
            Usage(
                input_tokens=token_count(reply.usage.get("prompt_tokens")),
                output_tokens=token_count(reply.usage.get("completion_tokens")),
            )
        )
        return reply.turn()

    async def _read(self, payload: dict[str, Any], reply: _Reply, trace: Trace) -> None:
        def note(retry: str) -> None:
            trace.notes.append(f"model server {retry}")

        async with streamed_post(
            self._http,
            self._url,
            payload,
            headers=self._headers,
            policy=self._retry,
            on_retry=note,
        ) as response:
            if response.status_code == 400 and "tools" in payload:
                # Ollama ("does not support tools") and vLLM without tool parsing refuse.
                raise ToolsUnsupported("the model server refused tools (HTTP 400)")
            if response.status_code >= 400:
                raise ModelUnavailable(f"the model server answered HTTP {response.status_code}")
            media = media_type(response.headers.get("content-type"))
            if media == "text/event-stream":
                await _read_events(response, reply)
            elif media.endswith("json"):
                whole = _parsed(await _read_body(response), _Completion)
                reply.done = True  # a whole body: only its finish_reason can say it was cut
                reply.add(whole.choices[0].message, whole.usage, whole.choices[0].finish_reason)
            else:
                raise ModelUnavailable(
                    f"the model server sent {media} (HTTP {response.status_code}), "
                    "not a chat completion"
                )


async def _read_body(response: httpx.Response) -> bytes:
    content = bytearray()
    async for chunk in response.aiter_bytes():
        content += chunk
        if len(content) > MAX_RESPONSE_BYTES:
            raise ModelUnavailable(_TOO_LONG)
    return bytes(content)


async def _read_events(response: httpx.Response, reply: _Reply) -> None:
    """Server-sent chunks into `reply` until `[DONE]`, the end of the body, or the reply
    degenerating (then the stream is closed, which stops the server). The body is counted as it
    arrives, not line by line: one endless line must not be read into memory whole."""
    read = 0
    pending = b""
    async for piece in response.aiter_bytes():
        read += len(piece)
        if read > MAX_RESPONSE_BYTES:
            raise ModelUnavailable(_TOO_LONG)
        *lines, pending = (pending + piece).split(b"\n")
        for line in lines:
            if not _take_event(line.decode("utf-8", "replace").strip(), reply):
                return
    _take_event(pending.decode("utf-8", "replace").strip(), reply)


def _take_event(line: str, reply: _Reply) -> bool:
    """One line of the stream into `reply`; False at `[DONE]` or once the reply degenerated."""
    if not line.startswith(_SSE_DATA):
        return True  # comments, event names, keep-alives
    data = line[len(_SSE_DATA) :].strip()
    if data == _SSE_DONE:
        reply.done = True
        return False
    if not data:
        return True
    chunk = _parsed(data, _Chunk)
    choice = chunk.choices[0] if chunk.choices else None
    return reply.add(
        choice.delta if choice else None, chunk.usage, choice.finish_reason if choice else None
    )
