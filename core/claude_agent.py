"""The agent loop with Claude's native tool use.

Round 1 forces the knowledge-base search (the model writes the query); later rounds let the model
choose (`any`: search again or respond); the last allowed round forces `respond`. A turn that
fails to respond (plain text, or an invalid respond call) is asked again once; a second failure
is an error for the user, never a guess. Tool failures go back to the model as `is_error`
results. The system prompt and the tool list carry `cache_control`, so every request after the
first reads them from the prompt cache.
"""

from __future__ import annotations

import time
from typing import Any

import anthropic
import jiter

from core.conversation import Trace, Turn, Usage
from core.model_errors import ModelUnavailable, NoResponse
from core.prompts import RETRY_NUDGE, history_messages, system_prompt
from core.tool_runner import AnswerProgress, ToolResult, ToolRunner
from core.tools import (
    RESPOND_TOOL,
    RespondInput,
    tool_definitions,
)

_CACHE = {"type": "ephemeral"}


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
        grows (the SDK parses the partial tool input as far as it goes)."""
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
                current: str | None = None
                raw = ""
                async for event in stream:
                    if event.type == "content_block_start":
                        block = event.content_block
                        current = block.name if block.type == "tool_use" else None
                        raw = ""
                    elif event.type == "input_json" and current == RESPOND_TOOL and on_answer:
                        raw += event.partial_json
                        partial = _partial_answer(raw)
                        if partial:
                            await on_answer(partial)
                response = await stream.get_final_message()
        except anthropic.AuthenticationError:
            raise ModelUnavailable("Claude rejected the API key") from None
        except anthropic.APIStatusError as exc:
            raise ModelUnavailable(f"Claude answered HTTP {exc.status_code}") from None
        except anthropic.APITimeoutError:
            raise ModelUnavailable("Claude did not answer in time") from None
        except anthropic.APIConnectionError:
            raise ModelUnavailable("Claude could not be reached") from None
        finally:
            trace.model_calls += 1
            trace.model_seconds += time.perf_counter() - started
        usage = response.usage
        trace.usage.add(
            Usage(
                input_tokens=usage.input_tokens or 0,
                output_tokens=usage.output_tokens or 0,
                cache_read_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
                cache_write_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
            )
        )
        return response
