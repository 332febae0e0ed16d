"""First-run warnings (issue 27, item 5): each one through a real crawl of the local test site.

* an unknown ``SIMHASH_*`` name gets a did-you-mean (``config.SETTINGS``, the one list);
* half-configured components are named (the spider middleware or the pipeline without the
  downloader middleware);
* the downloader middleware at a priority where it sees responses before Scrapy changes them;
* every start-up error names its setting in its first line (never a password);
* ``SIMHASH_REDIS_PERSIST`` without scrapy-redis' ``SCHEDULER_PERSIST`` (the real scheduler);
* the Redis start line tells pages of earlier crawls from pages of workers running now.

``scrapy crawl`` subprocesses (``test_first_run.crawl``) where the log output is the point;
in-process crawls (``conftest.run_crawl``) with ``caplog`` where the crawl's effect is checked too.
"""

from __future__ import annotations

import gzip
import logging
import re
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from conftest import Page, RecordingSpider, article_html, article_words, run_crawl, simhash_stats
from redis_server import RedisServer
from test_first_run import PROJECT, crawl, stats_of
from test_redis_backend import make_backend

from simhash_scrapy.backends import PageRecord
from simhash_scrapy.config import SETTINGS, unknown_settings

pytest_plugins = ["conftest_redis"]

ROOT = Path(__file__).resolve().parents[2]
MIDDLEWARE = {"simhash_scrapy.SimhashMiddleware": 540}
SPIDER_MW = {"simhash_scrapy.SimhashSpiderMiddleware": 950}
PIPELINE = {"simhash_scrapy.SimhashPipeline": 200}


def startup_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "simhash_scrapy.startup" and r.levelno == logging.WARNING]


def lines(log: str, level: str) -> list[str]:
    return [line for line in log.splitlines() if f" {level}: " in line]


def two_copies(serve: Any) -> Any:
    text = article_html("Copy", article_words(7))
    return serve({"/a": text, "/b": text, "/c": article_html("Other", article_words(8))})


# ------------------------------------------------------------------ unknown names
@pytest.mark.slow  # 9 s measured (--durations, -n 2, loaded 2-core machine)
def test_a_mistyped_setting_is_named_with_the_closest_known_one(serve: Any) -> None:
    site = two_copies(serve)
    proc = crawl(PROJECT, "-a", f"base={site.base}", "-a", "paths=/a,/b", "-s", "SIMHASH_ACTON=flag",
                 "-s", "SIMHASH_NO_SUCH_THING=1", "-s", "SIMHASH_TRESHOLD=3")  # fmt: skip
    warnings = [line.split(" WARNING: ", 1)[1] for line in lines(proc.stderr, "WARNING") if "simhash_scrapy.startup" in line]
    assert warnings == [
        "simhash-scrapy: unknown setting SIMHASH_ACTON (simhash-scrapy reads no such setting; it is ignored): "
        "did you mean SIMHASH_ACTION?",
        # no repository path (a pip user has no docs/ folder): the published reference
        "simhash-scrapy: unknown setting SIMHASH_NO_SUCH_THING (simhash-scrapy reads no such setting; it is "
        "ignored): the known settings are in the settings reference, "
        "https://simhash-scrapy.readthedocs.io/en/latest/reference/settings.html",
        # a transposition of THRESHOLD, the word other tools use for k
        "simhash-scrapy: unknown setting SIMHASH_TRESHOLD (simhash-scrapy reads no such setting; it is ignored): "
        "did you mean SIMHASH_MAX_DISTANCE?",
    ]
    # Ignored, as it says: the action stayed "drop", so the copy was dropped, not flagged.
    stats = stats_of(proc.stderr)
    assert stats["simhash/dropped"] == 1 and "simhash/flagged" not in stats
    assert stats["finish_reason"] == "finished"


@pytest.mark.slow  # 8 s measured (--durations, -n 2, loaded 2-core machine)
def test_the_project_settings_give_no_warning(serve: Any) -> None:
    site = two_copies(serve)
    proc = crawl(PROJECT, "-a", f"base={site.base}", "-a", "paths=/a,/b", "-s", "SIMHASH_MAX_DISTANCE=4")
    assert [line for line in lines(proc.stderr, "WARNING") if "simhash" in line] == []


def test_settings_is_the_one_list_of_every_setting_read_and_documented() -> None:
    # Every SIMHASH_* name in the package's code is in config.SETTINGS (two names are no settings:
    # an environment variable and a Redis script's error tag) ...
    used = set()
    for path in (ROOT / "simhash_scrapy").rglob("*.py"):
        used |= set(re.findall(r"\bSIMHASH_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8")))
    used -= {"SIMHASH_SCRAPY_PURE_PYTHON", "SIMHASH_LAYOUT"}
    assert sorted(used - set(SETTINGS)) == []
    assert sorted(set(SETTINGS) - used) == []
    # ... each documented in the settings reference, and nothing else is (tests/integration/test_docs.py).
    assert len(SETTINGS) == len(set(SETTINGS))
    assert unknown_settings(SETTINGS) == []
    assert unknown_settings(["SIMHASH_MAX_DISTANSE", "SIMHASH_REDIS_PERSISTS", "OTHER", "SIMHASH_X"]) == [
        ("SIMHASH_MAX_DISTANSE", "SIMHASH_MAX_DISTANCE"),
        ("SIMHASH_REDIS_PERSISTS", "SIMHASH_REDIS_PERSIST"),
        ("SIMHASH_X", None),
    ]


# ------------------------------------------------------------------ components
@pytest_twisted.ensureDeferred
async def test_the_spider_middleware_alone_is_named(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    site = two_copies(serve)
    caplog.set_level(logging.INFO)
    crawler = await run_crawl(RecordingSpider, {"SPIDER_MIDDLEWARES": SPIDER_MW}, start_urls=[site.url("/a"), site.url("/b")])
    assert startup_warnings(caplog) == [
        "simhash-scrapy: SimhashSpiderMiddleware is enabled (SPIDER_MIDDLEWARES) without SimhashMiddleware in "
        "DOWNLOADER_MIDDLEWARES, which fingerprints the pages: no page is checked and the spider middleware has "
        'nothing to act on; add DOWNLOADER_MIDDLEWARES = {"simhash_scrapy.SimhashMiddleware": 540} to settings.py, '
        'or enable the add-on instead of single components: ADDONS = {"simhash_scrapy.Addon": 0}'
    ]
    # What it says: both copies reached the spider, none was fingerprinted.
    assert len(crawler.spider.seen) == 2 and "simhash/fingerprinted" not in simhash_stats(crawler)


@pytest_twisted.ensureDeferred
async def test_the_pipeline_alone_is_named_unless_it_checks_items(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    site = two_copies(serve)
    caplog.set_level(logging.INFO)
    urls = [site.url("/a"), site.url("/b")]
    crawler = await run_crawl(RecordingSpider, {"ITEM_PIPELINES": PIPELINE}, start_urls=urls, items=True)
    [warning] = startup_warnings(caplog)
    assert warning.startswith(
        "simhash-scrapy: SimhashPipeline is enabled (ITEM_PIPELINES) without SimhashMiddleware in "
        "DOWNLOADER_MIDDLEWARES, which fingerprints the pages, and without SIMHASH_ITEM_FIELD"
    )
    assert "(or set SIMHASH_ITEM_FIELD to check items only)" in warning
    assert simhash_stats(crawler).get("simhash/fingerprinted") is None
    assert crawler.stats.get_value("item_scraped_count") == 2
    # Items only (SIMHASH_ITEM_FIELD): a configuration that works, so no warning; the copy's item is dropped.
    caplog.clear()
    crawler = await run_crawl(
        RecordingSpider, {"ITEM_PIPELINES": PIPELINE, "SIMHASH_ITEM_FIELD": "html"}, start_urls=urls, items=True
    )
    assert startup_warnings(caplog) == []
    assert simhash_stats(crawler)["simhash/items/near_duplicates"] == 1


@pytest_twisted.ensureDeferred
async def test_the_addon_and_the_three_entries_give_no_warning(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    site = two_copies(serve)
    caplog.set_level(logging.INFO)
    for settings in (
        {"ADDONS": {"simhash_scrapy.Addon": 0}},
        {"DOWNLOADER_MIDDLEWARES": MIDDLEWARE, "SPIDER_MIDDLEWARES": SPIDER_MW, "ITEM_PIPELINES": PIPELINE},
        {"DOWNLOADER_MIDDLEWARES": {"simhash_scrapy.SimhashMiddleware": 100}},
    ):
        crawler = await run_crawl(RecordingSpider, settings, start_urls=[site.url("/a"), site.url("/b")])
        assert simhash_stats(crawler)["simhash/dropped"] == 1, settings
    assert startup_warnings(caplog) == []


# ------------------------------------------------------------------ priority
@pytest_twisted.ensureDeferred
async def test_a_priority_above_scrapys_response_middlewares_is_named(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    # Two copies of one page, gzip-compressed as most servers send them.
    html = article_html("Copy", article_words(9)).encode("utf-8")
    body = gzip.compress(html, mtime=0)
    site = serve({p: Page(body, headers={"Content-Encoding": "gzip"}) for p in ("/a", "/b")})
    caplog.set_level(logging.INFO)
    urls = [site.url("/a"), site.url("/b")]
    crawler = await run_crawl(RecordingSpider, {"DOWNLOADER_MIDDLEWARES": {"simhash_scrapy.SimhashMiddleware": 600}},
                              start_urls=urls)  # fmt: skip
    [warning] = startup_warnings(caplog)
    assert warning.startswith(
        "simhash-scrapy: SimhashMiddleware is at priority 600 in DOWNLOADER_MIDDLEWARES, not below "
        "HttpCompressionMiddleware (590: it would see bodies still compressed (gzip, br, ...), which cannot be "
        "fingerprinted); RedirectMiddleware (600: "
    )
    assert "MetaRefreshMiddleware (580: " in warning and "RetryMiddleware (550: " not in warning  # RETRY_ENABLED off
    assert warning.endswith(
        "Scrapy calls process_response from the highest priority down, so give it a priority below 580, "
        'e.g. DOWNLOADER_MIDDLEWARES = {"simhash_scrapy.SimhashMiddleware": 540}'
    )
    # The reason is real: at 600 the compressed copies are not found; at 540 one is dropped.
    assert "simhash/dropped" not in simhash_stats(crawler)
    assert len(crawler.spider.seen) == 2
    caplog.clear()
    crawler = await run_crawl(RecordingSpider, {"DOWNLOADER_MIDDLEWARES": MIDDLEWARE}, start_urls=urls)
    assert startup_warnings(caplog) == []
    assert simhash_stats(crawler)["simhash/dropped"] == 1


# ------------------------------------------------------------------ start-up errors
def _start_error(proc: Any) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    [error] = lines(proc.stderr, "ERROR")
    prefix = "[simhash_scrapy.state] ERROR: simhash-scrapy cannot start, closing the spider: "
    assert prefix in error, error
    assert stats_of(proc.stderr)["finish_reason"] == "simhash_error"
    return error.split(prefix, 1)[1]


@pytest.mark.slow  # 21 s measured (--durations, -n 2, loaded 2-core machine)
def test_an_unusable_simhash_dir_is_named(serve: Any, tmp_path: Path) -> None:
    site = two_copies(serve)
    proc = crawl(PROJECT, "-a", f"base={site.base}", "-a", "paths=/a", "-s", "SIMHASH_DIR=/proc/simhash")
    assert _start_error(proc) == (
        "BackendError: SIMHASH_DIR='/proc/simhash': cannot make the folder: No such file or directory"
    )
    afile = tmp_path / "afile"
    afile.write_text("x")
    proc = crawl(PROJECT, "-a", f"base={site.base}", "-a", "paths=/a", "-s", f"SIMHASH_DIR={afile}/store")
    assert _start_error(proc) == f"BackendError: SIMHASH_DIR='{afile}/store': cannot make the folder: Not a directory"


@pytest.mark.slow  # 40 s measured (--durations, -n 2, loaded 2-core machine)
def test_a_malformed_redis_url_is_named_without_its_password(serve: Any) -> None:
    site = two_copies(serve)
    base = ("-a", f"base={site.base}", "-a", "paths=/a", "-s", "SIMHASH_BACKEND=redis")
    proc = crawl(PROJECT, *base, "-s", "REDIS_URL=localhost:6379")
    assert _start_error(proc) == (
        "REDIS_URL must be a redis://, rediss:// or unix:// URL (e.g. redis://localhost:6379/0), got 'localhost:6379'"
    )
    proc = crawl(PROJECT, *base, "-s", "SIMHASH_REDIS_URL=http://:hunter22@localhost:6379")
    assert _start_error(proc) == (
        "SIMHASH_REDIS_URL must be a redis://, rediss:// or unix:// URL (e.g. redis://localhost:6379/0), "
        "got 'http://:***@localhost:6379'"
    )
    proc = crawl(PROJECT, *base, "-s", "REDIS_URL=redis://:hunter22@localhost:notaport/0")
    assert _start_error(proc) == (
        "SIMHASH_REDIS_URL / REDIS_URL or REDIS_PARAMS: redis-py cannot make a client for "
        "redis://:***@localhost:notaport/0: Port could not be cast to integer value as 'notaport'"
    )
    proc = crawl(PROJECT, *base, "-s", 'REDIS_PARAMS={"pasword": "hunter22"}')
    error = _start_error(proc)
    assert error.startswith("REDIS_HOST / REDIS_PORT or REDIS_PARAMS: redis-py cannot make a client for ")
    assert "unexpected keyword argument 'pasword'" in error
    assert "hunter22" not in proc.stderr


@pytest.mark.slow  # 10 s measured (--durations, -n 2, loaded 2-core machine)
def test_a_report_folder_that_cannot_be_made_is_an_error_at_the_start(serve: Any, tmp_path: Path) -> None:
    site = two_copies(serve)
    afile = tmp_path / "afile"
    afile.write_text("x")
    proc = crawl(PROJECT, "-a", f"base={site.base}", "-a", "paths=/a",
                 "-s", f"SIMHASH_REPORT_URI={afile}/reports/%(name)s.jsonl")  # fmt: skip
    assert _start_error(proc) == (
        f"SIMHASH_REPORT_URI: cannot make the report's folder {afile}/reports: Not a directory"
    )


@pytest_twisted.ensureDeferred
async def test_a_custom_backend_that_fails_to_build_is_named(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A backend class (SIMHASH_BACKEND = "module.Class") whose from_crawler raises: one line, no traceback.
    (tmp_path / "failing_backend.py").write_text(
        "from simhash_scrapy.backends.memory import MemoryBackend\n"
        "class Failing(MemoryBackend):\n"
        "    @classmethod\n"
        "    def from_crawler(cls, crawler, config):\n"
        "        raise KeyError('MYBACKEND_URL is not set')\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    site = two_copies(serve)
    caplog.set_level(logging.INFO)
    crawler = await run_crawl(RecordingSpider, {"ADDONS": {"simhash_scrapy.Addon": 0},
                                                "SIMHASH_BACKEND": "failing_backend.Failing"}, start_urls=[site.url("/a")])  # fmt: skip
    assert crawler.stats.get_value("finish_reason") == "simhash_error"
    assert crawler.stats.get_value("simhash/error") == (
        "SIMHASH_BACKEND='failing_backend.Failing': failing_backend.Failing.from_crawler failed: "
        "KeyError: 'MYBACKEND_URL is not set'"
    )


# ------------------------------------------------------------------ scrapy-redis
def test_persist_without_scheduler_persist_is_named() -> None:
    # Not a crawl: scrapy-redis (0.9.1, the latest) cannot run on Scrapy 2.19 (its scheduler passes
    # spider= to the stats), and it is no dependency. The check reads only the settings, so it is
    # given them as a crawl would (Scrapy's Settings, the parsed config); warn_at_startup is what
    # DedupState calls at every crawl's start (the crawls above show it).
    from scrapy.settings import Settings

    from simhash_scrapy.config import SimhashConfig
    from simhash_scrapy.startup import startup_warnings as warnings_for

    def warnings(**values: Any) -> list[str]:
        settings = Settings({"SIMHASH_BACKEND": "redis", "REDIS_URL": "redis://localhost:6379/0", **values})
        return warnings_for(settings, SimhashConfig.from_settings(settings))

    scrapy_redis = {"SCHEDULER": "scrapy_redis.scheduler.Scheduler", "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter"}
    [warning] = warnings(**scrapy_redis, SIMHASH_REDIS_PERSIST=True)
    assert warning == (
        "SIMHASH_REDIS_PERSIST is on but scrapy-redis' SCHEDULER_PERSIST is off: when a worker closes, scrapy-redis "
        "deletes its request queue and dupefilter while simhash-scrapy keeps its record, so the next worker or crawl "
        "downloads those pages again only to find them recorded (unchanged or near-duplicates). Set "
        "SCHEDULER_PERSIST = True as well, or leave SIMHASH_REDIS_PERSIST unset (it follows SCHEDULER_PERSIST)"
    )
    assert warnings(**scrapy_redis, SIMHASH_REDIS_PERSIST="true", SCHEDULER_PERSIST="false") == [warning]
    # The pair set, the index following the queue, Scrapy's own scheduler or another backend: nothing to say.
    assert warnings(**scrapy_redis, SIMHASH_REDIS_PERSIST=True, SCHEDULER_PERSIST=True) == []
    assert warnings(**scrapy_redis) == []
    assert warnings(**scrapy_redis, SCHEDULER_PERSIST=True) == []
    assert warnings(SIMHASH_REDIS_PERSIST=True) == []
    assert warnings(**scrapy_redis, SIMHASH_REDIS_PERSIST=True, SIMHASH_BACKEND="memory") == []


# ------------------------------------------------------------------ recorded before / by a running worker
def _redis_start_line(caplog: pytest.LogCaptureFixture) -> str:
    [line] = [r.getMessage() for r in caplog.records if "Redis backend at" in r.getMessage()]
    return line.split(": ", 1)[1]


@pytest_twisted.ensureDeferred
async def test_pages_of_a_running_worker_are_not_called_earlier(
    serve: Any, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    site = two_copies(serve)
    caplog.set_level(logging.INFO)
    settings = {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_BACKEND": "redis",
                "SIMHASH_REDIS_URL": redis_server.url, "SIMHASH_REDIS_PERSIST": True}  # fmt: skip
    # An earlier crawl records one page.
    await run_crawl(RecordingSpider, settings, start_urls=[site.url("/c")])
    assert _redis_start_line(caplog).endswith("0 pages recorded by earlier crawls, no other worker running")
    # A worker starts (no other one running) and records two pages; it keeps running.
    worker = make_backend(redis_server, SIMHASH_REDIS_PERSIST=True)
    await worker.open(RecordingSpider.name)
    for i in range(2):
        await worker.check(PageRecord(f"https://elsewhere/{i}", 1 << (20 * i), RecordingSpider.name))
    # A second worker's crawl, started beside it: 3 pages, 1 earlier, 2 by the running worker.
    caplog.clear()
    try:
        await run_crawl(RecordingSpider, settings, start_urls=[site.url("/a")])
    finally:
        await worker.close()
    assert _redis_start_line(caplog).endswith(
        "3 pages recorded: 1 by earlier crawls, 2 by the 1 other worker running now"
    )
    # Once it stopped, they are pages of earlier crawls.
    caplog.clear()
    await run_crawl(RecordingSpider, settings, start_urls=[site.url("/a")])
    assert _redis_start_line(caplog).endswith("4 pages recorded by earlier crawls, no other worker running")


# ------------------------------------------------------------------ CLOSESPIDER_PAGECOUNT
@pytest_twisted.ensureDeferred
async def test_closespider_pagecount_does_not_count_dropped_responses(serve: Any) -> None:
    # README ("What happens to a response", 5): Scrapy counts response_received, never sent for a dropped one.
    copy = article_html("Copy", article_words(11))
    pages = {"/a": copy, **{f"/copy{i}": copy for i in range(4)}, "/b": article_html("B", article_words(12)),
             "/c": article_html("C", article_words(13))}  # fmt: skip
    site = serve(pages)
    urls = [site.url(p) for p in ("/a", "/copy0", "/copy1", "/copy2", "/copy3", "/b", "/c")]
    crawler = await run_crawl(
        RecordingSpider, {"ADDONS": {"simhash_scrapy.Addon": 0}, "CLOSESPIDER_PAGECOUNT": 2}, start_urls=urls
    )
    stats = crawler.stats.get_stats()
    assert stats["finish_reason"] == "closespider_pagecount"
    assert stats["simhash/dropped"] == 4
    assert stats["response_received_count"] == 2
    assert stats["downloader/response_count"] >= 6  # /a, the four copies, /b: downloaded, 2 counted
    assert crawler.spider.seen_urls[:2] == [site.url("/a"), site.url("/b")]
