"""Clustering step 7 (sentence containment) through a real Scrapy crawl of a local site (both code paths)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from conftest import RecordingSpider, run_crawl, simhash_stats

from simhash_scrapy.core.analysis import analyse_html

_WORDS = [f"word{i}" for i in range(4000)]


def sentences(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(_WORDS, k=rng.randrange(10, 22))).capitalize() + "." for _ in range(count)]


ARTICLE = sentences(1, 32)


def html(title: str, body: str, chrome: str = "") -> str:
    return (
        f"<!doctype html><html><head><title>{title}</title></head><body>"
        f'<nav class="menu"><a href="/">Home</a> <a href="/news">News</a></nav>{chrome}'
        f"<main><article><h1>{title}</h1>{body}</article></main>"
        f'<footer class="footer"><p>Copyright Example News.</p></footer></body></html>'
    )


def paragraphs(lines: list[str]) -> str:
    return "".join(f"<p>{line}</p>" for line in lines)


def site_pages() -> dict[str, str]:
    return {
        "/story": html("Harbour plan", "<p>Tuesday 4 June, by Anna Berg</p>" + paragraphs(ARTICLE)
                       + "<ul><li>Permalink</li><li>Tags: harbour, council</li></ul>"),
        # a print view: the article without its date row and its last six paragraphs
        "/story/print": html("Harbour plan", paragraphs(ARTICLE[:26])),
        # the article in another site's template, beside that site's own gallery captions
        "/syndicated/harbour": html("Harbour plan", paragraphs(sentences(2, 12)) + paragraphs(ARTICLE)),
        # a listing page holding the whole article and two others: contains it, is not a copy of it
        "/digest": html("This week", paragraphs(ARTICLE) + paragraphs(sentences(3, 32)) + paragraphs(sentences(4, 32))),
    }


ORDER = list(site_pages())


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("containment", [True, False])
async def test_a_print_view_and_a_syndicated_copy_are_found_by_their_sentences(
    serve: Any, implementation: str, containment: bool, tmp_path: Path
) -> None:
    pages = site_pages()
    site = serve(pages)
    report = tmp_path / "report.jsonl"
    settings = {
        "ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_ACTION": "flag",
        "SIMHASH_REPORT_URI": str(report), "SIMHASH_REPORT_FORMAT": "jsonl",
    }
    if not containment:
        settings["SIMHASH_CONTAINMENT"] = False
    crawler = await run_crawl(RecordingSpider, settings, start_urls=[site.url(path) for path in ORDER])
    seen = {entry["url"]: entry for entry in crawler.spider.seen}
    story = analyse_html(pages["/story"].encode()).fingerprint
    assert story is not None
    stats = simhash_stats(crawler)
    for path in ("/story/print", "/syndicated/harbour"):
        entry = seen[site.url(path)]
        assert entry["simhash"] == analyse_html(pages[path].encode()).fingerprint  # fingerprints never change
        assert (entry["simhash"] ^ story).bit_count() > 4  # beyond k, and beyond what steps 5-6 find here
        if containment:
            assert entry["duplicate_of"] == site.url("/story")
            assert entry["rule"] == "containment"
            assert entry["distance"] == (entry["simhash"] ^ story).bit_count()
        else:
            assert entry["duplicate_of"] is None
    assert seen[site.url("/digest")]["duplicate_of"] is None
    assert seen[site.url("/story")]["duplicate_of"] is None
    assert stats.get("simhash/containment/near_duplicates", 0) == (2 if containment else 0)
    assert stats.get("simhash/near_duplicates", 0) == (2 if containment else 0)
    assert "simhash/one_edit/near_duplicates" not in stats
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    members = {m["url"]: m for row in rows if row["type"] == "cluster" for m in row["members"]}
    if containment:
        for path in ("/story/print", "/syndicated/harbour"):
            assert members[site.url(path)]["rule"] == "containment"
