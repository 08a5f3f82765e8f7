"""`bot index`: maintenance of the index (a reindex with an alias swap on Elasticsearch)."""

from __future__ import annotations

import asyncio
import os
import socket
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from core.domain.health import ReindexReport

from bot.cli.app import app, err, out, shown, state

index_app = typer.Typer(help="Index maintenance.", no_args_is_help=True)
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
    from bot.runtime import opened
    from core.errors import SearchIndexError
    from core.run_locks import REINDEX_LOCK, uninterrupted

    s = state.settings
    holder = f"{socket.gethostname()}:{os.getpid()}"
    async with opened(s, check_compatible=False) as rt:
        locks = rt.backend.locks
        if not await locks.claim(REINDEX_LOCK, holder, s.elasticsearch.reindex_lock_ttl_s):
            raise SearchIndexError("another reindex is running (its lock has not expired)")
        try:
            with RichCountProgress(err, "Reindexing") as progress:
                return await rt.backend.reindex(delete_old=delete_old, on_progress=progress.update)
        finally:  # also after a failure or Ctrl-C: a retry must not wait for the expiry
            await uninterrupted(locks.release(REINDEX_LOCK, holder))


@index_app.command("rebuild-vectors")
def index_rebuild_vectors() -> None:
    """Build the SQLite index's approximate vector graph again from the stored vectors."""
    count, graph = asyncio.run(_rebuild_vectors())
    if count is None:  # approximate search off, or the index too small for it
        out.print(shown(f"Nothing to build: this index searches by {graph}"), soft_wrap=True)
        return
    out.print(shown(f"The vector graph holds {count} vectors: {graph}"), soft_wrap=True)


async def _rebuild_vectors() -> tuple[int | None, str]:
    from bot.progress import RichCountProgress
    from bot.runtime import opened
    from core.backends.sqlite.index import SqliteIndex
    from core.backends.sqlite.vectors import EXACT_SCAN
    from core.errors import SearchIndexError

    async with opened(state.settings) as rt:
        index = rt.backend.index
        if not isinstance(index, SqliteIndex):
            raise SearchIndexError(
                "rebuild-vectors is for the sqlite backend; Elasticsearch keeps its own graphs"
            )
        plan = index.vector_plan((await index.stats()).chunks)
        if plan.startswith(EXACT_SCAN):
            return None, plan
        with RichCountProgress(err, "Building the vector graph") as progress:
            try:
                count = await index.rebuild_vectors(progress.update)
            except OSError as exc:  # a read-only mount, a full disk
                raise SearchIndexError(
                    f"can't write the vector graph {index.graph_path} ({exc.strerror or exc}): "
                    "the file and its folder must be writable by this user"
                ) from None
        return count, index.vector_side()
