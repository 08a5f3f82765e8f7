"""The `bot` command: ingest, search and benchmark the knowledge base from a terminal."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from bot.logs import configure_logging
from core.config import Settings, load_settings
from core.domain.documents import SearchFilters, SearchMode
from core.domain.text import clip

# Each command imports what it uses: the SDKs and the model runtime cost seconds of CPU at
# import, which `bot --help`, `bot ingest` or `bot doctor` must not pay for `bot slack`'s sake.
if TYPE_CHECKING:
    from adapters.discord.bot import DocsBot
    from bot.diagnostics import Check
    from bot.wiring import Index
    from core.backends.elasticsearch.reindex import ReindexReport
    from core.domain.documents import IndexStats, SearchHit
    from core.domain.learned import LearnedKeyword
    from core.evaluation.retrieval import Dataset
    from core.ingest.pipeline import IngestReport, Removal
    from core.learning.pruning import KeywordPruner, PruneReport
    from core.search.embedder import CachedEmbedder

# No pretty exceptions: they print every frame's local variables (tokens, message texts), and
# `main()` turns every failure into one line anyway.
app = typer.Typer(
    help="A docs bot: answers questions from your documentation, with sources.",
    pretty_exceptions_enable=False,
)
eval_app = typer.Typer(help="Benchmarks on BEIR-layout datasets.")
app.add_typer(eval_app, name="eval")
out = Console()
err = Console(stderr=True)

_SKIPS_SHOWN = 20


EXIT_FAILURE = 1
T = TypeVar("T")
EXIT_USER_ERROR = 2


class _State:
    settings: Settings
    verbose: bool = False


state = _State()


@app.callback()
def _main(
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="Settings file (default: $BOT_CONFIG or config.yaml)."),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="On failure, print the traceback too.")
    ] = False,
) -> None:
    state.verbose = verbose
    state.settings = load_settings(config)
    configure_logging(state.settings.logging)


@app.command()
def ingest(
    targets: Annotated[list[str], typer.Argument(help="Files, folders (recursive) or URLs.")],
    base_url: Annotated[
        str | None, typer.Option(help="Published location of the files, for citation links.")
    ] = None,
    source: Annotated[str | None, typer.Option(help="Label for this collection.")] = None,
    prune: Annotated[
        bool, typer.Option(help="Delete indexed documents under TARGETS that no longer exist.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List every skip.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable report.")] = False,
) -> None:
    """Index documents: unchanged ones are skipped, changed ones replaced.

    Exits 1 when a target does not exist, when nothing it names could be indexed, or when
    another ingest holds the run lock (two at once would both do the whole work)."""
    report = _under_run_lock(_ingest(targets, base_url, source, prune))
    _print_report(report, verbose, as_json)
    problem = _ingest_problem(report)
    if problem is not None:
        _refuse(problem)


def _under_run_lock(work: Coroutine[object, object, T]) -> T:
    """Runs an ingest-locked command; another holder of the lock is a refusal (exit 1), the
    same as a run that did nothing: a script must see that its work was not done."""
    from core.errors import RunLockHeld

    try:
        return asyncio.run(work)
    except RunLockHeld as exc:
        _refuse(str(exc))


def _refuse(problem: str) -> NoReturn:
    err.print(Text(f"error: {problem}", style="red"), soft_wrap=True)
    raise typer.Exit(EXIT_FAILURE)


async def _ingest(
    targets: list[str], base_url: str | None, source: str | None, prune: bool
) -> IngestReport:
    import httpx

    from bot.progress import RichIngestProgress
    from bot.wiring import build_embedder, build_locks, open_index
    from core.ingest.pipeline import Ingestor
    from core.run_locks import run_lock

    s = state.settings
    embedder = build_embedder(s)
    index = await open_index(s, embedder)
    locks = build_locks(s, index)
    headers = {"User-Agent": s.ingest.user_agent}
    timeout = httpx.Timeout(s.ingest.url_timeout_s)
    try:
        async with (
            run_lock(locks, "ingest", s.ingest.lock_ttl_s),
            httpx.AsyncClient(headers=headers, timeout=timeout) as http,
        ):
            ingestor = Ingestor(index, embedder, s.ingest, http=http)
            with RichIngestProgress(err, s.ingest.progress_min_items) as progress:
                return await ingestor.ingest(
                    targets,
                    source=source or s.ingest.default_source,
                    base_url=base_url,
                    prune=prune,
                    progress=progress,
                )
    finally:
        await locks.close()
        await index.close()


def _ingest_problem(report: IngestReport) -> str | None:
    """The one line that makes an ingest fail, or None when it did what it was asked."""
    from core.domain.documents import Outcome

    if report.missing:
        named = ", ".join(f"{m.display} ({m.reason})" for m in report.missing)
        rest = "; the other targets were ingested" if report.indexed else ""
        return f"nothing to ingest at {named}{rest}"
    # Deleting (--prune) or finding everything unchanged is work done, not a failure.
    if report.indexed == 0 and report.counts[Outcome.DELETED] == 0:
        skipped = len(report.skipped) + len(report.failed)
        if skipped == 0:
            return f"no supported files under {', '.join(report.targets)}"
        return f"nothing was indexed: all {skipped} file(s) were skipped (reasons above)"
    if report.failed:
        return f"{len(report.failed)} document(s) could not be written (reasons above)"
    return None


def _print_report(report: IngestReport, verbose: bool, as_json: bool = False) -> None:
    from core.domain.documents import Outcome

    c = report.counts
    if as_json:
        rows = {
            kind: [{"display": p.display, "reason": p.reason} for p in problems]
            for kind, problems in (
                ("skipped", report.skipped),
                ("failed", report.failed),
                ("missing", report.missing),
            )
        }
        counts = {o.value: c[o] for o in Outcome}
        totals = {"counts": counts, "chunks": report.chunks_written, "seconds": report.seconds}
        out.print_json(json.dumps({**totals, **rows}))
        return
    summary = ", ".join(f"{c[o]} {o.value}" for o in Outcome if c[o] or o is Outcome.ADDED)
    out.print(
        f"Ingested in {report.seconds:.1f}s: {summary}; {report.chunks_written} chunks written.",
        soft_wrap=True,
    )
    problems = report.failed + report.skipped
    if not problems:
        return
    table = Table("file", "reason", title="Not indexed", title_justify="left")
    shown = problems if verbose else problems[:_SKIPS_SHOWN]
    for item in shown:
        table.add_row(Text(item.display), Text(item.reason))
    err.print(table)
    if len(problems) > len(shown):
        err.print(f"... and {len(problems) - len(shown)} more (--verbose lists all)")


@app.command()
def remove(
    targets: Annotated[
        list[str], typer.Argument(help="Source labels, URLs, or paths that were ingested.")
    ],
) -> None:
    """Remove documents from the index: a source label's, a URL's, or those ingested from a
    path (a file, or everything under a folder). Undoes a wrong `bot ingest`."""
    removals = _under_run_lock(_remove(targets))
    for r in removals:
        out.print(
            Text(f"{r.target} ({r.kind}): {r.documents} document(s), {r.chunks} chunk(s) removed"),
            soft_wrap=True,
        )
    unmatched = [r.target for r in removals if r.documents == 0]
    if unmatched:
        _refuse(
            f"nothing in the index matched {', '.join(unmatched)} "
            "(a source label, a URL or an ingested path; `bot search` shows sources)"
        )


async def _remove(targets: list[str]) -> list[Removal]:
    from bot.wiring import build_embedder, build_locks, open_index
    from core.ingest.pipeline import remove as remove_documents
    from core.run_locks import run_lock

    s = state.settings
    index = await open_index(s, build_embedder(s))
    locks = build_locks(s, index)
    try:
        async with run_lock(locks, "ingest", s.ingest.lock_ttl_s):
            return await remove_documents(index, targets)
    finally:
        await locks.close()
        await index.close()


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    k: Annotated[int, typer.Option("-k", min=1, max=100, help="How many hits.")] = 5,
    explain: Annotated[
        bool, typer.Option(help="Show BM25 rank, vector rank and fused score of each hit.")
    ] = False,
    mode: Annotated[SearchMode, typer.Option(help="Which side(s) to search.")] = SearchMode.HYBRID,
    source: Annotated[list[str] | None, typer.Option(help="Only these sources.")] = None,
    learned: Annotated[
        bool | None, typer.Option("--learned/--not-learned", help="Only (or no) learned entries.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Search the knowledge base."""
    if not query.strip():
        err.print("error: the query is empty", soft_wrap=True)
        raise typer.Exit(EXIT_USER_ERROR)
    filters = SearchFilters(sources=tuple(source or ()), learned=learned)
    hits, why_none = asyncio.run(_search(query, k, mode, filters))
    if as_json:
        out.print_json(json.dumps([_hit_json(h) for h in hits]))
    elif not hits:
        out.print(why_none, soft_wrap=True)
    else:
        _print_hits(hits, explain)


async def _search(
    query: str, k: int, mode: SearchMode, filters: SearchFilters
) -> tuple[list[SearchHit], str]:
    """The hits, and when there are none, why: an empty index and a filter that matches no
    document call for different actions, and "no results" alone names neither."""
    from bot.wiring import build_embedder, open_index

    s = state.settings
    index = await open_index(s, build_embedder(s))
    try:
        hits = await index.search(query, k=k, mode=mode, filters=filters)
        return hits, "" if hits else _no_hits_reason(await index.stats(), filters, index.location)
    finally:
        await index.close()


def _no_hits_reason(stats: IndexStats, filters: SearchFilters, location: str) -> str:
    if not stats.chunks:
        return (
            f"The knowledge base is empty: nothing has been ingested into {location} yet. "
            "Run `bot ingest PATH` (a folder, a file or a URL) to add documents."
        )
    unknown = [name for name in filters.sources if name not in stats.sources]
    if unknown and len(unknown) == len(filters.sources):
        indexed = ", ".join(f"{name} ({n} passages)" for name, n in sorted(stats.sources.items()))
        return (
            f"No document has the source {', '.join(map(repr, unknown))}; the sources indexed "
            f"are: {indexed}."
        )
    if filters.learned and not stats.learned_chunks:
        return "Nothing has been learned from the web yet (--learned matches no entry)."
    return f"No passage matches this query among {stats.chunks} passages."


def _snippet(text: str) -> str:
    return clip(text, state.settings.search.snippet_chars)


def _hit_json(hit: SearchHit) -> dict[str, object]:
    c = hit.chunk
    return {
        "title": c.title,
        "heading": c.heading,
        "url": c.url,
        "doc_id": c.doc_id,
        "source": c.source,
        "learned": c.learned,
        "snippet": _snippet(c.text),
        "score": hit.score,
        "bm25_rank": hit.bm25_rank,
        "bm25_score": hit.bm25_score,
        "vector_rank": hit.vector_rank,
        "vector_score": hit.vector_score,
    }


def _rank(rank: int | None, score: float | None) -> str:
    return "–" if rank is None or score is None else f"#{rank} ({score:.3f})"


def _print_hits(hits: list[SearchHit], explain: bool) -> None:
    for number, hit in enumerate(hits, start=1):
        c = hit.chunk
        line = Text(f"{number}. ", style="bold")
        line.append(c.title, style="bold")
        if c.heading:
            line.append(f" › {c.heading}")
        if c.learned:
            line.append(" [learned]", style="yellow")
        out.print(line)
        out.print(Text(f"   {c.url}", style="cyan"))
        out.print(Text(f"   {_snippet(c.text)}"))
        if explain:
            out.print(
                Text(
                    f"   fused {hit.score:.5f} · bm25 {_rank(hit.bm25_rank, hit.bm25_score)}"
                    f" · vector {_rank(hit.vector_rank, hit.vector_score)}",
                    style="dim",
                )
            )


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question, in plain words.")],
    as_json: Annotated[bool, typer.Option("--json", help="The whole answer object.")] = False,
    conversation: Annotated[
        str | None, typer.Option(help="Continue a conversation: earlier turns are context.")
    ] = None,
) -> None:
    """Ask a question; the answer cites its sources (the same path as Slack and Discord)."""
    if not question.strip():
        err.print('error: the question is empty: bot ask "How do I ...?"', soft_wrap=True)
        raise typer.Exit(EXIT_USER_ERROR)
    asyncio.run(_converse([question], as_json, conversation))


@app.command()
def chat(
    conversation: Annotated[str | None, typer.Option(help="Resume a conversation by name.")] = None,
) -> None:
    """A conversation in the terminal: ask follow-ups; an empty line or Ctrl-D ends it."""
    asyncio.run(_converse(None, False, conversation))


async def _converse(questions: list[str] | None, as_json: bool, conversation: str | None) -> None:
    from adapters.console.session import ConsoleSession
    from bot.wiring import build_embedder, build_engine, open_index

    s = state.settings
    if s.logging.level == "INFO":  # service logs would interleave with the answers on screen
        configure_logging(s.logging.model_copy(update={"level": "WARNING"}))
    index = await open_index(s, build_embedder(s))
    engine = build_engine(s, index)
    session = ConsoleSession(engine, out, conversation)
    try:
        if questions is not None:
            for question in questions:
                session.show(await session.ask(question), as_json)
            return
        while True:
            try:
                line = await asyncio.to_thread(out.input, "[bold]> [/bold]")
            except EOFError:
                break
            if not line.strip():
                break
            session.show(await session.ask(line), as_json)
    finally:
        await engine.close()
        await index.close()


@app.command()
def slack(
    socket: Annotated[
        bool, typer.Option("--socket", help="Socket Mode (needs SLACK_APP_TOKEN).")
    ] = False,
    http: Annotated[
        bool, typer.Option("--http", help="HTTP mode: POST /slack/events, GET /healthz.")
    ] = False,
    port: Annotated[
        int | None, typer.Option(help="HTTP port (default: $PORT, else slack.port).")
    ] = None,
) -> None:
    """Run the Slack bot: @mentions answered in threads, follow-ups, DMs."""
    if socket == http:
        err.print("error: choose exactly one of --socket and --http", soft_wrap=True)
        raise typer.Exit(2)
    asyncio.run(_run_slack(socket, port))


async def _server_index(s: Settings) -> Index:
    """The index of a long-running process, with the model loaded before it listens: a broken
    model stops it at start instead of failing every question, and the first question does
    not pay for the load."""
    from bot.wiring import build_embedder, open_index

    embedder = build_embedder(s)
    await embedder.warm_up()
    return await open_index(s, embedder)


async def _run_slack(socket_mode: bool, port: int | None) -> None:
    """Serve until SIGTERM or SIGINT, then let the answers in progress finish (or apologise in
    their threads) and return: the process exits 0, like `bot discord` and `bot clock`."""
    from adapters.slack.server import run_http, run_socket_mode
    from bot.wiring import build_engine, build_platform_state, build_slack_app, build_store
    from core.errors import MissingSecret

    s = state.settings
    app_token = s.secrets.slack_app_token
    if socket_mode and app_token is None:
        raise MissingSecret("SLACK_APP_TOKEN is not set: it is needed for Socket Mode")
    index = await _server_index(s)
    try:
        store = build_store(s, index)
        engine = build_engine(s, index, store)
        platform = build_platform_state(s, index, s.slack.dedup_ttl_s)
        try:
            service = build_slack_app(s, engine, store, platform, socket_mode=socket_mode)
            if app_token is not None and socket_mode:
                await run_socket_mode(service, app_token.get_secret_value(), out.print)
            else:
                port = port if port is not None else int(os.environ.get("PORT") or s.slack.port)
                await run_http(service, s.slack.host, port, out.print)
        finally:
            await engine.close()
            await platform.close()
    finally:
        await index.close()


discord_app = typer.Typer(help="The Discord bot.", invoke_without_command=True)
app.add_typer(discord_app, name="discord")


@discord_app.callback()
def discord_run(ctx: typer.Context) -> None:
    """Run the Discord bot (the Procfile's worker): /ask, threads, follow-ups."""
    if ctx.invoked_subcommand is None:
        asyncio.run(_run_discord(sync_guild=None, sync_only=False))


@discord_app.command("sync")
def discord_sync(
    guild: Annotated[
        int | None, typer.Option(help="Register in one server only (instant; for testing).")
    ] = None,
) -> None:
    """Register the /ask command with Discord. Run on deploy, not on every start."""
    asyncio.run(_run_discord(sync_guild=guild, sync_only=True))


async def _run_discord(sync_guild: int | None, sync_only: bool) -> None:
    from adapters.discord.startup import explained_connection_failures
    from bot.wiring import (
        build_discord_bot,
        build_engine,
        build_platform_state,
        build_store,
        discord_token,
    )

    s = state.settings
    token = discord_token(s)
    index = await _server_index(s)
    store = build_store(s, index)
    engine = build_engine(s, index, store)
    platform = build_platform_state(s, index, s.discord.dedup_ttl_s)
    bot = build_discord_bot(s, engine, store, platform)
    try:
        with explained_connection_failures():
            await _discord_session(bot, token, sync_guild, sync_only)
    finally:
        await bot.close()
        await engine.close()
        await platform.close()
        await index.close()


async def _discord_session(
    bot: DocsBot, token: str, sync_guild: int | None, sync_only: bool
) -> None:
    import discord

    if sync_only:
        await bot.login(token)
        target = discord.Object(id=sync_guild) if sync_guild else None
        if target is not None:
            bot.tree.copy_global_to(guild=target)
        commands = await bot.tree.sync(guild=target)
        where = f"in server {sync_guild}" if target else "globally (may take up to an hour)"
        out.print(f"Registered {len(commands)} command(s) {where}.")
        return
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, lambda: asyncio.ensure_future(bot.close()))
    await bot.start(token, reconnect=True)


index_app = typer.Typer(help="Index maintenance.")
app.add_typer(index_app, name="index")


@index_app.command("reindex")
def index_reindex(
    delete_old: Annotated[
        bool, typer.Option(help="Delete the previous index version after the swap.")
    ] = False,
) -> None:
    """Build a new index version (new embedder or mapping) and swap the alias, no downtime."""
    report = asyncio.run(_reindex(delete_old))
    vectors = "re-embedded" if report.reembedded else "copied"
    out.print(
        f"{report.new_index} now serves {report.chunks} chunks of {report.documents} documents "
        f"(vectors {vectors}); {report.old_index} "
        + ("deleted." if report.old_deleted else "kept: delete it when satisfied."),
        soft_wrap=True,
    )


async def _reindex(delete_old: bool) -> ReindexReport:
    from bot.progress import RichCountProgress
    from bot.wiring import build_embedder, build_locks, open_index
    from core.backends.elasticsearch.index import ElasticsearchIndex
    from core.backends.elasticsearch.reindex import REINDEX_LOCK, reindex
    from core.errors import SearchIndexError

    s = state.settings
    if s.search.backend != "elasticsearch":
        raise SearchIndexError(
            "reindex is for the elasticsearch backend; for SQLite, delete "
            f"{s.index_path} and run `bot ingest` again (the embedding cache makes it quick)"
        )
    index = await open_index(s, build_embedder(s), check_compatible=False)
    locks = build_locks(s, index)
    holder = f"{socket.gethostname()}:{os.getpid()}"
    claimed = False
    try:
        claimed = await locks.claim(REINDEX_LOCK, holder, s.elasticsearch.reindex_lock_ttl_s)
        if not claimed:
            raise SearchIndexError("another reindex is running (its lock has not expired)")
        assert isinstance(index, ElasticsearchIndex)
        with RichCountProgress(err, "Reindexing") as progress:
            return await reindex(index, delete_old=delete_old, on_progress=progress.update)
    finally:
        if claimed:  # also after a failure or Ctrl-C: a retry must not wait for the expiry
            await locks.release(REINDEX_LOCK, holder)
        await locks.close()
        await index.close()


keywords_app = typer.Typer(help="Keywords learned from web searches.")
app.add_typer(keywords_app, name="keywords")


@keywords_app.command("list")
def keywords_list(
    stale: Annotated[
        bool,
        typer.Option("--stale", help="Only the keywords the next prune would remove, and why."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Every learned keyword: how many answers saved it, how often it was used, and when."""
    learned, report = asyncio.run(_keywords())
    reasons = {s.keyword.keyword: s.reason.value for s in report.stale}
    if stale:
        learned = [k for k in learned if k.keyword in reasons]
    if as_json:
        rows = [{**asdict(k), "stale": reasons.get(k.keyword)} for k in learned]
        out.print_json(json.dumps(rows))
        return
    if not learned:
        out.print("No stale keywords." if stale else "No learned keywords yet.")
        return
    table = Table("keyword", "saved by", "uses", "created", "last used", "prune")
    for k in learned:
        table.add_row(
            Text(k.keyword),
            str(k.associations),
            str(k.uses),
            _when(k.created_at),
            _when(k.last_used_at) if k.last_used_at is not None else "never",
            reasons.get(k.keyword, ""),
        )
    out.print(table)


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M")


@asynccontextmanager
async def _pruner() -> AsyncIterator[KeywordPruner]:
    from bot.wiring import (
        build_embedder,
        build_knowledge,
        build_locks,
        build_platform_state,
        open_index,
    )
    from core.learning.pruning import KeywordPruner

    s = state.settings
    index = await open_index(s, build_embedder(s))
    knowledge = build_knowledge(s, index)
    platform = build_platform_state(s, index, s.slack.dedup_ttl_s)
    locks = build_locks(s, index)
    try:
        yield KeywordPruner(knowledge, platform, locks, s.keywords)
    finally:
        await locks.close()
        await platform.close()
        await knowledge.store.close()
        await index.close()


async def _keywords() -> tuple[list[LearnedKeyword], PruneReport]:
    async with _pruner() as pruner:
        return await pruner.knowledge.store.all(), await pruner.prune(dry_run=True)


@keywords_app.command("prune")
def keywords_prune(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be removed; change nothing.")
    ] = False,
) -> None:
    """Remove stale learned keywords now (what `bot clock` does on its schedule)."""
    report = asyncio.run(_prune(dry_run))
    if report is None:
        err.print("error: another prune is running; try again when it has finished")
        raise typer.Exit(1)
    verb = "Would remove" if dry_run else "Removed"
    out.print(
        f"{verb} {len(report.stale)} keyword(s); learned documents: "
        f"{len(report.documents_removed)} {'to delete' if dry_run else 'deleted'}, "
        f"{len(report.documents_rewritten)} {'to rewrite' if dry_run else 'rewritten'}.",
        soft_wrap=True,
    )
    for item in report.stale:
        out.print(Text(f"  {item.keyword.keyword}  ({item.reason.value})"))


async def _prune(dry_run: bool) -> PruneReport | None:
    from bot.clock import process_holder

    async with _pruner() as pruner:
        if dry_run:
            return await pruner.prune(dry_run=True)
        return await pruner.prune_claimed(process_holder())


@app.command()
def clock() -> None:
    """Run the scheduler (the Procfile's clock): prunes learned keywords on their schedule."""
    asyncio.run(_clock())


async def _clock() -> None:
    from bot.clock import run_clock

    async with _pruner() as pruner:
        await run_clock(state.settings.keywords, pruner)


@app.command()
def doctor() -> None:
    """Check the backend (reachable, versions, licence, index) and say which model answers,
    which platform tokens are set and whether the web is searched."""
    from core.domain.urls import redact_urls_in

    checks = asyncio.run(_doctor())
    table = Table("check", "status", "detail", title=f"backend: {state.settings.search.backend}")
    for check in checks:
        status = (
            "[red]FAIL[/red]" if not check.ok else "info" if check.info else "[green]ok[/green]"
        )
        # Any URL a message quotes (a client library's error) is shown without credentials.
        table.add_row(check.name, status, redact_urls_in(check.detail))
    out.print(table)
    if not all(c.ok for c in checks):
        raise typer.Exit(1)


async def _doctor() -> list[Check]:
    from bot.diagnostics import Check, configuration, diagnose
    from bot.wiring import build_embedder, open_index
    from core.errors import SearchIndexError

    s = state.settings
    embedder = build_embedder(s)
    try:
        index = await open_index(s, embedder, check_compatible=False)
    except SearchIndexError as exc:
        return [Check("connection", False, str(exc)), *configuration(s)]
    try:
        return [*await diagnose(index, embedder), *configuration(s)]
    finally:
        await index.close()


@eval_app.command("retrieval")
def eval_retrieval(
    dataset: Annotated[Path, typer.Option(help="BEIR folder: corpus.jsonl, queries.jsonl, qrels.")],
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N queries.")] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the figures here.")
    ] = None,
    index_path: Annotated[
        Path | None, typer.Option("--index", help="Keep the index here (default: a temp dir).")
    ] = None,
) -> None:
    """nDCG@10, Recall@10, Recall@100 and MRR@10 for bm25, vector and hybrid, side by side."""
    result = asyncio.run(_eval_retrieval(dataset, limit, index_path))
    table = Table(
        "mode",
        "nDCG@10",
        "Recall@10",
        "Recall@100",
        "MRR@10",
        "p50 ms",
        "p95 ms",
        title=f"{result['dataset']}: {result['queries']} queries, "
        f"{result['documents']} documents, {result['chunks']} chunks",
    )
    for row in result["modes"]:  # type: ignore[attr-defined]
        m = row["metrics"]
        table.add_row(
            row["mode"], *(f"{m[x]:.3f}" for x in m), f"{row['p50_ms']:.1f}", f"{row['p95_ms']:.1f}"
        )
    out.print(table)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        out.print(f"Wrote {json_path}")


async def _index_dataset(data: Dataset, index: Index, embedder: CachedEmbedder) -> float:
    """Index a BEIR corpus through the product's pipeline; returns the seconds it took."""
    from bot.progress import RichIngestProgress
    from core.evaluation.retrieval import prepared_corpus
    from core.ingest.pipeline import Ingestor, IngestReport

    s = state.settings
    started = time.perf_counter()
    with RichIngestProgress(err, s.ingest.progress_min_items) as progress:
        progress.start(len(data.corpus))
        await Ingestor(index, embedder, s.ingest).write(
            prepared_corpus(data, s.ingest, "eval"),
            await index.documents(),
            IngestReport(),
            progress,
        )
    return time.perf_counter() - started


def _eval_prefix(s: Settings, dataset: str) -> Settings:
    """Evaluation on Elasticsearch writes to its own throwaway indices, never the bot's."""
    name = "".join(c if c.isalnum() else "-" for c in dataset.lower())
    prefix = f"{s.elasticsearch.index_prefix}-eval-{name}-{uuid.uuid4().hex[:8]}"
    es = s.elasticsearch.model_copy(update={"index_prefix": prefix})
    return s.model_copy(update={"elasticsearch": es})


async def _eval_retrieval(
    folder: Path, limit: int | None, index_path: Path | None
) -> dict[str, object]:
    from bot.wiring import build_embedder, open_index
    from core.backends.elasticsearch.index import ElasticsearchIndex, drop_indices
    from core.evaluation.retrieval import evaluate, load_dataset

    s = state.settings
    data = load_dataset(folder, limit)
    embedder = build_embedder(s)
    with tempfile.TemporaryDirectory(prefix="bot-eval-") as tmp:
        if s.search.backend == "elasticsearch":
            s = _eval_prefix(s, data.name)
            index = await open_index(s, embedder)
        else:
            index = await open_index(s, embedder, index_path or Path(tmp) / "index.sqlite")
        try:
            index_seconds = await _index_dataset(data, index, embedder)
            stats = await index.stats()
            modes = await evaluate(index, data, list(SearchMode))
        finally:
            if isinstance(index, ElasticsearchIndex):
                await drop_indices(index)
            await index.close()
    return {
        "dataset": data.name,
        "backend": s.search.backend,
        "queries": len(data.queries),
        "documents": len(data.corpus),
        "chunks": stats.chunks,
        "index_seconds": round(index_seconds, 1),
        "embeddings_computed": embedder.computed,
        "embeddings_reused": embedder.reused,
        "settings": {
            "rrf_k": s.search.rrf_k,
            "candidates": s.search.candidates,
            "bm25_weight": s.search.bm25_weight,
            "vector_weight": s.search.vector_weight,
            "bm25_columns": s.search.bm25_columns.model_dump(),
            "bm25_max_postings": s.search.bm25_max_postings,
            "chunk_chars": s.ingest.chunk_chars,
            "chunk_overlap_chars": s.ingest.chunk_overlap_chars,
            "embedder": embedder.model_id,
        },
        "modes": [
            {
                "mode": r.mode.value,
                "metrics": r.metrics,
                "p50_ms": r.latency_ms_p50,
                "p95_ms": r.latency_ms_p95,
            }
            for r in modes
        ],
    }


@eval_app.command("answers")
def eval_answers(
    dataset: Annotated[Path, typer.Option(help="BEIR folder, with answers.jsonl for grading.")],
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Write the figures here.")
    ] = None,
) -> None:
    """Ask every question through the engine; score citation hits (and correctness with Claude)."""
    result = asyncio.run(_eval_answers(dataset, limit))
    table = Table("metric", "value", title=f"{result['dataset']}: answers")
    for key, value in result.items():
        if key != "dataset":
            table.add_row(key, json.dumps(value) if isinstance(value, dict) else str(value))
    out.print(table)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        out.print(f"Wrote {json_path}")


async def _eval_answers(folder: Path, limit: int | None) -> dict[str, object]:
    from bot.wiring import build_embedder, build_engine, build_judge, open_index
    from core.evaluation.answers import evaluate_answers, load_references
    from core.evaluation.retrieval import load_dataset

    s = state.settings
    data = load_dataset(folder, limit)
    embedder = build_embedder(s)
    with tempfile.TemporaryDirectory(prefix="bot-eval-") as tmp:
        scratch = s.model_copy(
            update={
                "storage": s.storage.model_copy(update={"data_dir": Path(tmp)}),
                # An evaluation measures the knowledge base; its questions never go to the web.
                "web_search": s.web_search.model_copy(update={"enabled": False, "channels": {}}),
            }
        )
        index = await open_index(scratch, embedder, Path(tmp) / "index.sqlite")
        engine = build_engine(scratch, index)
        try:
            await _index_dataset(data, index, embedder)
            evaluation = await evaluate_answers(
                engine, data, references=load_references(folder), judge=build_judge(scratch)
            )
        finally:
            await engine.close()
            await index.close()
    return {"dataset": data.name, **evaluation.summary()}


def main() -> None:
    """Every failure ends as one line and a non-zero exit code; `-v` adds the traceback.

    A `BotError` says what went wrong and what to do. Anything else is unexpected (a bug, or
    a failure nobody translated yet), and is still one line naming its type, never a page of
    traceback that buries the cause (with `-v`: the traceback, for a bug report).
    """
    from core.errors import BotError

    try:
        app()
    except BotError as exc:
        _fail(exc, f"error: {exc}", EXIT_USER_ERROR)
    except Exception as exc:  # noqa: BLE001 (the last handler: one line, not a traceback)
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else "no details"
        _fail(
            exc,
            f"error: unexpected {type(exc).__name__}: {detail} "
            "(run `bot -v ...` for the traceback)",
            EXIT_FAILURE,
        )


def _fail(exc: BaseException, line: str, code: int) -> None:
    from core.domain.urls import redact_urls_in

    if _verbose_requested():
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    err.print(Text(redact_urls_in(line), style="red"), soft_wrap=True)
    sys.exit(code)


def _verbose_requested() -> bool:
    """`-v` anywhere on the command line: before the command (`bot -v ask`) or after it, where
    some commands also read it as "more detail" (`bot ingest -v` lists every skip)."""
    return state.verbose or any(arg in ("-v", "--verbose") for arg in sys.argv[1:])
