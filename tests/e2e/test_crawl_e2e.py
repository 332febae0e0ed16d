"""End-to-end: real Scrapy crawls of a local HTTP site with the plugin on."""

from __future__ import annotations

import csv
import json
import logging
import warnings
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from conftest import Page, RecordingSpider, Site, article_html, article_words, run_crawl, simhash_stats
from scrapy.exceptions import ScrapyDeprecationWarning

from simhash_scrapy import _compat, hamming_distance
from simhash_scrapy.backends import BackendError
from simhash_scrapy.backends.memory import MemoryBackend
from simhash_scrapy.middleware import NearDuplicate

NAV = ["/article/1", "/article/2", "/article/3"]
W1, W2, W3 = article_words(11), article_words(12), article_words(13)
# k is pinned a little above the default so that tuning the core's defaults (weighting,
# extraction) cannot move the test site's near-duplicates (distance <= 4 under every
# feature setting we checked) out of range; distinct articles are 25+ bits apart.
ADDON = {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_MAX_DISTANCE": 6}


def news_site() -> dict[str, Page | str]:
    """Articles with the near-duplicates crawlers meet (distances checked in the tests)."""
    return {
        "/article/1": article_html("Harbour budget approved", W1, "Updated 2026-05-01 09:00", links=NAV),
        # session / tracking-parameter variant: another time stamp and a token
        "/article/1?utm_source=feed&sid=7f3a9c": article_html(
            "Harbour budget approved", W1, "Updated 2026-05-01 09:07 session 7f3a9c", links=NAV
        ),
        # printer-friendly version: another template, no navigation
        "/article/1/print": article_html("Harbour budget approved", W1, "", template="b"),
        "/article/2": article_html("New railway station opens", W2, "Updated 2026-05-02 10:00", links=NAV),
        # a redirect to a variant of article 2: the final URL is what is recorded
        "/old/article-2": Page(status=301, headers={"Location": "/article/2?ref=old"}, body=""),
        "/article/2?ref=old": article_html("New railway station opens", W2, "Updated 2026-05-02 10:00 ref old", links=NAV),
        "/article/3": article_html("Museum festival weekend", W3, "Updated 2026-05-03", links=NAV),
        "/article/3?ad=1": article_html("Museum festival weekend", W3, "Updated 2026-05-03 advertisement: cheap flights", links=NAV),
        "/article/3?again": article_html("Museum festival weekend", W3, "Updated 2026-05-03 again", links=NAV),
        "/article/2?optout": article_html("New railway station opens", W2, "opted out copy", links=NAV),
        "/logo.png": Page(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, content_type="image/png"),
        "/missing": Page(article_html("Not found", W3), status=404),
        "/tag/empty": "<html><body><nav><a href='/'>Home</a></nav><p>No posts yet.</p></body></html>",
    }


ORDER = [
    "/article/1",
    "/article/1?utm_source=feed&sid=7f3a9c",
    "/article/1/print",
    "/article/2",
    "/old/article-2",
    "/article/3",
    "/article/3?ad=1",
    "/article/3?again",
    "/article/2?optout",
    "/logo.png",
    "/missing",
    "/tag/empty",
]


async def crawl_news(site: Site, settings: dict[str, Any], **kwargs: Any) -> Any:
    return await run_crawl(
        RecordingSpider,
        {**ADDON, **settings},
        start_urls=[site.url(path) for path in ORDER],
        dont_filter=(site.url("/article/3?again"),),
        meta={site.url("/article/2?optout"): {"simhash_enabled": False}},
        **kwargs,
    )


@pytest_twisted.ensureDeferred
async def test_drop_mode_end_to_end(serve: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    site = serve(news_site())
    report = tmp_path / "reports" / "%(name)s.jsonl"
    with caplog.at_level(logging.DEBUG):
        crawler = await crawl_news(site, {"SIMHASH_REPORT_URI": str(report), "SIMHASH_DEBUG": True})
    spider = crawler.spider
    u = site.url

    # Exactly these responses reached the spider (404 is filtered by HttpErrorMiddleware).
    assert spider.seen_urls == [
        u("/article/1"),
        u("/article/2"),
        u("/article/3"),
        u("/article/3?again"),
        u("/article/2?optout"),
        u("/logo.png"),
        u("/tag/empty"),
    ]
    seen = {entry["url"]: entry for entry in spider.seen}
    assert seen[u("/article/3?again")]["flags"] == ["near-duplicate"]
    assert seen[u("/article/3?again")]["duplicate_of"] == u("/article/3")
    assert seen[u("/article/1")]["flags"] == [] and seen[u("/article/1")]["duplicate_of"] is None
    assert isinstance(seen[u("/article/1")]["simhash"], int)
    assert seen[u("/article/2?optout")]["skipped"] == "opted_out"
    assert seen[u("/logo.png")]["skipped"] == "content_type"
    assert seen[u("/tag/empty")]["skipped"] is None  # a short page: compared exactly, unique here

    # ... and exactly these were dropped, each with the URL it duplicates.
    dropped = {f.value.url: (f.value.canonical_url, f.value.distance) for f in spider.failures if f.check(NearDuplicate)}
    assert set(dropped) == {
        u("/article/1?utm_source=feed&sid=7f3a9c"),
        u("/article/1/print"),
        u("/article/2?ref=old"),  # the final URL after the redirect
        u("/article/3?ad=1"),
    }
    assert dropped[u("/article/2?ref=old")][0] == u("/article/2")
    assert {canonical for canonical, _ in dropped.values()} == {u("/article/1"), u("/article/2"), u("/article/3")}
    assert len(spider.failures) == 5  # the 4 near-duplicates and HttpError for /missing

    stats = simhash_stats(crawler)
    distances: dict[int, int] = {}
    for _, d in dropped.values():
        distances[d] = distances.get(d, 0) + 1
    flagged_distance = seen[u("/article/3?again")]["distance"]
    distances[flagged_distance] = distances.get(flagged_distance, 0) + 1
    assert stats == {
        "simhash/fingerprinted": 9,
        "simhash/unique": 4,
        "simhash/short/unique": 1,
        "simhash/near_duplicates": 5,
        "simhash/dropped": 4,
        "simhash/flagged": 1,
        "simhash/skipped/opted_out": 1,
        "simhash/skipped/content_type": 1,
        "simhash/skipped/status": 1,
        "simhash/index_size": 4,
        "simhash/clusters": 3,
        "simhash/pages": 9,  # distinct pages recorded: here each was fetched once
        **{f"simhash/distance_count/{d}": n for d, n in distances.items()},
    }
    assert crawler.stats.get_value("finish_reason") == "finished"

    # Every duplicate is logged (SIMHASH_DEBUG), with the page it duplicates.
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("simhash_scrapy")]
    assert sum("Dropped near-duplicate page" in line for line in lines) == 4
    assert f"Flagged near-duplicate page {u('/article/3?again')}: duplicates {u('/article/3')}" in "\n".join(lines)
    assert any(f"<GET {u('/article/3?again')}>" in r.getMessage() and "['near-duplicate']" in r.getMessage()
               for r in caplog.records)

    # The report: one cluster per line, canonical member first, then the summary line.
    clusters = [json.loads(line) for line in (tmp_path / "reports" / "recording.jsonl").read_text().splitlines()]
    summary = clusters.pop()
    assert (summary["type"], summary["pages"], summary["clusters"]) == ("summary", 9, 3)
    assert [(c["cluster_id"], c["canonical"], c["size"]) for c in clusters] == [
        (1, u("/article/1"), 3),
        (2, u("/article/3"), 3),
        (3, u("/article/2"), 2),
    ]
    first = clusters[0]
    assert [m["url"] for m in first["members"]] == [
        u("/article/1"),
        u("/article/1?utm_source=feed&sid=7f3a9c"),
        u("/article/1/print"),
    ]
    canonical_fp = int(first["members"][0]["fingerprint"], 16)
    assert first["members"][0]["fingerprint"] == f"{seen[u('/article/1')]['simhash']:016x}"
    for member in first["members"]:
        assert len(member["fingerprint"]) == 16
        assert member["distance"] == hamming_distance(int(member["fingerprint"], 16), canonical_fp)
        assert set(member) == {"url", "fingerprint", "distance", "referer", "depth", "rule", "canonical_link"}
        assert member["canonical_link"] is None  # the test site names no rel=canonical URL
        assert member["depth"] == 0  # start requests (DepthMiddleware sets depth on later ones)
    assert first["members"][1]["distance"] == dropped[u("/article/1?utm_source=feed&sid=7f3a9c")][1]
    assert [m["rule"] for m in first["members"]] == [None, "simhash", "simhash"] and first["max_distance"] == 6
    # The originals came first: each represents its cluster (no query, or not a print copy).
    assert [(c["representative"], c["representative_reason"]) for c in clusters] == [
        (u("/article/1"), "not_variant"),
        (u("/article/3"), "no_query"),
        (u("/article/2"), "no_query"),
    ]


@pytest_twisted.ensureDeferred
async def test_flag_mode_with_items_and_csv_report(serve: Any, tmp_path: Path) -> None:
    """Flag mode: every page reaches the spider; the pipeline drops the items of flagged pages."""
    site = serve(news_site())
    crawler = await crawl_news(
        site,
        {
            "SIMHASH_ACTION": "flag",
            "SIMHASH_ITEM_ACTION": "drop",
            "SIMHASH_REPORT_URI": str(tmp_path / "out" / "%(name)s-%(time)s.csv"),
            "LOG_LEVEL": "WARNING",
        },
        items=True,
    )
    spider = crawler.spider
    u = site.url
    flagged = [e["url"] for e in spider.seen if e["flags"] == ["near-duplicate"]]
    assert flagged == [
        u("/article/1?utm_source=feed&sid=7f3a9c"),
        u("/article/1/print"),
        u("/article/2?ref=old"),
        u("/article/3?ad=1"),
        u("/article/3?again"),
    ]
    assert len(spider.seen) == 11
    assert not [f for f in spider.failures if f.check(NearDuplicate)]
    stats = crawler.stats.get_stats()
    assert stats["simhash/flagged"] == 5 and "simhash/dropped" not in stats
    # items: one per HTML page that reached the spider; those of flagged pages are dropped
    assert stats["simhash/items/dropped"] == 5  # by SimhashSpiderMiddleware, which sees each item's response
    assert stats["item_scraped_count"] == 5  # /article/1, /2, /3, /2?optout, /tag/empty
    [report] = list((tmp_path / "out").glob("recording-*.csv"))
    with report.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 8  # 3 canonical pages + 5 near-duplicates
    assert {r["url"] for r in rows if r["url"] == r["canonical"]} == {u("/article/1"), u("/article/2"), u("/article/3")}


@pytest_twisted.ensureDeferred
async def test_followed_links_referer_and_depth(serve: Any, tmp_path: Path) -> None:
    pages: dict[str, Page | str] = {
        "/": article_html("Home", article_words(20), links=["/a", "/a?s=1", "/b"]),
        "/a": article_html("A", W1, "v1"),
        "/a?s=1": article_html("A", W1, "v2 session"),
        "/b": article_html("B", W2, "v1", links=["/a/print"]),
        "/a/print": article_html("A", W1, "", template="b"),
    }
    site = serve(pages)
    crawler = await run_crawl(
        RecordingSpider,
        {**ADDON, "SIMHASH_REPORT_URI": str(tmp_path / "r.jsonl"), "CONCURRENT_REQUESTS": 8},
        start_urls=[site.url("/")],
        follow=True,
    )
    [cluster] = [r for line in (tmp_path / "r.jsonl").read_text().splitlines() if (r := json.loads(line))["type"] == "cluster"]
    by_url = {m["url"]: m for m in cluster["members"]}
    assert set(by_url) == {site.url("/a"), site.url("/a?s=1"), site.url("/a/print")}
    # Which of /a and /a?s=1 is canonical depends on the download order: the first one crawled.
    assert cluster["canonical"] in (site.url("/a"), site.url("/a?s=1"))
    assert cluster["members"][0]["url"] == cluster["canonical"] and cluster["members"][0]["distance"] == 0
    for path in ("/a", "/a?s=1"):
        assert (by_url[site.url(path)]["referer"], by_url[site.url(path)]["depth"]) == (site.url("/"), 1)
    assert (by_url[site.url("/a/print")]["referer"], by_url[site.url("/a/print")]["depth"]) == (site.url("/b"), 2)
    assert set(crawler.spider.seen_urls) == {site.url("/"), site.url("/b"), cluster["canonical"]}
    assert simhash_stats(crawler)["simhash/clusters"] == 1
    assert simhash_stats(crawler)["simhash/dropped"] == 2


class BrokenBackend(MemoryBackend):
    async def open(self, spider_name: str) -> None:
        raise BackendError("cannot reach the store at nowhere:1 (set SIMHASH_BACKEND)")


@pytest_twisted.ensureDeferred
async def test_unusable_backend_closes_the_spider_with_a_clear_error(
    serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    site = serve(news_site())
    with caplog.at_level(logging.ERROR):
        crawler = await crawl_news(site, {"SIMHASH_BACKEND": f"{__name__}.BrokenBackend"})
    assert crawler.stats.get_value("finish_reason") == "simhash_error"
    assert "simhash-scrapy cannot start, closing the spider: BackendError: cannot reach the store" in caplog.text
    assert crawler.stats.get_value("simhash/fingerprinted") is None
    assert len(crawler.spider.seen) < len(ORDER)


@pytest_twisted.ensureDeferred
async def test_bad_report_placeholder_closes_the_spider(serve: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    site = serve(news_site())
    with caplog.at_level(logging.ERROR):
        crawler = await crawl_news(site, {"SIMHASH_REPORT_URI": str(tmp_path / "%(nope)s.jsonl")})
    assert crawler.stats.get_value("finish_reason") == "simhash_error"
    assert "SIMHASH_REPORT_URI" in caplog.text and "'nope'" in caplog.text


@pytest_twisted.ensureDeferred
async def test_bad_setting_stops_the_crawl_at_start(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    """One error line naming the setting (not a traceback out of from_crawler); the spider closes at once."""
    site = serve(news_site())
    message = "SIMHASH_ACTION must be one of 'drop', 'flag', got 'remove'"
    with caplog.at_level(logging.ERROR):
        crawler = await crawl_news(site, {"SIMHASH_ACTION": "remove"})
    assert crawler.stats.get_value("finish_reason") == "simhash_error"
    assert crawler.stats.get_value("simhash/error") == message
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [
        f"simhash-scrapy cannot start, closing the spider: {message}"
    ]
    if _compat.CLOSE_SPIDER_FROM_OPENED:
        assert site.hits == []  # before 2.18 the close comes just after the spider opened


@pytest_twisted.ensureDeferred
async def test_disabled_plugin_changes_nothing(serve: Any) -> None:
    site = serve(news_site())
    crawler = await crawl_news(site, {"SIMHASH_ENABLED": False})
    assert len(crawler.spider.seen) == 11
    assert simhash_stats(crawler) == {}


@pytest_twisted.ensureDeferred
async def test_manual_activation_and_progress_line(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    site = serve(news_site())
    with caplog.at_level(logging.INFO):
        crawler = await run_crawl(
            RecordingSpider,
            {"DOWNLOADER_MIDDLEWARES": {"simhash_scrapy.SimhashMiddleware": 540}, "LOGSTATS_INTERVAL": 0.05,
             "SIMHASH_MAX_DISTANCE": ADDON["SIMHASH_MAX_DISTANCE"],
             "DOWNLOAD_DELAY": 0.03},
            start_urls=[site.url(p) for p in ORDER],
            dont_filter=(site.url("/article/3?again"),),
            meta={site.url("/article/2?optout"): {"simhash_enabled": False}},
        )
    assert crawler.stats.get_value("simhash/dropped") == 4
    assert "Simhash: fingerprinted" in caplog.text and "near-duplicates (" in caplog.text


def test_deprecation_warnings_are_errors() -> None:
    """pyproject.toml's filterwarnings = error turns any Scrapy deprecation warning into a failure."""
    with pytest.raises(ScrapyDeprecationWarning):
        warnings.warn("deprecated", ScrapyDeprecationWarning, stacklevel=1)


@pytest_twisted.ensureDeferred
async def test_a_crawl_with_every_component_emits_no_warning(serve: Any, tmp_path: Path) -> None:
    """Scrapy swallows exceptions raised inside components, so record warnings instead of relying on errors."""
    site = serve(news_site())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await crawl_news(
            site,
            {"SIMHASH_ITEM_FIELD": "html", "SIMHASH_REPORT_URI": str(tmp_path / "r.csv"), "LOGSTATS_INTERVAL": 0.05},
            items=True,
        )
    assert [str(w.message) for w in caught] == []


@pytest_twisted.ensureDeferred
async def test_html_report(serve: Any, tmp_path: Path) -> None:
    pytest.importorskip("simhash_scrapy.core.report.html_report")
    site = serve(news_site())
    crawler = await crawl_news(site, {"SIMHASH_REPORT_URI": str(tmp_path / "%(name)s.html"), "LOG_LEVEL": "WARNING"})
    assert crawler.stats.get_value("simhash/clusters") == 3
    page = (tmp_path / "recording.html").read_text(encoding="utf-8")
    assert page.lstrip().lower().startswith("<!doctype html")
    assert site.url("/article/1/print") in page
