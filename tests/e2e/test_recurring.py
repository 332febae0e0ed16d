"""Recurring crawls end to end (issue 13): real ``scrapy crawl`` processes over a local site, twice and more.

With ``SIMHASH_DIR`` or a shared Redis (drop mode, defaults), a page fetched again under the
same URL is ``unchanged`` or ``changed``, never its own near-duplicate: the
second crawl of an unchanged site fetches every page again, drops nothing,
and the store keeps one record per URL.  With ``JOBDIR``, a job paused and
resumed finds exactly the near-duplicates of one uninterrupted run, and the
start URL fetched again (``dont_filter``) is ``unchanged``.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import Page, article_html
from crawl_helpers import PROJECT, crawl_env, distinct_words, interrupt_after, parse_stats, read_report, reached

from simhash_scrapy.core.store.store import read_store

pytest_plugins = ["conftest_redis"]

SECTIONS = 4
ARTICLES = 6
#: The pages changed between the second and the third crawl, and the near-duplicate copies added.
CHANGED = ["/s1/a0", "/s1/a3", "/s2/a1", "/s3/a4", "/s3/a5"]
COPIES = {"/s0/copy0": "/s1/a2", "/s0/copy1": "/s2/a2", "/s0/copy2": "/s3/a0"}


def article(path: str, seed: int, punctuation: str = ".") -> str:
    return article_html(f"Story {path}", distinct_words(seed), extra=f"Published on Monday{punctuation}")


def make_site(version: int) -> dict[str, Any]:
    """Index -> 4 sections -> 6 articles each (29 distinct pages); section 0 also links to 3 copy URLs.

    version 1: the copy URLs answer 404 (never fingerprinted); version 2: ``CHANGED`` pages get
    new text and the copy URLs serve near-duplicates (punctuation differs) of other articles.
    The link structure (and so every index and section page) is the same in both versions.
    """
    pages: dict[str, Any] = {}
    seeds: dict[str, int] = {}
    sections = [f"/s{i}" for i in range(SECTIONS)]
    pages["/"] = article_html("Front page", distinct_words(5000), links=sections)
    for i, section in enumerate(sections):
        links = [f"{section}/a{j}" for j in range(ARTICLES)] + (list(COPIES) if i == 0 else [])
        pages[section] = article_html(f"Section {i}", distinct_words(5100 + i), links=links)
        for j in range(ARTICLES):
            path = f"{section}/a{j}"
            seeds[path] = 6000 + 10 * i + j
            changed = version >= 2 and path in CHANGED
            pages[path] = article(path, seeds[path] + (500 if changed else 0))
    for copy, original in COPIES.items():
        if version >= 2:
            pages[copy] = article(original, seeds[original], punctuation="!").replace("<main>", '<main class="print">')
        else:
            pages[copy] = Page("<html><body><p>Not found</p></body></html>", status=404)
    return pages


def crawl(args: list[str], project: Path, timeout: float = 180) -> tuple[dict[str, Any], str]:
    proc = subprocess.run(
        [*_command(), *args], cwd=project, env=crawl_env(project), capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return parse_stats(proc.stderr), proc.stderr


def _command() -> list[str]:
    import sys

    return [sys.executable, "-m", "scrapy.cmdline", "crawl", "links"]


def copy_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__", ".scrapy"))
    return project


def store_urls(path: Path) -> list[str]:
    from test_store import sqlite_urls

    with sqlite3.connect(path) as db:  # what the sqlite3 library reads: chunks and rows
        urls = sqlite_urls(db)
    db.close()
    return urls


def backend_args(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[list[str], str | None]:
    """The ``-s`` options of a recurring crawl's backend: a ``SIMHASH_DIR`` store under ``tmp_path``, or a
    real Redis (the ``redis_server`` fixture) whose keys are kept between crawls; ``(options, Redis URL)``."""
    if backend == "redis":
        redis_url = request.getfixturevalue("redis_server").url
        return ["-s", "SIMHASH_BACKEND=redis", "-s", f"SIMHASH_REDIS_URL={redis_url}", "-s", "SIMHASH_REDIS_PERSIST=1"], redis_url
    return ["-s", f"SIMHASH_DIR={tmp_path / 'state'}"], None


def recorded_urls(backend: str, tmp_path: Path, redis_url: str | None) -> list[str]:
    """Every URL the backend keeps a record of (one record per identity)."""
    if backend == "simhash_dir":
        return store_urls(tmp_path / "state" / "links.store")
    from loop_helpers import in_thread

    from simhash_scrapy.backends.redis import read_members
    from simhash_scrapy.config import RedisConfig

    members = in_thread(read_members(RedisConfig.from_settings({"SIMHASH_REDIS_URL": redis_url}), "links"))
    return [m.url for m in members]


@pytest.mark.slow  # 65 s measured (--durations, -n 2, loaded 2-core machine)
@pytest.mark.parametrize("backend", ["simhash_dir", "redis"])
def test_recurring_crawls(backend: str, serve: Any, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The same three crawls with SIMHASH_DIR and with a shared Redis (keys kept between crawls)."""
    site_pages = make_site(1)
    site = serve(site_pages)
    project = copy_project(tmp_path)
    store = tmp_path / "state" / "links.store"
    options, redis_url = backend_args(backend, tmp_path, request)
    args = ["-a", f"base={site.base}", *options]
    everything = {site.url(p) for p in site_pages if not p.startswith("/s0/copy")}
    assert len(everything) == 1 + SECTIONS + SECTIONS * ARTICLES

    # First crawl: every page is new.
    stats, log = crawl(args, project)
    assert set(reached(log)) == everything and len(reached(log)) == len(everything)
    assert stats["simhash/unique"] == len(everything)
    assert "simhash/near_duplicates" not in stats and "simhash/dropped" not in stats

    # Second crawl of the same site: as many pages, all unchanged, nothing dropped, one record per URL.
    report = tmp_path / "second.jsonl"
    stats, log = crawl([*args, "-s", f"SIMHASH_REPORT_URI={report}"], project)
    assert stats["simhash/initial"] == len(everything)
    assert sorted(reached(log)) == sorted(everything)
    assert stats["simhash/unchanged"] == len(everything)
    for absent in ("simhash/unique", "simhash/changed", "simhash/near_duplicates", "simhash/dropped"):
        assert absent not in stats, (absent, stats)
    assert read_report(report) == []  # no clusters: the start URL fetched again is not its own cluster
    assert sorted(recorded_urls(backend, tmp_path, redis_url)) == sorted(everything)

    # Third crawl: 5 pages changed, 3 near-duplicate URLs added.
    site.handler.pages.update({p: v if isinstance(v, Page) else Page(v) for p, v in make_site(2).items()})
    report = tmp_path / "third.jsonl"
    stats, log = crawl([*args, "-s", f"SIMHASH_REPORT_URI={report}"], project)
    assert stats["simhash/changed"] == len(CHANGED)
    assert stats["simhash/near_duplicates"] == len(COPIES) and stats["simhash/dropped"] == len(COPIES)
    assert stats["simhash/unchanged"] == len(everything) - len(CHANGED)
    assert "simhash/unique" not in stats
    assert sorted(reached(log)) == sorted(everything)  # the copies are dropped, nothing else
    lines = [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines() if line.strip()]
    clusters = read_report(report)
    assert sorted((c["canonical"], [m["url"] for m in c["members"]]) for c in clusters) == sorted(
        (site.url(original), [site.url(original), site.url(copy)]) for copy, original in COPIES.items()
    )
    # The report lists the changed pages too, with their old and new fingerprints.
    changes = [line for line in lines if line["type"] == "changed"]
    assert sorted(c["url"] for c in changes) == sorted(site.url(p) for p in CHANGED)
    assert all(c["previous_fingerprint"] != c["fingerprint"] and c["distance"] > 3 for c in changes)
    assert sorted(recorded_urls(backend, tmp_path, redis_url)) == sorted(everything | {site.url(c) for c in COPIES})
    if backend == "redis":
        return
    contents = read_store(store)
    assert sorted(contents.urls()) == sorted(everything | {site.url(c) for c in COPIES})
    outcomes = dict(zip(contents.urls(), contents.outcomes))
    assert sorted(u for u, o in outcomes.items() if o == "changed") == sorted(site.url(p) for p in CHANGED)
    assert sorted(u for u, o in outcomes.items() if o == "near_duplicate") == sorted(site.url(c) for c in COPIES)


@pytest.mark.slow  # 30 s measured (--durations, -n 2, loaded 2-core machine)
def test_jobdir_paused_and_resumed(serve: Any, tmp_path: Path) -> None:
    site_pages = make_site(2)  # 29 distinct pages, 5 of them with other text, and 3 copies
    site = serve(site_pages)
    project = copy_project(tmp_path)
    jobdir = tmp_path / "job"
    report = tmp_path / "report.jsonl"
    args = ["-a", f"base={site.base}", "-s", f"JOBDIR={jobdir}", "-s", f"SIMHASH_REPORT_URI={report}"]
    # Ctrl-C after 10 pages: Scrapy stops gracefully, JOBDIR keeps the queue.
    first_log = interrupt_after([*_command(), *args, "-s", "DOWNLOAD_DELAY=0.25"], project, 10)
    first = parse_stats(first_log)
    assert first["finish_reason"] == "shutdown"

    second, _ = crawl(args, project)
    assert second["finish_reason"] == "finished"
    assert second["simhash/initial"] == first["simhash/fingerprinted"]
    # The start URL is fetched again on resume (dont_filter): unchanged, not its own duplicate.
    assert second["simhash/unchanged"] == 1
    assert first["simhash/fingerprinted"] + second["simhash/fingerprinted"] == len(site_pages) + 1
    # Exactly the 3 copies are near-duplicates (of pages fetched before or after the pause).
    near = first.get("simhash/near_duplicates", 0) + second.get("simhash/near_duplicates", 0)
    assert near == len(COPIES)
    pairs = sorted(sorted(m["url"] for m in c["members"]) for c in read_report(report))
    assert pairs == sorted(sorted([site.url(o), site.url(c)]) for c, o in COPIES.items())
    urls = store_urls(jobdir / "simhash.store")
    assert sorted(urls) == sorted(site.url(p) for p in site_pages)  # one record per URL
