"""One answer's web research: its web searches, and the keywords that must follow them.

The obligation: after a web search, the answer is not accepted until keywords for what was found
are saved. The model is asked (save_keywords is forced the next round) and, if it still has not
saved them, asked once more; after that the loop saves keywords it derives from the result
titles itself. So every web search an answer makes is learned, whatever the model does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog

from core.answer.citations import SourceRegistry
from core.answer.prompts import format_sources
from core.answer.tools import (
    SAVE_KEYWORDS_TOOL,
    SaveKeywordsInput,
    WebSearchInput,
    parse_tool_input,
)
from core.config import WebSearchSettings
from core.domain.conversation import ToolCall, Trace
from core.domain.documents import SearchHit
from core.domain.web import WebResult, web_chunks
from core.errors import ToolInputError
from core.learning.knowledge import LearnedKnowledge, derive_keywords
from core.learning.perplexity import web_search_allowed
from core.ports import WebSearch

# The forced save_keywords round, then once more; then the loop derives keywords itself.
MAX_KEYWORD_REQUESTS = 2
KEYWORDS_FIRST = (
    "Not yet: you searched the web, so first call save_keywords with specific keywords for what "
    "you found (product names, option names, error codes), then respond again."
)
log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class WebLearning:
    """What an answer needs to search the web and learn from it; `research` decides per
    conversation whether it may."""

    search: WebSearch
    knowledge: LearnedKnowledge
    settings: WebSearchSettings
    derived_keywords: int
    # `insights.store_questions`: false keeps no question text anywhere, so a learned document
    # records none either (its web query, the model's own search terms, says what it is about).
    store_questions: bool = True

    def research(
        self, question: str, conversation_key: str, allowed: bool | None = None
    ) -> WebResearch | None:
        """The web research for one question; `allowed` is the channel policy's say, which
        wins over `web_search.enabled` / `web_search.channels` when given."""
        if not (
            web_search_allowed(self.settings, conversation_key) if allowed is None else allowed
        ):
            return None
        return WebResearch(
            self.search,
            self.knowledge,
            question=question if self.store_questions else "",
            settings=self.settings,
            derived_keywords=self.derived_keywords,
        )


class WebResearch:
    def __init__(
        self,
        search: WebSearch,
        knowledge: LearnedKnowledge,
        *,
        question: str,
        settings: WebSearchSettings,
        derived_keywords: int,
    ) -> None:
        self._search = search
        self._knowledge = knowledge
        self._question = question
        self._settings = settings
        self._derived_keywords = derived_keywords
        self._searches = 0
        self._requests = 0
        self.pending: list[WebResult] = []
        self.learned_as: dict[str, str] = {}  # web page URL -> the learned document holding it

    async def web_search(self, raw: object, registry: SourceRegistry) -> tuple[str, str]:
        query = parse_tool_input(WebSearchInput, raw).query
        limit = self._settings.max_searches_per_answer
        if self._searches >= limit:
            raise ToolInputError(
                f"the web may be searched {limit} times per answer; answer with the sources "
                "you have"
            )
        self._searches += 1
        result = await self._search.search(query)
        if not result.sources:
            return f'The web search for "{query}" found no page to cite.', "0 web pages"
        self.pending.append(result)
        self._requests = 0
        numbered = registry.add([SearchHit(chunk, score=0.0) for chunk in web_chunks(result)])
        return format_sources(query, numbered), f"{len(result.sources)} web pages"

    async def save_keywords(self, raw: object) -> tuple[str, str]:
        keywords = parse_tool_input(SaveKeywordsInput, raw).keywords
        if not self.pending:
            raise ToolInputError("there is no new web search result to save keywords for")
        await self._learn(keywords)
        return (
            f"Saved {len(keywords)} keywords: {', '.join(keywords)}. Now respond.",
            f"{len(keywords)} keywords",
        )

    @property
    def budget_s(self) -> float:
        """Longest a web search may take: every attempt's timeout and the waits between."""
        s = self._settings
        return s.timeout_s * (s.max_retries + 1) + s.retry_max_s * s.max_retries

    def must_ask(self) -> bool:
        """True when the next round must be save_keywords (and counts the request)."""
        if self.pending and self._requests < MAX_KEYWORD_REQUESTS:
            self._requests += 1
            return True
        return False

    async def respond_refusal(self, *, final: bool, trace: Trace) -> str | None:
        """Why a `respond` can't be accepted yet, or None. When the model was asked enough (or
        this is the last round) the derived keywords are saved and the answer goes through."""
        if not self.pending:
            return None
        if self._requests < MAX_KEYWORD_REQUESTS and not final:
            self._requests += 1
            return KEYWORDS_FIRST
        await self.save_derived(trace)
        return None

    async def save_derived(self, trace: Trace) -> None:
        """Learn what is still pending with keywords from the result titles. A failure here
        is logged and noted, never the reason an answer is lost."""
        if not self.pending:
            return
        keywords = derive_keywords(self.pending, self._derived_keywords)
        started = time.perf_counter()
        call = ToolCall(
            SAVE_KEYWORDS_TOOL, {"keywords": list(keywords), "derived": True}, seconds=0.0
        )
        try:
            await self._learn(keywords)
            call.summary = f"{len(keywords)} keywords derived from the result titles"
        except Exception as exc:  # noqa: BLE001 (learning is a bonus; the answer stands)
            log.warning("learning_failed", error=type(exc).__name__)
            call.is_error = True
            call.summary = f"keywords not saved: {exc}"
            self.pending.clear()  # not retried on every later respond of this answer
        call.seconds = time.perf_counter() - started
        trace.tool_calls.append(call)
        trace.notes.append("the model saved no keywords after its web search: derived them")

    async def _learn(self, keywords: list[str]) -> None:
        """Learn the results pending now; a web search finishing meanwhile (a parallel call)
        stays pending for its own keywords."""
        batch = list(self.pending)
        doc_id = await self._knowledge.learn(
            question=self._question, results=batch, keywords=keywords
        )
        for result in batch:
            for source in result.sources:
                self.learned_as[source.url] = doc_id
        self.pending = [r for r in self.pending if all(r is not b for b in batch)]
