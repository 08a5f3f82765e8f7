"""The answer engine: one question in, one checked answer out, whatever model is (or isn't) there.

Paths, best first: a model with native tool use (Claude, or an OpenAI-compatible model that
honours tool calls); search-then-answer for a model that ignores tools; an extractive answer when
no model is configured or reachable. Every path ends in an `Answer` with a status: a user never
sees silence or a stack trace. The conversation's earlier turns go with each question, and the
new turn is stored for the next.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace

import structlog

from core import metrics
from core.answer.agent import run_agent
from core.answer.citations import (
    NumberedSource,
    SourceRegistry,
    check_answer,
    checked_answer,
    finished_part,
    quote_words,
)
from core.answer.extractive import extractive_answer, unavailable_reason
from core.answer.holding import ALSO_QUOTED, SourceHolding
from core.answer.limits import BurstLimits
from core.answer.search_then_answer import SearchThenAnswer
from core.answer.tool_runner import SearchFn, ToolRunner
from core.answer.tools import (
    SEARCH_TOOL,
    TOOL_NAMES,
    UNKNOWN_TOOL,
    WEB_SEARCH_TOOL,
    RespondInput,
)
from core.answer.turn_order import ConversationLocks
from core.answer.web_research import WebLearning
from core.config import CHARS_PER_TOKEN, AnswerSettings, ResolvedPolicy
from core.domain.agent import AnswerProgress
from core.domain.conversation import (
    Answer,
    AnswerMode,
    AnswerStatus,
    ChannelKind,
    Question,
    SourceKind,
    Trace,
    Turn,
)
from core.domain.documents import SearchFilters, SearchHit, SearchMode
from core.domain.text import head, without_controls
from core.errors import ModelUnavailable, NoResponse, SearchIndexError, ToolsUnsupported
from core.learning.knowledge import LearnedKnowledge
from core.ports import ChatModel, ConversationStore, SearchIndex

log = structlog.get_logger(__name__)

_NOTED_WAIT_S = 0.1  # a follow-up's wait for the answer before it, noted in its trace from this
INDEX_UNAVAILABLE = (
    "I can't reach the knowledge base right now, so I can't answer. "
    "Please try again in a few minutes."
)
NO_MODEL = "No language model is configured, so this is not a written answer."
# Said instead of "nothing found" when the index holds no passage at all: the fix is an ingest,
# not a rephrased question. In the terminal the reader runs the bot, so it names the index's
# `location` (a path or an index name); in a chat, where that is the server's business, not.
EMPTY_INDEX = (
    "The knowledge base is empty: nothing has been ingested into {location} yet. "
    "Run `bot ingest PATH` (a folder, a file or a URL) to add documents, then ask again."
)
# An unasked question no passage comes close to: in an `auto` channel it is held back, not posted.
NOT_CLOSE_ENOUGH = (
    "Nothing in the knowledge base is close enough to this question to answer it unasked."
)
# One person asked more than `answers.limits.per_asker` questions in `window_s`.
SLOW_DOWN = (
    "You've asked a lot of questions in a short time, so I'm pausing for a moment: "
    "please ask again in {seconds} s."
)
# More answers were being written than `answers.limits.model_concurrency` for `model_wait_s`.
BUSY = "Many questions are being answered right now, so this is not a written answer."
EMPTY_INDEX_IN_CHAT = (
    "The knowledge base is empty: no documents have been added yet. Ask the bot's owners to "
    "ingest the team's docs (`bot ingest`), then ask again."
)


@dataclass(frozen=True, slots=True)
class InvalidQuestion:
    message: str


def clean_question(text: str, max_chars: int) -> str | InvalidQuestion:
    cleaned = without_controls(text).strip()
    if not cleaned:
        return InvalidQuestion("Please ask a question: the message was empty.")
    if len(cleaned) > max_chars:
        return InvalidQuestion(
            f"That question is {len(cleaned):,} characters long; the limit is {max_chars:,}. "
            "Please shorten it to the part you need answered."
        )
    return cleaned


def within_budget(turns: list[Turn], token_budget: int) -> list[Turn]:
    """The most recent turns that fit the budget (oldest dropped first). The newest turn is
    kept even when it alone is over the budget, cut to fit: a follow-up to a long pasted log
    still knows what was asked and the start of what was said."""
    kept: list[Turn] = []
    used = 0
    for turn in reversed(turns):
        cost = (len(turn.question) + len(turn.answer)) // CHARS_PER_TOKEN
        if used + cost > token_budget:
            if not kept and token_budget > 0:
                kept.append(_shortened(turn, token_budget * CHARS_PER_TOKEN))
            break
        kept.append(turn)
        used += cost
    return list(reversed(kept))


def _shortened(turn: Turn, chars: int) -> Turn:
    """`turn` within `chars` characters: the question up to half of them, the answer's start
    in the rest."""
    question = head(turn.question, chars // 2)
    return Turn(question, head(turn.answer, chars - len(question)))


def _previewer(
    on_progress: AnswerProgress | None, registry: SourceRegistry
) -> AnswerProgress | None:
    """The model's partial answer as the user may see it: cleaned like the final text; a
    failing progress callback never fails the answer."""
    if on_progress is None:
        return None
    shown = on_progress

    async def preview(partial: str) -> None:
        try:
            await shown(check_answer(finished_part(partial), [], registry)[0])
        except Exception:
            log.warning("progress_callback_failed", exc_info=True)

    return preview


class AnswerEngine:
    def __init__(
        self,
        *,
        index: SearchIndex,
        store: ConversationStore,
        settings: AnswerSettings,
        top_k: int,
        model: ChatModel | None = None,
        fallback: SearchThenAnswer | None = None,
        knowledge: LearnedKnowledge | None = None,
        web: WebLearning | None = None,
        policies: Callable[[str], ResolvedPolicy] | None = None,
        ground_tool_answers: bool = False,
        limits: BurstLimits | None = None,
    ) -> None:
        """`fallback` answers when `model` turns out not to call tools; `policies` gives each
        channel's sources and web search (`Settings.policy`); `ground_tool_answers` holds the
        model's tool answers to the passages sentence by sentence, as search-then-answer's;
        `limits` bound a burst of chat questions (none: the terminal, evaluations)."""
        self._index = index
        self._store = store
        self._settings = settings
        self._top_k = top_k
        self._model = model
        self._fallback = fallback
        self._knowledge = knowledge
        self._web = web
        self._policies = policies
        self._holding = SourceHolding(settings)
        self._in_order = ConversationLocks()
        self._ground_tool_answers = ground_tool_answers
        self._limits = limits

    async def close(self) -> None:
        """Closes what the engine opened itself (the web search's client); the stores and the
        index belong to the backend, which closes them."""
        if self._web is not None:
            await self._web.search.close()

    def in_turn(self, conversation_key: str) -> AbstractAsyncContextManager[None]:
        """The conversation's turn, for an adapter to hold from before it reads the thread's
        history back from its platform until it has asked `answer` (which, in the same task,
        takes it again without waiting): two follow-ups must not both fill a lost history."""
        return self._in_order.held(conversation_key)

    async def search(self, query: str) -> list[SearchHit]:
        return await self._index.search(query, k=self._top_k)

    def _scoped(self, filters: SearchFilters) -> SearchFn:
        """The search one answer makes, within what its channel may be answered from."""
        if filters.is_empty():
            return self.search

        async def search(query: str) -> list[SearchHit]:
            return await self._index.search(query, k=self._top_k, filters=filters)

        return search

    async def answer(self, question: Question, on_progress: AnswerProgress | None = None) -> Answer:
        """`on_progress` receives the answer so far while the model writes it, already cleaned
        like the final text (unknown markers and URLs out, pings defused); the returned
        `Answer` is the checked, final version."""
        started = time.perf_counter()
        trace = Trace()
        cleaned = clean_question(question.text, self._settings.max_question_chars)
        if isinstance(cleaned, InvalidQuestion):
            return Answer(cleaned.message, AnswerStatus.ERROR, AnswerMode.EXTRACTIVE, trace=trace)
        if not question.unasked and (limited := await self._over_limit(question, trace)):
            return limited
        # A follow-up waits for the answer before it, and then has it in its history. The
        # wait is not the answer's time (its metrics and log line): it is noted apart.
        queued = time.perf_counter()
        async with self._in_order.held(question.conversation_key):
            waited = time.perf_counter() - queued
            if waited >= _NOTED_WAIT_S:
                trace.notes.append(f"waited {waited:.1f} s for the conversation's previous answer")
            started += waited
            answer = await self._answer_in_turn(question, cleaned, trace, on_progress)
        trace.total_seconds = time.perf_counter() - started
        answer.trace = trace
        if answer.withheld and answer.status is AnswerStatus.ERROR:
            return answer  # unasked, over its asker's limit: counted as limited, not as an answer
        _count(question.platform, answer)
        log.info(
            "answered",
            platform=question.platform,
            mode=answer.mode.value,
            status=answer.status.value,
            citations=len(answer.citations),
            model_calls=trace.model_calls,
            seconds=round(trace.total_seconds, 3),
        )
        return answer

    async def _answer_in_turn(
        self,
        question: Question,
        cleaned: str,
        trace: Trace,
        on_progress: AnswerProgress | None,
    ) -> Answer:
        """The answer, with the conversation's history read before it and its turn stored
        after it (the conversation's lock is held)."""
        try:
            history = within_budget(
                await self._store.recent(question.conversation_key, self._settings.history_turns),
                self._settings.history_token_budget,
            )
            registry = SourceRegistry()
            answer = await self._produce(question, cleaned, history, registry, trace, on_progress)
            if answer.status is AnswerStatus.NOT_FOUND and not len(registry):
                answer = await self._said_empty(answer, trace, question.channel_kind)
            await self._count_learned_use(answer, registry, cleaned, trace)
        except SearchIndexError as exc:  # the index or its server is down: say so, not silence
            log.warning("index_unavailable", error=str(exc))
            trace.notes.append(str(exc))
            # In the terminal the reader runs the bot, and the error says what to do (a
            # damaged file: delete it and ingest again; "try again later" would not help).
            said = str(exc) if question.channel_kind is ChannelKind.TERMINAL else INDEX_UNAVAILABLE
            answer = Answer(said, AnswerStatus.ERROR, AnswerMode.EXTRACTIVE)
        if answer.status is not AnswerStatus.ERROR and not answer.withheld:
            try:
                await self._store.append(question.conversation_key, Turn(cleaned, answer.text))
            except SearchIndexError as exc:  # the answer stands; only the follow-up context is lost
                log.warning("turn_not_stored", error=str(exc))
        return answer

    async def _said_empty(self, answer: Answer, trace: Trace, kind: ChannelKind) -> Answer:
        """A search that found nothing at all may have searched an empty index: then say so,
        and how to fill it (checked only here, so a normal question costs no extra query)."""
        if (await self._index.stats()).chunks:
            return answer
        trace.notes.append("the index holds no passages")
        text = (
            EMPTY_INDEX.format(location=self._index.location)
            if kind is ChannelKind.TERMINAL
            else EMPTY_INDEX_IN_CHAT
        )
        return Answer(text, AnswerStatus.NOT_FOUND, answer.mode)

    async def _count_learned_use(
        self, answer: Answer, registry: SourceRegistry, question: str, trace: Trace
    ) -> None:
        """Cited learned knowledge was useful: its documents get a use, and so do those of
        their keywords that share a word with what was asked (the question and the searches
        made for it); a document's other keywords did not bring it here, and counting them
        would keep them from ever being pruned. Only a verified citation (its quote is in the
        passage) counts: a made-up quote must not keep anything alive. The keywords come with
        the cited passages, so this costs the store no read."""
        learned = {
            c.doc_id for c in answer.citations if c.source_kind is SourceKind.LEARNED and c.verified
        }
        if not learned or self._knowledge is None:
            return
        searched = [
            str(c.input.get("query", "")) for c in trace.tool_calls if c.name == SEARCH_TOOL
        ]
        asked = quote_words(" ".join([question, *searched]))
        chunks = [s.hit.chunk for s in registry.all() if s.hit.chunk.doc_id in learned]
        keywords = {k for c in chunks for k in c.keywords if quote_words(k) & asked}
        try:
            await self._knowledge.record_use(sorted(learned), sorted(keywords))
        except Exception as exc:  # noqa: BLE001 (bookkeeping: never the reason an answer fails)
            log.warning("learned_use_not_counted", error=type(exc).__name__)

    async def _produce(
        self,
        asked: Question,
        question: str,
        history: list[Turn],
        registry: SourceRegistry,
        trace: Trace,
        on_progress: AnswerProgress | None,
    ) -> Answer:
        policy = self._policies(asked.scope) if self._policies else None
        filters = _filters(policy)
        search = self._scoped(filters)
        if asked.unasked and policy and policy.min_relevance:
            closest = await closest_passage(self._index, question, filters)
            if not _close_enough(closest, policy.min_relevance, trace):
                return Answer(
                    NOT_CLOSE_ENOUGH, AnswerStatus.NOT_FOUND, AnswerMode.EXTRACTIVE, withheld=True
                )
        # An unasked question counts against its asker only once it would cost a model's
        # answer: chatter the floor held back must not be why their next @mention waits.
        if asked.unasked and (limited := await self._over_limit(asked, trace)):
            return limited
        if self._model is None:
            return await self._extractive(search, question, registry, trace, NO_MODEL)
        async with self._model_slot(asked.platform, trace) as admitted:
            if not admitted:
                return await self._extractive(search, question, registry, trace, BUSY)
            allowed = policy.web_search if policy else None
            research = self._web.research(question, asked.scope, allowed) if self._web else None
            runner = ToolRunner(search, registry, trace, self._settings.tool_timeout_s, research)
            deadline_s = self._settings.deadline_s
            try:
                async with asyncio.timeout(deadline_s) as deadline:
                    return await self._written(
                        question, history, search, registry, runner, trace, on_progress
                    )
            except TimeoutError:
                if not deadline.expired():
                    raise
                # Each turn has its timeout; a slow model searching round after round would
                # otherwise keep the asker waiting for all of them.
                trace.notes.append(f"no answer within answers.deadline_s ({deadline_s:g} s)")
                reason = f"The language model took longer than {deadline_s:g} s to answer."
                return await self._extractive(search, question, registry, trace, reason)
            finally:
                await runner.finish()

    async def _over_limit(self, question: Question, trace: Trace) -> Answer | None:
        """What is said instead of an answer when the asker is over `answers.limits.per_asker`
        (this question counts towards it otherwise)."""
        if self._limits is None:
            return None
        wait = await self._limits.asker_wait(f"{question.platform}:{question.user}")
        if not wait:
            return None
        log.info("asker_limited", platform=question.platform, unasked=question.unasked)
        metrics.LIMITED.labels(question.platform, "asker").inc()
        return _slowed_down(question, wait, trace)

    @asynccontextmanager
    async def _model_slot(self, platform: str, trace: Trace) -> AsyncIterator[bool]:
        """A turn among the answers the model writes at once (always, without limits)."""
        if self._limits is None:
            yield True
            return
        started = time.perf_counter()
        async with self._limits.model.slot() as admitted:
            waited = time.perf_counter() - started
            if not admitted:
                trace.notes.append(f"no model slot came free in {waited:.1f} s")
                metrics.LIMITED.labels(platform, "model").inc()
            elif waited >= _NOTED_WAIT_S:
                trace.notes.append(f"waited {waited:.1f} s for a model slot")
            yield admitted

    async def _written(
        self,
        question: str,
        history: list[Turn],
        search: SearchFn,
        registry: SourceRegistry,
        runner: ToolRunner,
        trace: Trace,
        on_progress: AnswerProgress | None,
    ) -> Answer:
        """The model's answer, or what stands in for it when the model fails."""
        assert self._model is not None  # _produce answers without one itself
        try:
            respond = await run_agent(
                self._model,
                question,
                history,
                runner,
                trace,
                max_rounds=self._settings.max_rounds,
                on_answer=_previewer(on_progress, registry),
            )
            answer = await self._agent_answer(respond, registry, trace, search, question)
            # A web page cited in the answer that learned it: feedback on this answer then
            # counts for the learned document too.
            answer.citations = [
                replace(c, doc_id=runner.learned_as.get(c.url, c.doc_id))
                if c.source_kind is SourceKind.WEB
                else c
                for c in answer.citations
            ]
            return answer
        except ToolsUnsupported as exc:
            if self._fallback is None:
                return await self._extractive(
                    search, question, registry, trace, unavailable_reason(exc, trace)
                )
            trace.notes.append("the model ignored tool calls: search-then-answer")
            numbered = registry.add(await _timed(search, question, trace))
            return await self._fallback.answer(question, history, numbered, registry, trace)
        except ModelUnavailable as exc:
            reason = unavailable_reason(exc, trace)
            return await self._extractive(search, question, registry, trace, reason)
        except NoResponse as exc:  # never a guess, and never less than the passages
            trace.notes.append(str(exc))
            reason = f"The language model gave no usable answer ({exc})."
            return await self._extractive(search, question, registry, trace, reason)

    async def _agent_answer(
        self,
        respond: RespondInput,
        registry: SourceRegistry,
        trace: Trace,
        search: SearchFn,
        question: str,
    ) -> Answer:
        """The model's answer as shown: held to the passages claim by claim when its answers
        are grounded; otherwise checked, and completed with the top passages quoted when it
        answers citing none, so that no answer shows less than the answer with no model (a
        strong model's "not found" stands as written: the closest passages are noise then).
        The passages quoted are those of a search for the question itself, as with no model:
        a weak model's own queries can miss what the question asks (one for "password reset"
        about a timeout)."""
        numbered = registry.all()
        if self._ground_tool_answers:
            claimed = AnswerStatus(respond.status)
            top = await self._asked(search, question, trace)
            return self._holding.held(
                respond.answer,
                numbered,
                registry,
                trace,
                AnswerMode.AGENT,
                claimed=claimed,
                top=top,
            )
        answer = checked_answer(respond, registry, AnswerMode.AGENT)
        if answer.status is not AnswerStatus.NOT_FOUND and not answer.citations:
            trace.notes.append("the answer cites no passage: the top passages follow")
            top = await self._asked(search, question, trace)
            return self._holding.completed(answer, numbered, ALSO_QUOTED, top)
        return answer

    @staticmethod
    async def _asked(search: SearchFn, question: str, trace: Trace) -> list[NumberedSource]:
        """The results of a search for the question as asked, numbered apart from the
        passages the model read (what it may cite): `quoted` numbers those it quotes."""
        return SourceRegistry().add(await _timed(search, question, trace))

    async def _extractive(
        self, search: SearchFn, question: str, registry: SourceRegistry, trace: Trace, reason: str
    ) -> Answer:
        numbered = registry.add(await _timed(search, question, trace))
        return extractive_answer(
            numbered,
            passages=self._settings.extractive_passages,
            quote_chars=self._settings.quote_chars,
            reason=reason,
        )


def _filters(policy: ResolvedPolicy | None) -> SearchFilters:
    """A channel's `sources`, and no knowledge learned from the web where it says
    `web_search: false` (README: "never the web")."""
    if policy is None:
        return SearchFilters()
    return SearchFilters(sources=policy.sources, learned=None if policy.learned else False)


def _slowed_down(question: Question, wait: float, trace: Trace) -> Answer:
    """An asked question is told when to ask again; an unasked one is held back unsaid. Both
    are errors of ours, not answers: neither was searched, so neither is a gap in the docs."""
    trace.notes.append(f"the asker's questions are over answers.limits.per_asker for {wait:.0f} s")
    if question.unasked:
        return Answer("", AnswerStatus.ERROR, AnswerMode.EXTRACTIVE, trace=trace, withheld=True)
    said = SLOW_DOWN.format(seconds=math.ceil(wait))
    return Answer(said, AnswerStatus.ERROR, AnswerMode.EXTRACTIVE, trace=trace)


def _close_enough(closest: float | None, floor: float, trace: Trace) -> bool:
    """Whether an unasked question is close enough to some passage to be worth a model call:
    a question the docs plainly don't cover then costs nothing and posts nothing."""
    if closest is None:
        trace.notes.append("no vector side: the relevance floor was not applied")
        return True
    trace.notes.append(f"closest passage: cosine {closest:.3f}")
    if closest < floor:
        log.info("below_relevance_floor", closest=round(closest, 3))
        return False
    return True


async def closest_passage(
    index: SearchIndex, question: str, filters: SearchFilters
) -> float | None:
    """The cosine of the passage closest to `question` (the relevance floor's measure;
    `bench.relevance_floor` calibrates the floor with this same function). Asked of the vector
    side alone, so that neither the fusion's weights nor a server-side fusion hide it. -1 when
    nothing is found (an empty index, a scope with no passages); None when the backend gives
    no cosine, and then the answer's own grounding check decides."""
    hits = await index.search(question, k=1, mode=SearchMode.VECTOR, filters=filters)
    if not hits:
        return -1.0
    return hits[0].vector_score


def held_back(answer: Answer, policy: ResolvedPolicy) -> bool:
    """Whether the answer to a question nobody asked the bot stays unposted: always below the
    relevance floor; when it is not grounded, if the channel asks for grounded answers only."""
    return answer.withheld or (policy.answer_only_when_grounded and not answer.grounded)


async def _timed(search: SearchFn, query: str, trace: Trace) -> list[SearchHit]:
    started = time.perf_counter()
    try:
        return await search(query)
    finally:
        trace.tool_seconds += time.perf_counter() - started


def _count(platform: str, answer: Answer) -> None:
    """The answer in the process's Prometheus metrics (`core.metrics`)."""
    trace = answer.trace
    metrics.ANSWERS.labels(platform, answer.status.value, answer.mode.value).inc()
    metrics.ANSWER_SECONDS.labels(platform).observe(trace.total_seconds)
    if trace.model_calls:
        metrics.MODEL_SECONDS.labels(platform).observe(trace.model_seconds)
    for call in trace.tool_calls:
        # A tool's name is the model's text (steerable by whoever asks), and each label value is
        # a new series on a public endpoint: only our own tools are named.
        metrics.TOOL_CALLS.labels(call.name if call.name in TOOL_NAMES else UNKNOWN_TOOL).inc()
        if call.name == WEB_SEARCH_TOOL:
            metrics.WEB_SEARCHES.inc()
    if any(c.source_kind is SourceKind.WEB for c in answer.citations):
        metrics.WEB_ANSWERS.labels(platform).inc()
    metrics.TOKENS.labels("input").inc(trace.usage.input_tokens)
    metrics.TOKENS.labels("output").inc(trace.usage.output_tokens)
