"""Where documents come from: one interface for every source, so each gets the pipeline's
idempotent re-ingest (checksums), `--prune`, crash-resume and per-item skip reasons.

A connector discovers items (each with a stable `doc_id`, the deep link a reader follows, and
what to show in reports), says which doc_id prefixes it speaks for (what `--prune` may delete
under: an item of that scope not discovered again has disappeared), and fetches an item's bytes
within the ingest limits.
"""

from __future__ import annotations

from typing import Protocol

import httpx

from core.config import IngestSettings
from core.ingest.formats import DocumentFormat
from core.ingest.globs import PathFilter
from core.ingest.sources import Discovery, Skipped, SourceItem, discover, read_item


class Connector(Protocol):
    async def discover(self) -> Discovery:
        """Every item of the source now, what was skipped (with why), and the scopes."""

    async def fetch(self, item: SourceItem) -> tuple[bytes, DocumentFormat]:
        """The item's bytes and format; raises `UnreadableDocument` with the reason, or
        `NotModified` when the indexed copy is current."""

    def also_skipped(self) -> list[Skipped]:
        """Parts of the fetched items that are not indexed (a page's attachments), with why."""

    async def completed(self, settled: set[str]) -> None:
        """The run is over: a connector may now remember what it synced (never earlier, so
        that a crash re-reads what it missed), and only the items of `settled` (the doc ids
        indexed as the source has them now): one skipped or failed this time (a parse deadline,
        an embedding or index write that failed) is read again next time, or its change would
        be lost behind its old indexed copy."""


class PathsConnector:
    """Files, folders (walked) and single URLs, as `bot ingest` names them."""

    def __init__(
        self,
        targets: list[str],
        settings: IngestSettings,
        http: httpx.AsyncClient | None,
        base_url: str | None = None,
        paths: PathFilter | None = None,
    ) -> None:
        """`paths`: which files of a folder are taken (a source's include and exclude)."""
        self._targets = targets
        self._paths = paths or PathFilter([], [])
        self._settings = settings
        self._http = http
        self._base_url = base_url or settings.base_url

    async def discover(self) -> Discovery:
        return discover(self._targets, self._base_url, self._paths.takes)

    async def fetch(self, item: SourceItem) -> tuple[bytes, DocumentFormat]:
        return await read_item(
            item,
            max_bytes=self._settings.max_file_bytes,
            client=self._http,
            deadline_s=self._settings.url_deadline_s,
        )

    def also_skipped(self) -> list[Skipped]:
        return []

    async def completed(self, settled: set[str]) -> None:
        """Files and URLs are compared by checksum each run: nothing to remember."""
