"""Recurring crawls that save bandwidth and tell real changes (issue 24), through real crawls.

* A site served by ``python -m http.server`` (a real subprocess, which answers
  ``If-Modified-Since`` with 304): the second crawl with ``SIMHASH_DIR`` or a
  shared Redis sends the recorded validators, gets 304 for every page but the
  start URL (``dont_filter``, always downloaded so its links are followed),
  counts them unchanged and downloads no page body again; pages that gained a
  45-word paragraph are edited or changed, never unchanged.
* Without validators (the tests' own server sends none) or with
  ``SIMHASH_CONDITIONAL = False``, a re-crawl downloads everything as before and
  the content digest still tells unchanged pages from edited ones.
* A 304 reaches the callback only where the request handles status 304; it
  is never an ``HttpError``.  Scrapy's HTTP cache makes its own conditional
  requests: the plugin then sends none.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from conftest import RecordingSpider, article_html, article_words, run_crawl, simhash_stats
from crawl_helpers import crawl_env, parse_stats, reached
from test_recurring import backend_args, copy_project, recorded_urls

from loop_helpers import in_thread

from simhash_scrapy.core.store.store import read_store
from simhash_scrapy.middleware import NOT_MODIFIED_FLAG, EditedPage, NotModifiedPage

from static_server import Server  # tests/static_server.py: python -m http.server in a subprocess

pytest_plugins = ["conftest_redis"]

ADDON = {"ADDONS": {"simhash_scrapy.Addon": 0}}

PAGES = 200
#: The pages that gain a 45-word paragraph before the third crawl, and the one whose text gets one
#: word changed (a small edit: its simhash stays within k, its digest does not).
GROWN = [3, 47, 101, 150, 199]
ONE_WORD = 60
OLD = time.time() - 10_000  # file times well apart, whatever the clock's resolution
NEWER = OLD + 5_000


def page_name(n: int) -> str:
    return f"p{n:03d}.html"


def write_site(root: Path, pages: int = PAGES) -> None:
    """``index.html`` linking to ``pages`` articles of 300 distinct words each, all with an old mtime."""
    root.mkdir(parents=True, exist_ok=True)
    names = [page_name(n) for n in range(pages)]
    (root / "index.html").write_text(article_html("Index", article_words(1, 80), links=names), encoding="utf-8")
    for n, name in enumerate(names):
        (root / name).write_text(article_html(f"Article {n}", article_words(100 + n, 300)), encoding="utf-8")
    for path in root.iterdir():
        os.utime(path, (OLD, OLD))


def grow(root: Path, n: int) -> None:
    """Add a 45-word paragraph to page ``n`` (a newer mtime: the server answers 200 again)."""
    path = root / page_name(n)
    paragraph = "<p>" + " ".join(article_words(90_000 + n, 45)) + "</p>"
    html = path.read_text(encoding="utf-8")
    assert html.count("</article>") == 1
    path.write_text(html.replace("</article>", paragraph + "</article>"), encoding="utf-8")
    os.utime(path, (NEWER, NEWER))


def change_one_word(root: Path, n: int) -> None:
    path = root / page_name(n)
    words = article_words(100 + n, 300)
    html = path.read_text(encoding="utf-8")
    assert f" {words[150]} " in html
    path.write_text(html.replace(f" {words[150]} ", " zyzzyva ", 1), encoding="utf-8")
    os.utime(path, (NEWER, NEWER))


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[Any]:
    servers: list[Server] = []

    def start(root: Path) -> Server:
        server = Server(root, tmp_path / f"http-{len(servers)}.log")
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def crawl(project: Path, *args: str) -> tuple[dict[str, Any], str]:
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy.cmdline", "crawl", "links", *args],
        cwd=project, env=crawl_env(project), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr[-4000:]
    return parse_stats(proc.stderr), proc.stderr


def report_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.slow  # 114 s measured (--durations, -n 2, loaded 2-core machine)
@pytest.mark.parametrize("backend", ["simhash_dir", "redis"])
def test_a_second_crawl_gets_304s_and_edits_are_not_unchanged(
    backend: str, http_server: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    root = tmp_path / "site"
    write_site(root)
    server = http_server(root)
    project = copy_project(tmp_path)
    options, redis_url = backend_args(backend, tmp_path, request)
    args = ["-a", f"base={server.base}", *options]
    every = {f"{server.base}/"} | {f"{server.base}/{page_name(n)}" for n in range(PAGES)}

    # First crawl: nothing recorded, so no validators sent; every page is new.
    first, log = crawl(project, *args)
    assert set(reached(log)) == every
    assert first["simhash/unique"] == PAGES + 1 and first["simhash/fingerprinted"] == PAGES + 1
    assert "simhash/conditional" not in first and "downloader/response_status_count/304" not in first
    seen = len(server.statuses())

    # Second crawl: the start URL (dont_filter) is downloaded, every article answers 304.
    report = tmp_path / "second.jsonl"
    second, log = crawl(project, *args, "-s", f"SIMHASH_REPORT_URI={report}")
    statuses = server.statuses()[seen:]
    seen += len(statuses)
    assert len(statuses) == PAGES + 1
    assert sum(1 for _, status in statuses if status == 304) == PAGES  # >= 90% of the requests
    assert [path for path, status in statuses if status != 304] == ["/"]  # no article body downloaded again
    assert second["simhash/conditional"] == PAGES
    assert second["simhash/not_modified"] == second["downloader/response_status_count/304"] == PAGES
    assert second["simhash/unchanged"] == PAGES + 1  # the 304s and the start page (same text)
    assert second["simhash/fingerprinted"] == 1  # only the start page had a body
    for absent in ("simhash/edited", "simhash/changed", "simhash/unique", "simhash/near_duplicates",
                   "httperror/response_ignored_count"):  # fmt: skip
        assert absent not in second, (absent, second)
    # The links spider does not handle 304: those pages end before it (as unchanged pages dropped), not as errors.
    assert reached(log) == [f"{server.base}/"]
    assert second["simhash/unchanged_dropped"] == PAGES
    # Headers only (about 150 bytes a 304) and the start page: under a tenth of the first crawl.
    assert second["downloader/response_bytes"] < first["downloader/response_bytes"] / 10
    summary = report_lines(report)[-1]
    assert summary["type"] == "summary" and summary["previous_crawl"] is True
    assert (summary["pages"], summary["unchanged"], summary["edited"], summary["changed"]) == (PAGES + 1, PAGES + 1, 0, 0)
    assert sorted(recorded_urls(backend, tmp_path, redis_url)) == sorted(every)  # one record per URL

    # Third crawl: five pages gained a 45-word paragraph, one had one word changed.
    for n in GROWN:
        grow(root, n)
    change_one_word(root, ONE_WORD)
    touched = {f"{server.base}/{page_name(n)}" for n in [*GROWN, ONE_WORD]}
    third, log = crawl(project, *args)
    statuses = server.statuses()[seen:]
    assert sorted(p for p, status in statuses if status == 200) == sorted(["/", *(f"/{page_name(n)}" for n in [*GROWN, ONE_WORD])])
    assert third["simhash/not_modified"] == PAGES - len(GROWN) - 1
    assert third.get("simhash/edited", 0) + third.get("simhash/changed", 0) == len(GROWN) + 1
    assert third["simhash/edited"] >= 1  # the one-word edit at least: within k, other text
    assert third["simhash/unchanged"] == PAGES + 1 - len(GROWN) - 1
    assert set(reached(log)) == touched | {f"{server.base}/"}
    if backend == "simhash_dir":
        contents = read_store(tmp_path / "state" / "links.store")
        outcomes = dict(zip(contents.urls(), contents.outcomes))
        assert all(outcomes[url] in ("edited", "changed") for url in touched), {u: outcomes[u] for u in touched}
        assert outcomes[f"{server.base}/{page_name(ONE_WORD)}"] == "edited"
        assert sum(1 for o in outcomes.values() if o == "unchanged") == PAGES + 1 - len(touched)
        assert all(e is None for e in contents.etags)  # http.server sends no ETag
        assert all(m is not None for m in contents.last_modified)


@pytest.mark.slow  # 78 s measured (--durations, -n 2, loaded 2-core machine)
def test_without_validators_or_when_turned_off_a_recrawl_downloads_everything(
    http_server: Any, serve: Any, tmp_path: Path
) -> None:
    """A server without validators behaves as before; so does SIMHASH_CONDITIONAL = False with one."""
    project = copy_project(tmp_path)
    pages = {"/": article_html("Index", article_words(1, 80), links=[f"/a{n}" for n in range(6)])}
    pages.update({f"/a{n}": article_html(f"A{n}", article_words(200 + n, 300)) for n in range(6)})
    site = serve(pages)  # the tests' own server: no ETag, no Last-Modified
    args = ["-a", f"base={site.base}", "-s", f"SIMHASH_DIR={tmp_path / 'state'}"]
    crawl(project, *args)
    second, log = crawl(project, *args)
    assert len(reached(log)) == 7 and second["downloader/response_status_count/200"] == 7
    assert second["simhash/unchanged"] == 7 and "simhash/conditional" not in second
    assert "simhash/not_modified" not in second and "simhash/edited" not in second

    root = tmp_path / "site"
    write_site(root, pages=6)
    server = http_server(root)
    args = ["-a", f"base={server.base}", "-s", f"SIMHASH_DIR={tmp_path / 'state2'}", "-s", "SIMHASH_CONDITIONAL=False"]
    crawl(project, *args)
    change_one_word(root, 2)
    second, log = crawl(project, *args)
    assert [status for _, status in server.statuses()].count(304) == 0
    assert len(reached(log)) == 7 and "simhash/conditional" not in second
    assert second["simhash/unchanged"] == 6 and second["simhash/edited"] == 1  # the digest tells the edit


@pytest.mark.slow  # 5 s measured (--durations, -n 2, loaded 2-core machine)
@pytest_twisted.ensureDeferred
async def test_a_304_reaches_only_callbacks_that_handle_it(http_server: Any, tmp_path: Path) -> None:
    root = tmp_path / "site"
    write_site(root, pages=4)
    server = http_server(root)
    urls = [f"{server.base}/{page_name(n)}" for n in range(4)]
    settings = {**ADDON, "SIMHASH_DIR": str(tmp_path / "state"), "SIMHASH_UNCHANGED": "drop_items"}
    await run_crawl(RecordingSpider, settings, start_urls=urls, items=True)
    # p000 handles 304 (meta), p001 opts out of validators, p002/p003 are left to the defaults.
    meta = {urls[0]: {"handle_httpstatus_list": [304]}, urls[1]: {"simhash_conditional": False}}
    crawler = await run_crawl(RecordingSpider, settings, start_urls=urls, items=True, meta=meta)
    spider, stats = crawler.spider, simhash_stats(crawler)
    assert sorted(spider.seen_urls) == urls[:2]
    handled = next(entry for entry in spider.seen if entry["url"] == urls[0])
    assert NOT_MODIFIED_FLAG in handled["flags"] and handled["simhash"] is not None
    assert stats["simhash/not_modified"] == 3 and stats["simhash/conditional"] == 3
    assert stats["simhash/unchanged"] == 4 and stats["simhash/fingerprinted"] == 1  # p001: downloaded again
    # drop_items: the items of p001 (downloaded, unchanged) and of the 304 (an empty HtmlResponse: Scrapy
    # picks the class from the .html URL) are dropped.
    assert stats["simhash/items/unchanged_dropped"] == 2
    assert sorted(f.value.url for f in spider.failures) == urls[2:]
    assert all(isinstance(f.value, NotModifiedPage) for f in spider.failures)
    assert "httperror/response_ignored_count" not in crawler.stats.get_stats()


@pytest.mark.slow  # 2 s measured (--durations, -n 2, loaded 2-core machine)
@pytest_twisted.ensureDeferred
async def test_scrapy_http_cache_makes_its_own_conditional_requests(http_server: Any, tmp_path: Path) -> None:
    root = tmp_path / "site"
    write_site(root, pages=4)
    server = http_server(root)
    urls = [f"{server.base}/{page_name(n)}" for n in range(4)]
    settings = {
        **ADDON,
        "SIMHASH_DIR": str(tmp_path / "state"),
        "HTTPCACHE_ENABLED": True,
        "HTTPCACHE_DIR": str(tmp_path / "cache"),
        "HTTPCACHE_POLICY": "scrapy.extensions.httpcache.RFC2616Policy",
    }
    await run_crawl(RecordingSpider, settings, start_urls=urls)
    crawler = await run_crawl(RecordingSpider, settings, start_urls=urls)
    stats = crawler.stats.get_stats()
    # The cache serves or revalidates the pages itself; the spider gets whole pages, unchanged.
    assert sorted(crawler.spider.seen_urls) == urls and not crawler.spider.failures
    assert stats["simhash/unchanged"] == 4 and "simhash/conditional" not in stats
    assert "simhash/not_modified" not in stats


# ------------------------------------------------------------------ units: the rule, the store, the report
def test_the_rule_tells_unchanged_from_edited_by_digest() -> None:
    from simhash_scrapy.core.cluster.clustering import Clusterer, Outcome

    rule = Clusterer(max_distance=3)
    assert rule.check("s", "a", 0b1111, digest=10).outcome is Outcome.UNIQUE
    assert rule.check("s", "a", 0b1111, digest=10).outcome is Outcome.UNCHANGED
    assert rule.check("s", "a", 0b0111, digest=11).outcome is Outcome.EDITED  # one bit, other text
    assert rule.check("s", "a", 0b0111, digest=11).outcome is Outcome.UNCHANGED
    assert rule.check("s", "a", 0b0111).outcome is Outcome.UNCHANGED  # no digest: within k, as before
    assert rule.check("s", "a", 0b0111 ^ 0xFF00, digest=12).outcome is Outcome.CHANGED
    # A short page's digest is its fingerprint: equal or changed, never edited.
    assert rule.check("s", "b", 77, exact=True).outcome is Outcome.UNIQUE
    assert rule.check("s", "b", 77, exact=True, digest=5).outcome is Outcome.UNCHANGED


def _format_3_store(path: Path) -> list[Any]:
    """A store as format 3 wrote it: rows without the format-4 columns, user_version 3."""
    import sqlite3

    from simhash_scrapy.core.store.store import StoreConfig, StoreRecord
    from simhash_scrapy.core.store.store_rows import FORMAT_4_COLUMNS

    from test_store import format_4_store

    config = StoreConfig(3, 4, "w1-c0-tf-j2", "visible")
    records = [StoreRecord(i, "s", f"id{i}", f"https://x/{i}", 0x1234 + i, indexed=0x1234 + i, first_seen=1.0 + i,
                           last_seen=2.0 + i) for i in range(3)]  # fmt: skip
    format_4_store(path, records, config)
    db = sqlite3.connect(path, isolation_level=None)
    for name, _ in FORMAT_4_COLUMNS:
        db.execute(f"ALTER TABLE pages DROP COLUMN {name}")
    meta = dict(db.execute("SELECT key, value FROM simhash_meta").fetchall())
    meta["format"] = "3"
    from simhash_scrapy.core.store.store import _meta_checksum

    db.execute("UPDATE simhash_meta SET value = '3' WHERE key = 'format'")
    db.execute("UPDATE simhash_meta SET value = ? WHERE key = 'checksum'", (_meta_checksum(meta),))
    db.execute("PRAGMA user_version = 3")
    db.close()
    return records


def test_a_format_3_store_is_read_then_upgraded_in_place(tmp_path: Path) -> None:
    import sqlite3

    from simhash_scrapy.core.store.store import PageStore, StoreConfig, StoreRecord

    path = tmp_path / "old.store"
    _format_3_store(path)
    before = path.read_bytes()
    contents = read_store(path)  # a reader: every row checked (format-3 checksums), the file untouched
    assert contents.version == 3 and contents.urls() == [f"https://x/{i}" for i in range(3)]
    assert contents.digests == [None] * 3 and contents.etags == [None] * 3
    assert path.read_bytes() == before
    store = PageStore(path, StoreConfig(3, 4, "w1-c0-tf-j2", "visible"))
    assert len(store.open()) == 3  # a crawl: read, checked, then upgraded
    store.put(StoreRecord(3, "s", "id3", "https://x/3", 99, digest=2**64 - 1, etag='W/"e"', last_modified="Mon"))
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone() == (6,)  # via formats 4 and 5
    db.close()
    again = read_store(path)
    assert again.version == 6 and again.digests == [None, None, None, 2**64 - 1]
    assert again.etags[3] == 'W/"e"' and again.last_modified[3] == "Mon"
    # A validator changed behind the store's back is caught by the chunk's checksum.
    db = sqlite3.connect(path, isolation_level=None)
    (data,) = db.execute("SELECT data FROM chunks WHERE chunk = 0").fetchone()
    at = data.index(b'W/"e"')
    db.execute("UPDATE chunks SET data = ? WHERE chunk = 0", (data[:at] + b'W/"f"' + data[at + 5 :],))
    db.close()
    with pytest.raises(ValueError, match=r"corrupt chunk 0 \(checksum mismatch\)"):
        read_store(path)


def test_first_crawl_wording_and_the_jsonl_summary_line(tmp_path: Path) -> None:
    from simhash_scrapy.backends.base import ClusterMember, Outcome
    from simhash_scrapy.core.report.report import build_clusters, describe_report, report_summary, write_report

    members = [ClusterMember("https://x/", 1, "s", outcome=Outcome.UNCHANGED), ClusterMember("https://x/a", 2, "s")]
    first = report_summary(members, [], title="T", max_distance=3, source="here", previous_crawl=False)
    assert describe_report(first) == "2 pages: 2 unique, 0 near-duplicates in 0 clusters; fetched again in this crawl: 0 changed, 1 unchanged"
    members.append(ClusterMember("https://x/b", 3, "s", outcome=Outcome.EDITED))
    again = report_summary(members, [], title="T", max_distance=3, source="here", previous_crawl=True)
    assert describe_report(again).endswith("since the last crawl: 0 changed, 1 edited, 1 unchanged")
    lines = report_lines(write_report(tmp_path / "r.jsonl", build_clusters(members), "jsonl", again))
    assert [line["type"] for line in lines] == ["summary"]  # no cluster: still not an empty file
    assert (lines[0]["pages"], lines[0]["edited"], lines[0]["previous_crawl"]) == (3, 1, True)


@pytest_twisted.ensureDeferred
async def test_a_first_crawl_that_fetches_its_start_url_twice(serve: Any, tmp_path: Path) -> None:
    """No "since the last crawl" on a first crawl, and the report's cards equal the stats (issue 24)."""
    paths = [f"/a{n}" for n in range(4)]
    pages = {"/": article_html("Index", article_words(1, 80), links=paths)}
    pages.update({p: article_html(p, article_words(300 + n, 300), links=["/"]) for n, p in enumerate(paths)})
    site = serve(pages)
    report = tmp_path / "report.html"
    crawler = await run_crawl(
        RecordingSpider, {**ADDON, "SIMHASH_REPORT_URI": str(report)},
        start_urls=[site.url("/")], dont_filter=(site.url("/"),), follow=True,
    )  # fmt: skip
    stats = simhash_stats(crawler)
    # "/" is fetched again from each of the 4 pages linking back (this spider makes those dont_filter too).
    assert stats["simhash/fingerprinted"] == 9 and stats["simhash/unchanged"] == 4
    assert stats["simhash/pages"] == 5 and "simhash/conditional" not in stats  # no store: no validators
    cards = {k: int(v.replace(",", "")) for k, v in re.findall(r'<dd data-stat="(\w+)">([\d,]+)</dd>', report.read_text())}
    # The cards count distinct pages (their latest outcome), as simhash/pages does; the outcome stats count
    # fetches: "/" is one page, unchanged, fetched 4 more times.
    assert cards["pages"] == stats["simhash/pages"] and cards["unchanged"] == 1
    assert cards["unique"] == stats["simhash/unique"] == 5
    page = report.read_text(encoding="utf-8")
    assert "Fetched again, unchanged" in page and "since last crawl" not in page


@pytest.mark.slow  # 30 s measured (--durations, -n 2, loaded 2-core machine)
def test_with_jobdir_disk_queues(http_server: Any, tmp_path: Path) -> None:
    """Requests that went through JOBDIR's disk queues (pickled) get their validators when they are sent."""
    root = tmp_path / "site"
    write_site(root, pages=6)
    server = http_server(root)
    project = copy_project(tmp_path)
    args = ["-a", f"base={server.base}", "-s", f"SIMHASH_DIR={tmp_path / 'state'}"]
    crawl(project, *args)
    second, log = crawl(project, *args, "-s", f"JOBDIR={tmp_path / 'job'}")
    assert second["finish_reason"] == "finished" and second["scheduler/enqueued/disk"] == 7
    assert second["simhash/not_modified"] == second["simhash/conditional"] == 6
    assert second["simhash/unchanged"] == 7 and reached(log) == [f"{server.base}/"]


@pytest_twisted.ensureDeferred
async def test_simhash_edited_drops_edited_pages_only(serve: Any, tmp_path: Path) -> None:
    words = article_words(7, 300)
    pages = {f"/p{n}": article_html(f"P{n}", article_words(400 + n, 300)) for n in range(3)}
    pages["/e"] = article_html("E", words)
    site = serve(pages)
    urls = [site.url(p) for p in pages]
    settings = {**ADDON, "SIMHASH_DIR": str(tmp_path / "state"), "SIMHASH_EDITED": "drop"}
    await run_crawl(RecordingSpider, settings, start_urls=urls)
    site.handler.pages["/e"].body = article_html("E", [*words[:100], "zyzzyva", *words[101:]])  # one word
    crawler = await run_crawl(RecordingSpider, settings, start_urls=urls)
    stats = simhash_stats(crawler)
    assert (stats["simhash/edited"], stats["simhash/edited_dropped"], stats["simhash/unchanged"]) == (1, 1, 3)
    assert sorted(crawler.spider.seen_urls) == sorted(urls[:3])
    [failure] = crawler.spider.failures
    assert isinstance(failure.value, EditedPage) and failure.value.url == site.url("/e")
    assert failure.request.meta["simhash_outcome"] == "edited" and failure.request.meta["simhash_edited"] is True


@pytest.mark.parametrize("backend", ["simhash_dir", "redis"])
@pytest_twisted.ensureDeferred
async def test_a_304_keeps_the_rel_canonical_link_of_the_page(
    backend: str, http_server: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A 304 re-records the identity from its previous record: the rel=canonical URL the page named stays
    (it was lost: the 304's record named none, so the store wrote the link away and Redis's payload lost it)."""

    from simhash_scrapy.backends.persistent import stored_links
    from simhash_scrapy.backends.redis import read_members

    root = tmp_path / "site"
    write_site(root, pages=3)
    for n in range(3):
        path = root / page_name(n)
        html = path.read_text(encoding="utf-8")
        path.write_text(html.replace("</head>", f'<link rel="canonical" href="/canon/{n}"></head>', 1),
                        encoding="utf-8")
        os.utime(path, (OLD, OLD))
    server = http_server(root)
    urls = [f"{server.base}/{page_name(n)}" for n in range(3)]
    if backend == "redis":
        redis_url = request.getfixturevalue("redis_server").url
        settings = {**ADDON, "SIMHASH_BACKEND": "redis", "SIMHASH_REDIS_URL": redis_url, "SIMHASH_REDIS_PERSIST": True}

        def links() -> set[str | None]:
            members = in_thread(read_members({"REDIS_URL": redis_url}, RecordingSpider.name))
            return {m.canonical_link for m in members}
    else:
        settings = {**ADDON, "SIMHASH_DIR": str(tmp_path / "state")}

        def links() -> set[str | None]:
            return set(stored_links(read_store(tmp_path / "state" / f"{RecordingSpider.name}.store")).values())

    await run_crawl(RecordingSpider, settings, start_urls=urls)
    expected = {f"{server.base}/canon/{n}" for n in range(3)}
    assert links() == expected
    crawler = await run_crawl(RecordingSpider, settings, start_urls=urls)
    assert simhash_stats(crawler)["simhash/not_modified"] == 3
    assert links() == expected


@pytest_twisted.ensureDeferred
async def test_a_304_of_a_kept_near_duplicate_is_kept_again(http_server: Any, tmp_path: Path) -> None:
    """SIMHASH_KEEP_PER_CLUSTER: a near-duplicate that passed as one of the first members of its cluster is
    kept when it answers 304 too, as when it is downloaded again (it was dropped: the 304 path placed no page)."""
    root = tmp_path / "site"
    root.mkdir()
    words = article_words(7, 300)
    (root / "a.html").write_text(article_html("A", words), encoding="utf-8")
    (root / "b.html").write_text(article_html("A", words[:-2] + ["zyzzyva", "quux"]), encoding="utf-8")
    for path in root.iterdir():
        os.utime(path, (OLD, OLD))
    server = http_server(root)
    urls = [f"{server.base}/a.html", f"{server.base}/b.html"]
    settings = {**ADDON, "SIMHASH_DIR": str(tmp_path / "state"), "SIMHASH_KEEP_PER_CLUSTER": 2,
                "SIMHASH_ACTION": "drop"}
    first = simhash_stats(await run_crawl(RecordingSpider, settings, start_urls=urls))
    assert first["simhash/kept_per_cluster"] == 1 and "simhash/dropped" not in first
    crawler = await run_crawl(RecordingSpider, settings, start_urls=urls)
    second = simhash_stats(crawler)
    assert second["simhash/not_modified"] == 2, second
    assert second.get("simhash/kept_per_cluster") == 1 and "simhash/dropped" not in second, sorted(second.items())
    assert all(isinstance(f.value, NotModifiedPage) for f in crawler.spider.failures)


@pytest.mark.parametrize("backend", ["simhash_dir", "redis", pytest.param("redis-global", marks=pytest.mark.slow)])  # 2.5 s measured (--durations, serial, loaded 2-core machine)
@pytest_twisted.ensureDeferred
async def test_pages_declaring_a_product_identity_get_304s_and_are_listed_gone(
    backend: str, http_server: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A product page declares its identity (JSON-LD: checked in a scope of its own, ``core.cluster.identity``),
    and so does its tracking copy.  A second crawl on the store finds each one's record in the scope it was
    checked in (the identity its address declared, ``core.cluster.viewidentity``): every page answers 304 and is
    ruled on as it was (the tracking copy still a near-duplicate of its product page), and a product page that
    went away is listed as gone (before, the record was looked for in the plain scope: never found).  With
    Redis too: a worker reads the identities earlier crawls recorded when it opens (before, the first page of
    each address was downloaded without validators, and the one that went away was not listed); and with the
    global index over a real three-node Redis Cluster (``redis-global``: its scope registry names the identity
    scopes, their records are read at open, each address's record looked up by one HGET)."""
    from test_shop_crawl import product_html

    root = tmp_path / "site"
    (root / "p").mkdir(parents=True)
    (root / "p" / "shirt-blue.html").write_text(product_html("Linen shirt blue", "LS-1-BL", "49.90"), encoding="utf-8")
    (root / "p" / "shirt-red.html").write_text(product_html("Linen shirt red", "LS-1-RD", "52.90"), encoding="utf-8")
    for path in root.rglob("*.html"):
        os.utime(path, (OLD, OLD))
    server = http_server(root)
    blue = f"{server.base}/p/shirt-blue.html"
    # (http.server serves the file of the path: the query makes the tracking copy)
    urls = [blue, f"{blue}?utm_source=mail", f"{server.base}/p/shirt-red.html"]
    settings = {**ADDON, "SIMHASH_DIR": str(tmp_path / "state"), "SIMHASH_ACTION": "flag"}
    if backend == "redis":
        redis_url = request.getfixturevalue("redis_server").url
        settings = {**ADDON, "SIMHASH_BACKEND": "redis", "SIMHASH_REDIS_URL": redis_url,
                    "SIMHASH_REDIS_PERSIST": True, "SIMHASH_ACTION": "flag"}  # fmt: skip
    if backend == "redis-global":
        cluster = request.getfixturevalue("redis_cluster")
        settings = {**ADDON, "SIMHASH_BACKEND": "redis-global", "SIMHASH_REDIS_URL": cluster.url,
                    "SIMHASH_REDIS_CLUSTER": True, "SIMHASH_ACTION": "flag"}  # fmt: skip
    first = await run_crawl(RecordingSpider, settings, start_urls=urls)
    duplicate_of = {entry["url"]: entry["duplicate_of"] for entry in first.spider.seen}
    assert duplicate_of == {blue: None, f"{blue}?utm_source=mail": blue, urls[2]: None}
    assert simhash_stats(first)["simhash/identity/pages"] == 3
    (root / "p" / "shirt-red.html").unlink()
    crawler = await run_crawl(RecordingSpider, settings, start_urls=urls, meta={
        url: {"handle_httpstatus_list": [304, 404]} for url in urls
    })  # fmt: skip
    stats = simhash_stats(crawler)
    assert stats.get("simhash/conditional") == 3 and stats.get("simhash/not_modified") == 2, sorted(stats.items())
    assert stats.get("simhash/gone") == 1, sorted(stats.items())
    seen = {entry["url"]: entry for entry in crawler.spider.seen}
    assert seen[f"{blue}?utm_source=mail"]["duplicate_of"] == blue and seen[blue]["duplicate_of"] is None
