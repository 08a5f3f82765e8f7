"""Any OpenAI-compatible chat-completions endpoint (Ollama, vLLM, SGLang), over plain httpx.

The same tools and the same loop shape as the Claude path, written by hand against the wire
format. Many local models ignore `tool_choice`: when one answers a forced tool call with plain
text, it can't do tool use, and the engine switches to search-then-answer (`answer_from_sources`),
which needs no tools at all.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from core.conversation import Trace, Turn, Usage
from core.http_retry import RemoteFailure, RetryPolicy, post_json
from core.model_errors import ModelUnavailable, NoResponse, ToolsUnsupported
from core.prompts import NO_TOOLS_PROMPT, RETRY_NUDGE, history_messages
from core.tool_runner import AnswerProgress, ToolResult, ToolRunner
from core.tools import RESPOND_TOOL, RespondInput, tool_definitions


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


def _arguments(raw: object) -> object:
    if isinstance(raw, dict):
        return raw
    try:
        return json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        return None


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
            message = await self._complete(
                {"messages": messages, "tools": tools, "tool_choice": choice}, trace
            )
            calls = message.get("tool_calls") or []
            if not calls and round_number == 1:
                raise ToolsUnsupported("the model answered a forced tool call with plain text")
            if not calls:  # it can use tools (round 1 did): ask once more, like Claude
                runner.failed("the model answered without the respond tool")
                messages += [
                    {"role": "assistant", "content": message.get("content") or ""},
                    {"role": "user", "content": RETRY_NUDGE},
                ]
                continue
            messages.append(
                {"role": "assistant", "content": message.get("content"), "tool_calls": calls}
            )
            named = [
                (
                    c.get("id", ""),
                    c.get("function", {}).get("name", ""),
                    _arguments(c.get("function", {}).get("arguments")),
                )
                for c in calls
            ]
            respond = next((n for n in named if n[1] == RESPOND_TOOL), None)
            others = [n for n in named if n is not respond]
            results: list[ToolResult] | None = None
            if respond is not None and runner.keywords_pending:
                # Tools beside the respond (save_keywords, say) run before it is judged.
                results = await runner.run_all([(name, args) for _, name, args in others])
            refusal = ""
            if respond is not None:
                verdict = await runner.judge_respond(
                    respond[2], final=round_number >= self._max_rounds
                )
                if isinstance(verdict, RespondInput):
                    return verdict
                refusal = verdict
            if results is None:
                results = await runner.run_all([(name, args) for _, name, args in others])
            # Matched by position, not by id: servers may send empty or repeated ids.
            pending = iter(results)
            for call in named:
                result = ToolResult(refusal, True) if call is respond else next(pending)
                text = f"ERROR: {result.content}" if result.is_error else result.content
                messages.append({"role": "tool", "tool_call_id": call[0], "content": text})
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
        message = await self._complete({"messages": messages}, trace)
        content = message.get("content")
        if not isinstance(content, str) or not content.strip():
            raise NoResponse("the model returned an empty answer")
        return content

    async def _complete(self, body: dict[str, Any], trace: Trace) -> dict[str, Any]:
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
        try:
            data = response.json()
            message = data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ModelUnavailable("the model server sent a malformed response") from None
        usage = data.get("usage") or {}
        trace.usage.add(
            Usage(
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
            )
        )
        return message if isinstance(message, dict) else {}
