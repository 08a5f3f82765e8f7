"""Crawl throughput: a 2,000-page docs site on loopback, crawled and indexed through the real
connector and pipeline (httpx, robots.txt, a sitemap index of gzipped sitemaps with <lastmod>,
ETags, the embedder and the SQLite index of the default setup).

Each run, in a fresh data dir:
1. cold: the first sync, the embedding cache empty;
2. warm: the index and the crawl's memory removed, the embedding cache kept (what a rebuild of
   the index costs once the passages were embedded);
3. unchanged: the sync again over the index and memory of (2): its wall time and the requests
   it made (pages downloaded, pages asked "changed since?", pages not asked at all).

The pages are SciFact abstracts (real, distinct text: none is a cache hit in the cold run);
the site's server runs in a thread of its own. Politeness delay 0 (a local site).

    python -m bench.site_crawl [--pages 2000] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import json
import shutil
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

from bench.common import SHARED_EVAL, bench_settings, write_result
from bot.wiring import build_embedder, open_backend
from core.domain.documents import Outcome
from core.ingest.pipeline import Ingestor
from core.ingest.site import SiteConnector
from tests.fakes.threaded import catch_all, served_in_a_thread

SITEMAP_FILES = 2  # child sitemaps of the index, gzipped
NAV_LINKS = 3  # each page links to the next few
LASTMOD = "2026-11-01"


class LargeSite:
    """`pages` SciFact abstracts as HTML pages, with a sitemap index, robots.txt and ETags."""

    def __init__(self, pages: int) -> None:
        rows = (SHARED_EVAL / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
        if len(rows) < pages:
            raise SystemExit(f"SciFact has {len(rows)} documents; ask for at most that many pages")
        self.docs = [json.loads(line) for line in rows[:pages]]
        self.requests: Counter[str] = Counter()
        self.base = ""

    def page(self, n: int) -> str:
        doc = self.docs[n]
        links = "".join(
            f'<li><a href="/docs/p{m}.html">next</a></li>'
            for m in range(n + 1, min(n + 1 + NAV_LINKS, len(self.docs)))
        )
        title = doc.get("title") or f"Page {n}"
        return (
            f"<html><head><title>{title}</title></head><body><nav><ul>{links}</ul></nav>"
            f"<main><h1>{title}</h1><h2 id='abstract'>Abstract</h2><p>{doc['text']}</p></main>"
            "</body></html>"
        )

    def app(self) -> web.Application:
        return catch_all(self._handle)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == "/robots.txt":
            self.requests["robots"] += 1
            return web.Response(text=f"User-agent: *\nSitemap: {self.base}/sitemap.xml\n")
        if path == "/sitemap.xml":
            self.requests["sitemap"] += 1
            children = "".join(
                f"<sitemap><loc>{self.base}/sitemap-{k}.xml.gz</loc></sitemap>"
                for k in range(SITEMAP_FILES)
            )
            xml = f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{children}'
            return web.Response(text=xml + "</sitemapindex>", content_type="application/xml")
        if path.startswith("/sitemap-"):
            self.requests["sitemap"] += 1
            k = int(path.removeprefix("/sitemap-").split(".")[0])
            urls = "".join(
                f"<url><loc>{self.base}/docs/p{n}.html</loc><lastmod>{LASTMOD}</lastmod></url>"
                for n in range(k, len(self.docs), SITEMAP_FILES)
            )
            xml = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
            return web.Response(body=gzip.compress(xml.encode()), content_type="application/gzip")
        if path.startswith("/docs/p") and path.endswith(".html"):
            n = int(path.removeprefix("/docs/p").removesuffix(".html"))
            if 0 <= n < len(self.docs):
                body = self.page(n)
                etag = '"' + hashlib.sha256(body.encode()).hexdigest()[:16] + '"'
                if request.headers.get("If-None-Match") == etag:
                    self.requests["304"] += 1
                    return web.Response(status=304, headers={"ETag": etag})
                self.requests["page"] += 1
                return web.Response(text=body, content_type="text/html", headers={"ETag": etag})
        self.requests["404"] += 1
        raise web.HTTPNotFound()


async def _sync(site: LargeSite, data_dir: Path) -> tuple[float, int, Counter[str]]:
    """One sync of the whole site into `data_dir`: seconds, documents indexed, requests."""
    settings = bench_settings(
        data_dir,
        BOT_INGEST__CRAWL__DELAY_S="0",
        BOT_INGEST__CRAWL__MAX_PAGES=str(len(site.docs) + 1),
    )
    embedder = build_embedder(settings)
    backend = await open_backend(settings, embedder)
    site.requests.clear()
    try:
        async with httpx.AsyncClient(headers={"User-Agent": settings.ingest.user_agent}) as http:
            connector = SiteConnector(
                [site.base + "/docs/p0.html"],
                settings.ingest,
                http,
                prefixes=[site.base + "/docs/"],
                memory=data_dir / "crawls" / "bench.json",
                known=set(await backend.index.documents()),
            )
            ingestor = Ingestor(backend.index, embedder, settings.ingest, http=http)
            started = time.perf_counter()
            report = await ingestor.ingest_from(connector, source="site", prune=True)
            seconds = time.perf_counter() - started
    finally:
        await backend.close()
    done = report.counts[Outcome.ADDED] + report.counts[Outcome.UNCHANGED]
    if done != len(site.docs):
        raise SystemExit(f"indexed {done} of {len(site.docs)} pages: {report.skipped[:3]}")
    return seconds, report.counts[Outcome.UNCHANGED], Counter(site.requests)


async def one_run(site: LargeSite, data_dir: Path) -> dict[str, Any]:
    pages = len(site.docs)
    cold_s, _, cold_requests = await _sync(site, data_dir)
    settings = bench_settings(data_dir)
    settings.index_path.unlink()
    shutil.rmtree(data_dir / "crawls")
    warm_s, _, warm_requests = await _sync(site, data_dir)
    unchanged_s, unchanged, requests = await _sync(site, data_dir)
    return {
        "pages": pages,
        "cold_s": round(cold_s, 2),
        "cold_pages_per_s": round(pages / cold_s, 1),
        "cold_requests": dict(cold_requests),
        "warm_s": round(warm_s, 2),
        "warm_pages_per_s": round(pages / warm_s, 1),
        "warm_requests": dict(warm_requests),
        "unchanged_s": round(unchanged_s, 3),
        "unchanged_pages": unchanged,
        "unchanged_requests": dict(requests),
        "unchanged_request_total": sum(requests.values()),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    site = LargeSite(args.pages)
    runs = []
    with served_in_a_thread(site.app()) as base, tempfile.TemporaryDirectory() as tmp:
        site.base = base
        for n in range(args.runs):
            runs.append(await one_run(site, Path(tmp) / f"run{n}"))
            print(f"run {n + 1}: {runs[-1]}")

    def median(key: str) -> float:
        return statistics.median(float(r[key]) for r in runs)

    result = {
        "pages": args.pages,
        "runs": runs,
        "cold_pages_per_s_median": median("cold_pages_per_s"),
        "warm_pages_per_s_median": median("warm_pages_per_s"),
        "unchanged_s_median": median("unchanged_s"),
        "unchanged_request_total_median": median("unchanged_request_total"),
    }
    path = write_result("site-crawl.json", result)
    print(
        f"{args.pages} pages: cold {result['cold_pages_per_s_median']:.1f} pages/s, warm "
        f"{result['warm_pages_per_s_median']:.1f} pages/s; unchanged re-sync "
        f"{result['unchanged_s_median']:.2f} s with "
        f"{result['unchanged_request_total_median']:.0f} requests "
        f"(medians of {args.runs}) -> {path}"
    )


if __name__ == "__main__":
    asyncio.run(main())
