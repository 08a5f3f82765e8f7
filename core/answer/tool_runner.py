"""Running the model's tool calls: validate, execute with a timeout, record, never raise.

Shared by every model path, so Claude and OpenAI-compatible models see identical tools,
identical numbered sources, identical error messages and the same rules about which tool a
round must call (the knowledge base first; keywords after a web search; an answer at the end).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import structlog

from core.answer.citations import SourceRegistry
from core.answer.grounding import content_text
from core.answer.prompts import (
    AFTER_THE_RESULTS,
    EMPTY_ANSWER,
    SEARCH_FIRST,
    format_sources,
    system_prompt,
)
from core.answer.tools import (
    RESPOND_TOOL,
    SAVE_KEYWORDS_TOOL,
    SEARCH_TOOL,
    WEB_SEARCH_TOOL,
    RespondInput,
    SearchInput,
    parse_tool_input,
    required_tool,
)
from core.answer.web_research import WebResearch
from core.domain.agent import ToolResult
from core.domain.conversation import ToolCall, Trace
from core.domain.documents import SearchHit
from core.errors import NoResponse, ToolInputError, WebSearchError

SearchFn = Callable[[str], Awaitable[list[SearchHit]]]
_Handler = Callable[[object], Awaitable[tuple[str, str]]]
log = structlog.get_logger(__name__)


class ToolRunner:
    def __init__(
        self,
        search: SearchFn,
        registry: SourceRegistry,
        trace: Trace,
        timeout_s: float,
        web: WebResearch | None = None,
    ) -> None:
        self._search = search
        self._registry = registry
        self._trace = trace
        self._timeout_s = timeout_s
        self._web = web
        self.failures = 0  # turns without a usable answer; after one, `respond` is forced
        # Whether the knowledge base has been searched: no answer is accepted before it is (a
        # server may ignore the forced first search, and its model answer from nothing).
        self.searched = False
        self._handlers: dict[str, _Handler] = {SEARCH_TOOL: self._search_knowledge_base}
        # Each tool's time limit; a web search has its own retries, so its budget covers them.
        self._timeouts: dict[str, float] = {}
        if web is not None:
            self._handlers[WEB_SEARCH_TOOL] = lambda raw: web.web_search(raw, registry)
            self._handlers[SAVE_KEYWORDS_TOOL] = web.save_keywords
            self._timeouts[WEB_SEARCH_TOOL] = max(timeout_s, web.budget_s)

    @property
    def web(self) -> bool:
        """Whether this answer may search the web (it picks the tools and the system prompt)."""
        return self._web is not None

    def system_prompt(self) -> str:
        return system_prompt(web=self.web)

    def required_tool(self, round_number: int, max_rounds: int) -> str | None:
        """The tool this round must call; None lets the model choose. The search, whatever the
        round, until the knowledge base has been searched."""
        if not self.searched:
            return SEARCH_TOOL
        forced = required_tool(round_number, max_rounds, self.failures)
        if forced is None and self._web is not None and self._web.must_ask():
            return SAVE_KEYWORDS_TOOL
        return forced

    @property
    def keywords_pending(self) -> bool:
        """Web results wait for keywords: a `respond` now may be refused (so it is not
        streamed, and the turn's other tools run before the decision)."""
        return self._web is not None and bool(self._web.pending)

    @property
    def learned_as(self) -> dict[str, str]:
        """Web page URL -> the learned document it went into, for this answer."""
        return self._web.learned_as if self._web is not None else {}

    def failed(self, reason: str) -> None:
        """A turn gave no usable answer: the model is asked again once, then it is over."""
        self.failures += 1
        if self.failures > 1:
            raise NoResponse(f"{reason}, twice")

    async def judge_respond(
        self, raw: object, *, final: bool, searching: bool = False
    ) -> RespondInput | str:
        """The answer when it can be accepted; otherwise what the model is told instead (web
        results waiting for keywords, or what is wrong with its input). `searching`: the same
        turn searches too, so an answer written before its results is refused without counting
        as the model's one failed turn."""
        if not self.searched:
            if searching:
                return AFTER_THE_RESULTS
            self.failed("the model answered before searching the knowledge base")
            return SEARCH_FIRST
        if self._web is not None:
            refusal = await self._web.respond_refusal(final=final, trace=self._trace)
            if refusal is not None:
                return refusal
        try:
            respond = parse_tool_input(RespondInput, raw)
        except ToolInputError as exc:
            self.failed(f"the model's answer was invalid ({exc})")
            return str(exc)
        if respond.status != "not_found" and not content_text(respond.answer):
            self.failed("the model's answer held nothing but citation markers")
            return EMPTY_ANSWER
        return respond

    async def finish(self) -> None:
        """Whatever the answer's outcome, web results found for it are learned."""
        if self._web is not None:
            await self._web.save_derived(self._trace)

    async def _search_knowledge_base(self, raw: object) -> tuple[str, str]:
        query = parse_tool_input(SearchInput, raw).query
        hits = await self._search(query)
        self.searched = True
        return format_sources(query, self._registry.add(hits)), f"{len(hits)} passages"

    async def run(self, name: str, raw_input: object) -> ToolResult:
        started = time.perf_counter()
        call = ToolCall(
            name=name, input=raw_input if isinstance(raw_input, dict) else {}, seconds=0
        )
        limit = self._timeouts.get(name, self._timeout_s)
        try:
            handler = self._handlers.get(name)
            if handler is None:
                known = ", ".join([*self._handlers, RESPOND_TOOL])
                raise ToolInputError(f"unknown tool {name!r}; use one of: {known}")
            content, call.summary = await asyncio.wait_for(handler(raw_input), limit)
            result = ToolResult(content, is_error=False)
        except ToolInputError as exc:
            result = ToolResult(str(exc), is_error=True)
        except TimeoutError:
            result = ToolResult(f"{name} timed out after {limit:g}s", is_error=True)
        except WebSearchError as exc:
            result = ToolResult(
                f"web_search failed: {exc}. Answer from the knowledge-base results (status "
                "partial or not_found if they are not enough).",
                is_error=True,
            )
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
