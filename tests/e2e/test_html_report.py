"""The HTML cluster report: self-contained, correct numbers, usable with 10,000 clusters, in a real browser.

The browser tests drive Debian's ``chromium`` headless over the DevTools
protocol (``tests/chromium_cdp.py``, no extra package).  Without chromium they
skip with the install hint, except with ``CI=true``, where they fail.
Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import random
import re
import subprocess
import sys
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chromium_cdp import INSTALL_HINT, Chromium, find_chromium  # noqa: E402  (tests/ is on sys.path)
from conftest import article_html, article_words  # noqa: E402
from simhash_scrapy.config import SimhashConfig
from simhash_scrapy.core.cluster.clustering import Rule
from simhash_scrapy.core.report.html_report import render_html, report_numbers

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def cluster(cid: int, urls: list[str], distances: list[int], texts: list[str] | None = None) -> dict[str, Any]:
    members = []
    for i, (url, d) in enumerate(zip(urls, distances)):
        member: dict[str, Any] = {
            "url": url, "fingerprint": f"{cid * 1000 + i:016x}", "distance": d,
            "referer": None if i == 0 else urls[0], "depth": i,
        }  # fmt: skip
        if texts is not None:
            member["text"] = texts[i]
        members.append(member)
    return {"cluster_id": cid, "canonical": urls[0], "size": len(urls), "members": members}


def text_chunks(page: str) -> list[list[str]]:
    found = re.findall(r'<script type="text/plain" id="simhash-text-(\d+)">([^<]*)</script>', page)
    return [json.loads(zlib.decompress(base64.b64decode(data))) for _, data in sorted(found, key=lambda f: int(f[0]))]


def embedded_data(page: str) -> dict[str, Any]:
    raw = re.search(r'<script type="application/json" id="simhash-data">(.*?)</script>', page, re.DOTALL)
    assert raw is not None
    return json.loads(raw.group(1))


# ------------------------------------------------------------------ the document
def test_self_contained_and_escaped() -> None:
    evil = "https://x.example/</script><script>alert(1)</script>?q=<!--"
    clusters = [
        cluster(1, ["https://a.example/1", evil], [0, 2], ["line one\nline two", "line one\nline 2 <b>"]),
        cluster(2, ["javascript:alert(2)", "https://a.example/2"], [0, 1]),
    ]
    page = render_html(clusters, {"title": "Crawl <b>of</b> today", "source": "job & co"})
    # Nothing is loaded from elsewhere: no src/href attribute in the markup, no CSS url() or @import.
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page, re.IGNORECASE)
    assert "@import" not in page and "url(" not in page
    # Every script element is one of ours: the data, one text chunk, the code.
    assert page.count("<script") == 3 and page.count("</script>") == 3
    assert "<title>Crawl &lt;b&gt;of&lt;/b&gt; today</title>" in page and "job &amp; co" in page
    data = embedded_data(page)
    assert data["clusters"][0][3][1][0] == evil  # the URL survives the escaping unchanged
    # Links are made only for http(s) URLs (checked in the script; a file: URL is text).
    assert "/^https?:/i.test(url)" in page


def test_markup_style_and_script_are_package_files() -> None:
    """The page is filled from templates/report.html, .css and .js, all of it (no placeholder left)."""
    folder = Path(render_html.__code__.co_filename).parent / "templates"
    page = render_html([cluster(1, ["u1", "u2"], [0, 1])], {"pages": 2})
    script = (folder / "report.js").read_text(encoding="utf-8")
    style = (folder / "report.css").read_text(encoding="utf-8")
    assert f"<script>{script}</script>" in page and f"<style>{style}</style>" in page
    assert "</script" not in script.lower() and "</style" not in style.lower()
    assert "${" not in page


def test_the_templates_ship_in_the_package() -> None:
    """pyproject's package-data covers every template file (a wheel without them could not write HTML)."""
    import fnmatch

    tomllib = pytest.importorskip("tomllib")
    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]["simhash_scrapy"]
    templates = [p.relative_to(root / "simhash_scrapy").as_posix() for p in (root / "simhash_scrapy/core/report/templates").iterdir()]
    assert sorted(templates) == ["core/report/templates/report.css", "core/report/templates/report.html", "core/report/templates/report.js"]
    assert all(any(fnmatch.fnmatch(t, pattern) for pattern in patterns) for t in templates)


def test_numbers_and_histogram() -> None:
    clusters = [
        cluster(1, ["u1", "u2", "u3"], [0, 1, 3]),
        cluster(2, ["u4", "u5"], [0, 1]),
        cluster(3, ["u6", "u7", "u8", "u9"], [0, 0, 2, 1]),
    ]
    numbers = report_numbers(clusters, {"pages": 20})
    assert numbers == {
        "pages": 20, "unique": 14, "near_duplicates": 6, "clusters": 3, "largest": 4,
        "pages_in_clusters": 9, "histogram": {0: 1, 1: 3, 2: 1, 3: 1},
    }  # fmt: skip
    page = render_html(clusters, {"pages": 20, "max_distance": 3})
    for key, value in (("pages", 20), ("unique", 14), ("near_duplicates", 6), ("clusters", 3), ("largest", 4)):
        assert f'<dd data-stat="{key}">{value}</dd>' in page
    assert '<dd data-stat="max_distance">3</dd>' in page
    assert re.findall(r'<tr data-distance="(\d+)"><th>\d+</th><td class="count">(\d+)</td>', page) == [
        ("0", "1"), ("1", "3"), ("2", "1"), ("3", "1"),
    ]  # fmt: skip
    # Clusters are embedded largest first; without "pages" the pages in clusters are counted.
    assert [c[0] for c in embedded_data(page)["clusters"]] == [3, 1, 2]
    assert report_numbers(clusters)["pages"] == 9
    assert 'data-has-text="false"' in page and "without page texts" in page
    empty = render_html([], {"pages": 5})
    assert '<dd data-stat="clusters">0</dd>' in empty and "nothing to plot" in empty


def test_texts_are_stored_once_compressed_and_cut() -> None:
    long_text = "word " * 30_000
    clusters = [
        cluster(1, ["a", "b", "c"], [0, 1, 1], ["same text", "same text", "other text"]),
        cluster(2, ["d", "e"], [0, 3], [long_text, long_text + "x"]),
    ]
    page = render_html(clusters, {}, max_text_chars=1000)
    chunks = text_chunks(page)
    texts = [t for chunk in chunks for t in chunk]
    assert texts.count("same text") == 1 and "other text" in texts
    cut = [t for t in texts if t.startswith("word ")]
    assert len(cut) == 1 and cut[0].endswith("[... text cut at 1,000 characters in this report]")
    members = embedded_data(page)["clusters"][0][3]
    assert members[0][5] == members[1][5] != members[2][5]  # references into the chunks


@pytest.mark.slow  # 10,000 clusters of real-size texts (built once for this file)
def test_ten_thousand_clusters_stay_small() -> None:
    report = big_report()
    page = render_html(report, {"pages": 60_000})
    size = len(page.encode("utf-8"))
    raw_text = sum(len(m["text"]) for c in report for m in c["members"])
    assert sum(c["size"] for c in report) > 30_000 and raw_text > 30_000_000  # ~1.5 KB of text per member
    # Near-duplicate texts compress together: the whole page is a small fraction of its texts.
    assert size < raw_text / 3, (size, raw_text)
    # Without texts, about 150 bytes per member.
    report = [{**c, "members": [{k: v for k, v in m.items() if k != "text"} for m in c["members"]]} for c in report]
    members = sum(c["size"] for c in report)
    assert len(render_html(report, {}).encode("utf-8")) < 200 * members


@functools.cache  # built once per run (two tests read it; neither changes it)
def big_report(count: int = 10_000) -> list[dict[str, Any]]:
    rng = random.Random(3)
    clusters = []
    for c in range(count):
        words = article_words(c, 300)
        base = "\n".join(" ".join(words[i : i + 30]) for i in range(0, 300, 30))
        size = rng.choice([2, 2, 3, 3, 4, 6])
        urls = [f"https://news.example.com/s/{c}/story?session={m}" for m in range(size)]
        texts = [base if m == 0 else base.replace(words[7], f"edited{m}", 1) for m in range(size)]
        clusters.append(cluster(c + 1, urls, [0] + [rng.randint(0, 3) for _ in range(size - 1)], texts))
    return clusters


# -------------------------------------------------------------------- the browser
@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    binary = find_chromium()
    if binary is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"chromium is missing ({INSTALL_HINT}); CI=true needs the real-browser test")
        pytest.skip(f"chromium is not installed: {INSTALL_HINT}")
    chromium = Chromium(binary, width=1280, height=1000)
    try:
        yield chromium
    finally:
        chromium.close()


def requested_urls(chromium: Chromium, since: int) -> list[str]:
    return [
        e["params"]["request"]["url"] for e in chromium.events[since:] if e.get("method") == "Network.requestWillBeSent"
    ]


def make_site(root: Path) -> Path:
    """Clusters of 4, 3 and 2 pages (one word edited per copy) and 4 unique pages."""
    site = root / "site"
    site.mkdir()
    for c, size in enumerate((4, 3, 2)):
        words = article_words(700 + c, 240)
        (site / f"c{c}-0.html").write_text(article_html(f"Story {c}", words), encoding="utf-8")
        for m in range(1, size):
            edited = list(words)
            edited[20 * m + 1] = f"banana{m}"  # never the first word of a paragraph (capitalised)
            (site / f"c{c}-{m}.html").write_text(article_html(f"Story {c}", edited), encoding="utf-8")
    for u in range(4):
        (site / f"u{u}.html").write_text(article_html(f"Unique {u}", article_words(800 + u, 240)), encoding="utf-8")
    return site


@pytest.mark.slow  # 18 s measured (--durations, -n 2, loaded 2-core machine)
def test_browser_shows_the_numbers_of_the_json_report(browser: Chromium, tmp_path: Path) -> None:
    site = make_site(tmp_path)
    jsonl, html = tmp_path / "clusters.jsonl", tmp_path / "clusters.html"
    for out in (jsonl, html):
        proc = subprocess.run(
            [sys.executable, "-m", "scrapy.cmdline", "simhash", "dedup", str(site), "-o", str(out)],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    report = [line for line in lines if line.get("type") == "cluster"]
    assert [c["size"] for c in report] == [4, 3, 2]  # the page is checked against this
    assert lines[-1]["type"] == "summary" and lines[-1]["pages"] == 13
    pages = 13

    mark = len(browser.events)
    browser.goto(html.as_uri())
    browser.wait_for("document.body.dataset.ready === '1'")
    shown = browser.evaluate(
        "Object.fromEntries([...document.querySelectorAll('[data-stat]')]"
        ".map(e => [e.dataset.stat, Number(e.innerText.replace(/,/g, ''))]))"
    )
    assert shown == {
        "pages": pages,
        "unique": pages - sum(c["size"] - 1 for c in report),
        "near_duplicates": sum(c["size"] - 1 for c in report),
        "clusters": len(report),
        "largest": max(c["size"] for c in report),
        "max_distance": SimhashConfig.from_settings({}).max_distance,
    }
    histogram = browser.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#histogram tbody tr')]"
        ".map(r => [r.dataset.distance, Number(r.querySelector('.count').innerText)]))"
    )
    expected = Counter(str(m["distance"]) for c in report for m in c["members"][1:])
    assert histogram == dict(expected)
    summaries = browser.evaluate(
        "[...document.querySelectorAll('details.cluster')].map(d => [Number(d.dataset.size),"
        " d.querySelector('.canon').innerText, d.querySelector('.size').innerText])"
    )
    assert summaries == [[c["size"], c["canonical"], f"{c['size']} pages"] for c in report]
    assert browser.evaluate("document.getElementById('range').innerText") == "clusters 1\u20133 of 3"

    # A person clicks the largest cluster: its members, their distances and links, and a diff.
    browser.click("details.cluster summary")
    browser.wait_for("!!document.querySelector('details.cluster[open] table.sbs')")
    rows = browser.evaluate(
        "[...document.querySelectorAll('details.cluster[open] tr.member')].map(r => ["
        "(r.querySelector('td.url a') || r.querySelector('td.url span')).textContent,"
        " r.querySelector('td.distance').innerText,"
        " r.querySelector('td.mono').innerText])"
    )
    first = report[0]
    assert rows == [[m["url"], str(m["distance"]), m["fingerprint"]] for m in first["members"]]
    rules = browser.evaluate("[...document.querySelectorAll('details.cluster[open] td.rule')].map(t => t.innerText)")
    k = first["max_distance"]
    assert rules == ["" if m["rule"] is None else Rule(m["rule"]).describe(None, k) for m in first["members"]]
    assert rules[1:] == [f"simhash within k={k}"] * (len(rules) - 1)
    diff = browser.evaluate(
        "(() => { const t = document.querySelector('details.cluster[open] table.sbs');"
        " return {ins: [...t.querySelectorAll('ins')].map(e => e.innerText),"
        " del: [...t.querySelectorAll('del')].map(e => e.innerText),"
        " title: document.querySelector('details.cluster[open] .diff h3').innerText}; })()"
    )
    assert "banana1" in diff["ins"]  # member 1 has "banana1" where the canonical page has the original word
    assert len(diff["del"]) == 1
    assert diff["title"] == (
        f"Canonical (left) against member (right), distance {first['members'][1]['distance']} (simhash within k={k})"
    )
    # Choosing another member shows its diff.
    browser.click("details.cluster[open] tr.member:nth-child(3) button.show-diff")
    browser.wait_for(
        "[...document.querySelectorAll('details.cluster[open] table.sbs ins')].some(e => e.innerText === 'banana2')"
    )
    ARTIFACTS.mkdir(exist_ok=True)
    browser.evaluate("window.scrollTo(0, 0)")
    browser.screenshot(ARTIFACTS / "html-report.png")
    assert (ARTIFACTS / "html-report.png").stat().st_size > 10_000
    # Self-contained: the browser asked for nothing but the file itself.
    assert requested_urls(browser, mark) == [html.as_uri()]


@pytest.mark.slow  # 10,000 clusters of real-size texts
def test_browser_handles_ten_thousand_clusters(browser: Chromium, tmp_path: Path) -> None:
    report = big_report()
    page = tmp_path / "big.html"
    page.write_text(render_html(report, {"pages": 60_000}), encoding="utf-8")
    mark = len(browser.events)
    browser.goto(page.as_uri())
    browser.wait_for("document.body.dataset.ready === '1'")
    assert browser.evaluate("document.querySelectorAll('details.cluster').length") == 100
    assert browser.evaluate("document.getElementById('range').innerText") == "clusters 1\u2013100 of 10,000"
    assert browser.evaluate("document.querySelector('[data-stat=clusters]').innerText") == "10,000"
    browser.click("#next")
    browser.wait_for("document.getElementById('range').innerText.startsWith('clusters 101\u2013200')")
    # Largest first, across pages.
    sizes = browser.evaluate("[...document.querySelectorAll('details.cluster')].map(d => Number(d.dataset.size))")
    assert sizes == sorted((c["size"] for c in report), reverse=True)[100:200]
    # The filter finds one cluster among 10,000; opening it computes the diff then.
    browser.evaluate(
        "(() => { const f = document.getElementById('filter'); f.value = 'https://news.example.com/s/4321/';"
        " f.dispatchEvent(new Event('input')); })()"
    )
    browser.wait_for("document.getElementById('range').innerText === 'clusters 1\u20131 of 1'")
    assert browser.evaluate("document.querySelectorAll('table.sbs').length") == 0  # nothing computed before asked
    browser.click("details.cluster summary")
    browser.wait_for("!!document.querySelector('details.cluster[open] table.sbs ins')")
    assert browser.evaluate("document.querySelector('table.sbs ins').innerText") == "edited1"
    browser.screenshot(ARTIFACTS / "html-report-10k.png", full_page=False)
    assert requested_urls(browser, mark) == [page.as_uri()]


@pytest.mark.slow  # 7 s measured (--durations, -n 2, loaded 2-core machine)
def test_a_crawl_writes_the_html_report_with_texts(serve: Any, tmp_path: Path) -> None:
    """SIMHASH_REPORT_FORMAT = "html": the plugin keeps the page texts and the page can show diffs."""
    words = article_words(901, 240)
    edited = list(words)
    edited[33] = "zeppelin"
    site = serve(
        {"/a": article_html("Story", words), "/b": article_html("Story", edited), "/c": article_html("Other", article_words(902))}
    )
    report = tmp_path / "report.html"
    project = Path(__file__).parents[1] / "crawl_project"
    env = dict(os.environ)
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(project), env.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy.cmdline", "crawl", "pages", "-a", f"base={site.base}", "-a", "paths=/a,/b,/c",
         "-s", f"SIMHASH_REPORT_URI={report}"],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = report.read_text(encoding="utf-8")
    assert 'data-has-text="true"' in page
    for key, value in (("pages", 3), ("near_duplicates", 1), ("clusters", 1)):
        assert f'<dd data-stat="{key}">{value}</dd>' in page
    [cluster] = embedded_data(page)["clusters"]
    assert [m[0] for m in cluster[3]] == [site.url("/a"), site.url("/b")]
    texts = {t for chunk in text_chunks(page) for t in chunk}
    assert any("zeppelin" in t for t in texts) and len(texts) == 2


@pytest.mark.slow  # 2 s measured (--durations, -n 2, loaded 2-core machine)
def test_browser_opens_a_cluster_of_thousands_of_pages(browser: Chromium, tmp_path: Path) -> None:
    urls = [f"https://shop.example/item/{i}" for i in range(1_200)]
    page = tmp_path / "template.html"
    page.write_text(render_html([cluster(1, urls, [0] + [i % 4 for i in range(1, 1_200)])], {}), encoding="utf-8")
    browser.goto(page.as_uri())
    browser.wait_for("document.body.dataset.ready === '1'")
    browser.click("details.cluster summary")
    assert browser.wait_for("document.querySelectorAll('tr.member').length") == 500
    assert browser.evaluate("document.querySelector('tr.more button').innerText") == "Show all 1,200 members"
    browser.click("tr.more button")
    assert browser.wait_for("document.querySelectorAll('tr.member').length === 1200")
    assert browser.evaluate("document.querySelector('tr.member:last-child td.url a').href") == urls[-1]
    assert browser.evaluate("document.querySelector('.no-text').innerText").startswith("This report was written without")


def test_browser_shows_the_changed_pages(browser: Chromium, tmp_path: Path) -> None:
    """After a re-crawl: the counts and a plain table of the changed pages, readable before any script runs."""
    changes = [
        {"url": f"https://docs.example/p{i}", "scope": "s", "fingerprint": f"{0xF0 + i:016x}",
         "previous_fingerprint": f"{i:016x}", "distance": 4 + i}
        for i in range(3)
    ] + [{"url": "javascript:alert(1)", "scope": "s", "fingerprint": "00000000000000ff", "previous_fingerprint": None, "distance": None}]  # fmt: skip
    page = tmp_path / "changed.html"
    summary = {"pages": 12, "unchanged": 8, "changed": 4, "max_distance": 3}
    page.write_text(render_html([cluster(1, ["u1", "u2"], [0, 1])], summary, changes=changes), encoding="utf-8")
    mark = len(browser.events)
    browser.goto(page.as_uri())
    browser.wait_for("document.body.dataset.ready === '1'")
    shown = browser.evaluate(
        "[...document.querySelectorAll('#changed-section tr.changed-page')].map(r => [...r.cells].map(c => c.innerText))"
    )
    assert shown == [[c["url"], c["previous_fingerprint"] or "", c["fingerprint"], str(c["distance"] or "")] for c in changes]
    # Links only for http(s)/file URLs, as in the cluster tables.
    assert browser.evaluate("[...document.querySelectorAll('#changed-section a')].map(a => a.href)") == [c["url"] for c in changes[:3]]
    stats = browser.evaluate("Object.fromEntries([...document.querySelectorAll('[data-stat]')].map(e => [e.dataset.stat, e.innerText]))")
    assert (stats["unchanged"], stats["changed"]) == ("8", "4")
    assert requested_urls(browser, mark) == [page.as_uri()]


#: Markup and URLs that would run a script if the report let them through (each bumps window.__pwned).
PWN = "window.__pwned=(window.__pwned||0)+1"
HOSTILE = [
    f"<script>{PWN}</script>",
    f'<img src=x onerror="{PWN}">',
    f'"><svg onload="{PWN}"></svg>',
    f"'><body onload='{PWN}'>",
    f"</script><script>{PWN}</script><!--",
    "</textarea></title><iframe srcdoc=\"<script>parent.__pwned=1</script>\"></iframe>",
    "<style>body{display:none}</style>${title}]]>\u2028\u2029",
    f"<a href=\"javascript:{PWN}\">click</a>",
]  # fmt: skip


def test_browser_runs_no_script_from_hostile_titles_urls_and_texts(browser: Chromium, tmp_path: Path) -> None:
    """Every text of the report comes from crawled pages: titles, URLs, referers, texts, scopes, run values."""
    title = "Crawl " + HOSTILE[0] + HOSTILE[5]
    clusters = []
    for c, payload in enumerate(HOSTILE):
        urls = [f"https://shop.example/{c}?q={payload}", f"javascript:{PWN}//{c}", payload, f"file:///{payload}"]
        texts = [f"Kettle {c}\n{payload}\nprice 24.99", f"Kettle {c}\n{payload}\nprice 19.99 {payload}",
                 payload, f"{payload}\n{payload}"]  # fmt: skip
        members = cluster(c + 1, urls, [0, 1, 9, 0], texts)
        for member, referer, rule in zip(members["members"], [None, payload, payload, PWN], [None, "simhash", "one_edit", payload]):
            member["referer"], member["rule"] = referer, rule
        members["scope"] = payload
        clusters.append(members)
    changes = [{"url": payload, "scope": payload, "fingerprint": payload, "previous_fingerprint": payload, "distance": payload}
               for payload in HOSTILE]  # fmt: skip
    summary = {"title": title, "source": HOSTILE[2], "max_distance": 4, HOSTILE[1]: HOSTILE[3], "generated": HOSTILE[6]}
    page = tmp_path / "hostile.html"
    page.write_text(render_html(clusters, summary, changes=changes), encoding="utf-8")
    ours = page.read_text(encoding="utf-8").count("<script")  # the data, the text chunks, the code

    mark = len(browser.events)
    browser.goto(page.as_uri())
    browser.wait_for("document.body.dataset.ready === '1'")
    # Open every cluster and show every member's diff: all the stored texts are put into the page.
    browser.evaluate("document.querySelectorAll('details.cluster summary').forEach(s => s.click())")
    browser.wait_for(f"document.querySelectorAll('details.cluster[open] table.sbs').length === {len(HOSTILE)}")
    buttons = browser.evaluate("document.querySelectorAll('button.show-diff').length")
    assert buttons == 3 * len(HOSTILE)
    for i in range(buttons):
        browser.evaluate(f"document.querySelectorAll('button.show-diff')[{i}].click()")
        browser.wait_for(f"!!document.querySelectorAll('button.show-diff')[{i}].closest('details').querySelector('table.sbs')")
    browser.evaluate(
        "(() => { const f = document.getElementById('filter'); f.value = %s; f.dispatchEvent(new Event('input')); })()"
        % json.dumps(HOSTILE[0])
    )
    browser.wait_for("document.getElementById('range').innerText.length > 0")

    # No script ran: nothing bumped the counter, no element came from the data, no dialog opened.
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('script').length") == ours
    assert browser.evaluate("document.querySelectorAll('img, svg, iframe, object, embed, textarea').length") == 0
    assert browser.evaluate("document.querySelectorAll('style').length") == 1
    assert not [e for e in browser.events[mark:] if e.get("method") == "Page.javascriptDialogOpening"]
    # The hostile strings are shown as text; links only for http(s) URLs (file:///... is text).
    assert browser.evaluate("document.querySelector('h1').innerText") == title
    assert browser.evaluate("document.title") == title
    hrefs = browser.evaluate("[...document.querySelectorAll('a')].map(a => a.getAttribute('href'))")
    assert hrefs and all(h.lower().startswith("https:") for h in hrefs)
    shown = browser.evaluate("document.body.innerText")
    assert HOSTILE[1] in shown and f"javascript:{PWN}//0" in shown and f"file:///{HOSTILE[0]}" in shown
    rules = browser.evaluate("[...document.querySelectorAll('details.cluster[open] td.rule')].map(t => t.innerText)")
    assert rules[:4] == ["", "simhash within k=4", "one edit, beyond k=4", ""]  # an unknown rule is not shown
    assert requested_urls(browser, mark) == [page.as_uri()]


def test_browser_shows_the_representative(browser: Chromium, tmp_path: Path) -> None:
    """Each cluster says which page to keep and why; the representative's row is marked."""
    from simhash_scrapy.core.report.report import build_clusters

    members = [
        {"url": "https://docs.example/a?utm_source=x", "fingerprint": 1, "scope": "s",
         "canonical_link": "https://docs.example/a"},
        {"url": "https://docs.example/print/a", "fingerprint": 3, "scope": "s",
         "canonical_url": "https://docs.example/a?utm_source=x", "distance": 1},
        {"url": "https://docs.example/a", "fingerprint": 7, "scope": "s",
         "canonical_url": "https://docs.example/a?utm_source=x", "distance": 2},
        {"url": "https://docs.example/b", "fingerprint": 0xFF00, "scope": "s"},
        {"url": "https://docs.example/b?page=1", "fingerprint": 0xFF01, "scope": "s",
         "canonical_url": "https://docs.example/b", "distance": 1},
        {"url": "https://docs.example/c?utm_source=x", "fingerprint": 0xF0F0F0, "scope": "s"},
        {"url": "https://docs.example/articles/2026/" + "a-very-long-article-name-" * 12 + "14.html",
         "fingerprint": 0xF0F0F1, "scope": "s", "canonical_url": "https://docs.example/c?utm_source=x", "distance": 1},
    ]  # fmt: skip
    page = tmp_path / "representative.html"
    page.write_text(render_html(build_clusters(members, max_distance=4), {}), encoding="utf-8")
    browser.goto(page.as_uri())
    browser.wait_for("document.body.dataset.ready === '1'")
    summaries = browser.evaluate("[...document.querySelectorAll('details.cluster summary')].map(s => s.innerText)")
    assert "keep https://docs.example/a" in summaries[0] and "(named by rel=canonical or a redirect)" in summaries[0]
    # the anchor is the representative: the reason stands beside "keep it", never alone
    assert "keep it" in summaries[1] and "(no query string)" in summaries[1]
    # one meaning of max_distance in every format (the k); the largest member distance is "farthest"
    assert "farthest d 2 \u00b7 max_distance 4" in summaries[0]
    # a long URL to keep is shown whole (wrapped, never cut with an ellipsis)
    assert browser.evaluate("[...document.querySelectorAll('summary .rep')].every(e => e.scrollWidth <= e.clientWidth"
                            " && getComputedStyle(e).textOverflow !== 'ellipsis')")
    browser.click("details.cluster summary")
    assert browser.wait_for("document.querySelectorAll('tr.member').length") == 3
    marked = browser.evaluate("[...document.querySelectorAll('tr.representative')].map(r => [r.cells[0].innerText, r.cells[1].innerText])")
    assert marked == [["2 \u00b7 keep", "https://docs.example/a"]]
