"""Every interface the core depends on, and nothing else: the seams where an implementation is
chosen (SQLite or Elasticsearch, Claude or an OpenAI-compatible server, Perplexity) and where
tests put an in-memory fake. Value types live in `core.domain`; implementations elsewhere."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Protocol

from core.domain.agent import AnswerProgress, ModelTurn, TurnRequest
from core.domain.conversation import Answer, Trace, Turn
from core.domain.documents import (
    Chunk,
    DocumentRecord,
    DocumentWrite,
    IndexStats,
    Outcome,
    Progress,
    SearchFilters,
    SearchHit,
    SearchMode,
    Vectors,
)
from core.domain.feedback import RecordedAnswer
from core.domain.health import HealthCheck, ReindexReport
from core.domain.insights import LoggedAnswer
from core.domain.learned import LearnedDocument, LearnedKeyword
from core.domain.replies import PendingReply
from core.domain.web import WebResult


class Closable(Protocol):
    """Anything holding a connection, a file or a client that must be released once."""

    async def close(self) -> None: ...


class SearchIndex(Protocol):
    """Passages with their vectors, searched by both sides and fused.

    The unit of writing is a whole document: its chunks are replaced together with the checksum
    that says which version they came from, and the checksum is written last. That is what makes
    re-ingest idempotent and a crashed ingest resumable: a document whose checksum is current is
    complete."""

    async def write_documents(self, writes: Sequence[DocumentWrite]) -> dict[str, str]:
        """Replace each document's chunks; returns the reason of every document that failed.

        A batch call so that a server backend can send one bulk request for many documents.
        """

    async def replace_document(
        self, record: DocumentRecord, chunks: Sequence[Chunk], vectors: Vectors
    ) -> None:
        """Make `chunks` the document's only chunks and remember its checksum."""

    async def delete_document(self, doc_id: str) -> int:
        """Remove a document and its chunks; returns how many chunks went."""

    async def documents(self) -> dict[str, DocumentRecord]:
        """Every document the index holds, by id."""

    async def passages(self, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        """The passages with these ids that the index holds now, by id (a missing one is
        gone): what tells whether a cited passage changed."""

    async def search(
        self,
        query: str,
        *,
        k: int,
        mode: SearchMode = SearchMode.HYBRID,
        filters: SearchFilters | None = None,
    ) -> list[SearchHit]:
        """Top-k chunks for `query`, with both sides' ranks and scores kept on each hit."""

    async def stats(self) -> IndexStats: ...

    async def refresh(self) -> None:
        """Called once a run of writes (an ingest, a sync) is over: bring whatever the backend
        derives from its writes up to date, so that searching does not pay for it later."""

    @property
    def location(self) -> str:
        """Where the chunks live, for messages to the person running the bot (a file, an index
        name; never a URL, which may carry credentials)."""

    async def close(self) -> None: ...


class Embedder(Protocol):
    """Anything that turns passages and queries into L2-normalised vectors of fixed size."""

    @property
    def model_id(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    async def embed_documents(
        self, texts: Sequence[str], progress: Progress | None = None
    ) -> Vectors: ...

    async def embed_query(self, text: str) -> Vectors: ...


class ConversationStore(Protocol):
    async def recent(self, key: str, limit: int) -> list[Turn]:
        """The last `limit` turns of the conversation, oldest first."""

    async def append(self, key: str, turn: Turn) -> None: ...

    async def expire(self, before: float) -> int:
        """Forget conversations not added to since `before` (epoch seconds), under the same
        retention as the answer log; returns how many went."""

    async def close(self) -> None: ...


class Deliveries(Protocol):
    """Which platform deliveries were handled: a retried event or a duplicate pair is answered
    once, across restarts and processes."""

    async def first_delivery(self, *keys: str) -> bool:
        """True exactly once for any of these keys (an event id, a message id) within the TTL."""


class BotThreads(Protocol):
    """Threads the bot answered in, where follow-ups need no mention."""

    async def remember_thread(self, key: str) -> None: ...

    async def is_bot_thread(self, key: str) -> bool: ...


class LearnedVotes(Protocol):
    async def learned_votes(self) -> dict[str, int]:
        """Net feedback (up minus down) of the answers citing each learned document."""


class AnswerRecords(LearnedVotes, Protocol):
    """What was answered and what users thought of it."""

    async def record_answer(
        self,
        conversation_key: str,
        question: str,
        answer: Answer,
        *,
        posted: bool = True,
        channel: str | None = None,
    ) -> str:
        """Keep what was answered (`posted=False`: held back, in an `auto` channel), so a
        feedback click can be stored with its context and `bot report` can read it.
        `channel`: the channel's key when the conversation key does not start with it (a
        Discord thread's names only the thread)."""

    async def move_answer(self, answer_id: str, conversation_key: str) -> None:
        """The answer's conversation is now this one (a Discord `/ask` answered before its
        thread was opened): where an update to it is posted."""

    async def answer_log(self, since: float) -> list[LoggedAnswer]:
        """Every answer recorded at or after `since` (epoch seconds), oldest first, with the
        votes and 👎 reasons it got."""

    def answer_log_pages(self, since: float, page_size: int) -> AsyncIterator[list[LoggedAnswer]]:
        """The entries of `answer_log`, at most `page_size` at a time (oldest first on
        SQLite, in no set order on Elasticsearch), so a reader of a long window (`bot
        report`) holds one page in memory, not the window."""

    async def claim_recheck(self, answer_id: str) -> bool:
        """True the first time an answer is claimed for a re-check after its sources changed
        (by any process), False ever after: each answer is re-checked and updated once."""

    async def release_recheck(self, answer_id: str) -> None:
        """Undo `claim_recheck`: the next re-check claims the answer again (an update the
        platform did not take for now: a timeout, a rate limit, a server error)."""

    async def expire_answers(self, before: float) -> int:
        """Delete the answers recorded before `before`, with their votes and reasons; returns
        how many answers went."""

    async def record_feedback(self, answer_id: str, user: str, helpful: bool) -> bool:
        """Store (or change) one user's vote; False when the answer is unknown."""

    async def feedback_for(self, answer_id: str) -> list[tuple[str, int]]: ...

    async def record_feedback_reason(
        self, answer_id: str, user: str, reason: str, note: str
    ) -> bool:
        """What one user said was wrong with an answer (one of `FEEDBACK_REASONS`, and a
        note); the newest replaces theirs. False when the answer is unknown."""

    async def feedback_reasons(self, answer_id: str) -> list[tuple[str, str, str]]:
        """(user, reason, note) for each user who gave one."""

    async def recorded_answer(self, answer_id: str) -> RecordedAnswer | None:
        """The answer kept under `answer_id` (it came back from a button: untrusted), to show
        it again; None when unknown."""


class PendingReplies(Protocol):
    """The messages shown while answers are written ("Looking through the docs…") that nothing
    has replaced yet, kept in the store: a process killed in the middle of an answer can't
    apologise for it, so the next one does (`adapters/slack/leftovers`).

    Which process still answers is told by heartbeats: each running process `beat`s now and
    then; a reply whose owner has gone silent is abandoned. A heartbeat, not a host and a pid:
    with several processes on Elasticsearch, on other machines or in containers of their own
    (where every process is pid 1), no process can look another's pid up."""

    async def hold_reply(self, reply: PendingReply) -> None:
        """Remember `reply`, by its id: again with its new message when one replaced it (a
        stream in place of the placeholder)."""

    async def drop_reply(self, reply_id: str) -> None:
        """Forget the reply: the answer, or an apology, replaced its message. An unknown id
        (a reply claimed meanwhile) is no error."""

    async def beat(self, owner: str, forget_after_s: float) -> None:
        """`owner`, a running process, is alive now. Owners not heard from for
        `forget_after_s` are forgotten (their replies are abandoned by age by then)."""

    async def abandoned_replies(
        self, platform: str, *, silent_s: float, older_than_s: float, limit: int
    ) -> list[PendingReply]:
        """At most `limit` of the platform's replies, oldest first, that no process will
        replace: those at least `silent_s` old whose owner has not beaten for `silent_s`
        (gone), and those older than `older_than_s` whoever owns them (no answer runs that
        long)."""

    async def claim_reply(self, reply_id: str) -> bool:
        """Forget the reply, and say True to exactly one caller, across processes: the one
        that replaces its message."""


class PlatformState(Deliveries, BotThreads, AnswerRecords, PendingReplies, Protocol):
    """Everything a chat adapter keeps beyond conversation turns, in one store."""

    async def close(self) -> None: ...


class ModelFacts(Protocol):
    """What was learned about a model server (which `tool_choice` it honours), kept beside the
    other state so every process of the deployment knows it without finding out again."""

    async def get(self, key: str, max_age_s: float) -> str | None:
        """The value stored under `key` within the last `max_age_s` seconds, else None."""

    async def put(self, key: str, value: str) -> None: ...

    async def close(self) -> None: ...


class RunLocks(Protocol):
    async def claim(self, name: str, holder: str, ttl_s: float) -> bool:
        """True when `holder` now holds `name` (it was free, expired, or already its own)."""

    async def release(self, name: str, holder: str) -> None:
        """Free `name` if `holder` still holds it; someone else's claim is left alone."""

    async def held(self, name: str) -> tuple[str, float] | None:
        """Who holds `name` and when that claim expires (epoch seconds); None when it is free.
        For the message a refused caller shows: "running since ..., by host:pid"."""

    async def close(self) -> None: ...


class AskerWindows(Protocol):
    """Each asker's recent questions, counted in the store: every process serving the same
    backend (Slack's behind a load balancer) draws on one count."""

    async def admit(self, asker: str, cap: int, window_s: float) -> float:
        """0 when `asker` asked fewer than `cap` questions in the last `window_s` (this one
        now counts); otherwise the seconds until they may ask (a refused one does not count,
        so asking again sooner adds no wait)."""

    async def close(self) -> None: ...


class Keywords(Protocol):
    """Learned keywords: one keyword, many associations, use counts."""

    async def add(self, keyword: str, *, doc_id: str, question: str) -> None:
        """Save `keyword` (already normalised) for a learned document and the question."""

    async def get(self, keyword: str) -> LearnedKeyword | None: ...

    async def all(self) -> list[LearnedKeyword]: ...

    async def record_use(self, keywords: list[str]) -> None:
        """One more use of each keyword, now (its learned knowledge was cited)."""

    async def remove_keywords(self, keywords: list[str], *, saved_before: float) -> None:
        """Forget these keywords' associations made up to `saved_before`, and the keywords left
        with none (one saved again meanwhile keeps its new association)."""


class LearnedDocumentStore(Protocol):
    """Each learned document's record: question, web sources, created, last used, uses."""

    async def add_document(self, document: LearnedDocument) -> None:
        """Remember a learned document; one that exists already is left as it is."""

    async def documents(self) -> list[LearnedDocument]:
        """Every learned document, each with the keywords linked to it now."""

    async def document(self, doc_id: str) -> LearnedDocument | None: ...

    async def record_document_use(self, doc_ids: list[str]) -> None:
        """One more use of each learned document, now."""

    async def remove_document(self, doc_id: str) -> None:
        """Forget a learned document and its associations."""


class KeywordStore(Keywords, LearnedDocumentStore, Protocol):
    """Both, in one store: a learned document and its keywords change together."""

    async def forget_questions(self, before: float) -> int:
        """The questions kept with what was learned before `before` (epoch seconds) dropped,
        as `insights.retention_days` drops the answer log's: a learned document keeps none, an
        association keeps the question's hash (`HASHED_QUESTION`), so each still counts as one
        save. Returns how many records changed."""

    async def close(self) -> None: ...


class WebSearch(Protocol):
    async def search(self, query: str) -> WebResult: ...

    async def close(self) -> None: ...


class IngestProgress(Protocol):
    """What a long ingest tells its user; the CLI draws a progress bar from it."""

    def discovering(self, where: str) -> None:
        """Finding the documents has begun (a crawl, a clone, a space's listing: minutes,
        before any count is known)."""

    def start(self, total: int) -> None: ...

    def advance(self, display: str, outcome: Outcome) -> None: ...


class Judge(Protocol):
    async def is_correct(self, question: str, reference: str, answer: str) -> bool: ...


# Chat models


class ChatModel(Protocol):
    """A language model behind an API: one turn with tools, or plain text without them. An
    adapter keeps only its wire format, streaming and usage accounting; the rules of a turn
    (which tool when, retries, the round limit) are the agent loop's."""

    @property
    def forced_calls_guaranteed(self) -> bool:
        """Whether the API guarantees a forced tool call: if not, plain text in answer to one
        means the model can't use tools at all."""

    async def turn(
        self, request: TurnRequest, trace: Trace, on_answer: AnswerProgress | None
    ) -> ModelTurn:
        """One turn; `on_answer` receives the `respond` tool's answer while it is written."""

    async def write(self, system: str, history: Sequence[Turn], question: str, trace: Trace) -> str:
        """A plain-text reply with no tools (search-then-answer); empty when the model wrote
        nothing."""


# Backends


class Backend(Protocol):
    """One storage backend: the index, every store beside it and the connection they share.
    Stores are opened when first used, and everything is closed once, stores before the index
    (and the client last)."""

    @property
    def index(self) -> SearchIndex: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def conversations(self) -> ConversationStore: ...

    @property
    def locks(self) -> RunLocks: ...

    @property
    def keywords(self) -> KeywordStore: ...

    @property
    def facts(self) -> ModelFacts: ...

    @property
    def askers(self) -> AskerWindows: ...

    def platform_state(self, dedup_ttl_s: float, store_questions: bool = True) -> PlatformState:
        """The adapters' state; each platform keeps deliveries for its own time."""

    async def health(self) -> list[HealthCheck]:
        """The backend's own checks beyond the index's content (a cluster's connection,
        version, health, licence and index version; whether an embedded backend's files are
        whole)."""

    async def reindex(
        self, *, delete_old: bool, on_progress: Callable[[int, int], None]
    ) -> ReindexReport:
        """A new index version filled while the old one serves, then swapped in."""

    async def drop(self) -> None:
        """Remove everything this backend stored (an evaluation's scratch index)."""

    async def close(self) -> None: ...
