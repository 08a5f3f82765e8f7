"""`bot ingest` and `bot remove`: documents in and out of the index, under the ingest run lock."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.table import Table
from rich.text import Text

from core.domain.text import printable

if TYPE_CHECKING:
    from core.ingest.pipeline import IngestReport, Removal

from bot.cli.app import app, err, out, refuse, state

_SKIPS_SHOWN = 20
# The shell's code for a command ended by Ctrl-C (128 + SIGINT), what scripts test for.
EXIT_INTERRUPTED = 130
T = TypeVar("T")


def _checked_base_url(value: str | None) -> str | None:
    """The check `ingest.base_url` gets when the settings load: a link without its scheme or
    host, or with a password, would go into every citation of this ingest."""
    from core.config import link_base

    try:
        return None if value is None else link_base(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


@app.command()
def ingest(
    targets: Annotated[list[str], typer.Argument(help="Files, folders (recursive) or URLs.")],
    base_url: Annotated[
        str | None,
        typer.Option(
            help="Published location of the files, for citation links.",
            callback=_checked_base_url,
        ),
    ] = None,
    source: Annotated[str | None, typer.Option(help="Label for this collection.")] = None,
    prune: Annotated[
        bool, typer.Option(help="Delete indexed documents under TARGETS that no longer exist.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List every skip.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable report.")] = False,
    crawl: Annotated[
        bool,
        typer.Option(
            "--crawl",
            help="TARGETS are a docs site's start URLs: follow its links and sitemaps "
            "(ingest.crawl sets the bounds).",
        ),
    ] = False,
    sitemap: Annotated[
        list[str] | None,
        typer.Option(help="--crawl: read this sitemap (default: those robots.txt names)."),
    ] = None,
    prefix: Annotated[
        list[str] | None,
        typer.Option(
            help="--crawl: follow links under this URL prefix (default: each start URL's folder)."
        ),
    ] = None,
) -> None:
    """Index documents: unchanged ones are skipped, changed ones replaced.

    Exits 1 when a target does not exist, when nothing it names could be indexed, or when
    another ingest holds the run lock (two at once would both do the whole work)."""
    if (sitemap or prefix) and not crawl:
        refuse("--sitemap and --prefix go with --crawl")
    if (problem := _label_problem(source or state.settings.ingest.default_source)) is not None:
        refuse(problem)
    site = (sitemap or [], prefix or []) if crawl else None
    report = _under_run_lock(
        _ingest(targets, base_url, source, prune, site),
        interrupted="interrupted; the documents written so far are kept: run the same command "
        "again to resume (what is already indexed is skipped as unchanged)",
    )
    _print_report(report, verbose, as_json, summary=_did_work(report))
    problem = _ingest_problem(report)
    if problem is not None:
        refuse(problem)


def _label_problem(label: str) -> str | None:
    """Why documents must not be ingested under `label`: another writer owns it, and its next
    prune would delete them (or their prune, its documents)."""
    from core.domain.documents import LEARNED_SOURCE

    if label == LEARNED_SOURCE:
        return f"--source {label} is the label of what the bot learns from the web; choose another"
    if label in state.settings.sources:
        return (
            f"{label} is a source in {state.settings_file}: its sync owns that label and would "
            f"delete what is ingested under it; run `bot sync {label}`, or choose another --source"
        )
    return None


def _under_run_lock(work: Coroutine[object, object, T], *, interrupted: str) -> T:
    """Runs an ingest-locked command; another holder of the lock is a refusal (exit 1), the
    same as a run that did nothing: a script must see that its work was not done."""
    from core.errors import RunLockHeld

    try:
        return interruptible(work, interrupted)
    except RunLockHeld as exc:
        refuse(str(exc))


def interruptible(work: Coroutine[object, object, T], interrupted: str) -> T:
    """Runs `work`; Ctrl-C ends it with the line `interrupted` (what became of the work) and
    the shell's exit code for it, not a silent exit. `asyncio.run` cancels the work first, so
    its run lock is released and a document being written is finished or rolled back."""
    try:
        return asyncio.run(work)
    except KeyboardInterrupt:
        err.print(Text(interrupted, style="red"), soft_wrap=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None


async def _ingest(
    targets: list[str],
    base_url: str | None,
    source: str | None,
    prune: bool,
    site: tuple[list[str], list[str]] | None = None,
) -> IngestReport:
    from bot.progress import RichIngestProgress
    from bot.runtime import opened
    from core.config import source_name_problem
    from core.ingest.address_guard import fetch_client
    from core.ingest.pipeline import Ingestor
    from core.run_locks import run_lock

    s = state.settings
    async with (
        opened(s) as rt,
        run_lock(rt.backend.locks, "ingest", s.ingest.lock_ttl_s),
        fetch_client(s.ingest) as http,
    ):
        # A label the index already holds (written before names were checked) stays usable:
        # its documents can still be re-ingested and pruned under it.
        problem = source_name_problem(source) if source is not None else None
        if problem is not None and source not in (await rt.backend.index.stats()).sources:
            refuse(f"--source {problem}")
        ingestor = Ingestor(rt.backend.index, rt.embedder, s.ingest, http=http)
        label = source or s.ingest.default_source
        with RichIngestProgress(err, s.ingest.progress_min_items) as progress:
            if site is not None:
                from core.domain.documents import indexed
                from core.ingest.site import SiteConnector, memory_name

                sitemaps, prefixes = site
                crawler = SiteConnector(
                    targets,
                    s.ingest,
                    http,
                    sitemaps=sitemaps,
                    prefixes=prefixes,
                    memory=s.storage.data_dir / "crawls" / memory_name(targets, prefixes),
                    known=indexed(await rt.backend.index.documents()),
                )
                return await ingestor.ingest_from(
                    crawler, source=label, prune=prune, progress=progress, targets=targets
                )
            return await ingestor.ingest(
                targets, source=label, base_url=base_url, prune=prune, progress=progress
            )


def _did_work(report: IngestReport) -> bool:
    """Whether the run indexed or deleted anything (deleting, with --prune, or finding
    everything unchanged is work done)."""
    from core.domain.documents import Outcome

    return report.indexed > 0 or report.counts[Outcome.DELETED] > 0


def _ingest_problem(report: IngestReport) -> str | None:
    """The one line that makes an ingest fail, or None when it did what it was asked."""
    from core.domain.urls import redact_urls_in

    if report.missing:
        rest = "; the other targets were ingested" if report.indexed else ""
        return f"nothing to ingest at {report.missing_named()}{rest}"
    if not _did_work(report):
        skipped = len(report.skipped) + len(report.failed)
        if skipped == 0:
            return f"no supported files under {redact_urls_in(', '.join(report.targets))}"
        return f"nothing was indexed: all {skipped} file(s) were skipped (reasons above)"
    if report.failed:
        return f"{len(report.failed)} document(s) could not be written (reasons above)"
    return None


def _print_report(
    report: IngestReport, verbose: bool, as_json: bool = False, *, summary: bool = True
) -> None:
    """The counts (`summary`: not for a run that did nothing, which fails with one line saying
    why) and the table of what was not indexed, with why."""
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
    if summary:
        tally = ", ".join(f"{c[o]} {o.value}" for o in Outcome if c[o] or o is Outcome.ADDED)
        out.print(
            f"Ingested in {report.seconds:.1f}s: {tally}; {report.chunks_written} chunks written.",
            soft_wrap=True,
        )
    problems = report.failed + report.skipped
    if not problems:
        return
    table = Table("file", "reason", title="Not indexed", title_justify="left")
    shown = problems if verbose else problems[:_SKIPS_SHOWN]
    for item in shown:
        # Crawled links and a server's words: `Text` is never markup; `printable` keeps
        # what would act on the terminal out.
        table.add_row(Text(printable(item.display)), Text(printable(item.reason)))
    err.print(table)
    if len(problems) > len(shown):
        err.print(f"... and {len(problems) - len(shown)} more (--verbose lists all)")


@app.command()
def remove(
    targets: Annotated[
        list[str] | None,
        typer.Argument(help="Source labels, URLs, or ingested paths.", show_default=False),
    ] = None,
    sources: Annotated[
        list[str] | None,
        typer.Option(
            "--source",
            "-s",
            help="A source label whose documents go, however it reads (a folder's name too).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Remove documents from the index: a source label's, a URL's, or those ingested from a
    path (a file, or everything under a folder). Undoes a wrong `bot ingest`."""
    from core.domain.urls import redact_urls_in

    targets, labels = targets or [], sources or []
    if not targets and not labels:
        refuse("name what to remove: a path, a URL or a source label (or --source LABEL)")
    removals = _under_run_lock(
        _remove(targets, labels),
        interrupted="interrupted; the documents removed so far stay removed: run the same "
        "command again to remove the rest",
    )
    if not removals:  # only sources' records, of sources that had nothing indexed
        named = ", ".join([*targets, *labels])
        out.print(Text(f"{named}: no documents indexed; its sync record removed"))
    for r in removals:
        if r.documents:  # a target that matched nothing is named once, in the error below
            shown = redact_urls_in(r.target)
            out.print(
                Text(f"{shown} ({r.kind}): {r.documents} document(s), {r.chunks} chunk(s) removed"),
                soft_wrap=True,
            )
    problems = [r.refused for r in removals if r.refused]
    unmatched = [redact_urls_in(r.target) for r in removals if not r.documents and not r.refused]
    if unmatched:
        problems.append(
            f"nothing in the index matched {', '.join(unmatched)} "
            "(a source label, a URL or an ingested path; `bot doctor` lists the source labels)"
        )
    if problems:
        refuse("; ".join(problems))


async def _remove(targets: list[str], labels: list[str]) -> list[Removal]:
    from bot.runtime import opened
    from core.ingest.pipeline import remove as remove_documents
    from core.ingest.sync import forget_status, unconfigured
    from core.run_locks import run_lock

    s = state.settings
    async with opened(s) as rt, run_lock(rt.backend.locks, "ingest", s.ingest.lock_ttl_s):
        removals = await remove_documents(
            rt.backend.index, targets, labels=labels, default_label=s.ingest.default_source
        )
    # A source taken out of config.yaml, now removed: `bot sources list` stops naming it. One
    # whose syncs never indexed anything (`bot sync` still named it) is done with once
    # forgotten: that is no target that "matched nothing".
    # A refused target removed nothing: its record must keep naming what is still indexed.
    refused = {r.target for r in removals if r.refused}
    gone = {*targets, *labels} - refused
    forgotten = gone & set(unconfigured(s.storage.data_dir, s.sources))
    for name in forgotten:
        forget_status(s.storage.data_dir, name)
    return [r for r in removals if r.documents or r.refused or r.target not in forgotten]
