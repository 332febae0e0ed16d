"""No password of a page URL reaches a report, a log line, a stat or a command's output.

A real local site reached through ``http://bob:<secret>@127.0.0.1:PORT/`` (Scrapy's default HTTP/1.1
handler refuses a URL with user information, "invalid hostname"; its aiohttp handler takes it and sends
it as basic auth, the URL kept as it is in ``response.url``), crawled twice by real ``scrapy crawl``
runs with a store (the second crawl finds a changed page: the changes lists), each report format; then
``scrapy simhash report`` (clusters and ``--changes``), ``dedup`` (a feed whose item URLs carry the
password, a folder with ``--base-url``) and ``compare``.  The secret appears nowhere; its masked form
(``core.redact``: the user name kept, ``bob:***@``) does, so the URLs are still written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from command_helpers import read_jsonl, simhash  # noqa: E402  (tests/ is on sys.path)
from conftest import Page, article_html, article_words  # noqa: E402
from crawl_helpers import make_site, run_crawl_cli  # noqa: E402

SECRET = "s3cr3t-pw"
MASKED = "bob:***@"
AIOHTTP = '{"http": "scrapy.core.downloader.handlers._aiohttp.AiohttpDownloadHandler"}'
PATHS = "/a0,/b0,/a1,/b1,/a2"


def _plugin_log(log: str) -> str:
    """The crawl log but the test spider's own lines (it logs each URL it is given: not the plugin's)."""
    return "\n".join(line for line in log.splitlines() if "Reached the spider:" not in line)


def _files(folder: Path) -> dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(folder.iterdir()) if path.is_file()}


@pytest.mark.slow  # two real crawls and three commands a format
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "html"])
def test_a_crawl_through_a_url_with_a_password_writes_it_nowhere(serve: Any, tmp_path: Path, fmt: str) -> None:
    # (Scrapy's aiohttp handler is new in recent releases: an older Scrapy has no handler that takes the URL)
    pytest.importorskip("scrapy.core.downloader.handlers._aiohttp", reason="this Scrapy has no aiohttp handler")
    site = serve(make_site(3))
    base = site.base.replace("http://", f"http://bob:{SECRET}@")
    reports = tmp_path / "reports"
    store = tmp_path / "store"
    args = [
        "-a", f"base={base}", "-a", f"paths={PATHS}", "-s", f"DOWNLOAD_HANDLERS={AIOHTTP}",
        "-s", f"SIMHASH_REPORT_URI={reports}/clusters.{fmt}", "-s", f"SIMHASH_DIR={store}",
        "-s", "SIMHASH_DEBUG=True", "-s", "SIMHASH_LOG_LEVEL=INFO",  # every near-duplicate logged, with its URLs
    ]  # fmt: skip
    stats, log = run_crawl_cli(args)
    assert stats["simhash/near_duplicates"] == 2 and stats["simhash/clusters"] == 2
    # The pages reached the spider with the password in their URL: the crawl really went through it.
    assert f"Reached the spider: {base}/a0" in log
    assert SECRET not in _plugin_log(log)  # the plugin's lines and the stats dump
    assert MASKED in _plugin_log(log)  # the near-duplicate lines name the pages, masked

    # The second crawl: /a1 changed (the "changed" lists of every format).
    site.handler.pages["/a1"] = Page(article_html("Story 1", article_words(4242)))
    stats, again = run_crawl_cli(args)
    assert stats["simhash/changed"] == 1
    assert SECRET not in _plugin_log(again)
    written = _files(reports)
    assert f"clusters.{fmt}" in written
    if fmt == "csv":
        assert {"clusters.changed.csv", "clusters.changes.csv"} <= set(written)
    for name, text in written.items():
        assert SECRET not in text, name
        assert MASKED in text, name

    # The store keeps the real URLs (they key the pages): the report command masks them as the crawl does.
    out = tmp_path / f"report.{fmt}"
    proc = simhash("report", str(store), "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stderr
    for name, text in _files(tmp_path).items():
        assert SECRET not in text, name
    assert MASKED in out.read_text(encoding="utf-8")
    if fmt != "html":
        changes = simhash("report", str(store), "--changes", "--format", fmt, cwd=tmp_path)
        assert changes.returncode == 0, changes.stderr
        assert "changed" in changes.stdout and MASKED in changes.stdout
        assert SECRET not in changes.stdout + changes.stderr


@pytest.mark.slow  # five commands
def test_dedup_and_compare_write_no_password(serve: Any, tmp_path: Path) -> None:
    # A feed whose item URLs carry a password: two items are copies.
    story = article_html("Story", article_words(77))
    items = [
        {"url": f"https://bob:{SECRET}@shop.example/p1", "html": story},
        {"url": f"https://bob:{SECRET}@shop.example/p2", "html": story.replace("<main>", "<main class='x'>")},
        {"url": f"https://bob:{SECRET}@shop.example/p3", "html": article_html("Other", article_words(78))},
    ]
    feed = tmp_path / "items.jsonl"
    feed.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    proc = simhash("dedup", str(feed), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    clusters = read_jsonl(proc.stdout)
    assert [m["url"] for m in clusters[0]["members"]] == [
        "https://bob:***@shop.example/p1", "https://bob:***@shop.example/p2",
    ]  # fmt: skip
    assert SECRET not in proc.stdout + proc.stderr
    for fmt in ("csv", "html"):
        out = tmp_path / f"feed.{fmt}"
        proc = simhash("dedup", str(feed), "-o", str(out), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        text = out.read_text(encoding="utf-8")
        assert SECRET not in text + proc.stderr and "bob:***@shop.example/p2" in text

    # A folder of files, their URLs built on a --base-url with a password.
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "a.html").write_text(story, encoding="utf-8")
    (folder / "b.html").write_text(story, encoding="utf-8")
    proc = simhash("dedup", str(folder), "--base-url", f"https://bob:{SECRET}@docs.example/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "https://bob:***@docs.example/b.html" in proc.stdout
    assert SECRET not in proc.stdout + proc.stderr

    # compare: a fetch that fails says so with the URL masked (Scrapy's default handler refuses a URL with user
    # information, its message naming it without a scheme).  (compare's own crawler cannot load the aiohttp
    # handler: it is made before the event loop runs, "no running event loop".)
    site = serve({"/a": story, "/b": story})
    base = site.base.replace("http://", f"http://bob:{SECRET}@")
    proc = simhash("compare", f"{base}/a", f"{base}/b", cwd=tmp_path)
    assert proc.returncode == 1 and f"cannot fetch http://{MASKED}127.0.0.1" in proc.stderr, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
