"""Running the model's tool calls: validate, execute with a timeout, record, never raise.

Shared by every model path, so Claude and OpenAI-compatible models see identical tools,
identical numbered sources and identical error messages.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from core.citations import SourceRegistry
from core.conversation import ToolCall, Trace
from core.models import SearchHit
from core.prompts import format_sources
from core.tools import SEARCH_TOOL, SearchInput, ToolInputError, parse_tool_input

SearchFn = Callable[[str], Awaitable[list[SearchHit]]]
# Receives the answer text written so far, while the model is still writing it.
AnswerProgress = Callable[[str], Awaitable[None]]
log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class ToolResult:
    content: str
    is_error: bool


class ToolRunner:
    def __init__(
        self, search: SearchFn, registry: SourceRegistry, trace: Trace, timeout_s: float
    ) -> None:
        self._search = search
        self._registry = registry
        self._trace = trace
        self._timeout_s = timeout_s

    async def run(self, name: str, raw_input: object) -> ToolResult:
        started = time.perf_counter()
        call = ToolCall(
            name=name, input=raw_input if isinstance(raw_input, dict) else {}, seconds=0
        )
        try:
            if name != SEARCH_TOOL:
                raise ToolInputError(f"unknown tool {name!r}; use {SEARCH_TOOL} or respond")
            query = parse_tool_input(SearchInput, raw_input).query
            hits = await asyncio.wait_for(self._search(query), timeout=self._timeout_s)
            numbered = self._registry.add(hits)
            call.summary = f"{len(hits)} passages"
            result = ToolResult(format_sources(query, numbered), is_error=False)
        except ToolInputError as exc:
            result = ToolResult(str(exc), is_error=True)
        except TimeoutError:
            result = ToolResult(f"{name} timed out after {self._timeout_s:g}s", is_error=True)
        except Exception as exc:  # noqa: BLE001 (the model gets the reason and may recover)
            log.warning("tool_failed", tool=name, error=type(exc).__name__)
            result = ToolResult(f"{name} failed: {type(exc).__name__}: {exc}", is_error=True)
        call.seconds = time.perf_counter() - started
        call.is_error = result.is_error
        if result.is_error:
            call.summary = result.content
        self._trace.tool_calls.append(call)
        self._trace.tool_seconds += call.seconds
        return result

    async def run_all(self, calls: list[tuple[str, object]]) -> list[ToolResult]:
        """Parallel tool calls from one model turn run concurrently."""
        return list(await asyncio.gather(*(self.run(name, raw) for name, raw in calls)))
