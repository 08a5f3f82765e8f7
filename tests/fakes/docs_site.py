"""A small docs website on loopback, with what real sites have: robots.txt with a disallowed
folder and a Sitemap line, a sitemap index whose child is gzipped, redirects, the same page
under several URLs, a canonical tag, a link loop, broken links and links out of the docs. Every
request is counted by path, so tests can tell what a crawl fetched; pages carry an ETag and answer
a matching If-None-Match with 304."""

from __future__ import annotations

import gzip
import hashlib
from collections import Counter
from dataclasses import dataclass, field

from aiohttp import web

from tests.fakes.threaded import catch_all

HTML = "text/html; charset=utf-8"


def page(title: str, body: str, *links: str, canonical: str | None = None) -> str:
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    head = f'<link rel="canonical" href="{canonical}">' if canonical else ""
    return (
        f"<html><head><title>{title}</title>{head}</head><body><h1>{title}</h1>"
        f"<p>{body}</p><p>{anchors}</p></body></html>"
    )


GUIDE = (
    "Guide",
    "Configure the workspace and invite your team.",
    "/docs/install.html",
    "/docs/guide/advanced.html",
    "/docs/print/guide.html",
)


@dataclass
class DocsSite:
    pages: dict[str, str] = field(default_factory=dict)
    requests: Counter[str] = field(default_factory=Counter)
    downloads: Counter[str] = field(default_factory=Counter)  # pages sent whole (200)
    # The sitemap's <lastmod> of the pages it lists (a page without one: no <lastmod>).
    lastmods: dict[str, str] = field(
        default_factory=lambda: {"/docs/": "2026-11-01", "/docs/orphan.html": "2026-11-01"}
    )
    base: str = ""  # set once served
    # More redirects, path -> Location (a test's loops and dead ends).
    redirects: dict[str, str] = field(default_factory=dict)
    # Pages answering with an error status for now, path -> status (a site having a bad day).
    failing: dict[str, int] = field(default_factory=dict)
    # The Authorization header every request must carry (a site behind basic auth); None: open.
    authorization: str | None = None
    # More of robots.txt, after its rules (a file padded far past what crawlers read).
    robots_tail: str = ""

    def __post_init__(self) -> None:
        self.pages.update(
            {
                "/docs/": page(
                    "Docs home",
                    "Welcome to the product docs.",
                    "install.html",
                    "/docs/guide/?utm_source=nav",
                    "/docs/old-install",
                    "/docs/private/secret.html",
                    "/docs/missing.html",
                    "/blog/launch.html",
                    "#top",
                ),
                "/docs/install.html": page(
                    "Install", "Run the installer, then sign in.", "/docs/", "guide/index.html"
                ),
                "/docs/guide/": page(*GUIDE),
                "/docs/guide/advanced.html": page(
                    "Advanced", "Tune the cache size for large teams.", "/docs/guide/"
                ),
                # The guide again, as its print button serves it: one page under two URLs.
                "/docs/print/guide.html": page(*GUIDE, canonical="/docs/guide/"),
                "/docs/private/secret.html": page("Secret", "Not for robots."),
                "/docs/orphan.html": page("Orphan", "Only the sitemap links to this page."),
                "/blog/launch.html": page("Launch", "We launched."),
            }
        )

    def app(self) -> web.Application:
        return catch_all(self._handle)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.requests[path] = self.requests[path] + 1
        if self.authorization and request.headers.get("Authorization") != self.authorization:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="docs"'})
        if path in self.failing:
            return web.Response(status=self.failing[path], text="try again later")
        if path == "/robots.txt":
            return web.Response(
                text=f"User-agent: *\nDisallow: /docs/private/\nSitemap: {self.base}/sitemap.xml\n"
                + self.robots_tail,
                content_type="text/plain",
            )
        if path == "/sitemap.xml":
            return web.Response(
                text=(
                    '<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/'
                    f'schemas/sitemap/0.9"><sitemap><loc>{self.base}/sitemap-docs.xml.gz</loc>'
                    "</sitemap></sitemapindex>"
                ),
                content_type="application/xml",
            )
        if path == "/sitemap-docs.xml.gz":
            urls = "".join(
                f"<url><loc>{self.base}{p}</loc>"
                + (f"<lastmod>{self.lastmods[p]}</lastmod>" if p in self.lastmods else "")
                + "</url>"
                for p in ("/docs/", "/docs/orphan.html")
            )
            xml = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
            return web.Response(body=gzip.compress(xml.encode()), content_type="application/gzip")
        if path in self.redirects:
            raise web.HTTPFound(self.redirects[path])
        if path == "/docs/old-install":
            raise web.HTTPMovedPermanently("/docs/install.html")
        if path == "/docs/guide/index.html":
            raise web.HTTPFound("/docs/guide/")
        if path in self.pages:
            etag = '"' + hashlib.sha256(self.pages[path].encode()).hexdigest()[:16] + '"'
            if request.headers.get("If-None-Match") == etag:
                return web.Response(status=304, headers={"ETag": etag})
            self.downloads[path] = self.downloads[path] + 1
            return web.Response(
                text=self.pages[path],
                content_type="text/html",
                charset="utf-8",
                headers={"ETag": etag},
            )
        raise web.HTTPNotFound()
