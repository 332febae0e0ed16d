"""Cross-page template learning and the second simhash through a real Scrapy crawl of a local site (both code paths)."""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from conftest import RecordingSpider, article_html, article_words, run_crawl, simhash_stats

from simhash_scrapy.core.analysis import AnalysisOptions, analyse_html

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
        assert stats.get("simhash/template/near_duplicates") == 1, stats
        assert stats["simhash/template/pages"] == 2  # stories 2 and 3 (story 1 came first)
    else:
        assert reader["duplicate_of"] is None
        assert "simhash/template/pages" not in stats
    # different articles in one template stay apart, and the crawl's fingerprints are the library's
    for path in ("/story/1", "/story/2", "/story/3"):
        assert seen[site.url(path)]["duplicate_of"] is None
        assert seen[site.url(path)]["simhash"] == analyse_html(site_pages()[path].encode()).fingerprint
    assert stats.get("simhash/near_duplicates", 0) == (1 if templates else 0)


def edited(words: list[str]) -> list[str]:
    """8 of every 320 words replaced (2.5%): an edited copy."""
    return [f"zzedit{i}" if i % 40 == 0 else word for i, word in enumerate(words)]


def edit_pages() -> dict[str, str]:
    # article 4 and its edited copy are 6 bits apart (beyond k = 4), their second simhashes 3 bits;
    # article 36's copy: 6 and 1 (computed below, not assumed; the headline is not in the main text)
    return {
        f"/{name}/{seed}": article_html(f"Story {seed}", text, template="b")
        for seed in (4, 36)
        for name, text in (("article", article_words(seed, 320)), ("edited", edited(article_words(seed, 320))))
    }


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("second", [True, False])
async def test_an_edited_copy_beyond_k_is_found_by_the_second_simhash(
    serve: Any, implementation: str, second: bool
) -> None:
    pages = edit_pages()
    site = serve(pages)
    settings = {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_ACTION": "flag"}
    if not second:
        settings["SIMHASH_SECOND_SIMHASH"] = False
    crawler = await run_crawl(RecordingSpider, settings, start_urls=[site.url(path) for path in pages])
    seen = {entry["url"]: entry for entry in crawler.spider.seen}
    options = AnalysisOptions(second=True)
    for seed in (4, 36):
        original, copy = (analyse_html(pages[f"/{n}/{seed}"].encode(), options=options) for n in ("article", "edited"))
        assert 4 < (original.fingerprint ^ copy.fingerprint).bit_count() <= 8
        assert (original.second ^ copy.second).bit_count() <= 4  # type: ignore[operator]
        entry = seen[site.url(f"/edited/{seed}")]
        assert entry["simhash"] == copy.fingerprint  # the fingerprint is the library's, second simhash or not
        if second:
            assert entry["duplicate_of"] == site.url(f"/article/{seed}")
            assert entry["distance"] == (original.second ^ copy.second).bit_count()  # type: ignore[operator]
        else:
            assert entry["duplicate_of"] is None
    stats = simhash_stats(crawler)
    assert stats.get("simhash/second/near_duplicates", 0) == (2 if second else 0)
    assert stats.get("simhash/near_duplicates", 0) == (2 if second else 0)
