"""`bot sync` and `bot sources list`: the named sources of `sources:` in config.yaml."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from bot.cli.app import app, err, out, refuse, shown, state, when

sources_app = typer.Typer(
    help="The named sources of config.yaml's `sources:`.", no_args_is_help=True
)
# `bot sources list` with nothing to list: where a source is named, and the way without one.
NONE = (
    "no sources: config.yaml's `sources:` names none (README: Sources); "
    "`bot ingest` takes files, folders and URLs directly"
)
# A source synced here that config.yaml no longer names: no sync prunes its documents now.
GONE = "not in {file} any more; its documents stay indexed until `bot remove {name}`"


def _gone(name: str) -> str:
    return GONE.format(name=name, file=state.settings_file)


app.add_typer(sources_app, name="sources")


@app.command()
def sync(
    names: Annotated[
        list[str] | None, typer.Argument(help="Sources to sync (default: every one).")
    ] = None,
) -> None:
    """Ingest each named source (its documents labelled with its name, pruned of what went),
    one at a time; exits 1 when one failed or none is configured."""
    configured = state.settings.sources
    if not configured:
        refuse(
            f"no sources in {state.settings_file} (`sources:`); `bot ingest` takes files and URLs "
            "directly"
        )
    unknown = [n for n in names or [] if n not in configured]
    if unknown:
        refuse(f"unknown source {', '.join(unknown)}; configured: {', '.join(sorted(configured))}")
    from bot.cli.ingest import interruptible

    failed = interruptible(
        _sync(names or sorted(configured)),
        "interrupted; what was synced so far is kept: run the same command again to resume "
        "(what is already indexed is skipped as unchanged)",
    )
    if not names:
        from core.ingest.sync import unconfigured

        for gone in unconfigured(state.settings.storage.data_dir, configured):
            err.print(shown(f"{gone}: {_gone(gone)}"), soft_wrap=True)
    if failed:
        refuse(f"sync failed for {', '.join(failed)} (bot sources list shows why)")


async def _sync(names: list[str]) -> list[str]:
    from bot.progress import RichIngestProgress
    from bot.runtime import opened
    from core.errors import BotError
    from core.ingest.address_guard import fetch_client
    from core.ingest.pipeline import Ingestor
    from core.ingest.sync import SourceSyncer

    s = state.settings
    failed = []
    async with opened(s) as rt, fetch_client(s.ingest) as http:
        ingestor = Ingestor(rt.backend.index, rt.embedder, s.ingest, http=http)
        syncer = SourceSyncer(
            ingestor, rt.backend.index, rt.backend.locks, http, s.ingest, s.storage.data_dir
        )
        for name in names:
            try:
                with RichIngestProgress(err, s.ingest.progress_min_items) as progress:
                    report = await syncer.sync(name, s.sources[name], progress)
            except BotError as exc:
                err.print(shown(f"{name}: {exc}"), soft_wrap=True)
                failed.append(name)
                continue
            counts = ", ".join(f"{n} {o.value}" for o, n in report.counts.items() if n)
            out.print(shown(f"{name}: {counts or 'nothing found'}"))
    return failed


@sources_app.command("list")
def sources_list() -> None:
    """Each source with its type, location, schedule and how its last sync went."""
    from core.domain.urls import redact_url
    from core.ingest.sync import sync_statuses, unconfigured

    s = state.settings
    statuses = sync_statuses(s.storage.data_dir)
    table = Table("source", "type", "location", "schedule", "last sync", "result")
    for name, source in sorted(s.sources.items()):
        status = statuses.get(name)
        last = when(status.finished_at) if status else "never"
        if status is None:
            result = ""
        elif status.error:
            result = f"failed: {status.error}"
        else:
            counts = ", ".join(f"{n} {o}" for o, n in status.counts.items())
            result = counts + (f"; {len(status.skipped)} skipped" if status.skipped else "")
        # Locations (without a URL's password) and a failed sync's error (a server's words)
        # are not markup.
        table.add_row(
            name,
            source.type,
            shown(", ".join(redact_url(place) for place in source.location)),
            shown(source.schedule or "-"),
            last,
            shown(result),
        )
    for gone in unconfigured(s.storage.data_dir, s.sources):
        last = when(statuses[gone].finished_at)
        table.add_row(
            shown(gone),
            "-",
            "-",
            "-",
            last,
            shown(_gone(gone)),
        )
    out.print(table if table.row_count else NONE)
