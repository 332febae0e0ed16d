"""A cluster's representative (issue 28): how often a real crawl names the clean original.

    python benchmarks/representative.py                  # 300 articles, memory backend, both policies
    python benchmarks/representative.py --articles 100 --backend persistent
    python benchmarks/representative.py --backend redis  # needs redis-server on PATH (started on a free port)
    python benchmarks/representative.py --book           # the crawl's per-cluster view alone: memory, CPU
    python benchmarks/representative.py --set benchmarks/quality/data/realweb --half tune  # a quality set's copy groups

What it does:

1. Builds articles from real, human-written text (Debian's ``python3-doc``
   HTML sections, as ``benchmarks/url_rules.py`` does; fallback
   ``pydoc_data.topics``).
2. Serves one site on 127.0.0.1: each article has a clean original
   (``/docs/s<k>/a<i>.html``) and, drawn per article from a fixed seed, two
   to five copies: tracking parameters (``?utm_source=…&utm_campaign=…``), a
   session id (``?sessionid=<hex>``), a print copy (``/print/…``, another
   template), an AMP copy (``/amp/…``), a mobile copy (``/m/…``) and a mirror
   (``/mirror/v2/…``).  Half of the originals carry ``<link rel="canonical">``
   naming themselves (their query copies then do too, as real sites serve
   them); AMP copies name the original in 4 cases out of 5 (a third of them
   by a ``Link`` header), mirrors copy the original's tag.  A tenth of the
   articles have no copy.
3. Crawls it with Scrapy and the add-on, ``CONCURRENT_REQUESTS = 1``, every
   copy before any original (a shuffled order), once with
   ``SIMHASH_REPRESENTATIVE = "best"`` and once with ``"first"`` (each in a
   fresh process), drop mode, a JSON Lines report.
4. Prints, per policy: clusters, *mixed* clusters (a clean original and at
   least one copy), how many of those name the clean original as their
   representative (the figure the issue asks for: >= 95 %), the reasons, the
   ``simhash/canonical/replaced`` stat, and the crawl's CPU time (best / first
   ratio: what choosing costs).

``--set DIR [--half tune|test]`` applies the rule to a quality set instead
(``benchmarks/quality``: the real-web set, the shop set): every group of the
set's truth that holds one original and at least one copy (tracking, print,
template/syndicated copies; hard negatives left out) is a *mixed cluster*;
each member is a ``Candidate`` of its URL, the rel=canonical URL its page
names (``html_canonical``, the crawl's reader) and its place in the set's
crawl order.  It prints the share of groups whose representative is the
original, by kind of copy, for the rule of this tree and for the rule of
commit 881d76b (``--baseline``, read with ``git show``: the shortest URL
before crawl order, path words only) in the same run.

``--book`` measures ``core.cluster.representative.ClusterBook`` alone: 100,000
near-duplicates placed in clusters of 4 and in one cluster of 100,000
(bytes held per near-duplicate with ``tracemalloc``, CPU per placement
without it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from url_rules import load_articles  # noqa: E402

KINDS = ("tracking", "session", "print", "amp", "mobile", "mirror")


def original_path(i: int) -> str:
    return f"/docs/s{i % 12}/a{i}.html"


def copy_path(i: int, kind: str) -> str:
    path = original_path(i)
    return {
        "tracking": f"{path}?utm_source=newsletter&utm_campaign=w{i % 7}",
        "session": f"{path}?sessionid={i * 2654435761 % 2**32:08x}",
        "print": f"/print{path}",
        "amp": f"/amp{path}",
        "mobile": f"/m{path}",
        "mirror": f"/mirror/v2{path}",
    }[kind]


def render(title: str, paragraphs: list[str], template: str, extra: str, canonical: str | None) -> str:
    head = f"<title>{escape(title)}</title>"
    if canonical:
        head += f'<link rel="canonical" href="{escape(canonical)}">'
    body = "".join(f"<p>{escape(p)}</p>" for p in paragraphs)
    if template == "print":
        return f"<!doctype html><html><head>{head}</head><body><h1>{escape(title)}</h1>{body}<p>{extra}</p></body></html>"
    nav = "".join(f'<li><a href="/docs/s{s}/">Section {s}</a></li>' for s in range(12))
    return (
        f"<!doctype html><html><head>{head}</head><body><nav><ul>{nav}</ul></nav>"
        f"<main><article><h1>{escape(title)}</h1>{body}<p>{extra}</p></article></main>"
        f"<footer><p>Documentation mirror. All rights reserved.</p></footer></body></html>"
    )


def build_site(articles: list[tuple[str, list[str]]], seed: int) -> tuple[dict[str, tuple[bytes, dict[str, str]]], list[str], list[str]]:
    """(path -> (body, headers), the copies' URLs, the originals' URLs)."""
    rng = random.Random(seed)
    pages: dict[str, tuple[bytes, dict[str, str]]] = {}
    copies: list[str] = []
    originals: list[str] = []
    for i, (title, paragraphs) in enumerate(articles):
        clean = original_path(i)
        named = rng.random() < 0.5
        self_tag = clean if named else None
        pages[clean] = (render(title, paragraphs, "site", "Last updated 2026-05-01", self_tag).encode(), {})
        originals.append(clean)
        if rng.random() < 0.1:
            continue
        for kind in rng.sample(KINDS, rng.randint(2, 5)):
            path = copy_path(i, kind)
            headers: dict[str, str] = {}
            tag: str | None = None
            template, extra = "site", "Last updated 2026-05-01"
            if kind in ("tracking", "session"):
                tag = self_tag  # the same page, served under another URL
            elif kind == "print":
                template, extra = "print", "Printed from the documentation"
            elif kind == "amp":
                extra = "Accelerated page"
                if rng.random() < 0.8:
                    if rng.random() < 1 / 3:
                        headers["Link"] = f'<{clean}>; rel="canonical"'
                    else:
                        tag = clean
            elif kind == "mobile":
                extra = "Mobile edition"
            elif kind == "mirror":
                tag, extra = self_tag, "Mirrored for version 2"
            pages[path] = (render(title, paragraphs, template, extra, tag).encode(), headers)
            copies.append(path)
    rng.shuffle(copies)
    rng.shuffle(originals)
    return pages, copies, originals


def serve(pages: dict[str, tuple[bytes, dict[str, str]]]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            page = pages.get(self.path) or pages.get(self.path.split("?", 1)[0])
            body, headers = page if page is not None else (b"<html><body>Not found</body></html>", {})
            self.send_response(200 if page is not None else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


CRAWL_SCRIPT = r"""
import json, resource, sys
import scrapy
from scrapy.crawler import CrawlerProcess

urls, settings, out = json.load(open(sys.argv[1])), json.loads(sys.argv[2]), sys.argv[3]

class Pages(scrapy.Spider):
    name = "pages"
    async def start(self):
        for url in urls:
            yield scrapy.Request(url, callback=self.parse, errback=self.failed)
    def parse(self, response):
        pass
    def failed(self, failure):
        pass

process = CrawlerProcess({"ROBOTSTXT_OBEY": False, "TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "WARNING",
                          "CONCURRENT_REQUESTS": 1, "RETRY_ENABLED": False,
                          "ADDONS": {"simhash_scrapy.Addon": 0}, **settings})
crawler = process.create_crawler(Pages)
process.crawl(crawler)
process.start()
usage = resource.getrusage(resource.RUSAGE_SELF)
stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
stats["cpu_seconds"] = usage.ru_utime + usage.ru_stime
json.dump(stats, open(out, "w"))
"""


def crawl(urls: list[str], settings: dict[str, Any], workdir: Path) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    script, url_file, out = workdir / "crawl.py", workdir / "urls.json", workdir / "stats.json"
    script.write_text(CRAWL_SCRIPT)
    url_file.write_text(json.dumps(urls))
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    subprocess.run([sys.executable, str(script), str(url_file), json.dumps(settings), str(out)], check=True,
                   env=env, cwd=workdir)
    return json.loads(out.read_text())


def measure(report: Path, base: str, originals: set[str]) -> dict[str, Any]:
    clusters = [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines()]
    clusters = [c for c in clusters if c.get("type", "cluster") == "cluster"]
    mixed = right = 0
    reasons: Counter[str] = Counter()
    wrong: list[str] = []
    for cluster in clusters:
        urls = {m["url"][len(base):] for m in cluster["members"]}
        clean = urls & originals
        if len(clean) != 1 or len(urls) < 2:
            continue
        mixed += 1
        reasons[cluster["representative_reason"]] += 1
        if cluster["representative"][len(base):] in clean:
            right += 1
        elif len(wrong) < 5:
            wrong.append(f"{cluster['representative'][len(base):]} (original {next(iter(clean))})")
    return {"clusters": len(clusters), "mixed": mixed, "right": right, "reasons": dict(reasons), "wrong": wrong}


def book_cost(n: int = 100_000) -> None:
    import time
    import tracemalloc

    from simhash_scrapy.core.cluster.representative import ClusterBook

    for per in (4, n):
        for traced in (True, False):
            book = ClusterBook("best")
            if traced:
                tracemalloc.start()
            started = time.process_time()
            for i in range(n):
                c = i // per
                page = f"https://docs.example.com/section/{c % 50}/article-{c}.html"
                book.place("spider", f"{c:040x}", page + "?utm_source=x", None, f"{i:040x}",
                           page.replace("/section/", "/mirror/v2/section/") + f"?i={i}", page)
            cpu = time.process_time() - started
            if traced:
                held = tracemalloc.get_traced_memory()[0]
                tracemalloc.stop()
                print(f"clusters of {per}: {held / n:.0f} bytes held per near-duplicate")
            else:
                print(f"clusters of {per}: {cpu / n * 1e6:.1f} us CPU per near-duplicate")


BASELINE = "881d76b"


def baseline_rule(commit: str = BASELINE) -> Any:
    """``choose`` as it was at ``commit`` (the module's source from ``git show``, run in the package)."""
    import types

    source = subprocess.run(["git", "show", f"{commit}:simhash_scrapy/core/cluster/representative.py"], cwd=ROOT,
                            check=True, capture_output=True, text=True).stdout
    module = types.ModuleType("simhash_scrapy.core._representative_baseline")
    module.__package__ = "simhash_scrapy.core"
    sys.modules[module.__name__] = module
    exec(compile(source, f"representative.py@{commit}", "exec"), module.__dict__)  # noqa: S102
    return module.choose


def set_groups(root: Path, half: str | None) -> list[list[dict[str, Any]]]:
    """The set's mixed groups: members (manifest rows, crawl order) of one original and at least one copy."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for line in (root / "manifest.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("role") in ("original", "variant") and row.get("group") and (not half or row.get("half") == half):
            groups.setdefault(row["group"], []).append(row)
    mixed = []
    for rows in groups.values():
        if sum(r["role"] == "original" for r in rows) == 1 and len(rows) >= 2:
            mixed.append(sorted(rows, key=lambda r: r.get("order", r["id"])))
    return mixed


def measure_set(root: Path, half: str | None) -> None:
    sys.path.insert(0, str(ROOT))
    from simhash_scrapy.core.cluster.representative import Candidate, choose, html_canonical
    from simhash_scrapy.core.extract.text import parse_html

    rules = {"this tree": choose, f"baseline {BASELINE}": baseline_rule()}
    groups = set_groups(root, half)
    right: dict[str, Counter[str]] = {name: Counter() for name in rules}
    kinds: Counter[str] = Counter()
    wrong: dict[str, list[str]] = {name: [] for name in rules}
    for rows in groups:
        candidates = []
        for order, row in enumerate(rows):
            root_el = parse_html((root / row["file"]).read_bytes())
            candidates.append(Candidate(row["url"], html_canonical(root_el, row["url"]), order))
        kind = sorted({r["variant"].split(":")[0].rstrip("0123456789.") or "?" for r in rows if r["role"] == "variant"})
        label = "+".join(kind)
        kinds[label] += 1
        original = next(i for i, r in enumerate(rows) if r["role"] == "original")
        for name, rule in rules.items():
            chosen, reason = rule(candidates)
            if chosen == original:
                right[name][label] += 1
            elif len(wrong[name]) < 5:
                wrong[name].append(f"{rows[chosen]['url']} ({reason}) over {rows[original]['url']}")
    print(f"{root} half {half or 'all'}: {len(groups)} mixed groups (one original and its copies)")
    for name in rules:
        total = sum(right[name].values())
        share = 100.0 * total / len(groups) if groups else 0.0
        by_kind = ", ".join(f"{k} {right[name][k]}/{n}" for k, n in sorted(kinds.items()))
        print(f"  {name}: the original represents {total} of {len(groups)} ({share:.1f} %); {by_kind}")
        for line in wrong[name]:
            print(f"    not the original: {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--articles", type=int, default=300)
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--backend", choices=("memory", "persistent", "redis"), default="memory")
    parser.add_argument("--book", action="store_true", help="measure ClusterBook alone")
    parser.add_argument("--set", type=Path, help="a quality set (benchmarks/quality) whose copy groups to measure")
    parser.add_argument("--half", choices=("tune", "test"), help="with --set: one half of the set")
    args = parser.parse_args()
    if args.set:
        measure_set(args.set, args.half)
        return
    if args.book:
        sys.path.insert(0, str(ROOT))
        book_cost()
        return
    source, articles = load_articles(args.articles)
    pages, copies, originals = build_site(articles, args.seed)
    server = serve(pages)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    urls = [base + p for p in copies + originals]
    print(f"{len(articles)} articles from {source}; {len(copies)} copies crawled before {len(originals)} originals;"
          f" backend {args.backend}")
    redis = None
    if args.backend == "redis":
        sys.path.insert(0, str(ROOT / "tests"))
        from redis_server import RedisServer

        redis = RedisServer(tempfile.mkdtemp(prefix="simhash-redis-")).start()
    results = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for policy in ("best", "first"):
                work = Path(tmp) / policy
                settings: dict[str, Any] = {"SIMHASH_REPRESENTATIVE": policy,
                                            "SIMHASH_REPORT_URI": str(work / "clusters.jsonl")}
                if args.backend == "persistent":
                    settings["SIMHASH_DIR"] = str(work / "stores")
                elif redis is not None:
                    settings.update(SIMHASH_BACKEND="redis", SIMHASH_REDIS_URL=redis.url,
                                    SIMHASH_REDIS_KEY=f"bench-{policy}:%(spider)s")
                stats = crawl(urls, settings, work)
                result = measure(work / "clusters.jsonl", base, set(originals))
                result["replaced"] = stats.get("simhash/canonical/replaced", 0)
                result["cpu"] = stats["cpu_seconds"]
                result["pages"] = stats.get("simhash/fingerprinted", 0)
                results[policy] = result
    finally:
        server.shutdown()
        if redis is not None:
            redis.stop()
    for policy, r in results.items():
        share = 100.0 * r["right"] / r["mixed"] if r["mixed"] else 0.0
        print(f"\nSIMHASH_REPRESENTATIVE = {policy!r}: {r['pages']} pages, {r['clusters']} clusters, "
              f"{r['mixed']} mixed; the clean original represents {r['right']} of them ({share:.1f} %)")
        print(f"  reasons: {r['reasons']}; simhash/canonical/replaced = {r['replaced']}; crawl CPU {r['cpu']:.2f} s")
        for line in r["wrong"]:
            print(f"  not the original: {line}")
    print(f"\nCPU best / first: {results['best']['cpu'] / results['first']['cpu']:.2f}")


if __name__ == "__main__":
    main()
