"""End-to-end mode of the quality scorer: crawl the set with Scrapy and the plugin, score the cluster report.

Every host of the set is served by its own HTTP server on 127.0.0.1 (one port
per host, so per-host grouping is kept), the URLs are crawled in the set's
crawl order (one request at a time, FIFO, so the run is repeatable) by a spider
that only fetches, with ``ADDONS = {"simhash_scrapy.Addon": 0}``,
``SIMHASH_ACTION = "flag"`` (every page reaches the spider) and a JSON Lines
cluster report.  Two pages count as flagged when they are members of one
cluster.  Empty pages "fingerprinted" are those that appear in a cluster (the
report does not list pages that were fingerprinted but matched nothing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import common

_SPIDER = r"""
import json, sys
import scrapy
from scrapy.crawler import CrawlerProcess

urls_file, report, settings_json = sys.argv[1], sys.argv[2], sys.argv[3]
urls = [line.strip() for line in open(urls_file) if line.strip()]

class Quality(scrapy.Spider):
    name = "quality"

    async def start(self):
        for url in urls:
            yield scrapy.Request(url, dont_filter=True)

    def parse(self, response):
        seen.append([response.url, response.status, response.meta.get("simhash_skipped")])
        return None

seen = []

settings = {
    "LOG_LEVEL": "WARNING",
    "TELNETCONSOLE_ENABLED": False,
    "ROBOTSTXT_OBEY": False,
    "CONCURRENT_REQUESTS": 1,
    "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
    "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
    "RETRY_ENABLED": False,
    "COOKIES_ENABLED": False,
    "ADDONS": {"simhash_scrapy.Addon": 0},
    "SIMHASH_ACTION": "flag",
    "SIMHASH_REPORT_URI": report,
    "SIMHASH_REPORT_FORMAT": "jsonl",
}
settings.update(json.loads(settings_json))
process = CrawlerProcess(settings)
crawler = process.create_crawler(Quality)
process.crawl(crawler)
process.start()
stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
with open(report + ".order", "a") as out:  # the pages the spider got, in order (the library replays them)
    out.writelines(json.dumps(row) + "\n" for row in seen)
print(json.dumps(stats, default=str))
"""


class _Site:
    """One HTTP server per host of the set, serving the set's pages by path and query."""

    def __init__(self, evalset: common.EvalSet) -> None:
        self.routes: dict[str, dict[str, Path]] = {}
        for page in evalset.pages:
            parts = urlsplit(page.url)
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            self.routes.setdefault(parts.netloc, {})[target] = evalset.root / page.file
        self.servers: dict[str, ThreadingHTTPServer] = {}

    def __enter__(self) -> _Site:
        for host, routes in self.routes.items():
            server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(routes))
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.servers[host] = server
        return self

    def __exit__(self, *exc: object) -> None:
        for server in self.servers.values():
            server.shutdown()
            server.server_close()

    def local(self, url: str) -> str:
        parts = urlsplit(url)
        port = self.servers[parts.netloc].server_address[1]
        return f"http://127.0.0.1:{port}{parts.path}" + (f"?{parts.query}" if parts.query else "")


def _handler(routes: dict[str, Path]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            path = routes.get(self.path)
            if path is None:
                self.send_error(404)
                return
            body = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def _settings(setup) -> dict:
    f = setup.features
    return {
        "SIMHASH_TEXT_MODE": setup.text_mode,
        "SIMHASH_WORD_NGRAM": f.word_ngram,
        "SIMHASH_CHAR_NGRAM": f.char_ngram,
        "SIMHASH_WEIGHTING": f.weighting,
        "SIMHASH_CJK_NGRAM": f.cjk_ngram,
        "SIMHASH_MAX_DISTANCE": setup.k,
        "SIMHASH_MIN_TOKENS": setup.min_tokens,
        "SIMHASH_ONE_EDIT_BELOW": setup.one_edit_below,
        "SIMHASH_TEMPLATES": setup.templates,
        "SIMHASH_SECOND_SIMHASH": setup.second,
        "SIMHASH_CONTAINMENT": setup.containment,
    }


#: ``--backend``: where the crawl keeps its index.  ``memory``: in process; ``resumed``: a ``SIMHASH_DIR``
#: store, the crawl stopped after the first half of the pages and run again on the same store for the rest
#: (the second run's report covers every page); ``redis``: a redis-server started for the run, one worker.
BACKENDS = ("memory", "resumed", "redis")


def _crawl(tmp: Path, urls: list[str], report: Path, settings: dict) -> dict:
    script = tmp / "spider.py"
    script.write_text(_SPIDER)
    listing = tmp / "urls.txt"
    listing.write_text("\n".join(urls))
    env = dict(os.environ)
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    proc = subprocess.run(
        [sys.executable, str(script), str(listing), str(report), json.dumps(settings)],
        capture_output=True, text=True, cwd=tmp, env=env, timeout=1800,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"crawl failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _redis_server(tmp: Path) -> tuple[subprocess.Popen, str]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    return server, f"redis://127.0.0.1:{port}/0"


def _crawl_with(tmp: Path, urls: list[str], report: Path, settings: dict, backend: str) -> dict:
    """Crawl ``urls`` in order on ``backend`` (``BACKENDS``); the stats (summed over the runs)."""
    if backend == "memory":
        return _crawl(tmp, urls, report, settings)
    if backend == "resumed":
        settings = {**settings, "SIMHASH_DIR": str(tmp / "store")}
        half = len(urls) // 2
        first = _crawl(tmp, urls[:half], tmp / "first.jsonl", settings)
        stats = _crawl(tmp, urls[half:], report, settings)
        return {k: first.get(k, 0) + v if isinstance(v, int) else v for k, v in stats.items()}
    server, url = _redis_server(tmp)
    try:
        return _crawl(tmp, urls, report, {**settings, "SIMHASH_BACKEND": "redis", "SIMHASH_REDIS_URL": url})
    finally:
        server.terminate()
        server.wait(10)


def run_e2e(evalset: common.EvalSet, setup, backend: str = "memory"):  # -> score.Result
    import score

    pages = sorted(evalset.pages, key=lambda p: p.order)
    with tempfile.TemporaryDirectory(prefix="simhash-quality-") as tmp, _Site(evalset) as site:
        local = {site.local(p.url): p.id for p in pages}
        report = Path(tmp) / "report.jsonl"
        t0 = time.perf_counter()
        stats = _crawl_with(Path(tmp), [site.local(p.url) for p in pages], report, _settings(setup), backend)
        records = [json.loads(line) for line in report.read_text().splitlines() if line.strip()] if report.exists() else []
        clusters = [r for r in records if r.get("type", "cluster") == "cluster"]  # not the summary line
        seconds = time.perf_counter() - t0
        order = [json.loads(line) for line in Path(str(report) + ".order").read_text().splitlines()]
        first_order = Path(tmp) / "first.jsonl.order"
        if first_order.exists():
            order = [json.loads(line) for line in first_order.read_text().splitlines()] + order
    flagged: set[tuple[int, int]] = set()
    in_cluster: set[int] = set()
    for cluster in clusters:
        ids = [local[m["url"]] for m in cluster["members"] if m["url"] in local]
        in_cluster.update(ids)
        for i, a in enumerate(ids):
            for b in ids[i + 1 :]:
                flagged.add(common.pair(a, b))
    fps = {p.id: (1 if p.id in in_cluster else None) for p in pages}
    result = score.evaluate(evalset, setup, fps, flagged)
    result.skipped = sum(v for k, v in stats.items() if k.startswith("simhash/skipped/") and isinstance(v, int))
    result.extra.update(library_agrees(evalset, setup, local, order, flagged))
    result.extra.update(dedup_agrees(evalset, setup, local, order, flagged))
    result.extra.update(
        mode="e2e", backend=backend, seconds=round(seconds, 1), clusters=len(clusters),
        fingerprinted=stats.get("simhash/fingerprinted"), responses=stats.get("response_received_count"),
    )  # fmt: skip
    return result


def library_agrees(evalset: common.EvalSet, setup, local: dict, order: list, flagged: set) -> dict:
    """The library's entry point (``decide_html``) on the pages the crawl checked, in the crawl's order: the
    pairs it flags beside the crawl's (``library_only`` / ``crawl_only``: 0 and 0 when they agree)."""
    try:
        from simhash_scrapy import decide_html
    except ImportError:  # an older tree (the harness run with another revision's Python)
        return {}
    from simhash_scrapy.core.settings.config import SimhashConfig

    files = {p.id: evalset.root / p.file for p in evalset.pages}
    checked = [url for url, status, skipped in order if status == 200 and skipped is None and url in local]
    config = SimhashConfig.from_settings(_settings(setup))
    decisions = decide_html([(url, files[local[url]].read_bytes()) for url in checked], config)
    clusters: dict[int, list[int]] = {}
    for d in decisions:
        if d is not None and d.canonical is not None:
            clusters.setdefault(d.canonical, [local[checked[d.canonical]]]).append(local[checked[d.position]])
    mine = {common.pair(a, b) for ids in clusters.values() for i, a in enumerate(ids) for b in ids[i + 1 :]}
    return {"library_pairs": len(mine), "library_only": len(mine - flagged), "crawl_only": len(flagged - mine)}


def dedup_agrees(evalset: common.EvalSet, setup, local: dict, order: list, flagged: set) -> dict:
    """``scrapy simhash dedup``'s code (``commands.dedup``: its first pass over the files, then its clustering) on
    the pages the crawl checked, in the crawl's order, each file at its crawled URL (what ``--base-url`` gives a
    folder whose files are named by their paths): the pairs it flags beside the crawl's (``dedup_only`` /
    ``crawl_only_dedup``: 0 and 0 when they agree)."""
    import io

    try:
        from simhash_scrapy.commands import dedup
        from simhash_scrapy.commands._common import Progress

        dedup._scope_digests  # noqa: B018 - an older tree has another dedup (its files without URLs)
    except (ImportError, AttributeError):
        return {}
    from simhash_scrapy.core.settings.config import SimhashConfig

    checked = [url for url, status, skipped in order if status == 200 and skipped is None and url in local]
    files = {p.id: str(evalset.root / p.file) for p in evalset.pages}

    class Crawled(dedup._Source):
        kind = "files"
        description = "the crawl's pages"

        def count(self) -> int:
            return len(checked)

        def url(self, position: int) -> str:
            return checked[position]

        def payloads(self):  # type: ignore[no-untyped-def]
            return ((position, (files[local[url]], url)) for position, url in enumerate(checked))

    config = SimhashConfig.from_settings(_settings(setup))
    source = Crawled()
    quiet = Progress("fingerprinting", len(checked), "pages", False, io.StringIO())
    pages = dedup._fingerprint_pages(source, (config, "", "", config.item_format), 1, quiet, config)

    def pairs(canonical: list[int]) -> set[tuple[int, int]]:
        clusters: dict[int, list[int]] = {}
        for i, c in enumerate(canonical):
            if c >= 0:
                clusters.setdefault(c, [local[checked[pages.kept[c]]]]).append(local[checked[pages.kept[i]]])
        return {common.pair(a, b) for ids in clusters.values() for i, a in enumerate(ids) for b in ids[i + 1 :]}

    mine = pairs(dedup._cluster_pages(pages, config)[0].tolist())
    # The baseline, in the same run: dedup before issue 34's parity work (commit 6588428): the rule on fingerprints
    # alone (``assign_canonicals``: no URL), each page in the scope of its own digests, made without its URL (no
    # product option from the URL, no view identities).
    from simhash_scrapy.core.cluster.distinct import scope_key
    from simhash_scrapy.core.cluster.identity import combine_digests
    from simhash_scrapy.core.detector import assign_canonicals, page_digests
    from simhash_scrapy.core.records import page_scope

    names = [
        scope_key(page_scope(config.scope, url), combine_digests(page_digests(config, None, Path(path).read_bytes())))
        for url, path in ((url, files[local[checked[i]]]) for url, i in zip(pages.urls, pages.kept))
    ]  # fmt: skip
    numbers: dict[str, int] = {}
    before = pairs(assign_canonicals(
        pages.fingerprints, [numbers.setdefault(n, len(numbers)) for n in names], config.max_distance, config.blocks,
        pages.exact_flags, pages.edit_keys, pages.also, pages.seconds, pages.sketches,
    )[0].tolist())  # fmt: skip
    return {"dedup_pairs": len(mine), "dedup_only": len(mine - flagged), "crawl_only_dedup": len(flagged - mine),
            "dedup_before_only": len(before - flagged), "crawl_only_before": len(flagged - before)}  # fmt: skip


def run_detector(evalset: common.EvalSet, setup):  # -> score.Result
    """The library's entry point (``simhash_scrapy.decide_html``) on the set's pages in its crawl order, scored
    as the crawl is: two pages are flagged when they are in one cluster (the same canonical page)."""
    import score
    from simhash_scrapy import decide_html
    from simhash_scrapy.core.settings.config import SimhashConfig

    pages = sorted(evalset.pages, key=lambda p: p.order)
    t0 = time.perf_counter()
    config = SimhashConfig.from_settings(_settings(setup))
    decisions = decide_html([(p.url, (evalset.root / p.file).read_bytes()) for p in pages], config)
    clusters: dict[int, list[int]] = {}
    for d in decisions:
        if d is not None and d.canonical is not None:
            clusters.setdefault(pages[d.canonical].id, [pages[d.canonical].id]).append(pages[d.position].id)
    flagged = {common.pair(a, b) for ids in clusters.values() for i, a in enumerate(ids) for b in ids[i + 1 :]}
    in_cluster = {i for ids in clusters.values() for i in ids}
    result = score.evaluate(evalset, setup, {p.id: (1 if p.id in in_cluster else None) for p in pages}, flagged)
    result.skipped = sum(d is None for d in decisions)
    result.extra.update(mode="detector", seconds=round(time.perf_counter() - t0, 1), clusters=len(clusters))
    return result
