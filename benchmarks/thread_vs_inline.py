"""Fingerprinting in a worker thread vs on the event loop (``SIMHASH_THREADS``).

    python benchmarks/thread_vs_inline.py                 # 3 rounds, all modes
    python benchmarks/thread_vs_inline.py --rounds 5 --docs /usr/share/doc/python3-dev/html

What it measures, in one process and one run: an asyncio event loop handles
real HTML pages the way a crawl does, 16 at a time.  For each page the loop
waits for the "download" (``--latency``: 0 s is a local site, where the loop
is never idle; 0.2 s a remote one), does the spider's share of the work
(parsel: extract every link, as a following spider does) and the plugin fingerprints the page through
``DedupState.run_analysis`` - the plugin's real code path - either inline on
the loop (``inline``), in a pool of 1 or 2 worker threads (``thread1``,
``thread2``), or in 2 threads for pages of at least 64 kB / 16 kB and inline
for smaller ones (``hybrid64k-2``, the default, and ``hybrid16k-2``).
``spider-only`` skips fingerprinting (the baseline).

Meanwhile a probe on the loop wakes every 5 ms and records how late it
wakes: that lateness is how long the loop was blocked, i.e. how long every
other download, timeout and callback waited.

Pages: Debian's Python docs (package ``python3-doc``; 530 pages, median
~50 kB, a few of 1-2.5 MB), in a fixed shuffled order.  ``--max-kb`` leaves
out bigger pages to see the typical-page case.

First prints, for a few page sizes, the longest event-loop stall while one
page is fingerprinted and nothing else runs.  Then a markdown table per
page set: median wall time (all pages), pages/s,
CPU time of the process (all threads), loop lag p50/p99/max, and wall and
CPU time relative to ``inline``.  Timings on a
busy machine are noisy: modes alternate within each round and medians are
reported, so compare ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

DEFAULT_DOCS = Path("/usr/share/doc/python3-dev/html")
CONCURRENCY = 16
#: mode -> (threads on, worker threads, smallest page sent to a thread)
MODES = {
    "spider-only": None,
    "inline": (False, 1, 0),
    "thread1": (True, 1, 0),
    "thread2": (True, 2, 0),
    "hybrid64k-1": (True, 1, 64 * 1024),
    "hybrid64k-2": (True, 2, 64 * 1024),  # the default
    "hybrid16k-2": (True, 2, 16 * 1024),
}


def make_state(threads: bool, workers: int, min_bytes: int):  # type: ignore[no-untyped-def]
    from scrapy.utils.test import get_crawler

    import simhash_scrapy.state as state_module

    state_module.THREAD_WORKERS = workers
    state_module.THREAD_MIN_BYTES = min_bytes
    crawler = get_crawler(settings_dict={"SIMHASH_THREADS": threads})
    return state_module.DedupState(crawler)


async def run_mode(mode: str, pages: list[bytes], latency: float) -> dict[str, float]:
    from parsel import Selector

    from simhash_scrapy.core.analysis import analyse_html

    state = None
    if MODES[mode] is not None:
        state = make_state(*MODES[mode])
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    running = True
    interval = 0.005

    def tick(expected: float) -> None:
        now = loop.time()
        lags.append(max(0.0, now - expected))
        if running:
            loop.call_later(interval, tick, now + interval)

    loop.call_later(interval, tick, loop.time() + interval)
    queue = list(reversed(pages))

    async def worker() -> None:
        while queue:
            body = queue.pop()
            await asyncio.sleep(latency)  # the download (0: a local site, the loop is never idle)
            Selector(text=body.decode("utf-8", "replace")).css("a::attr(href)").getall()
            if state is not None:
                await state.run_analysis(analyse_html, body, "utf-8", state.config.analysis, size=len(body))

    start = time.perf_counter()
    cpu_start = time.process_time()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    running = False
    if state is not None and state._executor is not None:
        state._executor.shutdown(wait=True)
    lags.sort()

    def pct(p: float) -> float:
        return 1000 * lags[min(len(lags) - 1, int(p * (len(lags) - 1)))] if lags else 0.0

    return {"wall": wall, "cpu": cpu, "p50": pct(0.5), "p99": pct(0.99), "max": 1000 * lags[-1] if lags else 0.0}


def report(title: str, pages: list[bytes], rounds: int, latency: float, modes: list[str]) -> None:
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    for round_no in range(rounds):
        order = list(modes) if round_no % 2 == 0 else list(reversed(modes))
        for mode in order:
            results[mode].append(asyncio.run(run_mode(mode, pages, latency)))
            print(f"{title} round {round_no + 1} {mode}: {results[mode][-1]}", file=sys.stderr)
    base = statistics.median(r["wall"] for r in results["inline"])
    sizes = sorted(len(p) for p in pages)
    print(
        f"\n{title}: {len(pages)} pages, median {sizes[len(sizes) // 2] // 1024} kB, max {sizes[-1] // 1024} kB, "
        f"download latency {latency * 1000:.0f} ms, {CONCURRENCY} at a time"
    )
    base_cpu = statistics.median(r["cpu"] for r in results["inline"])
    print("| mode | wall s | pages/s | CPU s | loop lag p50 ms | p99 ms | max ms | wall vs inline | CPU vs inline |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mode, runs in results.items():
        wall = statistics.median(r["wall"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        print(
            f"| {mode} | {wall:.2f} | {len(pages) / wall:.0f} | {cpu:.2f} | {statistics.median(r['p50'] for r in runs):.1f} "
            f"| {statistics.median(r['p99'] for r in runs):.1f} | {statistics.median(r['max'] for r in runs):.1f} "
            f"| {wall / base:.3f} | {cpu / base_cpu:.3f} |"
        )


async def stall(page: bytes, mode: str) -> float:
    """Longest event-loop stall (ms) while one page is fingerprinted and nothing else runs."""
    from simhash_scrapy.core.analysis import analyse_html

    state = make_state(*MODES[mode])
    loop = asyncio.get_running_loop()
    worst = 0.0
    running = True

    def tick(expected: float) -> None:
        nonlocal worst
        now = loop.time()
        worst = max(worst, now - expected)
        if running:
            loop.call_later(0.001, tick, now + 0.001)

    loop.call_later(0.001, tick, loop.time() + 0.001)
    await asyncio.sleep(0.01)
    await state.run_analysis(analyse_html, page, "utf-8", state.config.analysis, size=len(page))
    await asyncio.sleep(0.01)
    running = False
    if state._executor is not None:
        state._executor.shutdown(wait=True)
    return 1000 * worst


def report_stalls(pages: list[bytes], modes: list[str]) -> None:
    by_size = sorted(pages, key=len)
    picks = [by_size[len(by_size) // 2], *[p for p in by_size if len(p) >= 64 * 1024][-3:]]
    picks += [p for p in by_size if 60 * 1024 <= len(p) < 70 * 1024][:1]
    picks = sorted({len(p): p for p in picks}.values(), key=len)
    modes = [m for m in modes if MODES[m] is not None]
    print("\nLongest event-loop stall while one page is fingerprinted (median of 3), nothing else running:")
    print("| page size | " + " | ".join(f"{m} ms" for m in modes) + " |")
    print("|---|" + "---|" * len(modes))
    for page in picks:
        cells = [statistics.median(asyncio.run(stall(page, m)) for _ in range(3)) for m in modes]
        print(f"| {len(page) // 1024} kB | " + " | ".join(f"{c:.1f}" for c in cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--docs", type=Path, default=DEFAULT_DOCS)
    parser.add_argument("--max-kb", type=int, default=200, help="size limit of the typical-page set (kB)")
    parser.add_argument("--latency", type=float, nargs="+", default=[0.0, 0.2], help="simulated download times (s)")
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--sets", nargs="+", choices=["all", "typical", "none"], default=["all", "typical"])
    args = parser.parse_args()
    files = sorted(args.docs.rglob("*.html"))
    if not files:
        sys.exit(f"no HTML pages under {args.docs} (apt-get install python3-doc, or pass --docs FOLDER)")
    pages = [f.read_bytes() for f in files]
    random.Random(1).shuffle(pages)
    typical = [p for p in pages if len(p) <= args.max_kb * 1024]
    modes = args.modes if "inline" in args.modes else ["inline", *args.modes]
    report_stalls(pages, modes)
    for latency in args.latency:
        if "all" in args.sets:
            report("all pages", pages, args.rounds, latency, modes)
        if "typical" in args.sets:
            report(f"pages <= {args.max_kb} kB", typical, args.rounds, latency, modes)


if __name__ == "__main__":
    main()
