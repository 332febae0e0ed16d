"""``scrapy simhash dedup`` on a crawl's item feed writes the report the item pipeline wrote for those items.

A real crawl of a local site whose item pipeline (``SIMHASH_ITEM_FIELD``, flag mode: every item reaches the
feed) writes a JSON Lines report and a feed of the items; ``dedup`` of that feed must give the same item
clusters, field by field: the same members, fingerprints, distances, rules and scope (``item:<host>``,
``core.records.record_scope``: found in review, dedup wrote the page scope ``<host>`` for items).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from command_helpers import read_jsonl, simhash  # noqa: E402  (tests/ is on sys.path)
from conftest import RecordingSpider, article_html, article_words, run_crawl  # noqa: E402
from crawl_helpers import read_report  # noqa: E402


def _site() -> dict[str, str]:
    pages = {}
    for i in range(4):
        words = article_words(300 + i)
        pages[f"/p{i}"] = article_html(f"Product {i}", words)
        pages[f"/p{i}/copy"] = article_html(f"Product {i}", words, extra="Shipped today.")
    return pages


@pytest.mark.slow  # a crawl and a dedup run
@pytest_twisted.ensureDeferred
async def test_dedup_of_a_feed_writes_the_item_pipelines_report(serve: Any, tmp_path: Path) -> None:
    site = serve(_site())
    urls = [site.url(path) for path in sorted(_site())]
    report, feed = tmp_path / "crawl.jsonl", tmp_path / "items.jsonl"
    settings = {
        "ITEM_PIPELINES": {"simhash_scrapy.SimhashPipeline": 200},
        "SIMHASH_ITEM_FIELD": "html",
        "SIMHASH_ITEM_ACTION": "flag",
        "SIMHASH_SCOPE": "domain",
        "SIMHASH_REPORT_URI": str(report),
        "FEEDS": {str(feed): {"format": "jsonlines"}},
    }
    crawler = await run_crawl(RecordingSpider, settings, start_urls=urls, items=True)
    assert crawler.stats.get_value("simhash/items/near_duplicates") == 4
    crawled = [c for c in read_report(report) if c["scope"].startswith("item:")]
    assert len(crawled) == 4 and {c["scope"] for c in crawled} == {"item:127.0.0.1"}

    proc = simhash("dedup", str(feed), "--field", "html", "-s", "SIMHASH_SCOPE=domain", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    deduped = read_jsonl(proc.stdout)
    assert [sorted(c) for c in deduped] == [sorted(c) for c in crawled]  # the same fields
    for ours, theirs in zip(deduped, crawled):
        assert [sorted(m) for m in ours["members"]] == [sorted(m) for m in theirs["members"]]
    assert deduped == crawled  # and the same values, the scope included
