"""Cross-page template learning through a real Scrapy crawl of a local site (both code paths)."""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from conftest import RecordingSpider, article_html, article_words, run_crawl, simhash_stats

from simhash_scrapy.core.analysis import analyse_html

#: What the site puts beside every article, inside its content block: main-content extraction keeps it.
BOX = "".join(f"<div>Most read today {n}: {' '.join(article_words(700 + n, 5))}</div>" for n in range(12))


def site_pages() -> dict[str, str]:
    return {
        # three different articles of one site, each with the site's "most read" box
        "/story/1": article_html("Harbour", article_words(1, 320), extra=BOX, template="b"),
        "/story/2": article_html("Museum", article_words(2, 320), extra=BOX, template="b"),
        "/story/3": article_html("Bridge", article_words(3, 320), extra=BOX, template="b"),
        # the third article again, without the box (a reader view of it)
        "/reader/3": article_html("Bridge", article_words(3, 320), template="b"),
    }


ORDER = list(site_pages())


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("templates", [True, False])
async def test_a_copy_without_the_sites_box_is_found_by_learning_the_box(
    serve: Any, implementation: str, templates: bool
) -> None:
    site = serve(site_pages())
    settings = {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_ACTION": "flag"}
    if not templates:
        settings["SIMHASH_TEMPLATES"] = False
    crawler = await run_crawl(RecordingSpider, settings, start_urls=[site.url(path) for path in ORDER])
    seen = {entry["url"]: entry for entry in crawler.spider.seen}
    story, reader = seen[site.url("/story/3")], seen[site.url("/reader/3")]
    # the box alone moves the article's simhash beyond k: only the learned template finds the pair
    assert (story["simhash"] ^ reader["simhash"]).bit_count() > 4
    stats = simhash_stats(crawler)
    if templates:
        assert reader["duplicate_of"] == site.url("/story/3")
        assert reader["rule"] == "simhash" and reader["distance"] <= 4
        assert stats["simhash/template/near_duplicates"] == 1
        assert stats["simhash/template/pages"] == 2  # stories 2 and 3 (story 1 came first)
    else:
        assert reader["duplicate_of"] is None
        assert "simhash/template/pages" not in stats
    # different articles in one template stay apart, and the crawl's fingerprints are the library's
    for path in ("/story/1", "/story/2", "/story/3"):
        assert seen[site.url(path)]["duplicate_of"] is None
        assert seen[site.url(path)]["simhash"] == analyse_html(site_pages()[path].encode()).fingerprint
    assert stats.get("simhash/near_duplicates", 0) == (1 if templates else 0)
