"""Building the core's parts from settings: the one place that knows which implementation to use."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import SecretStr

from bot.unset_secrets import missing_secret
from core.backends.sqlite import SqliteBackend
from core.config import DEFAULT_METRICS_PATH, HEALTH_PATH, READY_PATH, Settings
from core.errors import ConfigError, cannot_listen
from core.ports import (
    Backend,
    ChatModel,
    ConversationStore,
    Embedder,
    Judge,
    ModelFacts,
    PlatformState,
    WebSearch,
)
from core.search.embedder import CachedEmbedder, MiniLMEmbedder
from core.search.embedding_cache import EmbeddingCache
from core.search.threads import limit_blas_threads

# The SDKs (anthropic, elasticsearch, slack, discord) cost seconds of CPU to import: each is
# imported by the builder that needs it, so `bot --help` or `bot ingest` never pays for them.
if TYPE_CHECKING:
    from adapters.discord.bot import DocsBot
    from adapters.slack.server import SlackService
    from core.answer.claude import ClaudeModel
    from core.answer.engine import AnswerEngine
    from core.answer.question_gate import QuestionGate
    from core.answer.web_research import WebLearning
    from core.insights.stale import Notifier
    from core.learning.knowledge import LearnedKnowledge


def build_embedder(settings: Settings) -> CachedEmbedder:
    e = settings.embeddings
    _usable_folders(settings)
    model = MiniLMEmbedder(
        batch_size=e.batch_size,
        max_tokens=e.max_tokens,
        threads=e.threads,
        query_threads=e.query_threads,
    )
    cache = EmbeddingCache(settings.embedding_cache_path, model.model_id, model.dimensions)
    return CachedEmbedder(model, cache, e.query_cache_size)


def _usable_folders(settings: Settings) -> None:
    """The folders of the bot's files exist or can be made: checked first, so a data dir that
    is a file or read-only is one clear error naming the setting, not a SQLite traceback."""
    folders = {
        "storage.data_dir": settings.storage.data_dir,
        "search.sqlite_path": settings.index_path.parent,
        "embeddings.cache_path": settings.embedding_cache_path.parent,
    }
    for key, folder in folders.items():
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            reason = "it is a file, not a folder" if folder.is_file() else exc.strerror or exc
            variable = "BOT_" + key.upper().replace(".", "__")
            place = "a folder" if key == "storage.data_dir" else "a file in a folder"
            raise ConfigError(
                f"{key}: can't use {folder} for the bot's data: {reason}; set it (or "
                f"{variable}) to {place} this user can write"
            ) from None


async def open_backend(
    settings: Settings,
    embedder: Embedder,
    path: Path | None = None,
    *,
    check_compatible: bool = True,
) -> Backend:
    """The configured backend, checked and ready: a bad cluster address, wrong credentials or
    a version mismatch fail here, at start, with a clear message. `path` forces SQLite."""
    if settings.search.backend == "sqlite" or path is not None:
        limit_blas_threads(settings.search.blas_threads)
        return SqliteBackend(settings, embedder, path)
    from core.backends.elasticsearch import ElasticsearchBackend

    return await ElasticsearchBackend.open(settings, embedder, check_compatible=check_compatible)


def build_model(settings: Settings, facts: ModelFacts | None = None) -> ChatModel | None:
    """The model that answers: Claude when its key is set (and the provider allows it), else
    an OpenAI-compatible server when one is configured, else none (extractive answers).
    `facts` keeps what is learned about a server for the deployment's other processes."""
    return _claude(settings) or _openai_compatible(settings, facts)


def _claude_chosen(settings: Settings) -> bool:
    """Whether Claude answers: its key is set and the provider allows it."""
    chosen = settings.answers.provider in ("auto", "anthropic")
    return chosen and settings.secrets.anthropic_api_key is not None


def _claude(settings: Settings) -> ClaudeModel | None:
    key = settings.secrets.anthropic_api_key
    if not _claude_chosen(settings) or key is None:
        return None
    import anthropic

    from core.answer.claude import ClaudeModel

    a = settings.anthropic
    client = anthropic.AsyncAnthropic(
        api_key=key.get_secret_value(),
        base_url=a.base_url,
        timeout=a.timeout_s,
        max_retries=a.max_retries,
    )
    return ClaudeModel(client, model=a.model, max_tokens=settings.answers.max_tokens)


def _openai_compatible(settings: Settings, facts: ModelFacts | None) -> ChatModel | None:
    o = settings.openai
    if settings.answers.provider not in ("auto", "openai") or not o.base_url or not o.model:
        return None
    import httpx

    from core.answer.openai_compat import OpenAICompatibleModel

    key = settings.secrets.openai_api_key
    return OpenAICompatibleModel(
        httpx.AsyncClient(timeout=o.request_timeout_s),
        o,
        settings.answers.repetition,
        api_key=key.get_secret_value() if key else None,
        facts=facts,
    )


def build_judge(settings: Settings) -> Judge | None:
    """Claude as the judge of answer correctness, when its key is set."""
    from core.evaluation.answers import ClaudeJudge

    claude = _claude(settings)
    return ClaudeJudge(claude.client, settings.anthropic.model) if claude else None


def build_knowledge(settings: Settings, backend: Backend) -> LearnedKnowledge:
    from core.learning.knowledge import LearnedKnowledge

    return LearnedKnowledge(
        backend.index,
        backend.embedder,
        backend.keywords,
        max_keywords_per_document=settings.keywords.max_per_document,
    )


def build_web_search(settings: Settings) -> WebSearch | None:
    """The web search provider when any channel may use it; refused without its key."""
    w = settings.web_search
    if not settings.web_search_reach().anywhere:
        return None
    key = _secret(settings.secrets.perplexity_api_key, "PERPLEXITY_API_KEY", "for web search")
    import httpx

    from core.learning.perplexity import PerplexitySearch

    return PerplexitySearch(httpx.AsyncClient(), w, key)


def build_web_learning(settings: Settings, knowledge: LearnedKnowledge) -> WebLearning | None:
    """Web search and what is learned from it, when any channel may search the web."""
    from core.answer.web_research import WebLearning

    search = build_web_search(settings)
    if search is None:
        return None
    return WebLearning(
        search,
        knowledge,
        settings.web_search,
        settings.keywords.derived_max,
        store_questions=settings.insights.store_questions,
    )


def build_engine(settings: Settings, backend: Backend, *, chat: bool = False) -> AnswerEngine:
    from core.answer.engine import AnswerEngine
    from core.answer.limits import BurstLimits
    from core.answer.search_then_answer import SearchThenAnswer

    model = build_model(settings, backend.facts)
    knowledge = build_knowledge(settings, backend)
    web = build_web_learning(settings, knowledge)
    return AnswerEngine(
        index=backend.index,
        store=backend.conversations,
        settings=settings.answers,
        top_k=settings.search.top_k,
        model=model,
        fallback=SearchThenAnswer(model, settings.answers) if model else None,
        knowledge=knowledge,
        web=web,
        policies=settings.policy,
        ground_tool_answers=grounds_tool_answers(settings),
        limits=BurstLimits(settings.answers.limits, backend.askers) if chat else None,
    )


def grounds_tool_answers(settings: Settings) -> bool:
    """Whether the model's tool answers are held to the passages sentence by sentence: the
    chosen model's own setting (`anthropic.ground_answers`, `openai.ground_answers`). Read
    from the settings, so that no SDK is imported for it."""
    models = settings.anthropic if _claude_chosen(settings) else settings.openai
    return models.ground_answers


def _secret(value: SecretStr | None, name: str, purpose: str) -> str:
    if value is None:
        raise missing_secret(name, purpose)
    return value.get_secret_value()


def build_question_gate(settings: Settings, embedder: Embedder) -> QuestionGate:
    from core.answer.question_gate import QuestionGate
    from core.domain.question_model import QuestionModel

    model = QuestionModel.packaged() if settings.channels.question_classifier else None
    return QuestionGate(embedder, model)


def build_slack_app(
    settings: Settings,
    engine: AnswerEngine,
    store: ConversationStore,
    state: PlatformState,
    *,
    embedder: Embedder,
    socket_mode: bool,
    readiness: Callable[[], Awaitable[str | None]] | None = None,
) -> SlackService:
    from slack_bolt.async_app import AsyncApp

    from adapters.slack.app import SlackBot
    from adapters.slack.leftovers import LeftoverSweeper, PendingMessages, process_owner
    from adapters.slack.server import SlackService, one_line_logger
    from adapters.slack.token_watch import TokenWatch

    s = settings.slack
    token = _secret(settings.secrets.slack_bot_token, "SLACK_BOT_TOKEN", "to post answers")
    signing = (
        None
        if socket_mode
        else _secret(
            settings.secrets.slack_signing_secret, "SLACK_SIGNING_SECRET", "to verify requests"
        )
    )
    app = AsyncApp(
        # The token, not a client of ours: Bolt reads SLACK_BOT_TOKEN itself and warns at every
        # start when a client comes too.
        token=token,
        signing_secret=signing,
        request_verification_enabled=not socket_mode,
        # Bolt logs a refused request's whole body at INFO: its lines are cut to one short one.
        logger=one_line_logger("slack_bolt"),
    )
    if s.base_url:  # Bolt copies it into the client it makes for each request
        app.client.base_url = s.base_url
    watch = TokenWatch()  # and its retry handlers
    app.client.retry_handlers.append(watch)

    async def ready() -> str | None:
        return watch.reason() or (await readiness() if readiness is not None else None)

    questions = build_question_gate(settings, embedder)
    # One name for this process's placeholders and its heartbeat, so no other process
    # apologises for an answer it is still writing.
    owner = process_owner()
    pending = PendingMessages(state, owner)
    bot = SlackBot(engine, store, state, s, settings.policy, questions, pending)
    bot.register(app)
    return SlackService(
        bolt=app,
        bot=bot,
        signing_secret=signing,
        settings=s,
        metrics_path=settings.metrics.path,
        readiness=ready,
        leftovers=LeftoverSweeper(state, app.client, s.leftovers, owner, pending),
    )


def build_discord_bot(
    settings: Settings,
    engine: AnswerEngine,
    store: ConversationStore,
    state: PlatformState,
    *,
    embedder: Embedder,
) -> DocsBot:
    from adapters.discord.bot import DocsBot

    questions = build_question_gate(settings, embedder)
    return DocsBot(engine, store, state, settings.discord, settings.policy, questions)


@asynccontextmanager
async def metrics_server(
    settings: Settings, ready: Callable[[], Awaitable[str | None]] | None = None
) -> AsyncIterator[str | None]:
    """`metrics.path` on `metrics.port`, for the processes without an HTTP server of their own
    (`bot discord`, `bot clock`, `bot slack --socket`), while the block runs; yields its URL,
    or None when off. With `ready` (why the process can't answer now, None when it can), also
    GET /healthz (the process is up) and GET /readyz (200, or 503 with the reason), as
    `bot slack --http` serves them: a chat process without a port of its own gets the probes
    a platform's health check needs.

    Served in the process's own event loop, as the Slack server is: no thread per connection
    (prometheus_client's server starts one for each, and keeps an idle one for ever), every
    other path a 404, and a connection without a whole request closed after
    `metrics.idle_connection_s`."""
    m = settings.metrics
    if m.port is None:
        yield None
        return
    from aiohttp import web
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    from adapters.one_line_logs import one_line_logger
    from core import metrics

    path = m.path or DEFAULT_METRICS_PATH

    async def scrape(_: web.Request) -> web.Response:
        body = generate_latest(metrics.REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def alive(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def readiness(_: web.Request) -> web.Response:
        assert ready is not None
        reason = await ready()
        if reason is not None:
            return web.json_response({"ok": False, "reason": reason}, status=503)
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get(path, scrape)
    if ready is not None:
        app.router.add_get(HEALTH_PATH, alive)
        app.router.add_get(READY_PATH, readiness)
    # aiohttp's "Error handling request" for a request that is not HTTP: one line, as on the
    # Slack server's port, not a traceback per request anyone can send.
    runner = web.AppRunner(
        app,
        access_log=None,
        logger=one_line_logger("aiohttp.server"),
        keepalive_timeout=m.idle_connection_s,
        lingering_time=m.refused_linger_s,  # as on the Slack server's port
    )
    await runner.setup()
    try:
        try:
            await web.TCPSite(runner, m.host, m.port).start()
        except OSError as exc:
            raise cannot_listen(
                m.host, m.port, exc, port_setting="metrics.port", host_setting="metrics.host"
            ) from None
        yield f"http://{m.host}:{m.port}{path}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def notifiers(settings: Settings) -> AsyncIterator[dict[str, Notifier]]:
    """A notifier for each platform whose token is set, to post re-checked answers in their
    threads; Discord's over REST only (logged in, no gateway connection)."""
    found: dict[str, Notifier] = {}
    closing: list[Callable[[], Awaitable[None]]] = []
    try:
        if settings.secrets.slack_bot_token is not None:
            from slack_sdk.web.async_client import AsyncWebClient

            from adapters.slack.notify import SlackNotifier

            token = settings.secrets.slack_bot_token.get_secret_value()
            client = AsyncWebClient(token=token)
            if settings.slack.base_url:
                client.base_url = settings.slack.base_url
            found["slack"] = SlackNotifier(client, settings.slack, settings.policy)
        if settings.secrets.discord_token is not None:
            import discord

            from adapters.discord.notify import DiscordNotifier

            rest = discord.Client(intents=discord.Intents.none())
            closing.append(rest.close)
            await rest.login(discord_token(settings))
            found["discord"] = DiscordNotifier(rest.http, settings.discord, settings.policy)
        yield found
    finally:
        for close in closing:
            await close()


def discord_token(settings: Settings) -> str:
    return _secret(settings.secrets.discord_token, "DISCORD_TOKEN", "to connect to Discord")
