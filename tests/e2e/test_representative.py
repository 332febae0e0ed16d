"""A cluster's representative (issue 28): the page a person would keep, rel=canonical, the per-cluster budget.

Real crawls of a local site whose tracking, print, AMP and mirror copies are
crawled before their originals, for each backend (memory, a SIMHASH_DIR
store, Redis with a real redis-server); the units of ``core.cluster.representative`` are
tests/unit/test_representative_rule.py.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from conftest import Page, RecordingSpider, article_html, article_words, run_crawl, simhash_stats

from simhash_scrapy.backends.persistent import load_members
from simhash_scrapy.core.report.report import build_clusters, render_report
from simhash_scrapy.core.cluster.representative import (
    Candidate,
    ClusterBook,
    choose,
    is_variant,
)
from simhash_scrapy.middleware import NearDuplicate

pytest_plugins = ["conftest_redis"]

ADDON = {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_MAX_DISTANCE": 6}
ARTICLES = 6
#: Copies of each article, in the order they are crawled (the original comes last).
COPIES = ("tracking", "print", "amp", "mirror", "original")


def _path(i: int, kind: str) -> str:
    return {
        "original": f"/doc/{i}.html",
        "tracking": f"/doc/{i}.html?utm_source=feed&utm_medium=rss",
        "print": f"/print/doc/{i}.html",
        "amp": f"/doc/{i}.amp.html",
        "mirror": f"/mirror/v2/doc/{i}.html",
    }[kind]


def _with_canonical(page: str, href: str) -> str:
    return page.replace("</title></head>", f'</title><link rel="canonical" href="{href}"></head>', 1)


def copies_site() -> dict[str, Page | str]:
    """Articles, each with tracking, print, AMP and mirror copies.

    Even articles name their original with rel=canonical (the original and so
    its tracking copy, the AMP page by a ``Link`` header for article 0 and by
    the tag for the others, the mirror copying the tag verbatim); odd ones name
    nothing, so the URL rules decide (no query, not a print/AMP/mirror copy).
    """
    pages: dict[str, Page | str] = {}
    for i in range(ARTICLES):
        words = article_words(300 + i)
        title = f"Reference chapter {i}"
        original = article_html(title, words, "Last updated 2026-05-01")
        amp = article_html(title, words, "Last updated 2026-05-01 (accelerated)")
        mirror = article_html(title, words, "Last updated 2026-05-01 mirror v2")
        printed = article_html(title, words, "", template="b")
        target = _path(i, "original")
        amp_page: Page | str = amp
        if i % 2 == 0:
            original = _with_canonical(original, target)
            mirror = _with_canonical(mirror, target)
            if i == 0:
                amp_page = Page(amp, headers={"Link": f'<{target}>; rel="canonical", </style.css>; rel=preload'})
            else:
                amp_page = _with_canonical(amp, target)
        # The site serves a URL with a query string as the page without it: the tracking copy.
        pages[target] = original
        pages[_path(i, "print")] = printed
        pages[_path(i, "amp")] = amp_page
        pages[_path(i, "mirror")] = mirror
    return pages


def copies_first(site: Any) -> list[str]:
    return [site.url(_path(i, kind)) for kind in COPIES for i in range(ARTICLES)]


def originals_first(site: Any) -> list[str]:
    return [site.url(_path(i, kind)) for kind in reversed(COPIES) for i in range(ARTICLES)]


def backend_settings(backend: str, tmp_path: Path, request: pytest.FixtureRequest | None, server: Any = None) -> dict[str, Any]:
    if backend == "memory":
        return {}
    if backend == "persistent":
        return {"SIMHASH_DIR": str(tmp_path / "stores")}
    if server is None:
        assert request is not None
        server = request.getfixturevalue("redis_server")
    shards = {"SIMHASH_REDIS_SHARDS": 2} if backend == "redis-shards" else {}
    return {"SIMHASH_BACKEND": "redis", "SIMHASH_REDIS_URL": server.url, **shards}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line.get("type", "cluster") == "cluster"]


BACKENDS = ["memory", "persistent", "redis"]


# ------------------------------------------------------------------ real crawls
@pytest.mark.slow  # 6 s measured (--durations, -n 2, loaded 2-core machine)
@pytest.mark.parametrize("backend", [*BACKENDS, "redis-shards"])
@pytest_twisted.ensureDeferred
async def test_copies_first_the_report_names_the_original(
    serve: Any, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    site = serve(copies_site())
    report = tmp_path / "clusters.jsonl"
    crawler = await run_crawl(
        RecordingSpider,
        {**ADDON, **backend_settings(backend, tmp_path, request), "SIMHASH_REPORT_URI": str(report)},
        start_urls=copies_first(site),
    )
    stats = simhash_stats(crawler)
    clusters = read_jsonl(report)
    assert len(clusters) == ARTICLES
    for cluster in clusters:
        urls = [m["url"] for m in cluster["members"]]
        i = int(urls[0].split("/doc/")[1].split(".")[0])
        # Which pages are near-duplicates does not change: all five copies, the tracking copy the anchor.
        assert sorted(urls) == sorted(site.url(_path(i, kind)) for kind in COPIES)
        assert cluster["canonical"] == site.url(_path(i, "tracking"))
        assert cluster["representative"] == site.url(_path(i, "original"))
        # Named by rel=canonical (even articles); else the mirror (no query) is a copy by its URL.
        assert cluster["representative_reason"] == ("rel_canonical" if i % 2 == 0 else "not_variant")
        links = {m["url"]: m["canonical_link"] for m in cluster["members"]}
        if i % 2 == 0:
            assert links[site.url(_path(i, "amp"))] == site.url(_path(i, "original"))  # tag or Link header
            assert links[site.url(_path(i, "tracking"))] == site.url(_path(i, "original"))
            assert links[site.url(_path(i, "print"))] is None
        else:
            assert set(links.values()) == {None}
    # Drop mode (the default): only the anchors reached the spider; every later copy was dropped, the
    # original too (the crawl cannot undo a drop), and its NearDuplicate said it is the representative.
    assert sorted(crawler.spider.seen_urls) == sorted(site.url(_path(i, "tracking")) for i in range(ARTICLES))
    dropped = {f.value.url: f.value for f in crawler.spider.failures if isinstance(f.value, NearDuplicate)}
    assert len(dropped) == ARTICLES * (len(COPIES) - 1)
    for i in range(ARTICLES):
        original = dropped[site.url(_path(i, "original"))]
        assert original.representative == original.url
        assert original.canonical_url == site.url(_path(i, "tracking"))
    # Every cluster was re-chosen at least once (its original came last); the anchor was never kept twice.
    assert stats["simhash/canonical/replaced"] >= ARTICLES
    assert stats["simhash/dropped"] == ARTICLES * (len(COPIES) - 1)
    assert "simhash/kept_per_cluster" not in stats


def layout_site() -> tuple[dict[str, Page | str], list[str], list[str]]:
    """A magazine's layout where the shortest URL is a copy (issue 39): per article, crawled in this order,
    a syndicated mirror (``/mirror/a<i>.html``, naming the syndication partner's URL as canonical), a promo
    copy (``/promo/a<i>.html``, nothing named), the original (``/articles/a<i>.html``, nothing named) and a
    short tracking path (``/t/a<i>.html``, nothing named).  Returns (pages, crawl order, originals)."""
    pages: dict[str, Page | str] = {}
    order: list[str] = []
    for i in range(ARTICLES):
        words = article_words(700 + i)
        title = f"Feature story {i}"
        body = article_html(title, words, "Published 2026-04-01")
        pages[f"/mirror/a{i}.html"] = _with_canonical(body, f"https://partner.example/2026/04/story-{i}")
        pages[f"/promo/a{i}.html"] = body.replace("Published", "Spring offer. Published")
        pages[f"/articles/a{i}.html"] = body
        pages[f"/t/a{i}.html"] = body
    for kind in ("mirror", "promo", "articles", "t"):
        order += [f"/{kind}/a{i}.html" for i in range(ARTICLES)]
    return pages, order, [f"/articles/a{i}.html" for i in range(ARTICLES)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest_twisted.ensureDeferred
async def test_the_original_not_the_shortest_copy(
    serve: Any, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """The shortest URL (``/t/…``, ``/promo/…``) is a copy here: today's rule kept it, this one keeps the
    original, by the mirror's own canonical tag, the promo's URL, and the crawl order over the tracking path."""
    pages, order, originals = layout_site()
    site = serve(pages)
    report = tmp_path / "clusters.jsonl"
    await run_crawl(
        RecordingSpider,
        {**ADDON, **backend_settings(backend, tmp_path, request), "SIMHASH_REPORT_URI": str(report),
         "SIMHASH_ACTION": "flag"},
        start_urls=[site.url(p) for p in order],
    )
    clusters = read_jsonl(report)
    assert len(clusters) == ARTICLES
    for cluster in clusters:
        assert len(cluster["members"]) == 4
        assert cluster["canonical"].split(":", 2)[2].split("/", 1)[1].startswith("mirror/")
        assert cluster["representative"] in {site.url(p) for p in originals}
        assert cluster["representative_reason"] == "first_crawled"  # over /t/…, crawled after it
        # the shortest URL is a copy (today's rule, commit 881d76b, kept it: the shortest before crawl order)
        assert "/t/a" in min((m["url"] for m in cluster["members"]), key=len)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest_twisted.ensureDeferred
async def test_the_page_a_redirect_names_is_kept(
    serve: Any, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """A tracking copy (``/t/…``, no signal) is crawled first; the original is reached through a redirect
    (``/go/…`` -> ``/articles/…``): the redirect names it, as a rel=canonical tag would.  A redirect that
    only changes the host or scheme names nothing (``redirect_named``)."""
    pages: dict[str, Page | str] = {}
    for i in range(ARTICLES):
        body = article_html(f"Harbour story {i}", article_words(900 + i), "Published 2026-04-01")
        pages[f"/t/a{i}.html"] = body
        pages[f"/articles/a{i}.html"] = body
        pages[f"/go/a{i}"] = Page(b"", status=302, headers={"Location": f"/articles/a{i}.html"})
    site = serve(pages)
    report = tmp_path / "clusters.jsonl"
    await run_crawl(
        RecordingSpider,
        {**ADDON, **backend_settings(backend, tmp_path, request), "SIMHASH_REPORT_URI": str(report),
         "SIMHASH_ACTION": "flag"},
        start_urls=[site.url(f"/t/a{i}.html") for i in range(ARTICLES)] + [site.url(f"/go/a{i}") for i in range(ARTICLES)],
    )
    clusters = read_jsonl(report)
    assert len(clusters) == ARTICLES
    for cluster in clusters:
        i = int(cluster["canonical"].rsplit("/a", 1)[1].split(".")[0])
        assert cluster["canonical"] == site.url(f"/t/a{i}.html")  # the anchor: first crawled
        assert cluster["representative"] == site.url(f"/articles/a{i}.html")
        assert cluster["representative_reason"] == "rel_canonical"
        links = {m["url"]: m["canonical_link"] for m in cluster["members"]}
        assert links == {site.url(f"/t/a{i}.html"): None, site.url(f"/articles/a{i}.html"): site.url(f"/articles/a{i}.html")}


@pytest.mark.slow  # 4 s measured (--durations, -n 2, loaded 2-core machine)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest_twisted.ensureDeferred
async def test_first_keeps_the_first_crawled(
    serve: Any, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    site = serve(copies_site())
    report = tmp_path / "clusters.csv"
    crawler = await run_crawl(
        RecordingSpider,
        {**ADDON, **backend_settings(backend, tmp_path, request), "SIMHASH_REPORT_URI": str(report),
         "SIMHASH_REPRESENTATIVE": "first", "SIMHASH_ACTION": "flag"},
        start_urls=copies_first(site),
    )
    stats = simhash_stats(crawler)
    with report.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == ARTICLES * len(COPIES)
    for row in rows:
        assert row["representative"] == row["canonical"]
        assert row["representative_reason"] == "first_crawled"
        assert "utm_source" in row["representative"]
    assert "simhash/canonical/replaced" not in stats
    assert stats["simhash/flagged"] == ARTICLES * (len(COPIES) - 1)


@pytest.mark.slow  # 6 s measured (--durations, -n 2, loaded 2-core machine)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("order", ["copies_first", "originals_first"])
@pytest_twisted.ensureDeferred
async def test_keep_two_per_cluster(
    serve: Any, tmp_path: Path, backend: str, order: str, request: pytest.FixtureRequest
) -> None:
    site = serve(copies_site())
    urls = copies_first(site) if order == "copies_first" else originals_first(site)
    crawler = await run_crawl(
        RecordingSpider,
        {**ADDON, **backend_settings(backend, tmp_path, request), "SIMHASH_KEEP_PER_CLUSTER": 2},
        start_urls=urls,
        items=True,
    )
    stats = simhash_stats(crawler)
    passed: dict[int, list[str]] = {}
    for url in crawler.spider.seen_urls:
        passed.setdefault(int(url.split("/doc/")[1].split(".")[0]), []).append(url)
    # Exactly two members of each cluster passed: the first two crawled.
    assert sorted(passed) == list(range(ARTICLES))
    kinds = COPIES if order == "copies_first" else tuple(reversed(COPIES))
    for i, got in passed.items():
        assert got == [site.url(_path(i, kind)) for kind in kinds[:2]]
    assert stats["simhash/kept_per_cluster"] == ARTICLES
    assert stats["simhash/dropped"] == ARTICLES * (len(COPIES) - 2)
    # The second member passed unflagged, and its items too.
    assert all("near-duplicate" not in entry["flags"] for entry in crawler.spider.seen)
    assert crawler.stats.get_value("item_scraped_count") == 2 * ARTICLES


@pytest.mark.slow  # 3 s measured (--durations, -n 2, loaded 2-core machine)
@pytest.mark.parametrize("backend", ["memory", "persistent"])
@pytest_twisted.ensureDeferred
async def test_flag_mode_meta_and_originals_first(
    serve: Any, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """Flag mode: each page's meta names its cluster's representative; originals first: nothing is replaced."""
    site = serve(copies_site())
    report = tmp_path / "clusters.html"
    crawler = await run_crawl(
        MetaSpider,
        {**ADDON, **backend_settings(backend, tmp_path, request), "SIMHASH_ACTION": "flag",
         "SIMHASH_REPORT_URI": str(report)},
        start_urls=originals_first(site),
    )
    stats = simhash_stats(crawler)
    assert "simhash/canonical/replaced" not in stats
    for entry in crawler.spider.seen:
        i = int(entry["url"].split("/doc/")[1].split(".")[0])
        if entry["url"] == site.url(_path(i, "original")):
            assert entry["representative"] is None  # the anchor: not a near-duplicate
        else:
            assert entry["representative"] == site.url(_path(i, "original"))
            assert entry["reason"] == ("rel_canonical" if i % 2 == 0 else "not_variant")
            assert entry["kept"] is False
    html = report.read_text(encoding="utf-8")
    assert "named by rel=canonical" in html and "not a copy" in html


class MetaSpider(RecordingSpider):
    def parse(self, response: Any, **kwargs: Any) -> Any:
        yield from super().parse(response, **kwargs) or ()
        self.seen[-1].update(
            representative=response.meta.get("simhash_representative"),
            reason=response.meta.get("simhash_representative_reason"),
            kept=response.meta.get("simhash_kept"),
        )


@pytest.mark.slow  # 3 s measured (--durations, -n 2, loaded 2-core machine)
@pytest_twisted.ensureDeferred
async def test_resumed_store_keeps_positions_and_the_choice(serve: Any, tmp_path: Path) -> None:
    """A SIMHASH_DIR store crawled in two runs: the second run knows each cluster's members (budget, choice)."""
    site = serve(copies_site())
    settings = {**ADDON, "SIMHASH_DIR": str(tmp_path / "stores"), "SIMHASH_KEEP_PER_CLUSTER": 2,
                "SIMHASH_REPORT_URI": str(tmp_path / "clusters.jsonl")}
    urls = copies_first(site)
    first = await run_crawl(RecordingSpider, settings, start_urls=urls[: 2 * ARTICLES])
    assert len(first.spider.seen) == 2 * ARTICLES  # tracking copies (anchors) and print copies (budget)
    second = await run_crawl(RecordingSpider, settings, start_urls=urls[2 * ARTICLES :])
    # The second run's pages are the third to fifth members of their clusters: none passes.
    assert second.spider.seen == []
    clusters = read_jsonl(tmp_path / "clusters.jsonl")
    assert {c["representative"] for c in clusters} == {site.url(_path(i, "original")) for i in range(ARTICLES)}
    assert simhash_stats(second)["simhash/canonical/replaced"] >= ARTICLES
    # A third run re-checks every page, unchanged: the representatives stay where they were, and no
    # page "replaced" one (a page re-checked first in its cluster is part of what the store recorded).
    # (The originals first: a cluster's first re-checked page is its representative.)
    originals = [site.url(_path(i, "original")) for i in range(ARTICLES)]
    third = await run_crawl(RecordingSpider, settings, start_urls=originals + [u for u in urls if u not in originals])
    assert simhash_stats(third).get("simhash/canonical/replaced", 0) == 0
    assert {c["representative"] for c in read_jsonl(tmp_path / "clusters.jsonl")} == set(originals)
    # The store alone (what `scrapy simhash report STORE` reads) gives the same choice: the
    # rel=canonical URLs are in the store.
    members = load_members(tmp_path / "stores" / "recording.store")
    # Even articles: the original, its tracking copy, the AMP copy and the mirror name the original.
    assert sum(m.canonical_link is not None for m in members) == 4 * len(range(0, ARTICLES, 2))
    offline = build_clusters(members, max_distance=6)
    assert sorted((c["representative"], c["representative_reason"]) for c in offline) == sorted(
        (c["representative"], c["representative_reason"]) for c in clusters
    )
    # `scrapy simhash report STORE` follows the settings' SIMHASH_REPRESENTATIVE.
    import argparse

    from simhash_scrapy.commands import report as report_command

    for policy, expected in (("best", "rel_canonical"), ("first", "first_crawled")):
        out = tmp_path / f"{policy}.jsonl"
        opts = argparse.Namespace(format=None, output=str(out), input=str(tmp_path / "stores" / "recording.store"),
                                  redis=None, key=None, spider=None, no_texts=False)
        assert report_command.run_report(opts, settings={"SIMHASH_REPRESENTATIVE": policy}) == 0
        reasons = {c["representative_reason"] for c in read_jsonl(out)}
        assert expected in reasons and (policy == "best") == (reasons != {"first_crawled"})


# ------------------------------------------------------------------------ units


@pytest.mark.parametrize(
    ("url", "variant"),
    [
        ("https://x.example/print/a.html", True),
        ("https://x.example/a/print", True),
        ("https://x.example/amp/a.html", True),
        ("https://x.example/a.amp.html", True),
        ("https://x.example/a-print.html", True),
        ("https://m.x.example/a.html", True),
        ("https://x.example/a.html?output=amp", True),
        ("https://x.example/a.html?print=1", True),
        ("https://x.example/blueprint/a.html", False),
        ("https://x.example/camp/a.html", False),
        ("https://x.example/a.html?view=list", False),
        ("https://x.example/mirror/v2/a.html", True),
        ("https://x.example/promo/spring/a.html", True),
        ("https://x.example/syndicated/x/a-12", True),
        ("https://x.example/promotions/a.html", False),
        ("https://x.example/a.html?utm_source=feed", True),
        ("https://x.example/a.html?SessionID=ab12", True),
        ("https://x.example/q?page=3?format=print", True),  # a suffix glued onto a URL with a query
        ("https://x.example/q?page=3?utm_medium=email", True),
        ("https://x.example/q?page=3", False),
        ("https://x.example/q?page=3&sort=price", False),
        ("https://m.example/a.html", False),
    ],
)
def test_is_variant(url: str, variant: bool) -> None:
    assert is_variant(url) is variant


def test_canonical_link_of_a_page_analysed_off_the_event_loop_parses_its_head_only() -> None:
    """A page whose analysis may take long (many tags: ``core.analysis.may_take_long``) or too big for the
    shared parse is never parsed whole on the event loop for its rel=canonical link: only its head is."""
    from scrapy.http import HtmlResponse

    from simhash_scrapy.core.analysis import SLOW_MARKUP
    from simhash_scrapy.middleware import SHARED_PARSE_MAX_BYTES, _canonical_link

    head = b'<html><head><title>t</title><link rel="canonical" href="/the/one"></head><body>'
    for filler in (b"<b>x</b>" * (SLOW_MARKUP // 2 + 1), b"<p>" + b"word " * (SHARED_PARSE_MAX_BYTES // 5) + b"</p>"):
        response = HtmlResponse("https://x.example/a?b=1", body=head + filler + b"</body></html>", encoding="utf-8")
        assert _canonical_link(response) == "https://x.example/the/one"
        assert response._cached_selector is None  # the page itself was not parsed
    # a rel=canonical link in the body of such a page is not looked for (it belongs in the head)
    response = HtmlResponse("https://x.example/a", body=b"<html><body>" + b"<b>x</b>" * (SLOW_MARKUP // 2 + 1)
                            + b'<link rel="canonical" href="/late"></body></html>', encoding="utf-8")
    assert _canonical_link(response) is None and response._cached_selector is None


def test_report_formats_show_the_representative(tmp_path: Path) -> None:
    members = [
        {"url": "https://x.example/a?utm=1", "fingerprint": 1, "scope": "s", "canonical_link": "https://x.example/a"},
        {"url": "https://x.example/a", "fingerprint": 3, "scope": "s", "canonical_url": "https://x.example/a?utm=1",
         "distance": 1, "canonical_link": "https://x.example/a"},
    ]
    clusters = build_clusters(members, max_distance=4)
    assert clusters[0]["representative"] == "https://x.example/a"
    assert clusters[0]["representative_reason"] == "rel_canonical"
    assert build_clusters(members, max_distance=4, representative="first")[0]["representative"] == members[0]["url"]
    rows = list(csv.DictReader(render_report(clusters, "csv").splitlines()))
    assert [r["representative_reason"] for r in rows] == ["rel_canonical"] * 2
    assert json.loads(render_report(clusters, "jsonl").splitlines()[0])["representative"] == "https://x.example/a"


@pytest_twisted.ensureDeferred
async def test_store_keeps_rel_canonical_urls_and_names_a_damaged_blob(tmp_path: Path) -> None:
    """The SIMHASH_DIR store keeps each entry's rel=canonical URL (blobs written at each flush, the
    latest wins); a blob that is not what was written is named, and the store is left as it is."""
    import sqlite3

    from simhash_scrapy.backends import BackendError, PageRecord
    from simhash_scrapy.backends.persistent import PersistentBackend
    from simhash_scrapy.config import SimhashConfig
    from simhash_scrapy.core.store.store_rows import blob_checksum

    config = SimhashConfig.from_settings({"SIMHASH_DIR": str(tmp_path), "SIMHASH_FLUSH_INTERVAL": 0})
    backend = PersistentBackend(config)
    await backend.open("s")
    fp = 0x1234_5678_9ABC_DEF0
    await backend.check(PageRecord("https://x.example/a?utm=1", fp, "s", canonical_link="https://x.example/b"))
    await backend.check(PageRecord("https://x.example/a", fp ^ 1, "s", canonical_link="https://x.example/a"))
    # Checked again: it names another URL now, then none.
    await backend.check(PageRecord("https://x.example/a?utm=1", fp, "s", canonical_link="https://x.example/a"))
    await backend.check(PageRecord("https://x.example/c", fp ^ 3, "s"))
    await backend.close()
    members = load_members(tmp_path / "s.store")
    assert [m.canonical_link for m in members] == ["https://x.example/a", "https://x.example/a", None]
    assert build_clusters(members)[0]["representative"] == "https://x.example/a"

    path = tmp_path / "s.store"
    with sqlite3.connect(path) as db:
        name = db.execute("SELECT name FROM extra WHERE name LIKE 'rel_canonical/%' ORDER BY name").fetchone()[0]
        data = b'[[0, 7]]'
        db.execute("UPDATE extra SET data = ?, checksum = ? WHERE name = ?", (data, blob_checksum(name, data), name))
    before = path.read_bytes()
    again = PersistentBackend(config)
    with pytest.raises(BackendError, match=rf"s\.store: corrupt extra record '{name}' \(7 is not a URL\)"):
        await again.open("s")
    await again.close()
    assert path.read_bytes() == before


@pytest.mark.parametrize("seed", range(20))
def test_cluster_book_agrees_with_choose(seed: int) -> None:
    """Page by page, the crawl's incremental view gives ``choose``'s answer over the members so far."""
    import random

    rng = random.Random(seed)
    host = "https://x.example"
    pool = [f"{host}/d/{n}.html" for n in range(4)] + [f"{host}/print/d/{n}.html" for n in range(2)] + [
        f"{host}/d/{n}.html?utm_source=a" for n in range(3)] + [f"{host}/mirror/v2/d/{n}.html" for n in range(2)] + [
        f"{host}/d/{n}.amp.html" for n in range(2)]  # fmt: skip
    book = ClusterBook("best")
    members: dict[str, Candidate] = {}
    anchor_url = rng.choice(pool)
    anchor_link = rng.choice([None, rng.choice(pool)])
    members["id-anchor"] = Candidate(anchor_url, anchor_link, 0)
    for _ in range(rng.randint(1, 25)):
        identity = f"id-{rng.randrange(12)}"
        if identity in members:  # checked again: same URL and link
            url, link = members[identity].url, members[identity].link
        else:
            url, link = rng.choice(pool), rng.choice([None, None, rng.choice(pool)])
            members[identity] = Candidate(url, link, len(members))
        placed = book.place("s", "id-anchor", anchor_url, anchor_link, identity, url, link)
        position, reason = choose(list(members.values()))
        assert placed.representative == list(members.values())[position].url
        assert placed.reason == reason
        assert placed.position == members[identity].order + 1


@pytest.mark.slow  # 2 s measured (--durations, -n 2, loaded 2-core machine)
@pytest_twisted.ensureDeferred
async def test_redis_workers_share_the_cluster_positions(serve: Any, tmp_path: Path, redis_server: Any) -> None:
    """Two workers on one Redis key (one after the other, each with its own process state): the positions
    for SIMHASH_KEEP_PER_CLUSTER are counted in Redis, so the second worker's pages are the 3rd to 5th."""
    import redis as redis_py

    site = serve(copies_site())
    settings = {**ADDON, **backend_settings("redis", tmp_path, None, redis_server), "SIMHASH_KEEP_PER_CLUSTER": 2,
                "SIMHASH_REDIS_PERSIST": True}
    urls = copies_first(site)
    first = await run_crawl(RecordingSpider, settings, start_urls=urls[: 2 * ARTICLES])
    assert len(first.spider.seen) == 2 * ARTICLES  # the anchors and the second members
    second = await run_crawl(RecordingSpider, settings, start_urls=urls[2 * ARTICLES :])
    assert second.spider.seen == []
    assert simhash_stats(second)["simhash/dropped"] == 3 * ARTICLES
    client = redis_py.Redis.from_url(redis_server.url)
    keys = [k for k in client.keys("*") if k.endswith(b":positions")]
    assert len(keys) == 1 and client.hlen(keys[0]) == ARTICLES * len(COPIES)  # a count and 4 positions each
    client.close()
