"""`bot keywords` and `bot clock`: keywords learned from the web, and their pruning."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from bot.clock import ScheduledJob
    from bot.runtime import Runtime
    from core.domain.learned import LearnedDocument, LearnedKeyword
    from core.insights.stale import Notifier
    from core.learning.pruning import KeywordPruner, PruneReport
    from core.ports import PlatformState

from bot.cli.app import app, err, out, state, when

# A learned document without its question: privacy mode, or older than the retention.
NOT_KEPT = "(not kept: insights.store_questions, or older than insights.retention_days)"

keywords_app = typer.Typer(help="Keywords learned from web searches.", no_args_is_help=True)
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
            when(k.created_at),
            when(k.last_used_at) if k.last_used_at is not None else "never",
            reasons.get(k.keyword, ""),
        )
    out.print(table)


@keywords_app.command("show")
def keywords_show(
    keyword: Annotated[
        str, typer.Argument(help="A learned keyword (as `keywords list` shows it).")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Where a keyword came from: each learned document it finds, the question and web query
    that made it, the web pages it holds, and its other keywords."""
    documents = asyncio.run(_documents_of(keyword))
    if as_json:
        out.print_json(json.dumps([asdict(d) for d in documents]))
        return
    if not documents:
        err.print(Text(f"No learned document has the keyword {keyword!r}."))
        raise typer.Exit(1)
    for d in documents:
        out.print(Text(d.doc_id, style="bold"))
        out.print(Text(f"  question: {d.question or NOT_KEPT}"))
        out.print(Text(f"  web query: {d.query}"))
        used = when(d.last_used_at) if d.last_used_at is not None else "never"
        out.print(f"  learned {when(d.created_at)}, cited {d.uses} time(s), last {used}")
        out.print(Text(f"  keywords: {', '.join(d.keywords)}"))
        for page in d.sources:
            out.print(Text(f"  - {page.title} <{page.url}>"))


async def _documents_of(keyword: str) -> list[LearnedDocument]:
    from core.domain.learned import keyword_key

    # Looked up as stored, not judged by today's rules: one learned before them is found too.
    wanted = keyword_key(keyword)
    async with _pruner() as pruner:
        return [d for d in await pruner.knowledge.store.documents() if wanted in d.keywords]


@keywords_app.command("forget")
def keywords_forget(
    keywords: Annotated[list[str], typer.Argument(help="Learned keywords to remove.")],
) -> None:
    """Remove keywords that were learned wrongly, now: every learned document loses them, and
    one left without keywords is deleted."""
    forgot, unknown, rewritten, dropped = asyncio.run(_forget(keywords))
    if forgot:
        out.print(
            f"Forgot {len(forgot)} keyword(s); learned documents: {len(dropped)} deleted, "
            f"{len(rewritten)} rewritten.",
            soft_wrap=True,
        )
    if unknown:
        err.print(Text(f"error: not a learned keyword: {', '.join(map(repr, unknown))}"))
        raise typer.Exit(1)


async def _forget(keywords: list[str]) -> tuple[list[str], list[str], list[str], list[str]]:
    """The keywords forgotten and those no learned document has (each as stored), and the
    documents rewritten and deleted. Looked up as stored, not judged by today's rules: one
    learned before them (a mention in a title) can be removed too."""
    from core.domain.learned import keyword_key

    wanted = list(dict.fromkeys(keyword_key(k) for k in keywords))
    async with _pruner() as pruner:
        known = {k.keyword for k in await pruner.knowledge.store.all()}
        forgot = [k for k in wanted if k in known]
        unknown = [k for k in wanted if k not in known]
        rewritten, dropped = await pruner.knowledge.forget(forgot) if forgot else ([], [])
    return forgot, unknown, rewritten, dropped


@asynccontextmanager
async def _opened() -> AsyncIterator[tuple[Runtime, PlatformState, KeywordPruner]]:
    from bot.runtime import opened
    from bot.wiring import build_knowledge
    from core.learning.pruning import KeywordPruner

    s = state.settings
    async with opened(s) as rt:
        platform = rt.backend.platform_state(s.slack.dedup_ttl_s, s.insights.store_questions)
        pruner = KeywordPruner(
            build_knowledge(s, rt.backend), platform, rt.backend.locks, s.keywords
        )
        yield rt, platform, pruner


@asynccontextmanager
async def _pruner() -> AsyncIterator[KeywordPruner]:
    async with _opened() as (_, _, pruner):
        yield pruner


@asynccontextmanager
async def _housekeeping() -> AsyncIterator[tuple[KeywordPruner, list[ScheduledJob]]]:
    """The clock's jobs, on one opened backend: the keyword prune, the log's expiry and, with
    `insights.notify_stale`, the re-check of answers whose sources changed (with the platform
    clients that post the updates)."""
    from bot.clock import ExpireJob, RecheckJob, SyncJob
    from bot.wiring import notifiers
    from core.ingest.address_guard import fetch_client
    from core.ingest.pipeline import Ingestor
    from core.ingest.sync import SourceSyncer

    s = state.settings
    # The platforms' clients only when updates are posted: a Discord login is no part of
    # pruning keywords or expiring the log.
    updates: contextlib.AbstractAsyncContextManager[dict[str, Notifier]] = (
        notifiers(s) if s.insights.notify_stale else contextlib.nullcontext({})
    )
    async with (
        _opened() as (rt, platform, pruner),
        updates as available,
        fetch_client(s.ingest) as http,
    ):
        expire = ExpireJob(platform, rt.backend.conversations, rt.backend.keywords, s.insights)
        jobs: list[ScheduledJob] = [expire]
        if s.insights.notify_stale:
            engine = rt.engine()
            jobs.append(RecheckJob(platform, rt.backend.index, engine, available, s.insights))
        ingestor = Ingestor(rt.backend.index, rt.embedder, s.ingest, http=http)
        syncer = SourceSyncer(
            ingestor, rt.backend.index, rt.backend.locks, http, s.ingest, s.storage.data_dir
        )
        for name, source in sorted(s.sources.items()):
            if source.schedule:
                sync = functools.partial(syncer.sync, name, source)
                jobs.append(SyncJob(name, source.schedule, sync))
        yield pruner, jobs


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
    """Run the scheduler (the Procfile's clock): prunes learned keywords, expires the answer
    log (insights.retention_days), syncs the sources that have a schedule and, with
    insights.notify_stale, re-checks stale answers, each on its schedule."""
    _refuse_updates_posted_nowhere()
    asyncio.run(_clock())


def _refuse_updates_posted_nowhere() -> None:
    """`bot stale-answers --notify` refuses to run without a platform token; the clock used to
    start and re-check answers every half hour, with no client to post one of them through,
    and never say so."""
    from core.errors import ConfigError

    s = state.settings
    if s.insights.notify_stale and not (s.secrets.slack_bot_token or s.secrets.discord_token):
        raise ConfigError(
            "insights.notify_stale is on, but neither SLACK_BOT_TOKEN nor DISCORD_TOKEN is "
            "set: re-checked answers could be posted nowhere; set one, or turn it off"
        )


async def _clock() -> None:
    from bot.clock import run_clock
    from bot.wiring import metrics_server

    async with _housekeeping() as (pruner, jobs), metrics_server(state.settings) as url:
        if url:
            out.print(f"Metrics at {url}")
        await run_clock(state.settings.keywords, pruner, jobs)
