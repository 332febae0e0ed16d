"""``scrapy simhash compare|report|dedup``: the real commands, run in subprocesses.

Exit codes, outputs and formats against real files, a real local HTTP site,
real ``scrapy crawl`` runs of ``tests/crawl_project`` (JOBDIR, SIMHASH_DIR)
and a real redis-server.  Bad input must give one line on standard error and
never a traceback.
"""

from __future__ import annotations

import re

import csv
import gzip
import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import Page, article_html, article_words  # noqa: E402  (tests/ is on sys.path)
from simhash_scrapy.backends import PageRecord
from simhash_scrapy.backends.memory import MemoryBackend
from simhash_scrapy.core.detector import assign_canonicals
from simhash_scrapy.config import SimhashConfig
from simhash_scrapy.core.store.store import read_store

from command_helpers import (  # noqa: E402  (tests/ is on sys.path)
    assert_user_error,
    env,
    groups,
    read_jsonl,
    scrapy,
    simhash,
)

pytest_plugins = ["conftest_redis"]

PROJECT = Path(__file__).parents[1] / "crawl_project"
#: The defaults the commands run with (the tests follow them when they change).
DEFAULTS = SimhashConfig.from_settings({})
K = DEFAULTS.max_distance


def make_folder(root: Path) -> Path:
    """HTML files with known near-duplicates (sorted path order is the input order)."""
    site = root / "site"
    (site / "sub").mkdir(parents=True)
    for i in range(6):
        (site / f"a{i}.html").write_text(article_html(f"Story {i}", article_words(i)), encoding="utf-8")
    (site / "a0-copy.html").write_text(article_html("Story 0", article_words(0)), encoding="utf-8")
    edited = article_words(1)
    for position, word in zip((17, 40, 63, 86), ("banana", "mango", "kiwi", "papaya")):
        edited[position] = word  # four words edited: distance 2 (one word used once barely votes)
    (site / "a1-edit.html").write_text(article_html("Story 1", edited), encoding="utf-8")
    (site / "sub" / "a3.html").write_text(article_html("Story 3", article_words(3)), encoding="utf-8")
    (site / "thin.html").write_text("<html><body><p>Nothing here</p></body></html>", encoding="utf-8")
    (site / "notes.txt").write_text("not a page " * 50, encoding="utf-8")
    return site


EXPECTED_FOLDER_GROUPS = [["a0-copy.html", "a0.html"], ["a1-edit.html", "a1.html"], ["a3.html", "sub/a3.html"]]


# --------------------------------------------------------------- registration, help
@pytest.mark.slow  # 5 s measured (--durations, -n 2, loaded 2-core machine)
def test_registered_through_the_entry_point_in_and_out_of_a_project(tmp_path: Path) -> None:
    outside = scrapy(cwd=tmp_path)
    inside = scrapy(cwd=PROJECT, project=True)
    for proc in (outside, inside):
        assert proc.returncode == 0, proc.stderr
        assert any(line.split()[:1] == ["simhash"] for line in proc.stdout.splitlines()), proc.stdout
    assert "active project: crawl_project" in inside.stdout


@pytest.mark.slow  # 6 s measured (--durations, -n 2, loaded 2-core machine)
@pytest.mark.parametrize("command", ["compare", "report", "dedup"])
def test_each_sub_command_has_help_with_examples(tmp_path: Path, command: str) -> None:
    proc = simhash(command, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"usage: scrapy simhash {command}" in proc.stdout
    examples = proc.stdout.split("examples:", 1)[1]
    assert examples.count(f"scrapy simhash {command}") >= 3
    assert "exit codes: 0 done, 1 bad or unusable input, 2 bad usage" in proc.stdout
    # one name for each operand: the usage line says what "positional arguments" lists
    usage = proc.stdout.split("\n\n", 1)[0]
    positional = proc.stdout.split("positional arguments:", 1)[1].split("\n\n", 1)[0]
    names = re.findall(r"^  ([A-Z]+)\b", positional, re.M)
    assert names and all(name in usage for name in names), (usage, names)


@pytest.mark.slow  # 21 s measured (--durations, -n 2, loaded 2-core machine)
def test_top_level_help_and_missing_sub_command(tmp_path: Path) -> None:
    proc = simhash("-h", cwd=tmp_path)
    assert proc.returncode == 0
    for command in ("compare", "report", "dedup"):
        assert command in proc.stdout
    assert_user_error(simhash(cwd=tmp_path), 2, "", "choose a sub-command")
    assert_user_error(simhash("frobnicate", cwd=tmp_path), 2, "", "invalid choice")
    assert_user_error(simhash("dedup", str(tmp_path), "--bogus", cwd=tmp_path), 2, "dedup", "unrecognized arguments")


# ------------------------------------------------------------------- dedup
def test_assign_canonicals_decides_like_the_crawl_backend() -> None:
    """The batch all-pairs clustering equals MemoryBackend.check page by page (nearest canonical, ties: first)."""
    rng = random.Random(7)
    fps: list[int] = []
    for _ in range(60):
        base = rng.getrandbits(64)
        fps.append(base)
        for _ in range(rng.randrange(0, 6)):
            fp = base
            for bit in rng.sample(range(64), rng.randrange(0, 6)):
                fp ^= 1 << bit
            fps.append(fp)
    fps += fps[:40]  # exact repeats
    rng.shuffle(fps)
    scopes = [rng.choice("ab") for _ in fps]
    for k, blocks in ((3, None), (4, 6), (0, None)):
        config = SimhashConfig(max_distance=k, blocks=blocks)
        backend = MemoryBackend(config)
        verdicts = [backend.check_now(PageRecord(f"u{i}", fp, scope)) for i, (fp, scope) in enumerate(zip(fps, scopes))]
        scope_ids = np.array([0 if s == "a" else 1 for s in scopes])
        canonical, distance = assign_canonicals(np.array(fps, dtype=np.uint64), scope_ids, k, blocks)
        got = [(None, None) if c < 0 else (f"u{c}", int(d)) for c, d in zip(canonical.tolist(), distance.tolist())]
        assert got == [(v.canonical_url, v.distance) for v in verdicts]
        assert sum(c >= 0 for c in canonical.tolist()) > 20


@pytest.mark.slow  # 14 s measured (--durations, -n 2, loaded 2-core machine)
def test_dedup_folder_jsonl_csv_html(tmp_path: Path) -> None:
    site = make_folder(tmp_path)
    proc = simhash("dedup", str(site), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    clusters = read_jsonl(proc.stdout)
    prefix = site.resolve().as_uri() + "/"
    assert sorted(groups(clusters, prefix)) == EXPECTED_FOLDER_GROUPS
    for cluster in clusters:
        assert cluster["canonical"] == cluster["members"][0]["url"]
        assert cluster["size"] == len(cluster["members"]) == 2
        assert cluster["members"][0]["distance"] == 0
        assert all(len(m["fingerprint"]) == 16 for m in cluster["members"])
    by_first = {c["members"][0]["url"].replace(prefix, ""): c for c in clusters}
    assert by_first["a0-copy.html"]["members"][1]["distance"] == 0  # an exact copy
    assert 0 < by_first["a1-edit.html"]["members"][1]["distance"] <= K  # four words edited
    assert "10 pages read, 10 fingerprinted, 0 skipped" in proc.stderr  # the short page is compared exactly
    assert "[scrapy" not in proc.stderr  # no crawl log (Scrapy < 2.14 starts a crawler process for every command)
    assert f"dedup: 10 pages: 7 unique, 3 near-duplicates in 3 clusters (SIMHASH_MAX_DISTANCE={K}, text mode {DEFAULTS.text_mode})" in proc.stderr

    # CSV, one member per row, the same clusters; format from the file name.
    out = tmp_path / "clusters.csv"
    proc = simhash("dedup", str(site), "-o", str(out), "--base-url", "https://example.com/", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert len(rows) == 6
    assert {r["url"] for r in rows} >= {"https://example.com/a0.html", "https://example.com/sub/a3.html"}
    assert f"csv report written to {out}" in proc.stderr

    # HTML, with the texts for the diff.
    html_out = tmp_path / "clusters.html"
    proc = simhash("dedup", str(site), "-o", str(html_out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = html_out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and 'data-has-text="true"' in page
    assert '<dd data-stat="near_duplicates">3</dd>' in page and '<dd data-stat="pages">10</dd>' in page


@pytest.mark.slow  # 11 s measured (--durations, -n 2, loaded 2-core machine)
def test_dedup_settings_change_the_decision(tmp_path: Path) -> None:
    site = make_folder(tmp_path)
    strict = simhash("dedup", str(site), "-s", "SIMHASH_MAX_DISTANCE=0", cwd=tmp_path)
    assert strict.returncode == 0, strict.stderr
    prefix = site.resolve().as_uri() + "/"
    assert sorted(groups(read_jsonl(strict.stdout), prefix)) == [["a0-copy.html", "a0.html"], ["a3.html", "sub/a3.html"]]
    assert "SIMHASH_MAX_DISTANCE=0" in strict.stderr
    # Settings given before the sub-command work too.
    before = simhash("-s", "SIMHASH_MAX_DISTANCE=0", "dedup", str(site), cwd=tmp_path)
    assert read_jsonl(before.stdout) == read_jsonl(strict.stdout)  # the summary lines differ by their time


@pytest.mark.slow  # 20 s measured (--durations, -n 2, loaded 2-core machine)
def test_dedup_with_worker_processes_and_progress(tmp_path: Path) -> None:
    site = make_folder(tmp_path)
    one = simhash("dedup", str(site), "-j", "1", cwd=tmp_path)
    two = simhash("dedup", str(site), "-j", "2", "--progress", cwd=tmp_path)
    assert one.returncode == two.returncode == 0, two.stderr
    assert read_jsonl(one.stdout) == read_jsonl(two.stdout)  # the summary lines differ by their time
    assert "with 2 processes" in two.stderr
    assert "fingerprinting [########################] 100.0% 10/10 pages" in two.stderr
    assert "[#" not in one.stderr  # no progress bar when standard error is not a terminal


@pytest.mark.slow  # 12 s measured (--durations, -n 2, loaded 2-core machine)
def test_dedup_json_lines_items(tmp_path: Path) -> None:
    items = []
    for i in range(5):
        items.append({"url": f"https://news.example/{i}", "body": article_html(f"Story {i}", article_words(50 + i))})
    edited = article_words(51)
    edited[3] = "banana"
    items.append({"url": "https://news.example/1?utm=x", "body": article_html("Story 1", edited)})
    # Two items scraped from one page share its URL.
    items.append({"url": "https://news.example/2", "body": article_html("Story 2", article_words(52))})
    lines = [json.dumps(item) for item in items]
    lines.insert(2, "{not json")
    lines.append(json.dumps({"url": "https://news.example/none", "title": "no body"}))
    feed = tmp_path / "items.jsonl"
    feed.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = simhash("dedup", str(feed), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "field 'body'" in proc.stderr and "9 pages read" in proc.stderr
    assert "(bad_json: 1, no_field: 1)" in proc.stderr
    assert sorted(groups(read_jsonl(proc.stdout))) == [
        ["https://news.example/1", "https://news.example/1?utm=x"],
        ["https://news.example/2", "https://news.example/2#item-2"],
    ]

    # Items keep their item scope, as in the crawl's item pipeline: SIMHASH_DISTINCT_SELECTORS is for pages
    # (found in review: dedup split these two items by their price, the pipeline would not).
    lamp = " ".join(article_words(9, 120))
    priced = [{"url": f"https://shop.example/lamp-{i}", "html": f"<main><h1>Lamp</h1><p class='price'>{price}</p><p>{lamp}</p></main>"}
              for i, price in enumerate(("10.00", "12.00"))]
    shop_feed = tmp_path / "priced.jsonl"
    shop_feed.write_text("".join(json.dumps(item) + "\n" for item in priced), encoding="utf-8")
    proc = simhash("dedup", str(shop_feed), "-s", "SIMHASH_DISTINCT_SELECTORS=.price", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(groups(read_jsonl(proc.stdout))) == [["https://shop.example/lamp-0", "https://shop.example/lamp-1"]]

    # Plain text in another field, gzipped.
    texts = tmp_path / "texts.jl.gz"
    with gzip.open(texts, "wt", encoding="utf-8") as handle:
        for i, words in enumerate([article_words(1), article_words(2), article_words(1)]):
            handle.write(json.dumps({"link": f"u{i}", "text": " ".join(words)}) + "\n")
    proc = simhash(
        "dedup", str(texts), "--field", "text", "--field-format", "text", "--url-field", "link", "--format", "csv",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [(r["url"], r["distance"]) for r in rows] == [("u0", "0"), ("u2", "0")]


@pytest.mark.slow  # 21 s measured (--durations, -n 2, loaded 2-core machine)
def test_dedup_bad_input_is_one_line_and_an_exit_code(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_user_error(simhash("dedup", str(tmp_path / "missing"), cwd=tmp_path), 1, "dedup", "no such file or folder")
    assert_user_error(simhash("dedup", str(empty), cwd=tmp_path), 1, "dedup", "no HTML files")
    assert_user_error(simhash("dedup", cwd=tmp_path), 2, "dedup", "needs an INPUT")
    feed = tmp_path / "items.jsonl"
    feed.write_text(json.dumps({"url": "u", "title": "t"}) + "\n", encoding="utf-8")
    assert_user_error(simhash("dedup", str(feed), cwd=tmp_path), 1, "dedup", "none of the fields html, body, text")
    assert_user_error(
        simhash("dedup", str(feed), "--field", "depth", cwd=tmp_path), 1, "dedup", "could be fingerprinted"
    )
    csv_feed = tmp_path / "items.csv"
    csv_feed.write_text("url,body\n", encoding="utf-8")
    assert_user_error(simhash("dedup", str(csv_feed), cwd=tmp_path), 1, "dedup", "JSON Lines")
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"\x00\x01binary")
    assert_user_error(simhash("dedup", str(garbage), cwd=tmp_path), 1, "dedup", "neither JSON Lines")
    site = make_folder(tmp_path)
    assert_user_error(
        simhash("dedup", str(site), "-s", "SIMHASH_MAX_DISTANCE=99", cwd=tmp_path), 2, "dedup", "SIMHASH_MAX_DISTANCE"
    )
    assert_user_error(simhash("dedup", str(site), "-j", "0", cwd=tmp_path), 2, "dedup", "--jobs")
    # Found in review: a malformed --base-url was a traceback; its password is not shown.
    broken = simhash("dedup", str(site), "--base-url", "https://bob:s3cret@[::1/shop", cwd=tmp_path)
    assert_user_error(broken, 2, "dedup", "--base-url")
    assert "s3cret" not in broken.stderr + broken.stdout
    assert_user_error(simhash("dedup", str(site), "--base-url", "shop/pages", cwd=tmp_path), 2, "dedup", "--base-url")
    assert_user_error(simhash("dedup", str(site), "-o", str(empty), cwd=tmp_path), 1, "dedup", "is a folder")
    assert_user_error(simhash("dedup", str(site), "--format", "pdf", cwd=tmp_path), 2, "dedup", "invalid choice")


# ------------------------------------------------------------------ compare
def _compare_pages(tmp_path: Path) -> tuple[Path, Path, Path]:
    words = article_words(5, 300)
    a = tmp_path / "a.html"
    a.write_text(article_html("Harbour news", words, extra="Filed on Monday by the harbour desk."), encoding="utf-8")
    edited = list(words)
    edited[100:103] = ["zeppelin", "zeppelin", "zeppelin"]
    b = tmp_path / "b.html"
    b.write_text(article_html("Harbour news", edited, extra="Filed on Tuesday by the harbour desk."), encoding="utf-8")
    c = tmp_path / "c.html"
    c.write_text(article_html("Other story", article_words(6, 300)), encoding="utf-8")
    return a, b, c


@pytest.mark.slow  # 5 s measured (--durations, -n 2, loaded 2-core machine)
def test_compare_files_text_and_json(tmp_path: Path) -> None:
    a, b, c = _compare_pages(tmp_path)
    proc = simhash("compare", str(a), str(b), str(c), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    d = result["distances"]
    assert [d[i][i] for i in range(3)] == [0, 0, 0]
    assert all(d[i][j] == d[j][i] for i in range(3) for j in range(3))
    assert result["similarities"][0][1] == pytest.approx(1 - d[0][1] / 64)
    fps = [int(p["fingerprint"], 16) for p in result["pages"]]
    assert d[0][2] == (fps[0] ^ fps[2]).bit_count() > 3
    assert result["settings"]["SIMHASH_TEXT_MODE"] == DEFAULTS.text_mode
    assert result["settings"]["SIMHASH_MAX_DISTANCE"] == K
    assert result["decisions"][0] == {"page": 1, "decision": "unique"}
    assert result["decisions"][2]["decision"] == "unique"
    pair = result["pairs"][0]
    assert (pair["a"], pair["b"], pair["distance"]) == (1, 2, d[0][1])
    assert any("Monday" in line for line in pair["removed"]) and any("Tuesday" in line for line in pair["added"])
    assert any("zeppelin" in line for line in pair["added"])
    if d[0][1] <= K:
        assert result["decisions"][1] == {
            "page": 2, "decision": "near-duplicate", "canonical": 1, "distance": d[0][1], "rule": "simhash",
            "max_distance": K, "one_edit": False, "action": "drop",
        }  # fmt: skip
    if pair["distance"]:
        labels = [f["label"] for f in pair["features"]]
        assert "zeppelin" in labels  # the new word pushed the flipped bits
        assert all(f["push"] > 0 and f["bits"] for f in pair["features"])
        assert set(pair["differing_bits"]) >= set(pair["features"][0]["bits"])
    far = result["pairs"][1]  # page 3 is unique: explained against the nearer of pages 1 and 2
    assert far["b"] == 3 and d[far["a"] - 1][2] == min(d[0][2], d[1][2])
    assert far["features"] and len(far["differing_bits"]) == d[far["a"] - 1][2]

    text = simhash("compare", str(a), str(b), str(c), cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "distance d (similarity 1 - d/64)" in text.stdout
    assert f"{fps[0]:016x}" in text.stdout
    assert "3  unique: becomes a canonical page" in text.stdout
    assert "features weighing most in the differing bits" in text.stdout
    assert "+Filed on Tuesday by the harbour desk." in text.stdout


@pytest.mark.slow  # 2.5 s measured (--durations, serial, load 4 on 2 cores): two scrapy processes
def test_compare_says_which_text_it_compared(tmp_path: Path) -> None:
    """Pages whose dates differ outside the article: in main-content mode compare says it compared the
    extracted article, not "the visible texts" (which differ)."""
    words = article_words(9, 300)
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    page = article_html("Harbour news", words)
    a.write_text(page.replace("</body>", "<footer><p>Page generated 2026-05-01 10:00</p></footer></body>"), encoding="utf-8")
    b.write_text(page.replace("</body>", "<footer><p>Page generated 2026-05-02 17:31</p></footer></body>"), encoding="utf-8")
    main = simhash("compare", str(a), str(b), cwd=tmp_path)
    assert main.returncode == 0, main.stderr
    assert "the main-content texts (SIMHASH_TEXT_MODE=main" in main.stdout and "are identical" in main.stdout
    assert "the visible texts are identical" not in main.stdout
    visible = simhash("compare", str(a), str(b), "-s", "SIMHASH_TEXT_MODE=visible", cwd=tmp_path)
    assert "text that differs (1 line only in page 1, 1 line only in page 2" in visible.stdout  # the dates


@pytest.mark.slow  # 3 s measured (--durations, -n 2, loaded 2-core machine)
def test_compare_uses_the_project_settings(tmp_path: Path) -> None:
    """The navigation differs: invisible to main-content mode, visible to visible-text mode."""
    words = article_words(9, 120)
    a = tmp_path / "a.html"
    b = tmp_path / "b.html"
    a.write_text(article_html("Story", words, links=[f"/menu-{i}" for i in range(40)]), encoding="utf-8")
    b.write_text(article_html("Story", words, links=[f"/other-{i}" for i in range(40)]), encoding="utf-8")
    main = json.loads(simhash("compare", str(a), str(b), "--json", "-s", "SIMHASH_TEXT_MODE=main", cwd=tmp_path).stdout)
    visible = json.loads(
        simhash("compare", str(a), str(b), "--json", "-s", "SIMHASH_TEXT_MODE=visible", cwd=tmp_path).stdout
    )
    assert main["distances"][0][1] == 0
    assert visible["settings"]["SIMHASH_TEXT_MODE"] == "visible"
    assert visible["distances"][0][1] > 0


@pytest.mark.slow  # 27 s measured (--durations, -n 2, loaded 2-core machine)
def test_compare_urls_show_what_the_crawl_decides(serve: Any, tmp_path: Path) -> None:
    """compare's fingerprints are the ones a real 'scrapy crawl' stores for the same URLs."""
    words = article_words(21)
    edited = list(words)
    edited[10] = "banana"
    site = serve(
        {
            "/a": article_html("Story", words),
            "/b": article_html("Story", edited),
            "/thin": "<html><body><p>tiny</p></body></html>",
            "/json": Page('{"a": 1}', content_type="application/json"),
        }
    )
    job = tmp_path / "job"
    crawl = scrapy(
        "crawl", "pages", "-a", f"base={site.base}", "-a", "paths=/a,/b", "-s", f"JOBDIR={job}",
        cwd=PROJECT, project=True,
    )  # fmt: skip
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    stored = read_store(job / "simhash.store")
    crawled = dict(zip(stored.urls(), (f"{int(fp):016x}" for fp in stored.fingerprints)))

    proc = simhash("compare", site.url("/a"), site.url("/b"), "--json", cwd=PROJECT, project=True)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert [p["fingerprint"] for p in result["pages"]] == [crawled[site.url("/a")], crawled[site.url("/b")]]
    assert result["decisions"][1]["decision"] == ("near-duplicate" if stored.canonical[1] == 0 else "unique")
    assert site.hits.count("/b") == 2  # fetched once by the crawl, once by compare: never dropped

    proc = simhash("compare", site.url("/a"), site.url("/missing"), site.url("/thin"), site.url("/json"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[HTTP 404]" in proc.stdout and "HTTP status not in SIMHASH_HTTP_STATUSES" in proc.stdout
    assert "short page: fewer tokens than SIMHASH_MIN_TOKENS, compared by exact text" in proc.stdout
    assert "Content-Type not in SIMHASH_CONTENT_TYPES" in proc.stdout
    assert "Crawled (200)" not in proc.stderr and "[scrapy" not in proc.stderr  # the fetch log stays quiet


@pytest.mark.slow  # 39 s measured (--durations, -n 2, loaded 2-core machine)
def test_compare_bad_input(tmp_path: Path) -> None:
    a, b, _ = _compare_pages(tmp_path)
    assert_user_error(simhash("compare", str(a), cwd=tmp_path), 2, "compare", "at least two pages")
    assert_user_error(simhash("compare", str(a), str(tmp_path / "nope.html"), cwd=tmp_path), 1, "compare", "no such file")
    assert_user_error(simhash("compare", str(a), "example.com/page", cwd=tmp_path), 1, "compare", "http://")
    assert_user_error(simhash("compare", str(a), str(tmp_path), cwd=tmp_path), 1, "compare", "is a folder")
    assert_user_error(simhash("compare", str(a), "ftp://example.com/x", cwd=tmp_path), 2, "compare", "not ftp")
    assert_user_error(
        simhash("compare", str(a), "http://127.0.0.1:9/unreachable", cwd=tmp_path), 1, "compare", "cannot fetch"
    )
    assert_user_error(
        simhash("compare", str(a), str(b), "-s", "SIMHASH_TEXT_MODE=everything", cwd=tmp_path),
        2, "compare", "SIMHASH_TEXT_MODE",
    )  # fmt: skip


# ------------------------------------------------------------------- report
def _crawl_site(serve: Any) -> tuple[Any, str]:
    pages = {}
    for i in range(4):
        words = article_words(300 + i)
        pages[f"/a{i}"] = article_html(f"Story {i}", words)
        edited = list(words)
        edited[17] = "banana"
        pages[f"/b{i}"] = article_html(f"Story {i}", edited, template="b")
        pages[f"/c{i}"] = article_html(f"Story {i}", words)
    site = serve(pages)
    return site, "paths=" + ",".join(f"/{x}{i}" for i in range(4) for x in "abc")


@pytest.mark.slow  # 44 s measured (--durations, -n 2, loaded 2-core machine)
def test_report_from_a_jobdir_store_equals_the_crawls_report(serve: Any, tmp_path: Path) -> None:
    site, paths = _crawl_site(serve)
    job = tmp_path / "job"
    crawl_report = tmp_path / "crawl.jsonl"
    crawl = scrapy(
        "crawl", "pages", "-a", f"base={site.base}", "-a", paths, "-s", f"JOBDIR={job}",
        "-s", f"SIMHASH_REPORT_URI={crawl_report}", cwd=PROJECT, project=True,
    )  # fmt: skip
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    expected = read_jsonl(crawl_report.read_text(encoding="utf-8"))
    assert len(expected) >= 4 and all(c["size"] >= 2 for c in expected)

    # Outside the project: the JOBDIR folder, or the store file itself.
    for source in (job, job / "simhash.store"):
        proc = simhash("report", str(source), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert read_jsonl(proc.stdout) == expected
    assert "12 pages" in proc.stderr and f"{len(expected)} clusters" in proc.stderr

    # Inside the project, the store named by the settings; CSV and HTML.
    out = tmp_path / "out.csv"
    proc = simhash("report", "-s", f"JOBDIR={job}", "-o", str(out), cwd=PROJECT, project=True)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert len(rows) == sum(c["size"] for c in expected)
    assert [r["url"] for r in rows] == [m["url"] for c in expected for m in c["members"]]
    # The tools work in a project that turned the plugin off (SIMHASH_ENABLED = False): it was NotConfigured.
    proc = simhash("report", "-s", f"JOBDIR={job}", "-s", "SIMHASH_ENABLED=False", cwd=PROJECT, project=True)
    assert proc.returncode == 0, proc.stderr
    assert read_jsonl(proc.stdout) == expected
    html_out = tmp_path / "out.html"
    proc = simhash("report", str(job), "--format", "html", "-o", str(html_out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = html_out.read_text(encoding="utf-8")
    assert f'<dd data-stat="clusters">{len(expected)}</dd>' in page and '<dd data-stat="pages">12</dd>' in page


@pytest.mark.slow  # 11 s measured (--durations, -n 2, loaded 2-core machine)
def test_report_from_simhash_dir_by_spider(serve: Any, tmp_path: Path) -> None:
    site, paths = _crawl_site(serve)
    state = tmp_path / "state"
    crawl = scrapy(
        "crawl", "pages", "-a", f"base={site.base}", "-a", paths, "-s", f"SIMHASH_DIR={state}",
        cwd=PROJECT, project=True,
    )  # fmt: skip
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    (state / "other.store").write_bytes((state / "pages.store").read_bytes())
    assert_user_error(simhash("report", str(state), cwd=tmp_path), 1, "report", "holds 2 stores")
    by_folder = simhash("report", str(state), "--spider", "pages", cwd=tmp_path)
    by_settings = simhash("report", "--spider", "pages", "-s", f"SIMHASH_DIR={state}", cwd=PROJECT, project=True)
    assert by_folder.returncode == by_settings.returncode == 0, by_settings.stderr
    assert read_jsonl(by_folder.stdout) == read_jsonl(by_settings.stdout) and len(read_jsonl(by_folder.stdout)) >= 4
    assert_user_error(
        simhash("report", "-s", f"SIMHASH_DIR={state}", cwd=PROJECT, project=True), 2, "report", "--spider"
    )


@pytest.mark.slow  # 59 s measured (--durations, -n 2, loaded 2-core machine)
def test_report_from_redis(serve: Any, tmp_path: Path, redis_server: Any) -> None:
    site, paths = _crawl_site(serve)
    crawl_report = tmp_path / "crawl.jsonl"
    crawl = scrapy(
        "crawl", "pages", "-a", f"base={site.base}", "-a", paths, "-s", "SIMHASH_BACKEND=redis",
        "-s", f"SIMHASH_REDIS_URL={redis_server.url}", "-s", "SIMHASH_REDIS_PERSIST=True",
        "-s", f"SIMHASH_REPORT_URI={crawl_report}", cwd=PROJECT, project=True,
    )  # fmt: skip
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    expected = read_jsonl(crawl_report.read_text(encoding="utf-8"))
    proc = simhash("report", "--redis", redis_server.url, "--key", "pages:simhash", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert read_jsonl(proc.stdout) == expected
    by_spider = simhash(
        "report", "--redis", "--spider", "pages", "-s", f"REDIS_URL={redis_server.url}", cwd=PROJECT, project=True
    )
    assert by_spider.returncode == 0, by_spider.stderr
    assert read_jsonl(by_spider.stdout) == expected
    # Reading is read-only: the key is still there.
    again = simhash("report", "--redis", redis_server.url, "--key", "pages:simhash", cwd=tmp_path)
    assert read_jsonl(again.stdout) == read_jsonl(proc.stdout)
    # The rows name the rule with the k the key was written with, whatever k these settings give.
    assert expected and {c["max_distance"] for c in expected} == {K} != {K - 1}
    other_k = simhash("report", "--redis", redis_server.url, "--key", "pages:simhash", "-s", f"SIMHASH_MAX_DISTANCE={K - 1}",
                      cwd=tmp_path)  # fmt: skip
    assert read_jsonl(other_k.stdout) == expected
    assert_user_error(
        simhash("report", "--redis", redis_server.url, "--key", "nothing:here", cwd=tmp_path), 1, "report", "no simhash data"
    )


@pytest.mark.slow  # 35 s measured (--durations, -n 2, loaded 2-core machine)
def test_report_bad_input(tmp_path: Path) -> None:
    not_store = tmp_path / "file.store"
    not_store.write_bytes(b"hello")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_user_error(simhash("report", str(tmp_path / "missing"), cwd=tmp_path), 1, "report", "no such file")
    assert_user_error(simhash("report", str(empty), cwd=tmp_path), 1, "report", "no simhash store")
    assert_user_error(simhash("report", str(not_store), cwd=tmp_path), 1, "report", "not a simhash store")
    assert_user_error(simhash("report", cwd=tmp_path), 2, "report", "needs a STORE")
    assert_user_error(simhash("report", "--redis", "redis://127.0.0.1:9/0", cwd=tmp_path), 2, "report", "--key")
    assert_user_error(
        simhash("report", "--redis", "redis://127.0.0.1:9/0", "--key", "k", cwd=tmp_path), 1, "report", "Redis"
    )
    assert_user_error(
        simhash("report", str(empty), "--redis", "redis://127.0.0.1:9/0", cwd=tmp_path), 2, "report", "not both"
    )


@pytest.mark.slow  # 14 s measured (--durations, -n 2, loaded 2-core machine)
def test_dedup_ctrl_c_stops_workers_without_a_traceback(tmp_path: Path) -> None:
    import signal

    feed = tmp_path / "items.jsonl"
    # 20,000 pages (the workers are still busy when Ctrl-C comes), from 500 texts built once: a
    # page costs the test a string replace instead of a new text.
    texts = [article_html("Story NUMBER", article_words(seed)) for seed in range(500)]
    with open(feed, "w", encoding="utf-8") as handle:
        for i in range(20_000):
            handle.write(json.dumps({"url": f"u{i}", "html": texts[i % 500].replace("NUMBER", str(i))}) + "\n")
    with subprocess.Popen(
        [sys.executable, "-m", "scrapy.cmdline", "simhash", "dedup", str(feed), "-j", "2", "--progress", "-o", "out.jsonl"],
        cwd=tmp_path, env=env(), stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as in a terminal
    ) as proc:  # fmt: skip
        assert proc.stderr is not None
        first = proc.stderr.readline()  # the first progress line: workers are running
        assert first.startswith("fingerprinting ["), first
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group
        rest = proc.stderr.read()
        assert proc.wait(timeout=120) == 130
    assert "scrapy simhash dedup: error: interrupted" in rest
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest
    assert not (tmp_path / "out.jsonl").exists()


def test_report_lists_the_changed_pages_of_its_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The output part of `report`: a source's members with outcomes -> clusters, changed pages, one summary line.

    The members come from a real MemoryBackend (the reference backend) that saw a re-crawl; only the
    reading of the source is replaced (the stores and Redis are tested above).
    """
    import argparse

    from simhash_scrapy.commands import report as report_command

    backend = MemoryBackend(SimhashConfig(max_distance=3))
    first = {"a": 0x0F0F_0F0F_0F0F_0F0F, "b": 0x1234_5678_9ABC_DEF0, "c": 0x5555_0000_FFFF_AAAA}
    for url, fp in first.items():
        backend.check_now(PageRecord(f"https://x/{url}", fp, "s"))
    backend.check_now(PageRecord("https://x/a?copy", first["a"] ^ 1, "s"))  # a near-duplicate of /a
    backend.check_now(PageRecord("https://x/a", first["a"], "s"))  # re-crawl: unchanged
    backend.check_now(PageRecord("https://x/b", first["b"] ^ 0xFF, "s"))  # changed: 8 bits
    members = backend._members  # noqa: SLF001 - what members() returns, without an event loop
    monkeypatch.setattr(report_command, "_from_redis", lambda *args: (list(members), {"source": "a test backend"}))
    out = tmp_path / "r.csv"
    opts = argparse.Namespace(format=None, output=str(out), input=None, redis="redis://unused", key="k", spider=None, no_texts=False)
    assert report_command.run_report(opts, settings=None) == 0
    line = capsys.readouterr().err
    assert line == (
        "report: a test backend has 4 pages: 3 unique, 1 near-duplicate in 1 cluster; since the last crawl: "
        f"1 changed, 1 unchanged; csv written to {out} (changed pages: {tmp_path / 'r.changed.csv'})\n"
    )
    with (tmp_path / "r.changed.csv").open(newline="", encoding="utf-8") as fh:
        assert list(csv.DictReader(fh)) == [
            {"scope": "s", "url": "https://x/b", "previous_fingerprint": "123456789abcdef0", "fingerprint": "123456789abcde0f", "distance": "8"}
        ]
    # To standard output, JSON Lines carries both kinds of lines.
    opts.output, opts.format = None, "jsonl"
    assert report_command.run_report(opts, settings=None) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines.pop()["type"] == "summary"
    assert [(r["type"], r.get("url") or r["canonical"]) for r in lines] == [("cluster", "https://x/a"), ("changed", "https://x/b")]
