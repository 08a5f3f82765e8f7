"""How long a crawl takes to read one large page's links (`core.ingest.site._links`).

The crawl reads each page's links in a worker thread bounded by `ingest.parse_timeout_s`. It
used to build BeautifulSoup's tree of the whole page and search it (kept here only, as the
baseline); it now takes html.parser's tag events as they come, builds no tree, and stops once
it has `ingest.crawl.max_links_per_page` links and the canonical link. Both read the same links
(`tests/unit/ingest/test_document_formats.py` compares them on generated pages). The crawl
also takes each page's fingerprint (`core.ingest.site.fingerprint`: its words, to tell a copy
from a page that only names another as canonical): the third reader is what a crawl does per
page, both. Pages: a links page of --links anchors, without and with a canonical link in its
head; each read with the shipped limit and with none; the readers take turns, --runs times.

    python -m bench.link_reader [--links 300000] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from bench.common import REPO, bench_settings, write_result
from core.ingest.formats import DocumentFormat
from core.ingest.html import neutralise_unclosed_markup
from core.ingest.site import _followable, _links, page_fingerprint

BASE = "https://docs.example.com/guide/index.html"
Reader = Callable[[bytes, str, int], tuple[str | None, list[str]]]


def tree_links(data: bytes, base: str, limit: int) -> tuple[str | None, list[str]]:
    """The reader before: BeautifulSoup's tree of the page, searched."""
    from bs4 import BeautifulSoup, UnicodeDammit

    text = UnicodeDammit(data, is_html=True).unicode_markup or ""
    soup = BeautifulSoup(neutralise_unclosed_markup(text), "html.parser")
    canonical = None
    for tag in soup.find_all("link", href=True):
        rel = tag.get("rel")
        if "canonical" in (rel if isinstance(rel, list) else [str(rel)]):
            canonical = _followable(base, str(tag["href"]))
            break
    links = [
        link
        for tag in soup.find_all("a", href=True, limit=limit)
        if (link := _followable(base, str(tag["href"]))) is not None
    ]
    return canonical, links


def links_and_fingerprint(data: bytes, base: str, limit: int) -> tuple[str | None, list[str]]:
    """What the crawl reads of each HTML page: its links, and its fingerprint."""
    page_fingerprint(data, DocumentFormat.HTML)
    return _links(data, base, limit)


def page(links: int, canonical: bool) -> bytes:
    head = '<link rel="canonical" href="/guide/">' if canonical else ""
    anchors = "".join(f'<a href="/docs/p{n}.html">Page {n}</a>\n' for n in range(links))
    return (
        f"<html><head><title>All pages</title>{head}</head><body>{anchors}</body></html>".encode()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--links", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    shipped = bench_settings(REPO / ".bot").ingest.crawl.max_links_per_page
    readers: dict[str, Reader] = {
        "tree (before)": tree_links,
        "tag events": _links,
        "tag events and fingerprint (shipped)": links_and_fingerprint,
    }
    report: dict[str, object] = {"links": args.links, "runs": args.runs, "limit": shipped}
    for canonical in (False, True):
        data = page(args.links, canonical)
        for limit in (shipped, args.links):
            seconds: dict[str, list[float]] = {name: [] for name in readers}
            results = set()
            for run in range(args.runs):
                names = list(readers)[run % len(readers) :] + list(readers)[: run % len(readers)]
                for name in names:
                    started = time.process_time()
                    found = readers[name](data, BASE, limit)
                    seconds[name].append(time.process_time() - started)
                    results.add((found[0], tuple(found[1])))
            if len(results) != 1:
                raise SystemExit("the readers disagree")
            case = f"{'canonical' if canonical else 'no canonical'}, limit {limit}"
            report[case] = {name: round(statistics.median(s), 2) for name, s in seconds.items()}
            print(case, report[case], flush=True)
    print(f"wrote {write_result('link-reader.json', report)}")


if __name__ == "__main__":
    main()
