"""Analysis is linear in the page, on every adversarial shape (issue 37.1).

Each shape is a page built from ``n`` repeats of a unit (elements the text modes remove, each
followed by text; deep nesting; unclosed tags; one long text node; many sentences; many links),
analysed as a crawl analyses a page: ``analyse_html`` and ``analyse_tree`` (Scrapy's shared parse,
cleaned in place and undone) with the second simhash and the sentence sketch, in both text modes,
with the C helpers and in pure Python.  The test doubles the page and checks the growth of the
CPU time: about 2x when linear, about 4x for a quadratic path (the tails of 16,000 removed
``<script>`` took 4.6x per doubling, 13 s at 0.5 MB, before issue 37).

Not a timed assertion: a complexity check on CPU time (``time.process_time``), best of several
runs interleaved, each page big enough that its analysis dwarfs the fixed costs (its size is
doubled until it takes ``MIN_SECONDS``), relative to a bare parse of the same pages, over two
doublings (the smaller growth: a page outgrowing the CPU's caches costs 3x once; a quadratic path
costs 4x every time), and a ratio on the wrong side of 2.5x is measured again before it fails (over it
for the shapes, at most it for the check's own test, a quadratic loop).
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
import pytest_twisted
from lxml import etree

from conftest import Page, RecordingSpider, article_words, run_crawl
from simhash_scrapy import workers
from simhash_scrapy.core import _native, deadline
from simhash_scrapy.core.analysis import AnalysisOptions, analyse_html, analyse_tree

#: The largest growth of CPU time per doubling of the page that counts as linear.
MAX_GROWTH = 2.5
#: The most a parse's growth per doubling excuses (cache effects; libxml2 on one huge text node is
#: superlinear itself).
MAX_PARSE_GROWTH = 2.6
#: The smallest page takes at least this much CPU (fixed costs are ~1 ms).
MIN_SECONDS = 0.015
REPEATS = 3
WORDS = " ".join(f"word{i}" for i in range(40))


def _page(body: str) -> bytes:
    return f"<html><head><title>t</title></head><body><p>{WORDS}</p>{body}</body></html>".encode()


def _removed(tag: str, attributes: str = "") -> Callable[[int], bytes]:
    return lambda n: _page(f"<{tag}{attributes}>x</{tag}>tail text words " * n)


SHAPES: dict[str, Callable[[int], bytes]] = {
    "script": _removed("script"),
    "style": _removed("style"),
    "noscript": _removed("noscript"),
    "template": _removed("template"),
    "iframe": _removed("iframe"),
    "[hidden]": _removed("div", " hidden"),
    "deep nesting": lambda n: _page("<div><span>" * n + WORDS + "</span></div>" * n),
    "unclosed tags": lambda n: _page("<b x>t " * n),
    "long text node": lambda n: _page("<p>" + "word " * (16 * n) + "</p>"),
    "many sentences": lambda n: _page("".join(f"<p>Sentence {i} holds a few words.</p>" for i in range(n))),
    "many links": lambda n: _page("".join(f'<li><a href="/x{i}">link {i}</a></li>' for i in range(n))),
}
_PARSER = etree.HTMLParser(huge_tree=True)  # the parser of Scrapy's selectors


def _analyse(body: bytes, main_content: bool) -> None:
    """The crawl's analysis of an inline page: Scrapy's parse, cleaned in place and undone (the path
    of the issue's page; ``analyse_html``, the worker threads' path, cleans the tree the same way)."""
    options = AnalysisOptions(main_content=main_content, keep_source=True, second=True, sketch=True)
    analyse_tree(etree.fromstring(body, _PARSER), body, options)


def _cpu(func: Callable[[bytes], object], body: bytes) -> float:
    start = time.process_time()
    func(body)
    return time.process_time() - start


def _parse(body: bytes) -> None:
    etree.fromstring(body, _PARSER)


def _best_times(analyse: Callable[[bytes], object], pages: list[bytes], repeats: int) -> list[tuple[float, float]]:
    """The best CPU times of ``analyse`` and of a bare parse on each page, runs interleaved (so a busy
    spell of the machine slows them alike)."""
    best = [[float("inf"), float("inf")] for _ in pages]
    for _ in range(repeats):
        for times, body in zip(best, pages):
            times[0] = min(times[0], _cpu(analyse, body))
            times[1] = min(times[1], _cpu(_parse, body))
    return [(a, p) for a, p in best]


def growth(make: Callable[[int], bytes], analyse: Callable[[bytes], object], start: int = 1000,
           linear: bool = True) -> tuple[float, float, int]:
    """How much the CPU time of ``analyse`` grows per doubling of the page ``make(n)``, relative to a bare
    lxml parse of the same pages (linear: 2x, as a parse), the raw growth, and ``n``: ``n`` doubles from
    ``start`` until the page takes ``MIN_SECONDS``.  Two doublings (n, 2n, 4n) are measured and the
    smaller growth kept: a page outgrowing the CPU's caches costs up to 3x once, in one doubling,
    while a quadratic step costs 4x in both.  A parse that grows less than 2x (libxml2 stops reading
    deep pages) counts as 2x, and more than ``MAX_PARSE_GROWTH`` as that (a parse of one long text node
    grows ~4x itself: it must not excuse the analysis).  A growth on the wrong side of ``MAX_GROWTH`` is
    measured again, up to three times: over it when ``linear`` (the smallest growth of all the runs is
    kept), at most it when not (the check's own test: the largest run's is kept)."""
    n = start
    small = make(n)
    while _cpu(analyse, small) < MIN_SECONDS and n < 1_000_000:
        n *= 2
        small = make(n)
    pages = [small, make(2 * n), make(4 * n)]
    runs = []  # each run's smaller growth of its two doublings
    for attempt in range(3):  # measured again before it fails: single runs stall on a busy machine
        times = _best_times(analyse, pages, REPEATS + 2 * attempt)
        doublings = []
        for (a1, p1), (a2, p2) in itertools.pairwise(times):
            raw = a2 / max(a1, 1e-9)
            parse = min(max(p2 / max(p1, 1e-9), 2.0), MAX_PARSE_GROWTH)
            doublings.append((2 * raw / parse, raw))
        runs.append(min(doublings))
        if (min(runs)[0] <= MAX_GROWTH) if linear else (max(runs)[0] > MAX_GROWTH):
            break
    relative, raw = min(runs) if linear else max(runs)
    return relative, raw, n


# 44 cases of 0.6-2.0 s of CPU each, 38 s in all (a third of the fast set's CPU): 19 of them took 2 s or more
# (pytest -n 4 -m "not slow" --durations=0, load 1-4, 2 cores).
@pytest.mark.slow
@pytest.mark.parametrize("compiled", [True, False], ids=["C", "pure"])
@pytest.mark.parametrize("main_content", [True, False], ids=["main", "visible"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_doubling_the_page_at_most_doubles_the_work(shape: str, main_content: bool, compiled: bool) -> None:
    if compiled and not _native.speedups_enabled():
        pytest.skip("the C helpers are not built")
    with _native.switched(compiled):
        ratio, raw, n = growth(SHAPES[shape], lambda body: _analyse(body, main_content))
    assert ratio <= MAX_GROWTH, f"{shape}: {ratio:.2f}x ({raw:.2f}x raw) the CPU time per doubling from {n:,} repeats"


@pytest.mark.slow  # 8 s measured (--durations, -n 3, quiet 2-core machine)
def test_the_check_catches_a_quadratic_path() -> None:
    # The measure itself: a quadratic function of the page grows about 4x per doubling, past MAX_GROWTH.
    def quadratic(body: bytes) -> None:
        for unit in range(len(body) // 100):
            for _ in range(unit):  # each 100 bytes visit all the units before them: CPU only, no cache effects
                pass

    ratio, raw, _ = growth(lambda n: _page("x" * (n * 100)), quadratic, start=1, linear=False)
    assert ratio > MAX_GROWTH and raw > MAX_GROWTH  # (the family would fail it, parse-relative or raw)


# ------------------------------------------------------------------ a page that still takes long is cut


def test_a_page_past_its_cpu_time_is_cut_and_nothing_else_is() -> None:
    body = SHAPES["script"](20_000)
    options = AnalysisOptions(main_content=True)
    with deadline.within(0.0):
        with pytest.raises(deadline.TooSlow):
            analyse_tree(etree.fromstring(body, _PARSER), body, options)
    root = etree.fromstring(body, _PARSER)
    before = etree.tostring(root)
    with deadline.within(0.0), pytest.raises(deadline.TooSlow):
        analyse_tree(root, body, options)
    assert etree.tostring(root) == before  # cut mid-way: the shared tree is still put back
    with deadline.within(60.0):
        assert analyse_tree(root, body, options) == analyse_html(body, None, options)
    deadline.check()  # outside a block: nothing to cut


@pytest_twisted.ensureDeferred
async def test_a_crawl_cuts_a_page_past_its_cpu_time_counts_and_logs_it(
    serve: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A limit no page can meet: the large page (analysed in a worker thread) is cut; the small one
    # (inline, on the event loop, a few ms) is not subject to it.
    monkeypatch.setattr(workers, "ANALYSIS_MAX_SECONDS", 0.0)
    big, small = SHAPES["script"](40_000), _page(" ".join(article_words(3, 120)))
    site = serve({"/big": Page(big, content_type="text/html"), "/small": Page(small, content_type="text/html")})
    crawler = await run_crawl(
        RecordingSpider, {"ADDONS": {"simhash_scrapy.Addon": 0}}, start_urls=[site.url("/big"), site.url("/small")]
    )
    stats = crawler.stats
    assert stats.get_value("finish_reason") == "finished"
    assert stats.get_value("simhash/skipped/too_slow") == 1
    assert stats.get_value("simhash/fingerprinted") == 1
    seen = {entry["url"]: entry for entry in crawler.spider.seen}
    assert seen[site.url("/big")]["skipped"] == "too_slow"  # it goes on, unchecked
    assert [r.getMessage() for r in caplog.records if "was cut" in r.getMessage()] == [
        f"simhash-scrapy: the analysis of the page {site.url('/big')} took over 0 s of CPU and was cut; "
        "it goes on unchecked (simhash/skipped/too_slow)"
    ]


def test_exit_never_waits_for_a_page_in_a_worker_thread() -> None:
    # concurrent.futures joins its threads at exit: a crawl stopped by Ctrl-C waited minutes for one
    # page.  The workers are daemon threads; the process below exits at once, mid-analysis.
    code = (
        "import time\n"
        "from simhash_scrapy.workers import DaemonExecutor\n"
        "pool = DaemonExecutor(2, 'simhash')\n"
        "pool.submit(time.sleep, 60); pool.submit(lambda: [i * i for i in range(10**10)])\n"
        "time.sleep(0.2)\n"
    )
    start = time.monotonic()
    subprocess.run([sys.executable, "-c", code], check=True, timeout=50)
    assert time.monotonic() - start < 30  # (60 s and minutes of work were left)


def test_the_worker_pool_runs_work_and_hands_back_errors() -> None:
    pool = workers.DaemonExecutor(2, "simhash")
    try:
        assert pool.submit(sum, [1, 2, 3]).result(timeout=10) == 6
        assert pool.submit(int, "12", base=16).result(timeout=10) == 18
        with pytest.raises(ValueError):
            pool.submit(int, "x").result(timeout=10)
        assert all(thread.daemon for thread in pool._threads)
    finally:
        pool.shutdown()
    with pytest.raises(RuntimeError):
        pool.submit(sum, [])
