"""`bot ingest URL --crawl` against a docs site on loopback: sitemap index (gzipped child),
robots.txt, redirects, duplicates, a canonical tag, a loop, broken links and links out of the
docs; then the pages indexed, and a page gone from the site pruned."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import structlog
from aiohttp import web
from aiohttp.test_utils import TestServer
from typer.testing import CliRunner

from bot.cli import app
from core.config import IngestSettings, Settings
from core.domain.documents import Outcome
from core.errors import UnreadableDocument
from core.ingest.pipeline import Ingestor, IngestReport
from core.ingest.site import (
    LIMIT_REACHED,
    QUEUED_PER_PAGE,
    SiteConnector,
    normalised,
    parse_sitemap,
)
from tests.fakes.docs_site import GUIDE, DocsSite, page
from tests.fakes.faults import RefusingEmbedder
from tests.fakes.threaded import served_in_a_thread


@dataclass
class Served:
    site: DocsSite
    url: str
    http: httpx.AsyncClient


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    site = DocsSite()
    server = TestServer(site.app(), host="127.0.0.1")
    await server.start_server()
    site.base = str(server.make_url("")).rstrip("/")
    async with httpx.AsyncClient(headers={"User-Agent": "docbot-ingest/0.1"}) as http:
        yield Served(site, site.base, http)
    await server.close()


MEMORY = "crawl-memory.json"


@pytest.fixture
def sync(
    served: Served, settings: Settings, ingestor: Ingestor, index, tmp_path: Path
) -> Callable[[], Awaitable[IngestReport]]:
    """A pruning sync of the site as `bot sync` runs one: with the crawl's memory (in
    `tmp_path / MEMORY`) and the documents the index holds."""

    async def run() -> IngestReport:
        known = await index.documents()
        site = crawler(served, settings.ingest, memory=tmp_path / MEMORY, known=known)
        return await ingestor.ingest_from(site, source="site", prune=True)

    return run


def crawler(
    served: Served,
    settings: IngestSettings,
    memory: Path | None = None,
    known: Iterable[str] = (),
    **crawl: object,
) -> SiteConnector:
    tuned = settings.model_copy(
        update={"crawl": settings.crawl.model_copy(update={"delay_s": 0, **crawl})}
    )
    return SiteConnector([served.url + "/docs/"], tuned, served.http, memory=memory, known=known)


async def test_a_crawl_finds_every_page_once_within_the_docs(
    served: Served, settings: Settings
) -> None:
    found = await crawler(served, settings.ingest).discover()
    base = served.url
    assert [item.doc_id for item in found.items] == [
        f"{base}/docs/",
        f"{base}/docs/guide/",  # also as /docs/guide/index.html (a redirect), ?utm_source=...
        f"{base}/docs/guide/advanced.html",
        f"{base}/docs/install.html",  # also as /docs/old-install (a permanent redirect)
        f"{base}/docs/orphan.html",  # linked from nowhere: found in the gzipped sitemap
    ]  # /docs/print/guide.html names /docs/guide/ as its canonical URL: the same page
    skipped = {s.display: s.reason for s in found.skipped}
    assert skipped[f"{base}/docs/private/secret.html"] == "disallowed by robots.txt"
    assert skipped[f"{base}/docs/missing.html"].startswith("HTTP 404")
    assert found.scopes == [f"{base}/docs/"]
    assert served.site.requests["/blog/launch.html"] == 0  # out of the docs: never fetched
    assert served.site.requests["/docs/private/secret.html"] == 0
    assert served.site.requests["/robots.txt"] == 1  # read once per crawl
    assert all(n <= 1 for p, n in served.site.requests.items() if p.startswith("/docs/"))


async def test_the_bounds_hold(served: Served, settings: Settings) -> None:
    found = await crawler(served, settings.ingest, max_pages=2).discover()
    assert len(found.items) == 2
    assert any("page limit reached" in s.reason for s in found.skipped)
    shallow = await crawler(served, settings.ingest, max_depth=0).discover()
    assert {item.doc_id.removeprefix(served.url) for item in shallow.items} == {
        "/docs/",
        "/docs/orphan.html",  # the sitemap's pages start at depth 0 too
    }


async def test_crawled_pages_are_indexed_and_a_page_gone_is_pruned(
    served: Served, settings: Settings, ingestor: Ingestor, index
) -> None:
    first = await ingestor.ingest_from(crawler(served, settings.ingest), source="site")
    assert first.counts[Outcome.ADDED] == 5
    hits = await index.search("tune the cache size for large teams", k=1)
    assert hits[0].chunk.url.startswith(served.url + "/docs/guide/advanced.html")
    again = await ingestor.ingest_from(crawler(served, settings.ingest), source="site")
    assert again.counts[Outcome.UNCHANGED] == 5
    del served.site.pages["/docs/orphan.html"]
    pruned = await ingestor.ingest_from(crawler(served, settings.ingest), source="site", prune=True)
    assert pruned.counts[Outcome.DELETED] == 1
    assert served.url + "/docs/orphan.html" not in await index.documents()


async def test_with_no_memory_budget_every_page_waits_on_disk_and_is_indexed_the_same(
    served: Served,
    settings: Settings,
    ingestor: Ingestor,
    index,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A crawl held every body in memory until indexing (500 × 20 MB allowed by default)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    site = crawler(served, settings.ingest, max_held_bytes=0)
    with structlog.testing.capture_logs() as logs:
        report = await ingestor.ingest_from(site, source="site")
    assert report.counts[Outcome.ADDED] == 5
    [spilled] = [e for e in logs if e["event"] == "crawl_pages_on_disk"]
    assert (spilled["pages"], spilled["in_memory_bytes"]) == (5, 0)
    hits = await index.search("tune the cache size for large teams", k=1)
    assert hits[0].chunk.url.startswith(served.url + "/docs/guide/advanced.html")
    assert list(tmp_path.glob("bot-crawl-*")) == []  # removed with the crawl


async def test_pages_the_sitemap_dates_as_unchanged_are_not_even_asked(
    served: Served, sync: Callable[[], Awaitable[IngestReport]]
) -> None:
    await sync()
    served.site.requests.clear()
    unchanged = await sync()
    assert unchanged.counts[Outcome.UNCHANGED] == 5
    assert served.site.requests["/docs/"] == 0  # <lastmod> as when read: no request at all
    assert served.site.requests["/docs/orphan.html"] == 0
    assert served.site.requests["/docs/install.html"] == 1  # not in the sitemap: asked (304)

    served.site.pages["/docs/orphan.html"] = page("Orphan", "Now linked from the guide.")
    served.site.lastmods["/docs/orphan.html"] = "2026-11-24"
    served.site.downloads.clear()
    changed = await sync()
    assert set(served.site.downloads) == {"/docs/orphan.html"}
    assert changed.counts[Outcome.UPDATED] == 1


def test_hostile_sitemaps_are_refused_with_a_reason() -> None:
    bomb = (
        b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>'
        b"<urlset><url><loc>&lol2;</loc></url></urlset>"
    )
    with pytest.raises(UnreadableDocument, match="not a sitemap"):
        parse_sitemap(bomb, 100, 1_000_000)
    with pytest.raises(UnreadableDocument, match="not a sitemap"):
        parse_sitemap(b"<html>nope</html>", 100, 1_000_000)
    import gzip

    huge = gzip.compress(b"<urlset>" + b" " * 2_000_000 + b"</urlset>")
    with pytest.raises(UnreadableDocument, match="inflates past"):
        parse_sitemap(huge, 100, 1_000_000)
    kind, urls = parse_sitemap(
        b"<urlset>" + b"<url><loc>https://x/a</loc></url>" * 10 + b"</urlset>", 3, 1_000_000
    )
    assert (kind, len(urls)) == ("urlset", 3)
    _, dated = parse_sitemap(
        b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>https://x/a</loc>'
        b"<lastmod>2026-11-01T10:00:00+00:00</lastmod></url><url><loc>https://x/b</loc></url>"
        b"</urlset>",
        10,
        1_000_000,
    )
    assert [(e.loc, e.lastmod) for e in dated] == [
        ("https://x/a", "2026-11-01T10:00:00+00:00"),
        ("https://x/b", None),
    ]


@pytest.mark.parametrize(
    ("url", "same_as"),
    [
        ("https://Docs.Example.com/a/index.html#top", "https://docs.example.com/a/"),
        ("https://docs.example.com/a?utm_source=x&v=2", "https://docs.example.com/a?v=2"),
    ],
)
def test_one_spelling_per_page(url: str, same_as: str) -> None:
    assert normalised(url) == same_as


@pytest.fixture
def site_in_a_thread() -> Iterator[DocsSite]:
    """The site served from a thread of its own: for the command, which runs its own loop."""
    site = DocsSite()
    with served_in_a_thread(site.app()) as base:
        site.base = base
        yield site


def test_the_command_crawls_a_site(
    site_in_a_thread: DocsSite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BOT_INGEST__CRAWL__DELAY_S", "0")
    start = site_in_a_thread.base + "/docs/"
    result = CliRunner().invoke(app, ["ingest", start, "--crawl", "--source", "site", "-v"])
    assert result.exit_code == 0, result.output
    assert "5 added" in result.output
    assert "disallowed by robots.txt" in result.output
    site_in_a_thread.downloads.clear()
    again = CliRunner().invoke(app, ["ingest", start, "--crawl", "--source", "site"])
    assert again.exit_code == 0, again.output
    assert "5 unchanged" in again.output
    assert sum(site_in_a_thread.downloads.values()) == 0  # the crawl's memory in the data dir
    assert list((tmp_path / "crawls").glob("*.json"))
    refused = CliRunner().invoke(app, ["ingest", start, "--sitemap", start + "sitemap.xml"])
    assert refused.exit_code == 1
    assert "--sitemap and --prefix go with --crawl" in refused.output


async def test_a_page_too_slow_to_read_for_links_is_kept_without_its_links(
    served: Served, settings: Settings
) -> None:
    anchors = "".join(f'<a href="/docs/p{n}.html">{n}</a>' for n in range(200_000))
    served.site.pages["/docs/"] = f"<html><body><h1>Home</h1><p>Hi.</p>{anchors}</body></html>"
    hurried = settings.ingest.model_copy(update={"parse_timeout_s": 0.01})
    with structlog.testing.capture_logs() as logs:
        found = await crawler(served, hurried, max_depth=1).discover()
    ids = {item.doc_id.removeprefix(served.url) for item in found.items}
    assert "/docs/" in ids  # indexed all the same
    assert not any(i.startswith("/docs/p") for i in ids)
    assert [e["event"] for e in logs if e["event"] == "crawl_links_not_read"]


async def test_a_re_crawl_downloads_only_the_pages_that_changed(
    served: Served, sync: Callable[[], Awaitable[IngestReport]], tmp_path: Path
) -> None:
    first = await sync()
    assert first.counts[Outcome.ADDED] == 5
    pages = set(served.site.downloads)
    full_crawl = sum(served.site.downloads.values())  # the 5 pages and a print copy of one
    served.site.downloads.clear()

    unchanged = await sync()
    assert unchanged.counts[Outcome.UNCHANGED] == 5
    assert sum(served.site.downloads.values()) == 0  # every page answered 304, links remembered

    served.site.pages["/docs/install.html"] = page("Install", "Run the new installer.", "/docs/")
    served.site.pages["/docs/guide/advanced.html"] = page("Advanced", "Tune the cache well.")
    changed = await sync()
    assert set(served.site.downloads) == {"/docs/install.html", "/docs/guide/advanced.html"}
    assert changed.counts[Outcome.UPDATED] == 2
    assert changed.counts[Outcome.UNCHANGED] == 3
    assert pages >= set(served.site.downloads)

    (tmp_path / MEMORY).write_text(
        "{not json", encoding="utf-8"
    )  # a damaged memory: a full crawl, no error
    served.site.downloads.clear()
    again = await sync()
    assert again.counts[Outcome.UNCHANGED] == 5
    assert sum(served.site.downloads.values()) == full_crawl


def started_at(
    served: Served, settings: IngestSettings, path: str, **crawl: object
) -> SiteConnector:
    """A crawl of the docs started at one page of them."""
    tuned = settings.model_copy(
        update={"crawl": settings.crawl.model_copy(update={"delay_s": 0, **crawl})}
    )
    docs = served.url + "/docs/"
    return SiteConnector([served.url + path], tuned, served.http, prefixes=[docs])


async def test_a_canonical_link_to_a_page_saying_otherwise_is_not_followed(
    served: Served, settings: Settings, ingestor: Ingestor, index
) -> None:
    """A template naming the docs' home as every page's canonical: taken on trust, the first
    page read was indexed as the home page (its text cited at the home's URL) and the others
    were dropped as its duplicates. Each page keeps its own URL and its own text."""
    base = served.url
    for path, (title, text) in {
        "/docs/install.html": ("Install", "Run the installer, then sign in."),
        "/docs/guide/advanced.html": ("Advanced", "Tune the cache size for large teams."),
    }.items():
        served.site.pages[path] = page(title, text, "/docs/", canonical=f"{base}/docs/")
    with structlog.testing.capture_logs() as logs:
        report = await ingestor.ingest_from(
            started_at(served, settings.ingest, "/docs/install.html"), source="site"
        )
    assert report.counts[Outcome.ADDED] == 5  # the print copy of the guide is still merged
    for question, path in [
        ("run the installer then sign in", "/docs/install.html"),
        ("tune the cache size for large teams", "/docs/guide/advanced.html"),
        ("welcome to the product docs", "/docs/"),
    ]:
        [hit] = await index.search(question, k=1)
        assert hit.chunk.url.split("#")[0] == base + path, question
    [said] = [e for e in logs if e["event"] == "crawl_canonical_not_followed"]
    assert said["pages"] == 2


async def test_a_copy_read_before_its_canonical_page_is_merged_into_it(
    served: Served, settings: Settings
) -> None:
    """The print copy is where the crawl starts, with no link followed (`max_depth` 0): its
    canonical page is read all the same, to be compared with it, and the copy is merged."""
    site = started_at(served, settings.ingest, "/docs/print/guide.html", max_depth=0)
    found = await site.discover()
    assert [item.doc_id.removeprefix(served.url) for item in found.items] == [
        "/docs/",  # in the sitemap, as orphan.html: both at depth 0
        "/docs/guide/",
        "/docs/orphan.html",
    ]
    assert served.site.requests["/docs/guide/"] == 1
    assert served.site.requests["/docs/install.html"] == 0  # a link: not followed at depth 0


async def test_a_copy_whose_canonical_page_changed_is_indexed_under_its_own_url(
    served: Served, sync: Callable[[], Awaitable[IngestReport]], index
) -> None:
    """The print copy was merged into the guide, and answers 304 since: the guide's new text
    is no longer what the copy says, so the copy is downloaded and indexed under its URL."""
    assert (await sync()).counts[Outcome.ADDED] == 5
    served.site.pages["/docs/guide/"] = page(
        "Guide", "Configure the workspace, then ask your admin for invites.", *GUIDE[2:]
    )
    served.site.downloads.clear()
    parted = await sync()
    assert (parted.counts[Outcome.ADDED], parted.counts[Outcome.UPDATED]) == (1, 1)
    assert served.site.downloads["/docs/print/guide.html"] == 1
    [copy] = await index.search("configure the workspace and invite your team", k=1)
    assert copy.chunk.url.split("#")[0] == served.url + "/docs/print/guide.html"
    [guide] = await index.search("ask your admin for invites", k=1)
    assert guide.chunk.url.split("#")[0] == served.url + "/docs/guide/"

    served.site.downloads.clear()
    assert (await sync()).counts[Outcome.UNCHANGED] == 6
    assert sum(served.site.downloads.values()) == 0


async def test_a_merged_copy_whose_canonical_page_is_gone_is_indexed_under_its_own_url(
    served: Served, sync: Callable[[], Awaitable[IngestReport]], index
) -> None:
    """The copy answers 304 (unchanged) but the page it was merged into is gone: the index
    held none of the copy's own text, so it is downloaded and indexed, not skipped."""
    served.site.pages["/docs/"] = page("Docs home", "Welcome.", "/docs/guide/", GUIDE[4])
    assert (await sync()).counts[Outcome.ADDED] == 5
    del served.site.pages["/docs/guide/"]
    gone = await sync()
    assert gone.counts[Outcome.ADDED] == 1
    [copy] = await index.search("configure the workspace and invite your team", k=1)
    assert copy.chunk.url.split("#")[0] == served.url + "/docs/print/guide.html"


@pytest.mark.parametrize("spelling", ["/docs/guide", "/docs/guide/index.html"])
async def test_canonical_links_spelled_through_a_redirect_merge_and_stay_merged(
    spelling: str, served: Served, sync: Callable[[], Awaitable[IngestReport]]
) -> None:
    """The copy names the guide by a URL that redirects to it, and the guide names itself so
    too: the copy is merged, the guide is no alias, and an unchanged re-sync downloads
    nothing (the copy was downloaded whole every time)."""
    served.site.redirects["/docs/guide"] = "/docs/guide/"
    served.site.pages["/docs/guide/"] = page(*GUIDE, canonical=spelling)
    served.site.pages["/docs/print/guide.html"] = page(*GUIDE, canonical=spelling)
    first = await sync()
    assert first.counts[Outcome.ADDED] == 5  # the copy merged into the guide
    served.site.downloads.clear()
    assert (await sync()).counts[Outcome.UNCHANGED] == 5
    assert sum(served.site.downloads.values()) == 0


async def test_a_memory_from_before_fingerprints_downloads_each_page_once(
    served: Served, sync: Callable[[], Awaitable[IngestReport]], tmp_path: Path
) -> None:
    """Unchanged since is worth knowing only with what the page said: without it, a copy
    could never be compared with its canonical page again."""
    await sync()
    memory = json.loads((tmp_path / MEMORY).read_text(encoding="utf-8"))
    for remembered in memory.values():
        del remembered["fingerprint"]
    (tmp_path / MEMORY).write_text(json.dumps(memory), encoding="utf-8")
    served.site.downloads.clear()
    assert (await sync()).counts[Outcome.UNCHANGED] == 5
    assert set(served.site.downloads) == {
        "/docs/",
        "/docs/guide/",
        "/docs/guide/advanced.html",
        "/docs/install.html",
        "/docs/orphan.html",
        "/docs/print/guide.html",
    }
    served.site.downloads.clear()
    await sync()
    assert sum(served.site.downloads.values()) == 0


@pytest.mark.parametrize("status", [503, 429])
async def test_a_page_down_for_now_is_kept_with_the_pages_under_it(
    status: int, served: Served, sync: Callable[[], Awaitable[IngestReport]], index
) -> None:
    """A sync that prunes must not read "the server failed this once" as "the page is gone":
    the indexed copy stays, and so do the pages reached only through its links. A 404 is gone."""
    first = await sync()
    assert first.counts[Outcome.ADDED] == 5
    served.site.failing["/docs/guide/"] = status  # advanced.html is linked only from here
    with structlog.testing.capture_logs() as logs:
        bad_day = await sync()
    assert bad_day.counts[Outcome.DELETED] == 0
    assert bad_day.counts[Outcome.UNCHANGED] == 5
    # counted once, as unchanged: the skips are the site's usual ones (robots.txt, a 404)
    assert bad_day.counts[Outcome.SKIPPED] == first.counts[Outcome.SKIPPED]
    kept = [(e["url"], e["reason"]) for e in logs if e["event"] == "crawl_page_kept"]
    assert kept == [(f"{served.url}/docs/guide/", f"HTTP {status} from {served.url}/docs/guide/")]
    assert len(await index.documents()) == 5

    served.site.failing["/docs/guide/"] = 404
    gone = await sync()
    assert gone.counts[Outcome.DELETED] == 2  # the guide, and advanced.html found only there
    assert f"{served.url}/docs/guide/" not in await index.documents()


@pytest.mark.parametrize("failing", ["/sitemap-docs.xml.gz", "/robots.txt"])
async def test_a_sitemap_down_for_now_prunes_nothing(
    failing: str, served: Served, sync: Callable[[], Awaitable[IngestReport]], index
) -> None:
    """orphan.html is named only by the sitemap (robots.txt names the sitemap): with either
    failing for now, the crawl can't tell it is gone, so a pruning sync deletes nothing."""
    assert (await sync()).counts[Outcome.ADDED] == 5
    served.site.failing[failing] = 503
    unsure = await sync()
    assert unsure.counts[Outcome.DELETED] == 0
    assert f"{served.url}/docs/orphan.html" in await index.documents()
    assert [s.reason for s in unsure.skipped if s.reason.endswith("nothing pruned")]


async def test_a_crawl_cut_short_by_the_page_limit_prunes_nothing(
    served: Served, settings: Settings, ingestor: Ingestor, index, tmp_path: Path
) -> None:
    """Which pages fill the limit depends on which answer first (the crawl reads several at
    once): pruning the indexed pages left out would make them come and go between syncs."""

    async def sync(**crawl: object) -> IngestReport:
        known = await index.documents()
        site = crawler(served, settings.ingest, memory=tmp_path / MEMORY, known=known, **crawl)
        return await ingestor.ingest_from(site, source="site", prune=True)

    assert (await sync()).counts[Outcome.ADDED] == 5
    cut = await sync(max_pages=3)
    assert cut.counts[Outcome.DELETED] == 0
    assert len(await index.documents()) == 5
    assert any(s.reason.endswith("nothing pruned") for s in cut.skipped)


async def test_robots_txt_is_read_up_to_its_limit_and_the_rest_ignored(
    served: Served, settings: Settings
) -> None:
    """As Google does (500 KiB): the whole file was parsed, and its rules matched against
    every URL, on the event loop (13 MB: 11 s to parse, 250 ms per URL). Here the rule past
    the limit would disallow the whole of /docs/: it is not read."""
    served.site.robots_tail = "# padding\n" * 60_000 + "Disallow: /docs/\n"  # 600 KB
    found = await crawler(served, settings.ingest).discover()
    assert len(found.items) == 5
    skipped = {s.display: s.reason for s in found.skipped}
    assert skipped[f"{served.url}/docs/private/secret.html"] == "disallowed by robots.txt"


@pytest.fixture
async def sitemap_heavy() -> AsyncIterator[tuple[str, Counter[str]]]:
    """A site whose sitemap index names 3 sitemaps of 5,000 pages each (and each page is
    there), counting the requests by path."""
    requests: Counter[str] = Counter()

    async def handle(request: web.Request) -> web.Response:
        path = request.path
        requests[path] += 1
        base = f"{request.scheme}://{request.host}"
        if path == "/sitemap.xml":
            maps = "".join(f"<sitemap><loc>{base}/map{n}.xml</loc></sitemap>" for n in range(3))
            return web.Response(text=f"<sitemapindex>{maps}</sitemapindex>")
        if path.startswith("/map"):
            locs = "".join(
                f"<url><loc>{base}/docs/{path[4]}-{i}.html</loc></url>" for i in range(5_000)
            )
            return web.Response(text=f"<urlset>{locs}</urlset>", content_type="application/xml")
        if path.startswith("/docs/"):
            return web.Response(text=page("Page", "Text."), content_type="text/html")
        return web.Response(status=404)

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    yield str(server.make_url("")).rstrip("/"), requests
    await server.close()


async def test_sitemaps_queue_no_more_pages_than_the_crawl_can_take(
    sitemap_heavy: tuple[str, Counter[str]], settings: Settings
) -> None:
    """15,000 sitemap pages for a crawl of 5: each was queued and visited to be skipped as
    "page limit reached" (at 100 sitemaps of 50,000, 5 million visits). Now the sitemaps
    give at most what the crawl queues from links, and it prunes nothing."""
    base, requests = sitemap_heavy
    tuned = settings.ingest.model_copy(
        update={"crawl": settings.ingest.crawl.model_copy(update={"delay_s": 0, "max_pages": 5})}
    )
    async with httpx.AsyncClient() as http:
        found = await SiteConnector(
            [base + "/docs/"], tuned, http, sitemaps=[base + "/sitemap.xml"]
        ).discover()
    assert len(found.items) == 5
    assert len(found.skipped) <= 5 * QUEUED_PER_PAGE
    assert (base + "/map0.xml", LIMIT_REACHED) in {(s.display, s.reason) for s in found.skipped}
    assert requests["/map1.xml"] == requests["/map2.xml"] == 0  # no use reading them
    assert found.scopes == []  # cut short: nothing pruned


async def test_a_start_url_above_the_prefixes_is_a_skip_not_a_failure(
    served: Served, settings: Settings
) -> None:
    """A site's root as the start URL, the docs' folder as the prefix: the root is left out,
    its robots.txt still names the sitemap, and the crawl still speaks for the prefix."""
    tuned = settings.ingest.model_copy(
        update={"crawl": settings.ingest.crawl.model_copy(update={"delay_s": 0})}
    )
    site = SiteConnector([served.url + "/"], tuned, served.http, prefixes=[served.url + "/docs/"])
    found = await site.discover()
    assert not found.missing
    assert found.scopes == [served.url + "/docs/"]
    assert f"{served.url}/docs/orphan.html" in {item.doc_id for item in found.items}
    assert (served.url + "/", "not under any of the crawl's prefixes") in {
        (s.display, s.reason) for s in found.skipped
    }


def link_from_home(site: DocsSite, *hrefs: str) -> None:
    site.pages["/docs/"] = page("Docs home", "Welcome to the product docs.", *hrefs)


async def test_redirect_loops_in_a_crawl_are_skipped_with_why(
    served: Served, settings: Settings
) -> None:
    """A page that redirects to itself, and two that redirect to each other (each leaving the
    other to be read "there"), are reported, not dropped."""
    served.site.redirects.update(
        {"/docs/loop": "/docs/loop", "/docs/a": "/docs/b", "/docs/b": "/docs/a"}
    )
    link_from_home(served.site, "/docs/loop", "/docs/a", "/docs/b", "/docs/install.html")
    found = await crawler(served, settings.ingest).discover()
    base = served.url
    skipped = {s.display.removeprefix(base): s.reason for s in found.skipped}
    assert skipped["/docs/loop"] == "more than 20 redirects"
    assert skipped["/docs/a"] == (
        f"redirects in a loop ({base}/docs/a -> {base}/docs/b -> {base}/docs/a)"
    )
    assert skipped["/docs/b"] == (
        f"redirects in a loop ({base}/docs/b -> {base}/docs/a -> {base}/docs/b)"
    )
    assert f"{base}/docs/install.html" in {item.doc_id for item in found.items}


async def test_a_page_with_malformed_links_is_crawled_without_them(
    served: Served, settings: Settings
) -> None:
    link_from_home(
        served.site, "http://[::1", "http://127.0.0.1:99999/docs/x", "/docs/install.html"
    )
    async with asyncio.timeout(60):
        found = await crawler(served, settings.ingest).discover()
    assert f"{served.url}/docs/install.html" in {item.doc_id for item in found.items}
    assert not found.missing


async def test_a_start_url_that_cannot_be_read_fails_the_crawl_and_prunes_nothing(
    served: Served, settings: Settings, ingestor: Ingestor, index
) -> None:
    """The site down (here: its start page gone) is not "every page was deleted": the crawl
    says why it could not start, and a --prune keeps what the index has."""
    first = await ingestor.ingest_from(crawler(served, settings.ingest), source="site")
    assert first.counts[Outcome.ADDED] == 5
    served.site.redirects["/docs/"] = "/docs/"
    down = await ingestor.ingest_from(crawler(served, settings.ingest), source="site", prune=True)
    assert [(m.display, m.reason) for m in down.missing] == [
        (f"{served.url}/docs/", "more than 20 redirects")
    ]
    assert down.counts[Outcome.DELETED] == 0
    assert len(await index.documents()) == 5


@pytest.mark.parametrize(
    ("start", "why"),
    [
        ("http://[::1", "not a valid URL: invalid IPv6 URL"),
        ("http://127.0.0.1:99999/docs/", "not a valid URL: port out of range 0-65535"),
    ],
)
async def test_a_malformed_start_url_is_named_with_why(
    start: str, why: str, settings: Settings
) -> None:
    async with httpx.AsyncClient() as http:
        found = await SiteConnector([start], settings.ingest, http).discover()
    assert [(m.display, m.reason) for m in found.missing] == [(start, why)]
    assert not found.items


def test_the_command_says_why_a_crawl_could_not_start(
    site_in_a_thread: DocsSite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOT_STORAGE__DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BOT_INGEST__CRAWL__DELAY_S", "0")
    monkeypatch.setenv("BOT_INGEST__CRAWL__ROBOTS", "false")  # its sitemap would give pages
    site_in_a_thread.redirects["/docs/loop"] = "/docs/loop"
    start = site_in_a_thread.base + "/docs/loop"
    result = CliRunner().invoke(app, ["ingest", start, "--crawl"])
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"error: nothing to ingest at {start} (more than 20 redirects)"
    ]


async def test_a_changed_page_that_could_not_be_indexed_is_downloaded_again(
    served: Served, settings: Settings, index, embedder, tmp_path: Path
) -> None:
    """A changed page whose embedding failed: the crawl does not remember its new ETag, so
    the next one downloads it whole instead of taking a 304 for "indexed as it is"."""
    refusing = RefusingEmbedder(embedder, "eviction policy")
    ingestor = Ingestor(index, refusing, settings.ingest)

    async def sync() -> IngestReport:
        known = await index.documents()
        site = crawler(served, settings.ingest, memory=tmp_path / MEMORY, known=known)
        return await ingestor.ingest_from(site, source="site", prune=True)

    await sync()
    served.site.pages["/docs/guide/advanced.html"] = page(
        "Advanced", "Tune the cache size and the eviction policy.", "/docs/guide/"
    )
    failed = await sync()
    assert [s.display for s in failed.failed] == [f"{served.url}/docs/guide/advanced.html"]

    refusing.down = False
    again = await sync()
    assert again.counts[Outcome.UPDATED] == 1
    hits = await index.search("cache eviction policy", k=1)
    assert "eviction policy" in hits[0].chunk.text


async def test_other_chunk_settings_download_every_page_again_and_keep_one_down(
    served: Served, settings: Settings, ingestor: Ingestor, index, backend, tmp_path: Path
) -> None:
    """A 304 says a page's bytes did not change, not that its chunks would not under another
    chunk size: a sync under other settings downloads every page whole once and re-indexes
    it, while a page down for now still keeps its indexed copy."""
    from core.config import SourceSettings
    from core.ingest.sync import SourceSyncer

    fast = settings.ingest.model_copy(
        update={"crawl": settings.ingest.crawl.model_copy(update={"delay_s": 0})}
    )
    site = SourceSettings(type="site", location=[served.url + "/docs/"])

    def syncer(ingest: IngestSettings) -> SourceSyncer:
        pipeline = Ingestor(index, ingestor._embedder, ingest)
        return SourceSyncer(pipeline, index, backend.locks, served.http, ingest, tmp_path)

    assert (await syncer(fast).sync("handbook", site)).counts[Outcome.ADDED] == 5
    served.site.downloads.clear()
    assert (await syncer(fast).sync("handbook", site)).counts[Outcome.UNCHANGED] == 5
    assert not served.site.downloads  # 304s and the sitemap's dates

    served.site.failing["/docs/guide/advanced.html"] = 503
    smaller = fast.model_copy(update={"chunk_chars": 500, "chunk_overlap_chars": 50})
    report = await syncer(smaller).sync("handbook", site)
    assert report.counts[Outcome.UPDATED] == 4
    assert report.counts[Outcome.UNCHANGED] == 1  # down for now: kept, not pruned
    assert not report.counts[Outcome.DELETED]
    assert sum(served.site.downloads.values()) == 5  # the guide's print copy too
