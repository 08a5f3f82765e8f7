"""Named sources kept in sync: `bot sync NAME` and `bot clock` ingest each through its
connector, labelled with its name and pruned of what went (a source's sync owns the documents
of its label, and only those), one sync per source at a time across processes (a run lock per
source), and remember how the last one went for `bot sources list`.

The status is a small JSON file in the data dir (`sources-status.json`, see `memory`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from core.config import IngestSettings, SourceSettings
from core.domain.documents import Outcome, indexed
from core.domain.urls import redact_url
from core.errors import SourceUnavailable
from core.ingest.confluence import ConfluenceConnector, flavour_of
from core.ingest.connectors import Connector, PathsConnector
from core.ingest.git import GitConnector
from core.ingest.globs import PathFilter
from core.ingest.memory import load_json, save_json
from core.ingest.pipeline import Ingestor, IngestReport, document_shape
from core.ingest.site import SiteConnector, memory_name
from core.ports import IngestProgress, RunLocks, SearchIndex
from core.run_locks import run_lock

STATUS_FILE = "sources-status.json"
SKIPS_KEPT = 20  # skip reasons kept per source in the status
FINGERPRINT_CHARS = 16  # of a sha256: enough to tell two settings apart
# A sync cancelled before its end (Ctrl-C, `bot clock` stopping): the status says so, rather
# than how the sync before it went.
INTERRUPTED = "interrupted before it finished; the next sync picks up from there"


@dataclass(slots=True)
class SyncStatus:
    finished_at: float = 0.0
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # "what: why", the first few
    error: str | None = None  # why the last sync failed as a whole
    # The fingerprint of the settings the source's memory was last written under (see
    # `fingerprint`); "" before any was recorded.
    fingerprint: str = ""


def connector_for(
    name: str,
    source: SourceSettings,
    settings: IngestSettings,
    http: httpx.AsyncClient,
    data_dir: Path,
    known: set[str],
    *,
    revalidate: bool = False,
) -> Connector:
    """`revalidate`: what the source remembers (a commit, validators, versions) says only that
    an item's bytes did not change, not that its links or chunks would not under other
    settings: every item is read again, and only those whose checksum moved are written."""
    if source.type == "site":
        return SiteConnector(
            source.location,
            settings,
            http,
            sitemaps=source.sitemaps,
            prefixes=source.prefixes,
            memory=data_dir / "crawls" / f"{name}-{memory_name(source.location, source.prefixes)}",
            known=known,
            revalidate=revalidate,
        )
    if revalidate:
        known = set()  # Git and Confluence read whatever is not known as indexed
    if source.type == "git":
        return GitConnector(
            source.location[0],
            settings,
            checkout=data_dir / "git" / name,
            include=source.include,
            exclude=source.exclude,
            branch=source.branch,
            web_url=source.web_url,
            token=_token(source.token_env),
            known=known,
        )
    if source.type == "confluence":
        base = source.location[0]
        flavour = source.flavour or flavour_of(base)
        return ConfluenceConnector(
            base,
            source.spaces,
            settings,
            http,
            flavour=flavour,
            headers=_confluence_auth(flavour, source),
            memory=data_dir / "confluence" / f"{name}.json",
            known=known,
        )
    paths = PathFilter(source.include, source.exclude)
    return PathsConnector(source.location, settings, http, source.base_url, paths)


def _confluence_auth(flavour: str, source: SourceSettings) -> dict[str, str]:
    """Cloud: Basic with the account's email and its API token; Data Center: the personal
    access token as a Bearer token; no token_env: anonymous (a public site)."""
    token = _token(source.token_env)
    if token is None:
        return {}
    if flavour == "datacenter":
        return {"Authorization": f"Bearer {token}"}
    if not source.username:
        raise SourceUnavailable("a Confluence Cloud token needs username: the account's email")
    basic = base64.b64encode(f"{source.username}:{token}".encode()).decode()
    return {"Authorization": f"Basic {basic}"}


def _token(variable: str | None) -> str | None:
    if variable is None:
        return None
    if not (token := os.environ.get(variable, "").strip()):
        raise SourceUnavailable(f"the token variable {variable} (token_env) is not set")
    return token


@dataclass(frozen=True, slots=True)
class SourceSyncer:
    """What every sync of a process shares: the pipeline, the index and its run locks, the
    HTTP client, the ingest settings and the data dir (crawl memories, the status file)."""

    ingestor: Ingestor
    index: SearchIndex
    locks: RunLocks
    http: httpx.AsyncClient
    settings: IngestSettings
    data_dir: Path

    async def sync(
        self, name: str, source: SourceSettings, progress: IngestProgress | None = None
    ) -> IngestReport:
        """One sync of one source, under its run lock; its status recorded whatever happens.
        `progress`: told of each document, for a long sync's bar."""
        started = time.perf_counter()
        settings = fingerprint(source, self.settings)
        last = sync_statuses(self.data_dir).get(name)
        remembered = last.fingerprint if last is not None else ""
        try:
            async with run_lock(self.locks, f"sync-{name}", self.settings.lock_ttl_s):
                known = indexed(await self.index.documents())
                connector = connector_for(
                    name,
                    source,
                    self.settings,
                    self.http,
                    self.data_dir,
                    known,
                    revalidate=bool(remembered) and remembered != settings,
                )
                report = await self.ingestor.ingest_from(
                    connector,
                    source=name,
                    prune=True,
                    owned=True,
                    progress=progress,
                    targets=source.location,
                )
        except BaseException as exc:  # cancelled (Ctrl-C, the clock stopping) included
            # Not run to its end: what the source remembers is still the old settings'.
            why = str(exc) if isinstance(exc, Exception) else INTERRUPTED
            status = SyncStatus(time.time(), _since(started), error=why)
            status.fingerprint = remembered
            record_status(self.data_dir, name, status)
            raise
        problems = report.failed + report.skipped  # the failures first: the ones to act on
        skipped = [f"{s.display}: {s.reason}" for s in problems[:SKIPS_KEPT]]
        counts = {outcome.value: n for outcome, n in report.counts.items() if n}
        problem = (
            _missing(report)
            or _unwritten(report)
            or _all_skipped(report, name)
            or _nothing_found(report, name)
        )
        status = SyncStatus(time.time(), _since(started), counts, skipped, problem, settings)
        record_status(self.data_dir, name, status)
        if problem is not None:
            raise SourceUnavailable(problem)
        return report


def fingerprint(source: SourceSettings, settings: IngestSettings) -> str:
    """The settings a source's documents were indexed under, beyond their bytes: the source's
    own (a Git `web_url`, a Confluence `flavour` shape links and anchors) and the chunking.
    Not its schedule, which changes nothing indexed."""
    own = source.model_dump(mode="json", exclude={"schedule"})
    # Without a password a location may carry: the status file is no dictionary to attack it
    # with, and a rotated password is no change of what is indexed.
    own["location"] = [redact_url(place) for place in source.location]
    shape = [own, document_shape(settings)]
    text = json.dumps(shape, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:FINGERPRINT_CHARS]


def _missing(report: IngestReport) -> str | None:
    """Why a sync failed although it ran: a location that named nothing (a folder that is not
    there, a start URL that could not be read). Not "nothing found": the index kept what it
    had of it (nothing is pruned under a location that was not read)."""
    if not report.missing:
        return None
    rest = "; the other locations were synced" if report.indexed else ""
    return f"nothing to sync at {report.missing_named()}{rest}"


def _unwritten(report: IngestReport) -> str | None:
    """Why a sync failed although it ran to its end: documents it could not index (their
    embedding or index write failed). As `bot ingest` does, the run is a failure, said with
    the first reason, so that neither `bot sync`'s exit code nor the clock's log calls it
    synced; the rest was synced, and those are read again at the next sync."""
    if not report.failed:
        return None
    first = report.failed[0]
    return (
        f"{len(report.failed)} document(s) could not be indexed ({first.display}: "
        f"{first.reason}); the rest was synced, they are read again at the next sync"
    )


def _all_skipped(report: IngestReport, name: str) -> str | None:
    """Why a sync failed although it ran: everything it found was skipped (unsupported
    types, too big, unreadable, refused by robots.txt), so the source gives the bot nothing,
    as `bot ingest` fails when nothing was indexed. Almost always a mistake in the source's
    settings, and what was indexed from it before is kept (`_spared`)."""
    if report.indexed or not report.skipped:
        return None
    first = report.skipped[0]
    return (
        f"nothing was indexed: all {len(report.skipped)} item(s) were skipped "
        f"(the first: {first.display}: {first.reason}){_spared(report, name)}"
    )


def _nothing_found(report: IngestReport, name: str) -> str | None:
    """Why a sync failed although every location was read: it found no document at all and
    had none indexed before (an include pattern, a prefix or a space key that matches
    nothing), which the source's settings almost never mean. A source emptied since its last
    sync is pruned, and that is no failure."""
    if report.indexed or report.skipped or report.failed or report.counts[Outcome.DELETED]:
        return None
    return (
        f"nothing found at {report.places() or name}: check the source's include and "
        "exclude patterns, prefixes or spaces"
    )


def _spared(report: IngestReport, name: str) -> str:
    if not report.spared:
        return ""
    return (
        f"; the {report.spared} document(s) indexed from it before are kept (if it is "
        f"really empty now, `bot remove {name}`)"
    )


def sync_statuses(data_dir: Path) -> dict[str, SyncStatus]:
    """The last sync of each source; an unreadable file is as if none had run."""
    kept = load_json(data_dir / STATUS_FILE)
    try:
        return {name: SyncStatus(**status) for name, status in kept.items()}
    except (TypeError, AttributeError):  # not a status file of this shape (None included)
        return {}


def record_status(data_dir: Path, name: str, status: SyncStatus) -> None:
    statuses = sync_statuses(data_dir)
    statuses[name] = status
    save_json(data_dir / STATUS_FILE, {n: asdict(s) for n, s in statuses.items()}, indent=1)


def forget_status(data_dir: Path, name: str) -> None:
    """A source taken out of config.yaml whose documents were removed: nothing left to report."""
    statuses = sync_statuses(data_dir)
    if statuses.pop(name, None) is not None:
        save_json(data_dir / STATUS_FILE, {n: asdict(s) for n, s in statuses.items()}, indent=1)


def unconfigured(data_dir: Path, configured: Collection[str]) -> list[str]:
    """Sources synced here that config.yaml no longer names: their documents stay indexed
    (and cited) until removed, since a sync prunes only its own source's, and no sync runs
    for a source that is gone."""
    return sorted(name for name in sync_statuses(data_dir) if name not in configured)


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 3)
