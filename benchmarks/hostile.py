"""Hostile markup: fingerprinting time against a bare lxml parse of the same bytes, and the event loop.

    python benchmarks/hostile.py                 # every page kind, 32,000 repeats of its unit
    python benchmarks/hostile.py --repeats 5 --kinds svg div

Issue 23.1: one 225 KB page of 32,000 unclosed ``<svg x>`` tags took ~30 s of CPU in
``fingerprint_html`` (a backtracking regex), and the crawl analysed it on the event loop.
For each kind of hostile page (unclosed tags of several kinds, ``<`` floods, unclosed
comments and scripts, a long attribute, deep nesting, a ``<meta`` flood, many links) this
prints, as CPU time of this process (best of ``--repeats``):

* ``lxml.html``: a bare ``lxml.html.fromstring(body)``, the baseline of the issue (libxml2 stops
  at 256 levels of nesting, so on unclosed tags it reads only the first few KB);
* ``lxml huge``: ``etree.fromstring(body, HTMLParser(huge_tree=True))``, the parser Scrapy's
  selectors use (stops at 2048 levels);
* ``fingerprint_html`` (main content, the default) with the C helpers and in pure Python, and
  the ratios to both baselines;
* ``x2``: time for the page with twice the repeats over time for this one (about 2 when linear;
  a quadratic path gives about 4); ``x2 / parse``: the same against the growth of the parse
  (``lxml huge``, counted between 2x and 2.6x), twice ``x2`` over it: one doubling that outgrows
  the CPU's caches costs up to 3x raw, the parse's too;
* the crawl's decision (``SimhashMiddleware`` with ``SIMHASH_THREADS`` on, in an asyncio loop):
  whether the page was analysed in a worker thread (``simhash/analysed_off_loop``) and the
  longest the event loop was blocked meanwhile (a 1 ms ticker's worst lateness, median of 3
  runs; on a busy machine the floor is several ms even for a page analysed in 0.5 ms).

Times on a busy machine are noisy; compare the ratios, measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

import lxml.html
from lxml import etree

from simhash_scrapy import fingerprint_html
from simhash_scrapy.core import _native

WORDS = b" ".join(b"word%d" % i for i in range(80))
HEAD = b"<html><head><title>t</title></head><body><p>" + WORDS + b"</p>"


def kinds(n: int) -> dict[str, bytes]:
    """Hostile pages built from ``n`` repeats of their unit (32,000 gives the issue's page)."""
    return {
        "svg (the issue's page)": b"<svg x>" * n,
        "svg after text": HEAD + b"<svg x>" * n,
        "div": HEAD + b"<div x>" * n,
        "b": HEAD + b"<b x>" * n,
        "a": HEAD + b"<a x>" * n,
        "math": HEAD + b"<math x>" * n,
        "< flood": HEAD + b"<" * (7 * n),
        "<a flood (no >)": HEAD + b"<a" * (3 * n),
        "<!-- flood": HEAD + b"<!--" * (2 * n),
        "unclosed comment": HEAD + b"<!--" + WORDS * (n // 80),
        "<script> flood": HEAD + b"<script>" * n,
        "unclosed script": HEAD + b"<script>" + b"x = '<p>';" * n,
        "long attribute": HEAD + b'<p title="' + b"a" * (7 * n),
        "</svg x> flood": HEAD + b"</svg x>" * n,
        "nested, closed": HEAD + b"<div>" * n + WORDS + b"</div>" * n,
        "<meta flood": b"<meta" * (n + n // 2),
        "links": HEAD + b"<a x>w</a>" * n,
        # Issue 37.1: removed elements each followed by text (their tails were joined quadratically).
        "<script> + text": HEAD + b"<script>x</script>tail text words " * n,
        "<style> + text": HEAD + b"<style>x</style>tail text words " * n,
        "<noscript> + text": HEAD + b"<noscript>x</noscript>tail text words " * n,
        "<template> + text": HEAD + b"<template>x</template>tail text words " * n,
        "<iframe> + text": HEAD + b"<iframe>x</iframe>tail text words " * n,
        "[hidden] + text": HEAD + b"<div hidden>x</div>tail text words " * n,
        "many sentences": HEAD + b"".join(b"<p>Sentence %d holds a few words.</p>" % i for i in range(n)),
        "NUL page": b"<html><head><title>t</title></head><body><main><p\x00>" + WORDS + b"\x00" * (7 * n),
    }


def best(func: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        func()
        times.append(time.process_time() - start)
    return min(times)


_HUGE = etree.HTMLParser(huge_tree=True)


def crawl_decision(body: bytes) -> tuple[bool, float]:
    """Whether the crawl's middleware analysed ``body`` off the loop, and the loop's worst stall (s)."""
    from scrapy.http import HtmlResponse
    from scrapy.utils.test import get_crawler

    from simhash_scrapy.middleware import SimhashMiddleware

    crawler = get_crawler(settings_dict={"SIMHASH_THREADS": True})
    middleware = SimhashMiddleware.from_crawler(crawler)

    async def run() -> float:
        lateness = 0.0
        done = False

        async def ticker() -> None:
            nonlocal lateness
            while not done:
                start = time.perf_counter()
                await asyncio.sleep(0.001)
                lateness = max(lateness, time.perf_counter() - start - 0.001)

        task = asyncio.ensure_future(ticker())
        await asyncio.sleep(0.01)
        response = HtmlResponse("http://127.0.0.1/page", body=body, headers={"Content-Type": "text/html"})
        await middleware._analyse(response)
        done = True
        await task
        return lateness

    stall = asyncio.run(run())
    executor = middleware.state._executor
    if executor is not None:
        executor.shutdown()
    return bool(crawler.stats.get_value("simhash/analysed_off_loop")), stall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=32_000, help="repeats of each page's unit (default 32,000)")
    parser.add_argument("--repeats", type=int, default=5, help="timing runs per figure (best is kept)")
    parser.add_argument("--kinds", nargs="*", help="only kinds whose name starts with one of these")
    args = parser.parse_args()

    pages, doubled = kinds(args.n), kinds(2 * args.n)
    print(f"# Hostile markup ({args.n:,} repeats; CPU ms, best of {args.repeats}; C helpers built: "
          f"{_native.speedups_enabled()})\n")
    print("| page | KB | lxml.html ms | lxml huge ms | fingerprint_html ms | / lxml.html | / lxml huge "
          "| pure Python ms | x2 | x2 / parse | crawl: off loop | loop stall ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, body in pages.items():
        if args.kinds and not any(name.startswith(k) for k in args.kinds):
            continue
        bare = best(lambda: lxml.html.fromstring(body), args.repeats)
        huge = best(lambda: etree.fromstring(body, _HUGE), args.repeats)
        ours = best(lambda: fingerprint_html(body), args.repeats)
        with _native.switched(False):
            pure = best(lambda: fingerprint_html(body), max(1, args.repeats // 2))
        # The doubled page with as many runs, and its parse: a single doubling on a busy machine or one
        # that outgrows the CPU's caches can cost 3x once; ``x2 / parse`` is the growth against the
        # parse's (2x when both are linear), as tests/integration/test_linear.py measures it.
        twice = best(lambda: fingerprint_html(doubled[name]), args.repeats)
        huge_twice = best(lambda: etree.fromstring(doubled[name], _HUGE), args.repeats)
        parse_growth = min(max(huge_twice / max(huge, 1e-9), 2.0), 2.6)
        decisions = [crawl_decision(body) for _ in range(3)]
        off_loop, stall = decisions[0][0], statistics.median(d[1] for d in decisions)
        print(
            f"| {name} | {len(body) / 1000:,.0f} | {bare * 1000:.2f} | {huge * 1000:.2f} | {ours * 1000:.2f} "
            f"| {ours / max(bare, 1e-9):.1f} | {ours / max(huge, 1e-9):.1f} | {pure * 1000:.2f} "
            f"| {twice / max(ours, 1e-9):.1f} | {2 * twice / max(ours, 1e-9) / parse_growth:.1f} "
            f"| {'yes' if off_loop else 'no'} | {stall * 1000:.1f} |"
        )
    ordinary_pages_off_loop()


def ordinary_pages_off_loop() -> None:
    """How many pages of the benchmark corpus the crawl would analyse off the loop for their markup."""
    import sys
    from pathlib import Path

    from simhash_scrapy.core.analysis import SLOW_DEPTH, SLOW_MARKUP, may_take_long, tree_may_take_long
    from simhash_scrapy.core.extract.text import TooDeep, parse_html

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import corpus

    name, pages = corpus.html_pages()
    many = sum(1 for page in pages if may_take_long(page))
    def deep_page(page: bytes) -> bool:
        try:
            return tree_may_take_long(parse_html(page))
        except TooDeep:
            return True

    deep = sum(1 for page in pages if deep_page(page))
    print(f"\nOrdinary pages ({name}): {many} with more than {SLOW_MARKUP:,} tags, "
          f"{deep} nested {SLOW_DEPTH} deep (analysed off the loop whatever their size).")


if __name__ == "__main__":
    main()
