"""Extraction failures and redirect stubs through a real Scrapy crawl of a local site (both code paths)."""

from __future__ import annotations

from typing import Any

import pytest_twisted
from conftest import RecordingSpider, run_crawl, simhash_stats
from test_boilerplate import LONG_ARTICLE, OTHER_ARTICLE, STUB, false_lead
from test_printlinks import home, page, printed

from simhash_scrapy.core.analysis import analyse_html

NOISE = "<div>Session {0} started 12:03:{0}, request id 77810{0}</div>"


def site_pages() -> dict[str, str]:
    return {
        # redirect stubs of one target (Rust's std/core/alloc stubs), with tracking noise
        "/core/slice/index.html": STUB.format(noise=""),
        "/core/slice/index.html?utm_source=x": STUB.format(noise=NOISE.format(11)),
        "/alloc/slice/index.html?sid=4": STUB.format(noise=NOISE.format(42)),
        # two different articles whose <main> holds the same byline: an extraction failure
        "/news/harbour": false_lead(LONG_ARTICLE),
        "/news/museum": false_lead(OTHER_ARTICLE),
    }


ORDER = list(site_pages())


@pytest_twisted.ensureDeferred
async def test_stubs_are_one_page_and_failed_extractions_are_not_short_pages(serve: Any, implementation: str) -> None:
    site = serve(site_pages())
    crawler = await run_crawl(
        RecordingSpider,
        # Scrapy would follow the stubs' refresh itself; off, so the plugin sees them as a crawl of
        # a site whose stubs carry noise does (and as `scrapy simhash dedup` reads saved pages).
        {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_ACTION": "flag", "METAREFRESH_ENABLED": False},
        start_urls=[site.url(path) for path in ORDER],
    )
    seen = {entry["url"]: entry for entry in crawler.spider.seen}
    first = site.url("/core/slice/index.html")
    for path in ("/core/slice/index.html?utm_source=x", "/alloc/slice/index.html?sid=4"):
        assert seen[site.url(path)]["duplicate_of"] == first
    harbour, museum = seen[site.url("/news/harbour")], seen[site.url("/news/museum")]
    assert harbour["duplicate_of"] is None and museum["duplicate_of"] is None
    # the crawl's fingerprints are the library's
    for path in ("/news/harbour", "/core/slice/index.html"):
        assert seen[site.url(path)]["simhash"] == analyse_html(site_pages()[path].encode()).fingerprint
    stats = simhash_stats(crawler)
    assert stats["simhash/short/near_duplicates"] == 2  # the two noisy stubs, compared by their target


@pytest_twisted.ensureDeferred
async def test_a_home_pages_print_view_with_numbered_links_is_its_copy(serve: Any, implementation: str) -> None:
    # A home page of three long menus: a CMS print view with links puts a marker after every menu link and
    # lists the addresses below; its main text was the menus (350 words) against the page's two paragraphs.
    body, other = home(3, 30), home(3, 30, text_seed=2)  # another page of the shop: the same menus, its own text
    pages = {
        "/?format=print&links=1": printed(body, links=True),  # crawled first
        "/": page(body),
        "/?format=print": printed(body, links=False),
        "/about": page(other),
    }
    site = serve(pages)
    crawler = await run_crawl(
        RecordingSpider, {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_ACTION": "flag"},
        start_urls=[site.url(path) for path in pages],
    )
    seen = {entry["url"]: entry for entry in crawler.spider.seen}
    first = site.url("/?format=print&links=1")
    assert seen[site.url("/")]["duplicate_of"] == first and seen[site.url("/")]["distance"] == 0
    assert seen[site.url("/?format=print")]["duplicate_of"] == first
    assert seen[site.url("/about")]["duplicate_of"] is None
