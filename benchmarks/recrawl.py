"""Recurring crawls: bytes downloaded and time of a second crawl, with and without validators (issue 24).

    python benchmarks/recrawl.py                 # 200 pages, 3 repetitions
    python benchmarks/recrawl.py --pages 100 --reps 1
    python benchmarks/recrawl.py --digest-cost   # CPU share of the content digest in a page's analysis
    python benchmarks/recrawl.py --deep --pages 1000 --reps 1   # a site 3 levels deep: pages reached (issue 35)

What it does:

1. Copies ``--pages`` real pages of Debian's Python docs (``/usr/share/doc/python3-dev/html/library``,
   package ``python3-doc``; without them, generated article pages) into a folder with an
   ``index.html`` linking to each, every file with an old modification time.
2. Serves the folder with ``python -m http.server`` in a subprocess (it sends ``Last-Modified``
   and answers ``If-Modified-Since`` with 304; no ``ETag``).
3. For each mode, from a fresh state: crawl 1, crawl 2 (nothing changed), then adds a 45-word
   paragraph to 5 pages (newer modification time) and crawl 3.  Each crawl is a fresh process
   (this file with ``--crawl``): the spider fetches ``/`` (``dont_filter``, as ``start_urls``),
   follows its links and yields one item per page.  Modes:

   * ``scrapy``: plain Scrapy, no plugin (every crawl downloads everything);
   * ``validators``: the plugin with ``SIMHASH_DIR`` (conditional requests on, the default);
   * ``no-validators``: the same with ``SIMHASH_CONDITIONAL = False`` (content digest only);
   * ``deltafetch``: scrapy-deltafetch (``pip install scrapy-deltafetch``; skipped when absent):
     a request to a page that yielded an item before is never sent again (its middleware as
     released, 2.1.0, with a thin async adapter: Scrapy 2.13+ refuses it without one).

4. Prints a markdown table per crawl: requests, 200 and 304 answers, bytes received
   (``downloader/response_bytes``, headers included), median process wall time and CPU time
   (the crawl process), and, for crawl 3, how the 5 edited pages were told: the plugin's
   outcomes (``edited``/``changed``/``unchanged``), what the distance-only rule before issue 24
   would have said (within k = "unchanged"), and for deltafetch how many were fetched at all.

``--deep`` (issue 35): a generated site three levels deep (``index.html`` -> 5 sections -> 25 topics ->
``--pages`` articles, each article linking to the next one of its topic), crawled three times by a spider
that follows every link (crawl 3 after 5 articles gained 45 words), in the modes that a re-crawl could take:

* ``scrapy``: plain Scrapy (everything downloaded every time);
* ``replay``: the plugin's defaults: validators sent, a 304 replays the requests its page yielded last time
  (``SIMHASH_REPLAY``, kept in ``<store>.replay``);
* ``no-replay``: validators sent, ``SIMHASH_REPLAY = False`` (before issue 35: a 304 ends the branch);
* ``httpcache``: the plugin with Scrapy's HTTP cache (``RFC2616Policy``: the cache makes its own conditional
  requests and serves the stored body after a 304, so the spider parses every page again);
* ``no-validators``: the plugin with ``SIMHASH_CONDITIONAL = False`` (every page downloaded again).

It prints, per crawl: the distinct pages requested ("reached"), requests, 200 and 304 answers, bytes
received, bytes kept on disk (the store and replay file, or the HTTP cache), and CPU time.

Timings on a shared machine are noisy: compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
DOCS = Path("/usr/share/doc/python3-dev/html/library")
EDITED = 5
OLD = time.time() - 100_000
NEWER = OLD + 50_000
_WORDS = (
    "river stone garden window silver morning letter market yellow forest engine candle harbor velvet "
    "planet ladder copper meadow winter signal pocket thunder marble violet orchard bridge lantern mirror "
    "cotton saddle pepper island canyon feather button anchor basket hollow jungle kettle lemon magnet"
).split()


# ------------------------------------------------------------------ the crawl (a child process)
def run_one_crawl(base: str, settings: dict[str, Any], out: Path) -> None:
    import scrapy

    follow = settings.pop("_FOLLOW", False)
    from scrapy.crawler import CrawlerProcess

    class RecrawlSpider(scrapy.Spider):
        name = "recrawl"

        async def start(self):  # type: ignore[override]
            yield scrapy.Request(base + "/", dont_filter=True, callback=self.parse_index)

        def parse_index(self, response: Any) -> Any:
            yield {"url": response.url}
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, callback=self.parse_page)

        def parse_page(self, response: Any) -> Any:
            yield {"url": response.url, "title": response.css("title::text").get()}
            if follow:
                for href in response.css("a::attr(href)").getall():
                    yield response.follow(href, callback=self.parse_page)

    if settings.get("DELTAFETCH_ENABLED"):
        import warnings

        warnings.filterwarnings("ignore", module="scrapy_deltafetch")  # its stats calls pass spider= (deprecated)
        settings["SPIDER_MIDDLEWARES"] = {_async_deltafetch(): 100}
    process = CrawlerProcess(settings={
        "LOG_LEVEL": "WARNING", "ROBOTSTXT_OBEY": False, "TELNETCONSOLE_ENABLED": False, "LOGSTATS_INTERVAL": 0,
        "CONCURRENT_REQUESTS": 8, **settings,
    })  # fmt: skip
    crawler = process.create_crawler(RecrawlSpider)
    process.crawl(crawler)
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
    out.write_text(json.dumps(stats), encoding="utf-8")


def _async_deltafetch() -> type:
    """scrapy-deltafetch 2.1.0's own middleware, given the async twin of its ``process_spider_output``
    that Scrapy 2.13+ requires (it refuses the middleware otherwise); the same logic, item by item."""
    from scrapy_deltafetch import DeltaFetch

    class AsyncDeltaFetch(DeltaFetch):  # type: ignore[misc]
        async def process_spider_output_async(self, response: Any, result: Any, spider: Any = None) -> Any:
            async for entry in result:
                for kept in DeltaFetch.process_spider_output(self, response, [entry], spider):
                    yield kept

    return AsyncDeltaFetch


# ------------------------------------------------------------------ the site
def _paragraph(seed: int, words: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) + str(rng.randrange(100)) for _ in range(words))


def build_site(root: Path, pages: int) -> list[str]:
    root.mkdir(parents=True)
    names: list[str] = []
    sources = sorted(DOCS.glob("*.html")) if DOCS.is_dir() else []
    for n in range(pages):
        name = f"p{n:03d}.html"
        if n < len(sources):
            shutil.copyfile(sources[n], root / name)
        else:
            body = "".join(f"<p>{_paragraph(n * 100 + i, 60)}</p>" for i in range(8))
            (root / name).write_text(f"<html><head><title>Page {n}</title></head><body><main><h1>Page {n}</h1>"
                                     f"{body}</main></body></html>", encoding="utf-8")  # fmt: skip
        names.append(name)
    links = "".join(f'<li><a href="{name}">{name}</a></li>' for name in names)
    (root / "index.html").write_text(f"<html><head><title>Index</title></head><body><ul>{links}</ul></body></html>",
                                     encoding="utf-8")  # fmt: skip
    for path in root.iterdir():
        os.utime(path, (OLD, OLD))
    return names


def add_paragraph(path: Path, seed: int) -> None:
    """A 45-word paragraph after the page's first heading (inside its main text), newer file time."""
    html = path.read_text(encoding="utf-8", errors="surrogateescape")
    paragraph = f"<p>{_paragraph(seed, 45)}</p>"
    match = re.search(r"</h1>", html)
    at = match.end() if match else html.index("</body>")
    path.write_text(html[:at] + paragraph + html[at:], encoding="utf-8", errors="surrogateescape")
    os.utime(path, (NEWER, NEWER))


# The server the tests use too (tests/static_server.py).
sys.path.insert(0, str(HERE.parents[1] / "tests"))
from static_server import Server  # noqa: E402


def build_deep_site(root: Path, pages: int) -> list[str]:
    """``index.html`` -> 5 sections -> 25 topics -> ``pages`` articles (see ``--deep``); the article paths."""
    root.mkdir(parents=True)
    topics = [(s, t) for s in range(5) for t in range(5)]
    articles: dict[tuple[int, int], list[str]] = {topic: [] for topic in topics}
    for n in range(pages):
        articles[topics[n % len(topics)]].append(f"s{topics[n % len(topics)][0]}/t{topics[n % len(topics)][1]}/a{n}.html")

    def page(title: str, seed: int, links: list[str]) -> str:
        body = "".join(f"<p>{_paragraph(seed * 100 + i, 60)}</p>" for i in range(4))
        nav = "".join(f'<li><a href="/{link}">{link}</a></li>' for link in links)
        return (f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1>{body}</main>"
                f"<nav><ul>{nav}</ul></nav></body></html>")  # fmt: skip

    def write(path: str, html: str) -> None:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(html, encoding="utf-8")

    for (s, t), names in articles.items():
        write(f"s{s}/t{t}/index.html", page(f"Topic {s}.{t}", 900_000 + 10 * s + t, names))
        for i, name in enumerate(names):
            following = names[i + 1 : i + 2]
            write(name, page(f"Article {name}", 1_000 + int(name.rsplit("/a", 1)[1][:-5]), following))
    for s in range(5):
        write(f"s{s}/index.html", page(f"Section {s}", 800_000 + s, [f"s{s}/t{t}/index.html" for t in range(5)]))
    write("index.html", page("Home", 700_000, [f"s{s}/index.html" for s in range(5)]))
    for path in root.rglob("*"):
        os.utime(path, (OLD, OLD))
    return [name for names in articles.values() for name in names]


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


DEEP_MODES = ("scrapy", "replay", "no-replay", "httpcache", "no-validators")


def deep_settings(mode: str, state: Path) -> dict[str, Any]:
    settings: dict[str, Any] = {"_FOLLOW": True}
    if mode == "scrapy":
        return settings
    settings.update({"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_DIR": str(state / "simhash")})
    if mode == "no-replay":
        settings["SIMHASH_REPLAY"] = False
    elif mode == "no-validators":
        settings["SIMHASH_CONDITIONAL"] = False
    elif mode == "httpcache":
        settings.update({"HTTPCACHE_ENABLED": True, "HTTPCACHE_DIR": str(state / "httpcache"),
                         "HTTPCACHE_POLICY": "scrapy.extensions.httpcache.RFC2616Policy"})  # fmt: skip
    return settings


def deep_main(pages: int, reps: int) -> None:
    """``--deep``: pages reached, answers, bytes and CPU of three crawls of a deep site, per mode."""
    rows: dict[tuple[str, int], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="simhash-recrawl-deep-") as tmp:
        tmp_path = Path(tmp)
        pristine = tmp_path / "pristine"
        names = build_deep_site(pristine, pages)
        total = len(list(pristine.rglob("*.html")))
        print(f"{total} pages ({pages} articles, 3 levels deep: index, 5 sections, 25 topics), "
              f"{folder_bytes(pristine):,} bytes; 5 articles gain 45 words before crawl 3; {reps} repetition(s)\n")
        for rep in range(reps):
            for mode in DEEP_MODES:
                site, state = tmp_path / f"site-{mode}-{rep}", tmp_path / f"state-{mode}-{rep}"
                shutil.copytree(pristine, site)
                for path in site.rglob("*"):
                    os.utime(path, (OLD, OLD))
                state.mkdir()
                server = Server(site, tmp_path / f"log-{mode}-{rep}")
                try:
                    seen = 0
                    for number in (1, 2, 3):
                        if number == 3:
                            for i, name in enumerate(names[:: max(1, len(names) // 5)][:5]):
                                add_paragraph(site / name, 7_000 + i)
                        stats = crawl(server.base, deep_settings(mode, state), state)
                        statuses = server.statuses()[seen:]
                        seen += len(statuses)
                        stats["reached"] = len({path for path, _ in statuses})
                        stats["kept"] = folder_bytes(state) - sum(p.stat().st_size for p in state.glob("stats-*.json"))
                        rows.setdefault((mode, number), []).append(stats)
                finally:
                    server.stop()
    for number, title in ((1, "Crawl 1 (nothing recorded)"), (2, "Crawl 2 (nothing changed)"),
                          (3, "Crawl 3 (5 articles gained 45 words)")):  # fmt: skip
        print(f"### {title}\n")
        print("| mode | pages reached | requests | 200 | 304 | bytes received | bytes kept on disk | CPU s (median) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for mode in DEEP_MODES:
            runs = rows[(mode, number)]
            s = runs[0]
            print(f"| {mode} | {s['reached']:,} of {total:,} | {s.get('downloader/request_count', 0):,} | "
                  f"{s.get('downloader/response_status_count/200', 0):,} | {s.get('downloader/response_status_count/304', 0):,} | "
                  f"{s.get('downloader/response_bytes', 0):,} | {s['kept']:,} | {statistics.median(r['cpu'] for r in runs):.2f} |")  # fmt: skip
        print()


# ------------------------------------------------------------------ modes
def mode_settings(mode: str, state: Path) -> dict[str, Any]:
    if mode == "scrapy":
        return {}
    if mode == "deltafetch":
        # run_one_crawl puts scrapy-deltafetch's middleware (with an async adapter) in SPIDER_MIDDLEWARES.
        return {"DELTAFETCH_ENABLED": True, "DELTAFETCH_DIR": str(state / "deltafetch")}
    settings: dict[str, Any] = {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_DIR": str(state / "simhash")}
    if mode == "no-validators":
        settings["SIMHASH_CONDITIONAL"] = False
    return settings


def crawl(base: str, settings: dict[str, Any], work: Path) -> dict[str, Any]:
    out = work / f"stats-{time.monotonic_ns()}.json"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, str(HERE), "--crawl", base, json.dumps(settings), str(out)], check=True,
                   cwd=work)  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    stats = json.loads(out.read_text(encoding="utf-8"))
    stats["wall"] = wall
    stats["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return stats


def edit_outcomes(state: Path, site: Path, base: str, edited: list[str], k: int) -> dict[str, int]:
    """How the plugin's store recorded the edited pages, and what the distance-only rule would have said."""
    from simhash_scrapy.core.store.store import read_store

    contents = read_store(state / "simhash" / "recrawl.store")
    counts = {"edited": 0, "changed": 0, "unchanged": 0, "old rule: unchanged": 0}
    for row, url in enumerate(contents.urls()):
        if url.rsplit("/", 1)[-1] in edited:
            counts[contents.outcomes[row]] = counts.get(contents.outcomes[row], 0) + 1
            if contents.has_previous[row] and bin(int(contents.fingerprints[row]) ^ int(contents.previous[row])).count("1") <= k:
                counts["old rule: unchanged"] += 1
    return counts


def digest_cost(pages: int) -> None:
    """CPU time of the content digest (``exact_digest`` of the page's text) against the whole analysis."""
    from simhash_scrapy.core.analysis import analyse_html
    from simhash_scrapy.core.features.exact import exact_digest
    from simhash_scrapy.core.extract.text import extract_text_bytes

    with tempfile.TemporaryDirectory(prefix="simhash-digest-") as tmp:
        root = Path(tmp) / "site"
        build_site(root, pages)
        bodies = [path.read_bytes() for path in sorted(root.glob("p*.html"))]
    texts = [extract_text_bytes(body, main_content=True) for body in bodies]
    best_all = best_digest = float("inf")
    for _ in range(5):
        started = time.process_time()
        for body in bodies:
            analyse_html(body)
        best_all = min(best_all, time.process_time() - started)
        started = time.process_time()
        for text in texts:
            exact_digest(text)
        best_digest = min(best_digest, time.process_time() - started)
    print(f"{len(bodies)} pages: analysis {1000 * best_all / len(bodies):.2f} ms a page (digest included), "
          f"digest {1000 * best_digest / len(bodies):.3f} ms a page = {100 * best_digest / best_all:.1f}% of it "
          f"(best of 5, CPU time)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--crawl", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--digest-cost", action="store_true", help="only measure the content digest's CPU share")
    parser.add_argument("--deep", action="store_true", help="a site 3 levels deep: pages reached per mode (issue 35)")
    args = parser.parse_args()
    if args.digest_cost:
        digest_cost(args.pages)
        return
    if args.crawl:
        run_one_crawl(args.crawl[0], json.loads(args.crawl[1]), Path(args.crawl[2]))
        return
    if args.deep:
        deep_main(args.pages, args.reps)
        return
    flat_main(args)


def flat_main(args: argparse.Namespace) -> None:
    """The default run: a one-level site, bytes and time per mode (see the module docstring)."""
    from simhash_scrapy.core.defaults import MAX_DISTANCE

    modes = ["scrapy", "validators", "no-validators", "deltafetch"]
    try:
        import scrapy_deltafetch  # noqa: F401
    except ImportError:
        modes.remove("deltafetch")
        print("scrapy-deltafetch is not installed: its mode is skipped (pip install scrapy-deltafetch)")
    results: dict[tuple[str, int], list[dict[str, Any]]] = {}
    edits: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory(prefix="simhash-recrawl-") as tmp:
        tmp_path = Path(tmp)
        pristine = tmp_path / "pristine"
        names = build_site(pristine, args.pages)
        edited = names[len(names) // (EDITED + 1) :: len(names) // (EDITED + 1)][:EDITED]
        source = "Debian python3-doc library pages" if DOCS.is_dir() else "generated pages"
        print(f"{args.pages} pages ({source}, {sum(p.stat().st_size for p in pristine.iterdir()):,} bytes) + index; "
              f"{EDITED} pages gain 45 words before crawl 3; {args.reps} repetition(s)\n")  # fmt: skip
        for rep in range(args.reps):
            for mode in modes:  # alternated, so the machine's load falls on every mode alike
                site = tmp_path / f"site-{mode}-{rep}"
                shutil.copytree(pristine, site)
                for path in site.iterdir():
                    os.utime(path, (OLD, OLD))
                state = tmp_path / f"state-{mode}-{rep}"
                state.mkdir()
                server = Server(site)
                try:
                    settings = mode_settings(mode, state)
                    for number in (1, 2, 3):
                        if number == 3:
                            for i, name in enumerate(edited):
                                add_paragraph(site / name, 7_000 + i)
                        results.setdefault((mode, number), []).append(crawl(server.base, settings, state))
                finally:
                    server.stop()
                if mode in ("validators", "no-validators") and rep == 0:
                    edits[mode] = edit_outcomes(state, site, server.base, edited, MAX_DISTANCE)
    first = {mode: statistics.median(r["downloader/response_bytes"] for r in results[(mode, 1)]) for mode in modes}
    for number, title in ((1, "Crawl 1 (nothing recorded)"), (2, "Crawl 2 (nothing changed)"),
                          (3, f"Crawl 3 ({EDITED} pages gained 45 words)")):  # fmt: skip
        print(f"### {title}\n")
        print("| mode | requests | 200 | 304 | bytes received | vs crawl 1 of plain Scrapy | wall s (median) | CPU s (median) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for mode in modes:
            runs = results[(mode, number)]
            s = runs[0]
            received = statistics.median(r.get("downloader/response_bytes", 0) for r in runs)
            print(f"| {mode} | {s.get('downloader/request_count', 0)} | {s.get('downloader/response_status_count/200', 0)} | "
                  f"{s.get('downloader/response_status_count/304', 0)} | {received:,.0f} | "
                  f"{received / first['scrapy']:.3f} | {statistics.median(r['wall'] for r in runs):.2f} | "
                  f"{statistics.median(r['cpu'] for r in runs):.2f} |")  # fmt: skip
        print()
    print(f"### How the {EDITED} edited pages were told in crawl 3\n")
    for mode, counts in edits.items():
        detail = ", ".join(f"{name} {count}" for name, count in counts.items())
        print(f"* {mode}: {detail} (stats: edited {results[(mode, 3)][0].get('simhash/edited', 0)}, changed "
              f"{results[(mode, 3)][0].get('simhash/changed', 0)}, not modified {results[(mode, 3)][0].get('simhash/not_modified', 0)})")  # fmt: skip
    if "deltafetch" in modes:
        s = results[("deltafetch", 3)][0]
        print(f"* deltafetch: {s.get('downloader/request_count', 0) - 1} page requests sent, "
              f"{s.get('deltafetch/skipped', 0)} skipped: the edited pages are never fetched again")  # fmt: skip


if __name__ == "__main__":
    main()
