"""The ingest pipeline: sources -> sections -> chunks -> vectors -> index, a document at a time.

Why it is safe to rerun at any point:
- a document's checksum covers its bytes, its link and everything that shapes its chunks, so an
  unchanged document is recognised before it is even parsed, and skipped;
- each document's checksum is written with (SQLite) or after (Elasticsearch) its chunks: a crash
  loses at most the documents being written, and the rerun redoes exactly what is missing;
- vectors come from the content-hash cache, so redoing work costs no embedding.
Vectors are computed for several documents at once (the model is much faster in batches) and
handed to the index as one batch (one bulk request on a server); failures are still per document.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urldefrag

import httpx
import structlog

from core.config import IngestSettings
from core.domain.documents import (
    Chunk,
    DocumentRecord,
    DocumentWrite,
    Outcome,
    chunk_id,
    embedding_text,
)
from core.domain.urls import redact_url
from core.errors import IndexUnavailable, UnreadableDocument
from core.ingest.chunker import split_text
from core.ingest.connectors import Connector, PathsConnector
from core.ingest.formats import parse_in_time
from core.ingest.sections import ParsedDocument, ParseLimits
from core.ingest.sources import Discovery, NotModified, Skipped, SourceItem, is_url
from core.ports import Embedder, IngestProgress, SearchIndex

# Bump when parsing or chunking changes in a way that must re-chunk every document.
# 2: an HTML table's cells kept apart (`a | b`), where they ran together into one word.
# 3: an HTML `<pre>` kept as a fenced code block with its spacing, where it was collapsed; code
#    carries no overlap, and each passage of a long code block is fenced.
PIPELINE_VERSION = "3"


@dataclass(slots=True)
class IngestReport:
    counts: dict[Outcome, int] = field(default_factory=lambda: dict.fromkeys(Outcome, 0))
    skipped: list[Skipped] = field(default_factory=list)
    failed: list[Skipped] = field(default_factory=list)
    # Targets that named nothing (a typo, an empty argument): the command's error, not a skip.
    missing: list[Skipped] = field(default_factory=list)
    chunks_written: int = 0
    seconds: float = 0.0
    # What the run was asked to ingest, for the error when it held no supported file at all.
    targets: list[str] = field(default_factory=list)
    # Documents the index now holds as their source has them (added, updated or unchanged):
    # all a connector may remember as synced. One skipped or failed must be read again.
    settled: set[str] = field(default_factory=set)
    # Documents a pruning run left in place because it skipped all it found (`ingest_from`).
    spared: int = 0

    def places(self) -> str:
        """The places the run was asked to read, as they may be shown (no password of a URL);
        empty when it was given none."""
        return ", ".join(map(redact_url, self.targets))

    def missing_named(self) -> str:
        """The targets that named nothing, each with why: `./nope (no such file, folder or URL)`."""
        return ", ".join(f"{m.display} ({m.reason})" for m in self.missing)

    @property
    def indexed(self) -> int:
        """Documents now in the index from this run's targets (new, changed or unchanged)."""
        c = self.counts
        return c[Outcome.ADDED] + c[Outcome.UPDATED] + c[Outcome.UNCHANGED]


@dataclass(slots=True)
class Removal:
    """What `remove` found for one target, and how it read it (URL, path or source label)."""

    target: str
    kind: str
    documents: int = 0
    chunks: int = 0
    refused: str = ""  # why nothing was removed although something may have matched


@dataclass(slots=True)
class PreparedDocument:
    record: DocumentRecord
    chunks: list[Chunk]
    display: str


def document_shape(settings: IngestSettings) -> str:
    """What shapes every document's chunks besides its own bytes: another value re-chunks it."""
    return f"{PIPELINE_VERSION}|{settings.chunk_chars}|{settings.chunk_overlap_chars}"


def document_checksum(data: bytes, *, url: str, source: str, settings: IngestSettings) -> str:
    digest = hashlib.sha256(data).hexdigest()
    shape = document_shape(settings)
    return hashlib.sha256(f"{digest}|{url}|{source}|{shape}".encode()).hexdigest()


def build_chunks(
    parsed: ParsedDocument, *, doc_id: str, source: str, url: str, settings: IngestSettings
) -> list[Chunk]:
    chunks: list[Chunk] = []
    for section in parsed.sections:
        link = f"{url}#{section.anchor}" if section.anchor else url
        for text in split_text(section.text, settings.chunk_chars, settings.chunk_overlap_chars):
            chunks.append(
                Chunk(
                    chunk_id=chunk_id(doc_id, len(chunks)),
                    doc_id=doc_id,
                    source=source,
                    title=parsed.title,
                    heading=section.heading,
                    url=link,
                    text=text,
                    position=len(chunks),
                )
            )
    return chunks


class Ingestor:
    def __init__(
        self,
        index: SearchIndex,
        embedder: Embedder,
        settings: IngestSettings,
        *,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self._index = index
        self._embedder = embedder
        self._settings = settings
        self._parse_limits = ParseLimits.from_settings(settings)
        self._http = http

    async def ingest(
        self,
        targets: list[str],
        *,
        source: str,
        base_url: str | None = None,
        prune: bool = False,
        progress: IngestProgress | None = None,
    ) -> IngestReport:
        connector = PathsConnector(targets, self._settings, self._http, base_url)
        return await self.ingest_from(
            connector, source=source, prune=prune, progress=progress, targets=targets
        )

    async def ingest_from(
        self,
        connector: Connector,
        *,
        source: str,
        prune: bool = False,
        owned: bool = False,
        progress: IngestProgress | None = None,
        targets: list[str] | None = None,
    ) -> IngestReport:
        """Whatever the source: discover, fetch and index what changed, prune what went.

        `owned`: `source` is a named source's label and its documents are this connector's
        alone (see `_gone`)."""
        started = time.perf_counter()
        report = IngestReport(targets=list(targets or ()))
        if progress is not None:
            progress.discovering(report.places() or source)
        found = await connector.discover()
        report.skipped.extend(found.skipped)
        report.counts[Outcome.SKIPPED] += len(found.skipped)
        report.missing.extend(found.missing)
        existing = await self._index.documents()
        if progress is not None:
            progress.start(len(found.items))
        prepared = self._prepare(connector, found.items, existing, source, report, progress)
        await self.write(prepared, existing, report, progress)
        report.skipped.extend(parts := connector.also_skipped())
        report.counts[Outcome.SKIPPED] += len(parts)
        if prune:
            gone = _gone(found, existing, source if owned else None)
            if not report.indexed and report.skipped:
                # Everything found was skipped (robots.txt shutting the bot out, every file
                # too big or unreadable): the documents are still there, the bot could not
                # read them this time, and pruning would empty the source's part of the index.
                report.spared = len(gone)
                gone = []
            for doc_id in gone:
                await self._index.delete_document(doc_id)
                report.counts[Outcome.DELETED] += 1
        await self._index.refresh()
        await connector.completed(report.settled)
        report.seconds = time.perf_counter() - started
        return report

    async def _prepare(
        self,
        connector: Connector,
        items: list[SourceItem],
        existing: dict[str, DocumentRecord],
        source: str,
        report: IngestReport,
        progress: IngestProgress | None,
    ) -> AsyncIterator[PreparedDocument]:
        for item in items:
            try:
                try:
                    data, fmt = await connector.fetch(item)
                except NotModified:  # the source says the indexed copy is current
                    if (held := existing.get(item.doc_id)) is not None and held.complete:
                        report.settled.add(item.doc_id)
                        _count(report, progress, item.display, Outcome.UNCHANGED)
                        continue
                    raise UnreadableDocument("not modified, yet not in the index") from None
                checksum = document_checksum(
                    data, url=item.url, source=source, settings=self._settings
                )
                known = existing.get(item.doc_id)
                if known is not None and known.checksum == checksum:
                    report.settled.add(item.doc_id)
                    _count(report, progress, item.display, Outcome.UNCHANGED)
                    continue
                # A parser's own log lines (pypdf's "EOF marker not found") name no file.
                with structlog.contextvars.bound_contextvars(document=item.display):
                    parsed = await parse_in_time(data, fmt, item.fallback_title, self._parse_limits)
            except UnreadableDocument as exc:
                report.skipped.append(Skipped(item.display, str(exc)))
                _count(report, progress, item.display, Outcome.SKIPPED)
                continue
            chunks = build_chunks(
                parsed, doc_id=item.doc_id, source=source, url=item.url, settings=self._settings
            )
            record = DocumentRecord(
                item.doc_id, source, parsed.title, item.url, checksum, len(chunks)
            )
            yield PreparedDocument(record, chunks, item.display)

    async def write(
        self,
        documents: AsyncIterator[PreparedDocument] | Iterable[PreparedDocument],
        existing: dict[str, DocumentRecord],
        report: IngestReport,
        progress: IngestProgress | None = None,
    ) -> None:
        """Embed in groups of about `embed_group_chunks` chunks, write document by document."""
        group: list[PreparedDocument] = []
        size = 0
        async for doc in _aiter(documents):
            group.append(doc)
            size += len(doc.chunks)
            if size >= self._settings.embed_group_chunks:
                await self._write_group(group, existing, report, progress)
                group, size = [], 0
        if group:
            await self._write_group(group, existing, report, progress)

    async def _write_group(
        self,
        group: list[PreparedDocument],
        existing: dict[str, DocumentRecord],
        report: IngestReport,
        progress: IngestProgress | None,
    ) -> None:
        texts = [embedding_text(c) for doc in group for c in doc.chunks]
        try:
            vectors = await self._embedder.embed_documents(texts)
        except Exception as exc:  # noqa: BLE001 (reported per document; the run goes on)
            if len(group) > 1:  # one bad document must not fail the others of its group
                for doc in group:
                    await self._write_group([doc], existing, report, progress)
                return
            report.failed.append(Skipped(group[0].display, f"embedding failed: {exc}"))
            _count(report, progress, group[0].display, Outcome.FAILED)
            return
        writes: list[DocumentWrite] = []
        offset = 0
        for doc in group:
            writes.append(
                DocumentWrite(doc.record, doc.chunks, vectors[offset : offset + len(doc.chunks)])
            )
            offset += len(doc.chunks)
        try:
            failures = await self._index.write_documents(writes)
        except IndexUnavailable:
            raise  # the server is gone: every later write would fail too; rerun to resume
        except Exception as exc:  # noqa: BLE001 (reported per document; the run goes on)
            failures = {doc.record.doc_id: str(exc) for doc in group}
        for doc in group:
            reason = failures.get(doc.record.doc_id)
            if reason is not None:
                report.failed.append(Skipped(doc.display, f"index write failed: {reason}"))
                _count(report, progress, doc.display, Outcome.FAILED)
                continue
            report.chunks_written += len(doc.chunks)
            report.settled.add(doc.record.doc_id)
            held = existing.get(doc.record.doc_id)
            outcome = Outcome.UPDATED if held is not None and held.complete else Outcome.ADDED
            _count(report, progress, doc.display, outcome)


def _gone(found: Discovery, existing: dict[str, DocumentRecord], owner: str | None) -> list[str]:
    """The indexed documents a pruning run deletes: those under its scopes that it did not
    find again, except under what it could not look into.

    With `owner` (a named source's sync), only the documents labelled with it: another source
    may take other files of the same repository, folder or site (its own include patterns or
    prefixes), and they are not gone. And all of them: when the discovery was whole (every
    location read, its scopes known), one of its documents outside them is left over from an
    earlier configuration (another remote, branch, space, prefix or folder) and goes too."""
    seen = {item.doc_id for item in found.items}
    whole = owner is not None and bool(found.scopes) and not found.missing
    gone = []
    for doc_id, record in sorted(existing.items()):
        if owner is not None and record.source != owner:
            continue
        in_scope = whole or any(
            doc_id == scope or (scope.endswith("/") and doc_id.startswith(scope))
            for scope in found.scopes
        )
        unseen = any(doc_id.startswith(folder) for folder in found.unseen)
        if in_scope and doc_id not in seen and not unseen:
            gone.append(doc_id)
    return gone


async def remove(
    index: SearchIndex, targets: list[str], *, labels: Sequence[str] = (), default_label: str = ""
) -> list[Removal]:
    """Delete the documents each target names, to undo a wrong ingest.

    A target is read as a URL (documents with that link or id, or under it when it ends in
    `/`), else as a path when one exists there or it is written like one (the files ingested
    from it or from under it, even if they have been deleted since), else (or when a path
    written like one matches nothing) as a source label. `labels` are source labels only.

    Never the label every ingest without `--source` gets (`default_label`) from a target that
    names a path that matched nothing (a folder moved, a typo): that label holds every such
    ingest, another folder's too. An existing path that matched nothing is not read as a label
    either. Both are said, with what to write instead."""
    records = await index.documents()
    removals: list[Removal] = []
    asked = [(t, _matching(records, t, default_label)) for t in targets]
    asked += [(label, ("source", _labelled(records, label), "")) for label in labels]
    for target, (kind, matches, refused) in asked:
        removal = Removal(target, kind, refused=refused)
        for doc_id in [] if refused else matches:
            if doc_id not in records:  # named twice
                continue
            removal.chunks += await index.delete_document(doc_id)
            removal.documents += 1
            del records[doc_id]
        removals.append(removal)
    return removals


def _labelled(records: dict[str, DocumentRecord], label: str) -> list[str]:
    return [r.doc_id for r in records.values() if r.source == label]


def _matching(
    records: dict[str, DocumentRecord], target: str, default_label: str
) -> tuple[str, list[str], str]:
    """(how `target` was read, the documents it names, why they are not removed)."""
    if is_url(target) or target.startswith("file:"):  # file: links are cited without --base-url
        try:
            url = redact_url(urldefrag(target).url)
        except ValueError:  # malformed (`http://[::1`): no document was ingested from it
            return "URL", [], ""
        return (
            "URL",
            [
                r.doc_id
                for r in records.values()
                if url in (r.doc_id, r.url.split("#")[0])
                or (url.endswith("/") and (r.doc_id.startswith(url) or r.url.startswith(url)))
            ],
            "",
        )
    path = Path(target)
    exists = bool(target.strip()) and os.path.lexists(path)
    if exists or (target.strip() and (os.sep in target or target.startswith("."))):
        uri = path.resolve().as_uri()
        folder = uri.rstrip("/") + "/"
        if by_path := [d for d in records if d == uri or d.startswith(folder)]:
            return "path", by_path, ""
    # A label may look like a path (`team/docs`, `.notes`): read as one it matched nothing.
    labelled = _labelled(records, target)
    if labelled and (exists or target == default_label):
        place = "exists here" if exists else "is no path anything was ingested from"
        return (
            "source",
            labelled,
            (
                f"{target} {place}, and it is also a source label ({len(labelled)} document(s)"
                + (", everything ingested without --source" if target == default_label else "")
                + f"): to remove that label's documents, run `bot remove --source {target}`"
            ),
        )
    return "source", labelled, ""


def _count(
    report: IngestReport, progress: IngestProgress | None, display: str, outcome: Outcome
) -> None:
    report.counts[outcome] += 1
    if progress is not None:
        progress.advance(display, outcome)


async def _aiter(
    items: AsyncIterator[PreparedDocument] | Iterable[PreparedDocument],
) -> AsyncIterator[PreparedDocument]:
    if isinstance(items, AsyncIterator):
        async for item in items:
            yield item
    else:
        for item in items:
            yield item
