"""Learned URL rules (issue 14): learning, trust, contradiction, skipping before download, persistence, sharing.

The learner's own tests are tests/unit/test_urlrules.py and test_urlrewrite.py; the crawl tests here run real
Scrapy crawls of a local site whose articles have tracking-parameter, print
and mobile variants (same article, another template) and a listing whose
``page=`` parameter matters.
"""

from __future__ import annotations

import gc
import json
import random

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from simhash_scrapy.config import SimhashConfig
from simhash_scrapy.urlrules import PredictedDuplicate

from conftest import RecordingSpider, article_html, article_words, run_crawl, simhash_stats  # noqa: E402

pytest_plugins = ["conftest_redis"]

B = "http://site.test"


# ------------------------------------------------------------------ unit


def test_settings_are_parsed_and_checked() -> None:
    config = SimhashConfig.from_settings(
        {"SIMHASH_URL_RULES": "SKIP", "SIMHASH_URL_RULES_MIN_SUPPORT": "4", "SIMHASH_URL_RULES_MIN_PRECISION": 0.9,
         "SIMHASH_URL_RULES_EXPLORE": "0", "SIMHASH_URL_RULES_CANONICAL": "false"}
    )
    assert (config.url_rules, config.url_rules_min_support, config.url_rules_min_precision) == ("skip", 4, 0.9)
    assert config.url_rules_explore == 0 and config.url_rules_canonical is False
    assert SimhashConfig.from_settings({}).url_rules == "off"
    for name, value in (("SIMHASH_URL_RULES", "maybe"), ("SIMHASH_URL_RULES_MIN_SUPPORT", 0),
                        ("SIMHASH_URL_RULES_MIN_PRECISION", 1.5), ("SIMHASH_URL_RULES_EXPLORE", "-1")):
        with pytest.raises(ValueError, match=name):
            SimhashConfig.from_settings({name: value})


# ------------------------------------------------------------------ site
ARTICLES = 24


def dust_site() -> dict[str, str]:
    """A hub linking every article and, for most, a tracking, a print and a mobile variant."""
    pages: dict[str, str] = {}
    links = []
    for i in range(ARTICLES):
        words = article_words(1000 + i)
        title = f"Story {i}"
        pages[f"/news/{i}.html"] = article_html(title, words, links=["/", "/about.html"])
        pages[f"/print/news/{i}.html"] = article_html(title, words, template="b")
        pages[f"/m/news/{i}.html"] = article_html(title, words, extra="Mobile edition", template="b")
        links.append(f"/news/{i}.html")
        links.append(f"/news/{i}.html?utm_source=newsletter&utm_medium=email")
        links.append(f"/print/news/{i}.html")
        links.append(f"/m/news/{i}.html")
    pages["/about.html"] = article_html("About", article_words(7), links=["/"])
    hub = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    pages["/"] = f"<html><body><h1>News</h1><ul>{hub}</ul></body></html>"
    return pages


SETTINGS: dict[str, Any] = {
    "ADDONS": {"simhash_scrapy.Addon": 0},
    "SIMHASH_URL_RULES": "skip",
    "SIMHASH_URL_RULES_MIN_SUPPORT": 3,
    "SIMHASH_URL_RULES_MIN_PRECISION": 0.5,
    "SIMHASH_URL_RULES_EXPLORE": 0,
    # Breadth-first: the hub's links are all scheduled before the articles are fetched.
    "DEPTH_PRIORITY": 1,
    "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
    "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
}


def variant_hits(hits: list[str]) -> list[str]:
    return [h for h in hits if h.startswith(("/print/", "/m/")) or "utm_source" in h]


@pytest.mark.slow  # 4 s measured (--durations, -n 2, loaded 2-core machine)
@pytest_twisted.ensureDeferred
async def test_skip_mode_avoids_predicted_duplicates_and_errbacks_see_why(serve: Any, tmp_path: Path) -> None:
    site = serve(dust_site())
    report = tmp_path / "report.jsonl"
    crawler = await run_crawl(RecordingSpider, {**SETTINGS, "SIMHASH_REPORT_URI": str(report)},
                              start_urls=[site.url("/")], follow=True)
    stats = simhash_stats(crawler)
    spider = crawler.spider
    skipped = [f.value for f in spider.failures if isinstance(f.value, PredictedDuplicate)]
    assert stats["simhash/requests/skipped"] == len(skipped) > ARTICLES  # most variants never downloaded
    for exc in skipped:
        assert exc.canonical_url.startswith(site.url("/news/")) and "?" not in exc.canonical_url
        assert exc.rules
    # Every article was downloaded: nothing distinct was lost.
    assert all(f"/news/{i}.html" in site.hits for i in range(ARTICLES))
    assert len(variant_hits(site.hits)) + len(skipped) == 3 * ARTICLES
    assert stats["simhash/url_rules/trusted"] >= 2
    lines = report.read_text().splitlines()
    rules = [line for line in lines if '"type": "url_rule"' in line]
    assert any("drop ?utm_source=newsletter" in line for line in rules)


@pytest.mark.slow  # 12 s measured (--durations, -n 2, loaded 2-core machine)
@pytest_twisted.ensureDeferred
async def test_learn_mode_skips_nothing_but_learns(serve: Any) -> None:
    site = serve(dust_site())
    crawler = await run_crawl(RecordingSpider, {**SETTINGS, "SIMHASH_URL_RULES": "learn"},
                              start_urls=[site.url("/")], follow=True)
    stats = simhash_stats(crawler)
    assert "simhash/requests/skipped" not in stats
    assert len(variant_hits(site.hits)) == 3 * ARTICLES
    assert stats["simhash/url_rules/trusted"] >= 2


@pytest.mark.slow  # 5 s measured (--durations, -n 2, loaded 2-core machine)
@pytest_twisted.ensureDeferred
async def test_off_by_default(serve: Any) -> None:
    site = serve(dust_site())
    crawler = await run_crawl(RecordingSpider, {"ADDONS": {"simhash_scrapy.Addon": 0}},
                              start_urls=[site.url("/")], follow=True)
    assert not any(k.startswith(("simhash/url_rules", "simhash/requests")) for k in simhash_stats(crawler))


@pytest.mark.slow  # 3 s measured (--durations, -n 2, loaded 2-core machine)
@pytest_twisted.ensureDeferred
async def test_dont_filter_and_opted_out_requests_are_never_skipped(serve: Any) -> None:
    site = serve(dust_site())
    # First crawl: learn (saved in SIMHASH_DIR); second: variants only, some dont_filter, some opted out.
    # Within one crawl, rules are learned from the first articles and used for the rest.
    crawler = await run_crawl(RecordingSpider, SETTINGS, start_urls=[site.url("/")], follow=True)
    assert simhash_stats(crawler)["simhash/requests/skipped"] > 0
    variants = [site.url(f"/print/news/{i}.html") for i in range(ARTICLES)]
    originals = [site.url(f"/news/{i}.html") for i in range(ARTICLES)]
    special = variants[:6]
    meta = {url: {"simhash_enabled": False} for url in variants[6:12]}
    site.hits.clear()
    crawler = await run_crawl(
        RecordingSpider, SETTINGS, start_urls=originals + variants, dont_filter=tuple(special), meta=meta
    )
    # No rules carried over (memory backend): the second crawl learns again, quickly.
    hits = set(site.hits)
    for url in special + variants[6:12]:
        assert url[len(site.base):] in hits
    skipped = [f.value.url for f in crawler.spider.failures if isinstance(f.value, PredictedDuplicate)]
    assert not set(skipped) & set(special + variants[6:12])


# ------------------------------------------------------------ persistence
def urls(site: Any, paths: list[str]) -> list[str]:
    return [site.url(p) for p in paths]


def split_site(site: Any, first: range, second: range) -> tuple[list[str], list[str], list[str]]:
    """Start URLs that teach (articles of ``first`` with variants), and the originals and variants of ``second``."""
    teach = []
    for i in first:
        teach += [f"/news/{i}.html", f"/news/{i}.html?utm_source=newsletter&utm_medium=email",
                  f"/print/news/{i}.html", f"/m/news/{i}.html"]
    originals = [f"/news/{i}.html" for i in second]
    variants = [v for i in second for v in (f"/news/{i}.html?utm_source=newsletter&utm_medium=email",
                                            f"/print/news/{i}.html", f"/m/news/{i}.html")]
    return urls(site, teach), urls(site, originals), urls(site, variants)


async def assert_second_crawl_skips_from_its_start(site: Any, settings: dict[str, Any]) -> None:
    teach, originals, variants = split_site(site, range(0, 8), range(8, ARTICLES))
    first = await run_crawl(RecordingSpider, settings, start_urls=teach)
    assert simhash_stats(first)["simhash/url_rules/trusted"] >= 3
    site.hits.clear()
    second = await run_crawl(RecordingSpider, settings, start_urls=originals + variants)
    stats = simhash_stats(second)
    assert stats["simhash/url_rules/loaded"] > 0
    # Nothing new was learned in the second crawl: every variant was skipped by the rules it loaded.
    assert stats.get("simhash/url_rules/pairs", 0) == 0
    assert stats["simhash/requests/skipped"] == len(variants)
    assert sorted(site.hits) == sorted(u[len(site.base):] for u in originals)


@pytest.mark.slow  # 13 s measured (--durations, -n 2, loaded 2-core machine)
@pytest_twisted.ensureDeferred
async def test_rules_survive_a_simhash_dir_recrawl(serve: Any, tmp_path: Path) -> None:
    site = serve(dust_site())
    await assert_second_crawl_skips_from_its_start(site, {**SETTINGS, "SIMHASH_DIR": str(tmp_path / "simhash")})
    from simhash_scrapy.core.store.store import read_store

    assert read_store(tmp_path / "simhash" / "recording.store").extra.get("url_rules")  # kept in the store
    # ``scrapy simhash report`` shows them (JSON Lines records, an HTML table).
    for fmt in ("jsonl", "html"):
        out = tmp_path / f"report.{fmt}"
        proc = subprocess.run(
            [sys.executable, "-m", "scrapy.cmdline", "simhash", "report", str(tmp_path / "simhash"), "-o", str(out)],
            cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == 0, proc.stderr
        assert "learned URL rules" in proc.stderr
        text = out.read_text()
        assert "/print/… -&gt; /…" in text if fmt == "html" else '"rule": "/print/… -> /…"' in text
        if fmt == "html":
            assert 'id="url-rules"' in text


@pytest_twisted.ensureDeferred
async def test_two_workers_on_one_redis_share_rules(serve: Any, redis_server: Any) -> None:
    site = serve(dust_site())
    settings = {**SETTINGS, "SIMHASH_BACKEND": "redis", "SIMHASH_REDIS_URL": redis_server.url,
                "SIMHASH_REDIS_PERSIST": True}
    await assert_second_crawl_skips_from_its_start(site, settings)


@pytest.mark.slow  # 4 s measured (--durations, -n 2, loaded 2-core machine)
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest_twisted.ensureDeferred
async def test_rules_survive_a_jobdir_pause_and_resume(serve: Any, tmp_path: Path) -> None:
    """(Scrapy 2.13's scheduler leaves a resumed job's disk-queue files to the garbage collector,
    scrapy/pqueues.py init_prios: they are collected here, not in whichever test runs next.)"""
    site = serve(dust_site())
    settings = {**SETTINGS, "JOBDIR": str(tmp_path / "job")}
    first = await run_crawl(RecordingSpider, {**settings, "CLOSESPIDER_PAGECOUNT": 16},
                            start_urls=[site.url("/")], follow=True)
    assert first.stats.get_value("finish_reason") == "closespider_pagecount"
    assert simhash_stats(first)["simhash/url_rules/trusted"] >= 2
    first_hits = list(site.hits)
    site.hits.clear()
    second = await run_crawl(RecordingSpider, settings, start_urls=[site.url("/")], follow=True)
    stats = simhash_stats(second)
    assert second.stats.get_value("finish_reason") == "finished"
    assert stats["simhash/url_rules/loaded"] > 0
    assert stats["simhash/requests/skipped"] > 0
    hits = first_hits + site.hits
    # Over the whole job every article was downloaded, and most variants were not.
    assert all(f"/news/{i}.html" in hits for i in range(ARTICLES))
    assert len(variant_hits(hits)) < 1.5 * ARTICLES
    del first, second
    gc.collect()


@pytest.mark.slow  # 5 s measured (--durations, -n 2, loaded 2-core machine)
@pytest_twisted.ensureDeferred
async def test_exploration_downloads_predicted_duplicates_to_verify(serve: Any) -> None:
    site = serve(dust_site())
    crawler = await run_crawl(RecordingSpider, {**SETTINGS, "SIMHASH_URL_RULES_EXPLORE": 1.0},
                              start_urls=[site.url("/")], follow=True)
    stats = simhash_stats(crawler)
    assert stats["simhash/requests/explored"] > 0
    assert "simhash/requests/skipped" not in stats
    assert "simhash/url_rules/contradicted" not in stats  # the variants really are duplicates
    assert len(variant_hits(site.hits)) == 3 * ARTICLES


def test_persistent_backend_keeps_extras_in_the_store_and_reset_forgets_them(tmp_path: Path) -> None:
    from simhash_scrapy.backends.persistent import PersistentBackend

    def drive(coro: Any) -> Any:  # the persistent backend never waits
        try:
            coro.send(None)
        except StopIteration as stop:
            return stop.value
        raise AssertionError("the coroutine waited")

    def backend(reset: bool = False) -> PersistentBackend:
        return PersistentBackend(SimhashConfig.from_settings({"SIMHASH_DIR": str(tmp_path), "SIMHASH_RESET": reset}))

    async def cycle(reset: bool, data: bytes | None) -> bytes | None:
        b = backend(reset)
        await b.open("spider")
        found = await b.load_extra("url_rules")
        if data is not None:
            await b.save_extra("url_rules", data)
        await b.close()
        return found

    assert drive(cycle(False, b"rules-1")) is None
    assert drive(cycle(False, None)) == b"rules-1"
    from simhash_scrapy.core.store.store import read_store

    assert read_store(tmp_path / "spider.store").extra["url_rules"] == b"rules-1"
    assert drive(cycle(True, None)) is None


def test_the_addon_adds_the_component_only_when_rules_are_on() -> None:
    from scrapy.utils.test import get_crawler

    from simhash_scrapy.urlrules import URL_RULES_MIDDLEWARE_PRIORITY, UrlRulesMiddleware

    for mode, present in (("off", False), (None, False), (" OFF ", False), ("learn", True), ("Skip", True)):
        settings = {"ADDONS": {"simhash_scrapy.Addon": 0}}
        if mode is not None:
            settings["SIMHASH_URL_RULES"] = mode
        mws = get_crawler(RecordingSpider, settings).settings.getdict("DOWNLOADER_MIDDLEWARES")
        assert (mws.get(UrlRulesMiddleware) == URL_RULES_MIDDLEWARE_PRIORITY) is present
    # A bad value does not raise in the add-on (a traceback, no finish reason): the component is left out and
    # the middleware's state reports the setting in one line when the crawl starts (test_first_run's
    # wrong-settings crawl checks that line and the finish reason simhash_error).
    settings = {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_URL_RULES": "sometimes"}
    mws = get_crawler(RecordingSpider, settings).settings.getdict("DOWNLOADER_MIDDLEWARES")
    assert UrlRulesMiddleware not in mws


# ------------------------------------------- issue 23: rules that cannot lose a family


# ------------------------------------------------ the adversarial site, crawled for real
ADV_NEWS, ADV_PRODUCTS, ADV_PER_PAGE = 8, 60, 20


def adversarial_site() -> tuple[dict[str, str], dict[str, str]]:
    """The shape that lost whole families (issue 23), small: pages and the content id of each path.

    Articles ``/news-N`` and products ``/shop/product-N`` link six related ones
    with a ``?page=K`` they ignore (the home page lists them last, so a
    depth-first crawl fetches them first); ``/shop/?page=N`` is real
    pagination (20 products a page) and products 20+ are linked only from
    pages 2 and 3; ``/en/`` mirrors the site except ``/en/news-N``, a real
    translation.  The server answers ``/news-3?page=4`` with ``/news-3``.
    """
    pages: dict[str, str] = {}
    cids: dict[str, str] = {}
    nav = ["/", "/shop/", "/about"]

    def add(path: str, cid: str, html: str) -> None:
        pages[path] = html
        cids[path] = cid

    for lang in ("", "/en"):
        extra = "English edition" if lang else ""
        for i in range(ADV_NEWS):
            rng = random.Random(i)
            related_ = [f"{lang}/news-{j}" + ("" if lang else f"?page={2 + (i + k) % 3}")
                        for k, j in enumerate(rng.sample(range(ADV_NEWS), 6))]
            other = f"/news-{i}" if lang else f"/en/news-{i}"
            seed = 5000 + i if lang else 4000 + i  # a translation is another text
            add(f"{lang}/news-{i}", f"news{lang}-{i}",
                article_html(f"News {i}", article_words(seed, 300), extra, related_ + [other] + nav))
        for i in range(ADV_PRODUCTS):
            rng = random.Random(1000 + i)
            related_ = [f"{lang}/shop/product-{j}?page={2 + (i + k) % 3}"
                        for k, j in enumerate(rng.sample(range(ADV_PER_PAGE), 6))]
            links = related_ + ([] if lang else [f"/en/shop/product-{i}"]) + nav
            add(f"{lang}/shop/product-{i}", f"product-{i}",
                article_html(f"Product {i}", article_words(6000 + i, 300), extra, links))
        pages_count = ADV_PRODUCTS // ADV_PER_PAGE
        for page in range(1, pages_count + 1):
            items = range((page - 1) * ADV_PER_PAGE, page * ADV_PER_PAGE)
            links = [f"{lang}/shop/product-{i}" for i in items]
            links += [f"{lang}/shop/?page={p}" for p in range(1, pages_count + 1) if p != page] + nav
            words = [w for i in items for w in article_words(6000 + i, 12)]
            html = article_html(f"Shop, page {page}", words, extra, links)
            add(f"{lang}/shop/?page={page}", f"shop-{page}", html)
            if page == 1:
                add(f"{lang}/shop/", "shop-1", html)
        add(f"{lang}/about", "about", article_html("About", article_words(7, 300), extra, nav))
        home = ["/shop/", "/en/", "/about"] + [f"{lang}/news-{i}" for i in range(ADV_NEWS)]
        home += [f"{lang}/shop/product-{i}" for i in range(5)]
        add(f"{lang}/", "home", article_html("Home", article_words(8, 300), extra, home))
    return pages, cids


def content_of(cids: dict[str, str], hit: str) -> str | None:
    return cids.get(hit) or cids.get(hit.partition("?")[0])


@pytest.mark.slow  # 15 s measured (--durations, -n 2, loaded 2-core machine)
@pytest_twisted.ensureDeferred
async def test_skip_mode_loses_no_family_of_the_adversarial_site(serve: Any, tmp_path: Path) -> None:
    pages, cids = adversarial_site()
    site = serve(pages)
    report = tmp_path / "report.jsonl"
    # One request at a time: the order pages arrive in (hence which rule is trusted when a translation is
    # explored) is then the scheduler's alone, not the machine's load.
    settings = {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_URL_RULES": "skip", "CONCURRENT_REQUESTS": 1,
                "SIMHASH_REPORT_URI": str(report)}
    crawler = await run_crawl(RecordingSpider, settings, start_urls=[site.url("/")], follow=True)
    stats = simhash_stats(crawler)
    got = {content_of(cids, hit) for hit in site.hits}
    # Every content: list pages 2 and 3, the products only they link, each translation.
    assert set(cids.values()) - got == set()
    # The rules still skip (the ?page= noise on articles and products).
    skipped = [f.value for f in crawler.spider.failures if isinstance(f.value, PredictedDuplicate)]
    assert stats["simhash/requests/skipped"] == len(skipped) >= 30
    assert any("drop ?page=*" in exc.rules for exc in skipped)
    # Whether the /en/ rule was trusted before a translation showed up (then contradicted) or met one
    # first depends on the scheduler's order, which differs between Scrapy versions: the unit tests above
    # check each path; here what matters is that no translation was lost (asserted above).
    rules = {r["rule"]: r for r in map(json.loads, report.read_text().splitlines()) if r.get("type") == "url_rule"}
    assert not rules["drop ?page=*"]["on_lists"]


