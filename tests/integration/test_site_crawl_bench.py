"""The crawl throughput bench, small: the same code as `python -m bench.site_crawl`, on 30
pages, so CI keeps it running and its request counts honest."""

from __future__ import annotations

from pathlib import Path

from bench.site_crawl import LargeSite, one_run
from tests.fakes.threaded import served_in_a_thread

PAGES = 30


async def test_a_crawl_then_an_unchanged_resync_that_asks_for_no_page(tmp_path: Path) -> None:
    site = LargeSite(PAGES)
    with served_in_a_thread(site.app()) as base:
        site.base = base
        figures = await one_run(site, tmp_path)
    assert figures["cold_requests"]["page"] == PAGES
    assert figures["warm_requests"]["page"] == PAGES  # the memory was removed: all downloaded
    assert figures["unchanged_pages"] == PAGES
    # robots.txt and the three sitemap files; every page dated unchanged by its <lastmod>
    assert figures["unchanged_requests"] == {"robots": 1, "sitemap": 3}
