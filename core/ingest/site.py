"""A docs website as a source: its sitemaps and its links, within the prefixes it was given.

What a mature crawler does, bounded for a bot that runs beside other work:
- it starts from the given URLs and from sitemaps (given, or named by robots.txt; index files
  and gzip too), reads every page at most once, and follows links only under the allowed URL
  prefixes (by default each start URL's folder), up to `max_depth` links away and `max_pages`
  pages in all;
- it honours robots.txt (Protego, the parser Scrapy uses) and waits `delay_s` between two
  requests to one host, with at most `concurrency` requests in flight;
- a page names itself by the URL it was served from after redirects, so duplicates (`/a`,
  `/a/index.html`, `/a?utm=x`) are one page; a page whose `<link rel="canonical">` names another
  page under the prefixes is merged into it only when both say the same words (a print copy,
  `?lang=en`), and kept under its own URL otherwise (a template naming the docs' home as every
  page's canonical would have cited one page's text at another's URL);
- every fetch keeps the URL ingest's limits (size, time, content type, redirect checks), and
  every page left out is reported with its reason.

The pages' bodies are kept from the crawl until the pipeline fetches them (at most
`max_pages` of them, each under `ingest.max_file_bytes`), so a page is downloaded once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import re
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from html.parser import HTMLParser
from pathlib import Path
from typing import TypeVar
from urllib.parse import urldefrag, urljoin, urlsplit, urlunsplit

import httpx
import structlog

from core.config import IngestSettings
from core.domain.urls import redact_url
from core.errors import UnreachableDocument, UnreadableDocument
from core.ingest.daemon_work import run_abandonable
from core.ingest.formats import DocumentFormat
from core.ingest.held_pages import HeldPages
from core.ingest.html import neutralise_unclosed_markup
from core.ingest.memory import load_json, save_json
from core.ingest.sources import (
    AlreadySeen,
    Discovery,
    Fetched,
    NotModified,
    Skipped,
    SourceItem,
    fetch_url,
    is_url,
    title_from_name,
    url_problem,
    userinfo,
)

log = structlog.get_logger(__name__)
GZIP_WINDOW = 16 + zlib.MAX_WBITS  # zlib's flag for a gzip header
_GZIP_MAGIC = b"\x1f\x8b"
_DROPPED_QUERY = ("utm_", "ref", "fbclid", "gclid")  # tracking parameters: not a new page
LIMIT_REACHED = "page limit reached (ingest.crawl.max_pages); nothing pruned"
_COMMENT_START, _COMMENT_END = re.compile(rb"<!--"), re.compile(rb"-->")
_SCRIPT_START = re.compile(rb"<script\b", re.IGNORECASE)
_SCRIPT_END = re.compile(rb"</script", re.IGNORECASE)
# A tag: `<` and a letter, `/`, `!` or `?`, to the next `>` or the end (one match per `<` at
# most); a bare `<` ("load < 5") is text, as html.parser reads it.
_TAG = re.compile(rb"<[A-Za-z/!?][^>]*>?")
_IMAGE_TAG = re.compile(rb"<img\b", re.IGNORECASE)
_ALT = re.compile(rb"""\salt\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.IGNORECASE)
# URLs queued per page kept, at most: room for broken, disallowed and duplicate links, without
# letting a page of 100,000 links grow the queue without bound.
QUEUED_PER_PAGE = 4
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Visit:
    url: str
    depth: int


@dataclass(frozen=True, slots=True)
class _Remembered:
    """What a crawl keeps of a page for the next one: the name it was indexed under, its
    validators (for a conditional request) and its links (followed without downloading it)."""

    name: str
    etag: str | None
    last_modified: str | None
    links: list[str]
    lastmod: str | None = None  # the sitemap's <lastmod> for it when it was last read
    canonical: str | None = None  # another page under the prefixes it names as canonical
    merged_into: str | None = None  # the page it was merged into, the last crawl that read it
    # What it says (`fingerprint`), when last downloaded: "" when it was not read in time (it
    # is then merged with nothing), None in a memory written before fingerprints.
    fingerprint: str | None = None

    def conditional(self) -> dict[str, str] | None:
        headers = {}
        if self.etag:
            headers["If-None-Match"] = self.etag
        if self.last_modified:
            headers["If-Modified-Since"] = self.last_modified
        return headers or None


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    loc: str
    lastmod: str | None


def normalised(url: str) -> str:
    """One spelling per page: no fragment, no tracking parameters, no `index.html`, a
    lower-case scheme and host. A malformed URL (`http://[::1`) is left as it is, for
    `url_problem` to report."""
    try:
        parts = urlsplit(urldefrag(url).url)
    except ValueError:
        return url
    query = "&".join(
        p for p in parts.query.split("&") if p and not p.lower().startswith(_DROPPED_QUERY)
    )
    path = parts.path or "/"
    if path.endswith(("/index.html", "/index.htm")):
        path = path.rsplit("/", 1)[0] + "/"
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, query, ""))


def default_prefix(url: str) -> str:
    """The folder of a start URL: `https://x/docs/guide.html` -> `https://x/docs/`."""
    parts = urlsplit(normalised(url))
    folder = parts.path if parts.path.endswith("/") else parts.path.rsplit("/", 1)[0] + "/"
    return urlunsplit((parts.scheme, parts.netloc, folder, "", ""))


class SiteConnector:
    def __init__(
        self,
        start_urls: list[str],
        settings: IngestSettings,
        http: httpx.AsyncClient,
        *,
        sitemaps: Iterable[str] = (),
        prefixes: Iterable[str] = (),
        memory: Path | None = None,
        known: Iterable[str] = (),
        revalidate: bool = False,
    ) -> None:
        """`memory`: a file where the crawl keeps each page's validators and links, so the next
        one asks "changed since?" and downloads only what changed; `known`: the doc ids the
        index holds (a page not among them is always downloaded whole); `revalidate`: every
        page is downloaded whole (the settings it was indexed under changed), its links still
        remembered (a page down for now keeps its copy and its pages)."""
        # A user and password in a URL (`https://user:pw@docs.example.com/`) are sent to its
        # scheme, host and port only, and kept out of every URL the crawl names: the pages'
        # ids and citation links, the skip reasons, its memory.
        self._auth = _credentials([*start_urls, *sitemaps, *prefixes])
        self._start = [normalised(redact_url(u)) for u in start_urls]
        self._sitemaps = [redact_url(u) for u in sitemaps]
        self._prefixes = [normalised(redact_url(p)) for p in prefixes] or sorted(
            {default_prefix(u) for u in self._start if _crawlable(u)}
        )
        self._settings = settings
        self._crawl = settings.crawl
        self._http = http
        self._bodies = HeldPages(settings.crawl.max_held_bytes)
        self._robots: dict[str, object] = {}  # origin -> Protego, or None for "allow all"
        self._last_request: dict[str, float] = {}
        self._queued: set[str] = set()  # every URL queued, normalised
        self._memory_path = memory
        self._memory: dict[str, _Remembered] = _load(memory)
        if revalidate:
            self._memory = {url: _forgotten(page) for url, page in self._memory.items()}
        self._crawled: dict[str, _Remembered] = {}
        self._known = set(known)
        self._not_modified: set[str] = set()
        self._lastmods: dict[str, str] = {}  # page URL -> its sitemap <lastmod>, this crawl
        self._host_locks: dict[str, asyncio.Lock] = {}
        # Pages left to be read under another URL (a redirect to a URL of the crawl), and the
        # URLs left out of it with why: a redirect that leads nowhere is then reported too.
        self._redirects: dict[str, tuple[_Visit, str]] = {}
        self._left_out: dict[str, str] = {}
        # This crawl: each URL read -> the page it named itself with; each alias merged into
        # its canonical page -> that page.
        self._landed: dict[str, str] = {}
        self._merged: dict[str, str] = {}
        # robots.txt or sitemaps that failed for now: pages only they name may still exist.
        self._unsure: list[Skipped] = []

    # -- the connector ---------------------------------------------------------------------

    async def discover(self) -> Discovery:
        found = Discovery(items=[], skipped=[], scopes=list(self._prefixes))
        for url in self._start + self._sitemaps + self._prefixes:
            if not is_url(url):
                found.missing.append(Skipped(redact_url(url), "not an http(s) URL"))
            elif (problem := url_problem(url)) is not None:
                found.missing.append(Skipped(redact_url(url), problem))
        if found.missing:  # nothing crawled: this crawl speaks for nothing (prunes nothing)
            found.scopes = []
            return found
        self._queued = set()  # each discovery a crawl of its own
        self._bodies.clear()
        self._redirects, self._left_out, self._unsure = {}, {}, []
        self._landed, self._merged = {}, {}
        seen = self._queued
        pages: dict[str, _Remembered] = {}  # every page kept, by the URL it names itself with
        queue: asyncio.Queue[_Visit | None] = asyncio.Queue()
        for url in self._start + await self._sitemap_pages(found):
            if url not in seen:
                seen.add(url)
                queue.put_nowait(_Visit(url, 0))

        async def worker() -> None:
            while (visit := await queue.get()) is not None:
                try:
                    for link in await self._visit(visit, found, pages):
                        if link not in seen and len(seen) < self._crawl.max_pages * QUEUED_PER_PAGE:
                            seen.add(link)
                            queue.put_nowait(_Visit(link, visit.depth + 1))
                finally:
                    queue.task_done()

        workers = [asyncio.create_task(worker()) for _ in range(self._crawl.concurrency)]
        await queue.join()
        for _ in workers:
            queue.put_nowait(None)
        await asyncio.gather(*workers)
        await self._settle_aliases(found, pages)
        found.items = [
            SourceItem(name, name, name, title_from_name(urlsplit(name).path))
            for name in sorted(pages)
            if name not in self._merged
        ]
        self._report_dead_ends(found)
        if self._bodies.spilled:
            log.info(
                "crawl_pages_on_disk",
                pages=self._bodies.spilled,
                in_memory_bytes=self._bodies.in_memory_bytes,
                setting="ingest.crawl.max_held_bytes",
            )
        # A start URL not read, or robots.txt or a sitemap failing for now (the pages only it
        # names may be there still): this crawl can't say what is gone, so it prunes nothing.
        # Nor does one cut short by the page limit: which pages fill it depends on which
        # answer first, and the indexed pages left out would come and go from sync to sync.
        limited = any(s.reason == LIMIT_REACHED for s in found.skipped)
        if found.missing or self._unsure or limited:
            found.scopes = []
        found.skipped += [replace(u, reason=f"{u.reason}; nothing pruned") for u in self._unsure]
        self._crawled = {u: p for u, p in self._memory.items() if u in seen}
        return found

    def also_skipped(self) -> list[Skipped]:
        return []

    async def completed(self, settled: set[str]) -> None:
        """Remember the validators of the pages indexed for the next crawl (not before: a crash
        mid-sync would leave pages remembered as current yet never indexed). A page that could
        not be indexed (a parse deadline, a failed write) keeps its links but not its
        validators: a 304 next time would leave its change behind its old indexed copy."""
        self._bodies.clear()  # what was not indexed (a failed fetch) is not asked for again
        if self._memory_path is None:
            return
        kept = {
            url: page if self._merged.get(page.name, page.name) in settled else _forgotten(page)
            for url, page in self._crawled.items()
        }
        save_json(self._memory_path, {u: asdict(p) for u, p in kept.items()})

    async def fetch(self, item: SourceItem) -> tuple[bytes, DocumentFormat]:
        if item.doc_id in self._not_modified:
            raise NotModified(item.doc_id)
        kept = self._bodies.pop(item.doc_id)
        if kept is None:
            raise UnreadableDocument("not fetched by the crawl")
        return kept

    # -- pages -----------------------------------------------------------------------------

    def _leave_out(
        self, visit: _Visit, found: Discovery, reason: str, *, asked: bool = True
    ) -> list[str]:
        """`visit` not in the crawl, with why. A start URL asked for and not read is the
        crawl's failure (a target that named nothing), not a page's skip: nothing was crawled
        from it, so nothing under the prefixes may be pruned as gone. One the crawl's own rules
        leave out (`asked` False: outside the prefixes, robots.txt, the page limit) is a skip
        like any page's: a site's root above the docs' prefix still names the sitemap."""
        self._left_out[visit.url] = reason
        shown = Skipped(redact_url(visit.url), reason)
        if asked and visit.depth == 0 and visit.url in self._start:
            found.missing.append(shown)
        else:
            found.skipped.append(shown)
        return []

    def _report_dead_ends(self, found: Discovery) -> None:
        """Redirects the crawl left to be read under their target, where that never happened:
        redirects in a loop through pages of the crawl (`/a` -> `/b` -> `/a`: each left to the
        other) and, for a start URL, a redirect to a page left out."""
        for source, (visit, target) in sorted(self._redirects.items()):
            trail = [source]
            while target in self._redirects and target not in trail:
                trail.append(target)
                target = self._redirects[target][1]
            if target in trail:
                loop = " -> ".join([*trail[trail.index(target) :], target])
                self._leave_out(visit, found, f"redirects in a loop ({loop})")
            elif visit.depth == 0 and visit.url in self._start and target in self._left_out:
                self._leave_out(visit, found, f"redirects to {target}: {self._left_out[target]}")

    async def _visit(
        self, visit: _Visit, found: Discovery, pages: dict[str, _Remembered]
    ) -> list[str]:
        """Fetch one page, keep it (once, under its own name) and return its links to follow."""
        if not self._in_scope(visit.url):
            if visit.url in self._start:
                why = "not under any of the crawl's prefixes"
                return self._leave_out(visit, found, why, asked=False)
            return []
        if not await self._allowed(visit.url):
            return self._leave_out(visit, found, "disallowed by robots.txt", asked=False)
        if len(pages) >= self._crawl.max_pages:
            return self._leave_out(visit, found, LIMIT_REACHED, asked=False)
        remembered = self._memory.get(visit.url)
        indexed = remembered is not None and self._indexed(remembered)
        # Unchanged is worth knowing only with what it said: a page remembered without its
        # fingerprint (a memory from before them) is downloaded whole once.
        current = remembered is not None and remembered.fingerprint is not None and indexed
        listed = self._lastmods.get(visit.url)
        if remembered is not None and current and listed and remembered.lastmod == listed:
            return self._keep(visit, found, pages, remembered, None)  # the sitemap says as is
        conditional = remembered.conditional() if remembered is not None and current else None
        try:
            fetched = await self._get(
                visit.url, any_type=False, seen=self._seen, conditional=conditional
            )
        except NotModified:
            assert remembered is not None
            return self._keep(visit, found, pages, replace(remembered, lastmod=listed), None)
        except AlreadySeen as exc:  # a redirect to a page of the crawl: read there
            self._redirects[visit.url] = (visit, normalised(str(exc)))
            return []
        except UnreachableDocument as exc:
            if remembered is None or not indexed:
                return self._leave_out(visit, found, str(exc))
            # Down for now, not gone: the indexed copy stays (a pruning sync would delete it)
            # and the links it had are still followed, so the pages under it stay too. It is
            # counted as unchanged, so it is said here rather than also counted as skipped.
            log.warning("crawl_page_kept", url=redact_url(visit.url), reason=str(exc))
            return self._keep(visit, found, pages, remembered, None)
        except UnreadableDocument as exc:
            return self._leave_out(visit, found, str(exc))
        assert fetched.fmt is not None
        final = normalised(fetched.url)
        if not self._in_scope(final):
            return self._leave_out(visit, found, f"redirected out of the crawl to {final}")
        page = await self._read_page(fetched, final, listed)
        return self._keep(visit, found, pages, page, (fetched.data, fetched.fmt))

    def _keep(
        self,
        visit: _Visit,
        found: Discovery,
        pages: dict[str, _Remembered],
        page: _Remembered,
        body: tuple[bytes, DocumentFormat] | None,
    ) -> list[str]:
        """The page in the crawl (once, under its own name; `body` None: not modified since the
        copy indexed) and the links to follow from it."""
        name = page.name
        self._memory[visit.url] = page  # duplicates too: next time they are asked, not fetched
        self._landed[visit.url] = name
        if name in pages:
            return []  # the same page under another URL
        if len(pages) >= self._crawl.max_pages:  # others filled the crawl while this one read
            return self._leave_out(visit, found, LIMIT_REACHED)
        pages[name] = page
        if body is None:
            self._not_modified.add(name)
        else:
            self._bodies.put(name, *body)
        # The page it names as canonical is read even past `max_depth`: without it, whether
        # the two say the same can't be told.
        follow = [page.canonical] if page.canonical is not None else []
        if visit.depth < self._crawl.max_depth:
            follow += [link for link in page.links if self._in_scope(link)]
        return follow

    def _indexed(self, page: _Remembered) -> bool:
        """The index holds what `page` says: under its name, or (merged) its canonical's."""
        return page.name in self._known or page.merged_into in self._known

    async def _read_page(self, fetched: Fetched, name: str, listed: str | None) -> _Remembered:
        """What the crawl keeps of a page downloaded: its links, the page it names as canonical
        (when another under the prefixes) and its fingerprint. Read off the event loop and
        within `ingest.parse_timeout_s`: a page too slow to read is still indexed (the pipeline
        parses it under its own limits), but its links are not followed, nor is it merged."""
        assert fetched.fmt is not None
        canonical: str | None = None
        links: list[str] = []
        if fetched.fmt is DocumentFormat.HTML:
            try:
                canonical, links = await self._in_thread(
                    functools.partial(_links, fetched.data, name, self._crawl.max_links_per_page)
                )
            except TimeoutError:
                seconds = self._settings.parse_timeout_s
                log.warning("crawl_links_not_read", url=name, seconds=seconds)
        try:  # apart from the links: linear, so a page too big to read for links has one too
            fingerprint = await self._in_thread(
                functools.partial(page_fingerprint, fetched.data, fetched.fmt)
            )
        except TimeoutError:
            fingerprint = ""
        if canonical == name or (canonical is not None and not self._in_scope(canonical)):
            canonical = None
        return _Remembered(
            name,
            fetched.etag,
            fetched.last_modified,
            links,
            lastmod=listed,
            canonical=canonical,
            fingerprint=fingerprint,
        )

    async def _in_thread(self, work: Callable[[], T]) -> T:
        """`work` off the event loop, within `ingest.parse_timeout_s` (TimeoutError past it)."""
        return await run_abandonable(
            work, self._settings.parse_timeout_s, self._settings.parse_threads
        )

    # -- aliases ---------------------------------------------------------------------------

    async def _settle_aliases(self, found: Discovery, pages: dict[str, _Remembered]) -> None:
        """Each page naming another as its canonical is merged into it when both say the same
        (one page under two URLs) and kept under its own URL otherwise. A canonical link is the
        site's claim, and a wrong one is common (a template naming the docs' home on every
        page): taken on trust, the crawl indexed one page's text under another's URL, and a
        citation linked to a page that does not say what it quotes."""
        differing: list[str] = []
        for name in list(pages):
            page, target = pages[name], self._canonical_page(pages[name], pages)
            same = target is not None and _same_words(page, target)
            if not same and self._unread_alias(page):
                # Merged last time and unchanged since, but no longer the same as its canonical
                # page (changed, gone, left out of this crawl): the index holds none of it.
                reread = await self._reread(name, found, pages)
                if reread is None:
                    continue
                page, target = reread, self._canonical_page(reread, pages)
                same = target is not None and _same_words(page, target)
            if same and target is not None:
                self._merged[name] = target.name
                self._bodies.pop(name)
                self._not_modified.discard(name)
            elif target is not None:
                differing.append(name)
            merged_into = target.name if same and target is not None else None
            if page.merged_into != merged_into:
                self._remember(name, replace(page, merged_into=merged_into))
        if differing:
            log.info(
                "crawl_canonical_not_followed",
                pages=len(differing),
                first=redact_url(differing[0]),
                reason="its text differs from its canonical page's: kept under its own URL",
            )

    def _canonical_page(
        self, page: _Remembered, pages: dict[str, _Remembered]
    ) -> _Remembered | None:
        """The page of this crawl `page` names as canonical, when that one is no alias itself
        (a chain or a loop of canonical links merges nothing; a page naming itself under
        another spelling, `/guide` redirecting to `/guide/`, is none)."""
        if page.canonical is None:
            return None
        target = pages.get(self._landing(page.canonical))
        if target is None or target.name == page.name:
            return None
        if target.canonical is not None and self._landing(target.canonical) != target.name:
            return None
        return target

    def _landing(self, url: str) -> str:
        """The page `url` led to in this crawl, through redirects."""
        trail: set[str] = set()
        while url not in trail:
            trail.add(url)
            redirected = self._redirects.get(url)
            url = self._landed.get(url) or (redirected[1] if redirected else url)
        return url

    def _unread_alias(self, page: _Remembered) -> bool:
        """A page merged into its canonical page the last time it was read, and not downloaded
        this time (unchanged, or down for now): the index holds none of its own text."""
        return page.merged_into is not None and page.name in self._not_modified

    def _remember(self, name: str, page: _Remembered) -> None:
        """`page` as the crawl keeps it, under every URL of this crawl that led to it."""
        for url, landed in self._landed.items():
            if landed == name:
                self._memory[url] = page

    async def _reread(
        self, name: str, found: Discovery, pages: dict[str, _Remembered]
    ) -> _Remembered | None:
        """`name` downloaded whole, to be indexed under its own URL; None (and left out, with
        why) when that fails."""
        try:
            fetched = await self._get(name, any_type=False)
        except (UnreachableDocument, UnreadableDocument) as exc:
            del pages[name]
            self._not_modified.discard(name)
            found.skipped.append(Skipped(redact_url(name), str(exc)))
            return None
        assert fetched.fmt is not None
        page = await self._read_page(fetched, name, pages[name].lastmod)
        pages[name] = page
        self._not_modified.discard(name)
        self._bodies.put(name, fetched.data, fetched.fmt)
        self._remember(name, page)
        return page

    def _seen(self, url: str) -> bool:
        return normalised(url) in self._queued

    def _in_scope(self, url: str) -> bool:
        return any(url.startswith(prefix) for prefix in self._prefixes)

    async def _get(
        self,
        url: str,
        *,
        any_type: bool,
        seen: Callable[[str], bool] | None = None,
        conditional: dict[str, str] | None = None,
        cut_at: int | None = None,
    ) -> Fetched:
        """One request, politely: after `delay_s` since the last one to this host. `cut_at`:
        the body is read up to that many bytes, the rest ignored (instead of the document
        limit, past which it is refused)."""
        host = urlsplit(url).netloc
        lock = self._host_locks.setdefault(host, asyncio.Lock())
        async with lock:
            wait = self._last_request.get(host, 0.0) + self._crawl.delay_s - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._last_request[host] = time.monotonic()
        item = SourceItem(url, url, url, "", auth=self._auth.get(_origin(url)))
        try:
            async with asyncio.timeout(self._settings.url_deadline_s):
                return await fetch_url(
                    item,
                    self._settings.max_file_bytes if cut_at is None else cut_at,
                    self._http,
                    any_type=any_type,
                    seen=seen,
                    conditional=conditional,
                    cut=cut_at is not None,
                )
        except TimeoutError:
            raise UnreachableDocument(
                f"did not arrive whole within {self._settings.url_deadline_s:g} s"
            ) from None

    # -- robots.txt ------------------------------------------------------------------------

    async def _allowed(self, url: str) -> bool:
        if not self._crawl.robots:
            return True
        rules = await self._rules(url)
        if rules is None:
            return True
        return bool(rules.can_fetch(url, self._settings.user_agent))  # type: ignore[attr-defined]

    async def _rules(self, url: str) -> object | None:
        """The origin's robots.txt, read once; none (or unreadable) allows everything. Read up
        to `max_robots_bytes`, the rest ignored, as Google does: Protego parses it and matches
        every URL against all its rules on the event loop (13 MB of rules took 11 s to parse
        and 250 ms per URL)."""
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin not in self._robots:
            from protego import Protego

            limit = self._crawl.max_robots_bytes
            try:
                robots = await self._get(origin + "/robots.txt", any_type=True, cut_at=limit)
                text = robots.data.decode("utf-8", "replace")
                if len(robots.data) >= limit:  # cut: its last line may be only part of one
                    text = text.rpartition("\n")[0]
                self._robots[origin] = Protego.parse(text)
            except UnreachableDocument as exc:  # the sitemaps it names are unknown this time
                self._robots[origin] = None
                self._unsure.append(Skipped(redact_url(origin + "/robots.txt"), str(exc)))
            except UnreadableDocument:
                self._robots[origin] = None
        return self._robots[origin]

    # -- sitemaps --------------------------------------------------------------------------

    async def _sitemap_pages(self, found: Discovery) -> list[str]:
        """Page URLs of the sitemaps (given, else those robots.txt names) under the prefixes,
        index files read through, each file at most once and `max_sitemaps` in all.

        At most `max_pages * QUEUED_PER_PAGE` of them, as for the links the pages hold: 100
        sitemaps of 50,000 URLs each queued 5 million visits for a crawl of 500 pages (65 s
        and 500,000 "page limit reached" skips for 10 of them). Past that bound the crawl
        would be cut short anyway: no more sitemaps are read, and it prunes nothing."""
        pending = list(self._sitemaps)
        if not pending and self._crawl.robots:
            for start in self._start:
                rules = await self._rules(start)
                pending += list(rules.sitemaps) if rules is not None else []  # type: ignore[attr-defined]
        read: set[str] = set()
        pages: dict[str, None] = {}  # in order, once each
        room = self._crawl.max_pages * QUEUED_PER_PAGE
        while pending and len(read) < self._crawl.max_sitemaps:
            url = pending.pop(0)
            if url in read:
                continue
            read.add(url)
            try:
                data = (await self._get(url, any_type=True)).data
                kind, entries = parse_sitemap(
                    data, self._crawl.max_sitemap_urls, self._settings.max_file_bytes
                )
            except UnreachableDocument as exc:  # its pages are unknown this time
                self._unsure.append(Skipped(redact_url(url), f"sitemap: {exc}"))
                continue
            except UnreadableDocument as exc:
                found.skipped.append(Skipped(redact_url(url), f"sitemap: {exc}"))
                continue
            located = [e for e in entries if _crawlable(e.loc)]
            if kind == "index":
                pending += [e.loc for e in located]
                continue
            for entry in located:
                if not self._in_scope(page_url := normalised(entry.loc)):
                    continue  # never crawled: not queued either
                if len(pages) >= room and page_url not in pages:
                    found.skipped.append(Skipped(redact_url(url), LIMIT_REACHED))
                    return list(pages)
                pages[page_url] = None
                if entry.lastmod:
                    self._lastmods[page_url] = entry.lastmod
        return list(pages)


def parse_sitemap(data: bytes, max_urls: int, max_bytes: int) -> tuple[str, list[SitemapEntry]]:
    """("index" | "urlset", each <loc> with its <lastmod>), from XML or gzipped XML; an
    entity-expanding or oversized file is refused (defusedxml; inflation capped at
    `max_bytes`)."""
    from defusedxml import ElementTree
    from defusedxml.common import DefusedXmlException

    if data.startswith(_GZIP_MAGIC):
        inflater = zlib.decompressobj(GZIP_WINDOW)
        data = inflater.decompress(data, max_bytes + 1)
        if len(data) > max_bytes:
            raise UnreadableDocument(f"inflates past {max_bytes:,} bytes")
    try:
        root = ElementTree.fromstring(data)
    except (DefusedXmlException, ElementTree.ParseError) as exc:
        raise UnreadableDocument(f"not a sitemap ({type(exc).__name__})") from None
    kind = root.tag.rsplit("}", 1)[-1]
    if kind not in ("sitemapindex", "urlset"):
        raise UnreadableDocument(f"not a sitemap (root element <{kind}>)")
    entries: list[SitemapEntry] = []
    for element in root:
        if len(entries) >= max_urls:
            break
        fields = {
            child.tag.rsplit("}", 1)[-1]: (child.text or "").strip()
            for child in element
            if isinstance(child.tag, str)
        }
        if fields.get("loc"):
            entries.append(SitemapEntry(fields["loc"], fields.get("lastmod") or None))
    return ("index" if kind == "sitemapindex" else "urlset"), entries


def page_fingerprint(data: bytes, fmt: DocumentFormat) -> str:
    """A page's fingerprint (`fingerprint`); a file not HTML: its bytes'."""
    return fingerprint(data) if fmt is DocumentFormat.HTML else hashlib.sha256(data).hexdigest()


def fingerprint(data: bytes) -> str:
    """What an HTML page says, hashed: its words and its images' alt text, without its tags
    (attributes hold what a server writes into each copy: CSRF tokens, script nonces), its
    comments or its scripts. Two URLs with the same fingerprint serve the same words, which is
    what makes one an alias of the other. Any other difference (a timestamp in the text, a
    `<nav>` the index leaves out) keeps them apart, the safe side: a comment or script never
    closed hides nothing after it. Linear in the page's size, on bytes."""
    digest = hashlib.sha256()
    for shown in _outside(data, _COMMENT_START, _COMMENT_END):
        for text in _outside(shown, _SCRIPT_START, _SCRIPT_END):
            digest.update(_words(text))
    return digest.hexdigest()


def _outside(data: bytes, start: re.Pattern[bytes], end: re.Pattern[bytes]) -> Iterator[bytes]:
    """The pieces of `data` outside each `start`...`end`; from a `start` never ended, the
    rest as it is."""
    position = 0
    while (opened := start.search(data, position)) is not None:
        closed = end.search(data, opened.end())
        if closed is None:
            break
        yield data[position : opened.start()]
        position = closed.end()
    yield data[position:]


def _words(markup: bytes) -> bytes:
    """The words of `markup` outside its tags, and each image's alt text in its place."""
    pieces: list[bytes] = []
    position = 0
    for tag in _TAG.finditer(markup):
        pieces.append(markup[position : tag.start()])
        if _IMAGE_TAG.match(tag.group(0)) and (alt := _ALT.search(tag.group(0))) is not None:
            pieces.append(next(value for value in alt.groups() if value is not None))
        position = tag.end()
    pieces.append(markup[position:])
    return b" ".join(b" ".join(pieces).split()) + b" "


def _links(data: bytes, base: str, limit: int) -> tuple[str | None, list[str]]:
    """A page's canonical URL and the http(s) links it holds, normalised, at most `limit`.
    Decoded as BeautifulSoup would (its declared or sniffed charset), then read in linear time
    as the page parser reads it: html.parser alone is quadratic on markup that never closes,
    and a thread running it can't be stopped when its time is up."""
    from bs4 import UnicodeDammit

    text = UnicodeDammit(data, is_html=True).unicode_markup or ""
    reader = _LinkReader(limit)
    with contextlib.suppress(_EnoughLinks):
        reader.feed(neutralise_unclosed_markup(text))
        reader.close()
    canonical = _followable(base, reader.canonical) if reader.canonical is not None else None
    links = [link for href in reader.hrefs if (link := _followable(base, href)) is not None]
    return canonical, links


def _followable(base: str, href: str) -> str | None:
    """`href` read against `base` and normalised, when it is a URL the crawl can request."""
    target = _joined(base, href)
    return normalised(target) if target is not None and _crawlable(target) else None


class _EnoughLinks(Exception):
    """The reader has `limit` links and the canonical link: the rest of the page is not read."""


class _LinkReader(HTMLParser):
    """The first `limit` `<a href>` and the first `<link rel=canonical href>`, as html.parser
    meets their tags (the events BeautifulSoup builds its tree from, read the same way: the
    last of a repeated attribute, a bare `href` as empty), without the tree, which cost most
    of the time (a page of 300,000 links at the shipped limit: 21 s with it, 4 s without;
    BENCHMARKS.md, "Site crawl"). Reading stops once both are found."""

    def __init__(self, limit: int) -> None:
        super().__init__(convert_charrefs=True)
        self.limit = limit
        self.hrefs: list[str] = []
        self.canonical: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ("a", "link"):
            return
        values = dict(attrs)
        if "href" not in values:
            return
        href = values["href"] or ""
        if tag == "a" and len(self.hrefs) < self.limit:
            self.hrefs.append(href)
        elif (
            tag == "link"
            and self.canonical is None
            and "canonical" in (values.get("rel") or "").split()
        ):
            self.canonical = href
        if len(self.hrefs) == self.limit and self.canonical is not None:
            raise _EnoughLinks


def _joined(base: str, href: str) -> str | None:
    """`href` read against `base`; None when it is malformed (`http://[::1`)."""
    try:
        return urljoin(base, href)
    except ValueError:
        return None


def _crawlable(url: str) -> bool:
    """An http(s) URL that can be requested (a page's malformed link is not followed)."""
    return is_url(url) and url_problem(url) is None


def memory_name(start_urls: Iterable[str], prefixes: Iterable[str]) -> str:
    """The memory file of one crawl (the same start URLs and prefixes: the same crawl), named
    without the URLs' passwords (a hash of a short one is easily reversed)."""
    key = "\n".join(sorted(normalised(redact_url(u)) for u in [*start_urls, *prefixes]))
    return hashlib.sha256(key.encode()).hexdigest()[:16] + ".json"


Origin = tuple[str, str, int | None]


def _origin(url: str) -> Origin | None:
    """Scheme, host and port: where a URL's credentials may be sent (see `fetch_url`)."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:  # malformed: `discover` reports it
        return None
    return parsed.scheme, parsed.host, parsed.port


def _credentials(urls: Iterable[str]) -> dict[Origin | None, tuple[str, str]]:
    """The user and password the crawl's URLs hold, by the origin they are for."""
    found: dict[Origin | None, tuple[str, str]] = {}
    for url in urls:
        try:
            credentials = userinfo(url)
        except ValueError:  # malformed: `discover` reports it
            continue
        if credentials is not None:
            found[_origin(redact_url(url))] = credentials
    return found


def _same_words(page: _Remembered, other: _Remembered) -> bool:
    return bool(page.fingerprint) and page.fingerprint == other.fingerprint


def _forgotten(page: _Remembered) -> _Remembered:
    """`page` without what says "unchanged since": the next crawl downloads it whole."""
    return replace(page, etag=None, last_modified=None, lastmod=None)


def _load(path: Path | None) -> dict[str, _Remembered]:
    """A crawl's memory; a missing or unreadable file is an empty one (everything is then
    downloaded whole, as on a first crawl)."""
    if path is None:
        return {}
    kept = load_json(path)
    try:
        return {url: _Remembered(**page) for url, page in kept.items()}
    except (TypeError, AttributeError):  # not a memory of this shape (None included)
        return {}
