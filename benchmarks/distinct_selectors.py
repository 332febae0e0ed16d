"""What ``SIMHASH_DISTINCT_SELECTORS`` costs (``core.cluster.distinct``): CPU per page, memory per scope.

    python benchmarks/distinct_selectors.py [--pages 2000] [--no-redis]

* CPU time (``time.process_time``, best of three) of the protected-text
  digest of ``[".price", ".sku"]`` on a parsed page, against ``analyse_tree``
  of the same parse (what the crawl does to every page anyway): a 45-token
  product page and a 3,000-token article of the example project's sample site.
* Memory: the same N unique pages checked in one scope, and each in a scope of
  its own (every price different: the worst case), in the in-process backend
  (``MemoryBackend``, traced with ``tracemalloc``) and in a throw-away
  redis-server (``used_memory`` before and after); the difference per page is
  what a scope costs.  Decisions are the same either way (all unique).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simhash_scrapy.backends.base import PageRecord  # noqa: E402
from simhash_scrapy.backends.memory import MemoryBackend  # noqa: E402
from simhash_scrapy.config import SimhashConfig  # noqa: E402
from simhash_scrapy.core.analysis import analyse_tree  # noqa: E402
from simhash_scrapy.core.extract.text import parse_html  # noqa: E402

from edit_keys import cpu_per_call  # noqa: E402  (benchmarks/edit_keys.py: best of three, CPU s per call)

PRODUCT = (
    "<!doctype html><html><head><title>Kettle</title></head><body><nav><a href='/'>Home</a></nav><main>"
    "<h1>Steel kettle</h1><p>This sturdy kettle boils water quickly and quietly thanks to its concealed heating "
    "element and its wide spout pours without dripping while the cool touch handle keeps fingers safe.</p>"
    '<p>Price <span class="price">24.99</span> SKU <span class="sku">KT-1001</span></p></main></body></html>'
).encode()
ARTICLE = (ROOT / "example_project" / "sample_site" / "pages" / "articles" / "formatstrings.html").read_bytes()


def bench_cpu() -> dict[str, Any]:
    config = SimhashConfig.from_settings({"SIMHASH_DISTINCT_SELECTORS": [".price", ".sku"]})
    assert config.distinct is not None
    results = {}
    for name, body, repeats in (("product page", PRODUCT, 2000), ("3,000-token article", ARTICLE, 100)):
        root = parse_html(body)
        digest = cpu_per_call(lambda: config.distinct.digest(root), repeats)
        analysis = cpu_per_call(lambda: analyse_tree(root, body, config.analysis), repeats)
        results[name] = {"digest_us": digest * 1e6, "analysis_us": analysis * 1e6, "ratio": digest / analysis}
    return results


def records(n: int, own_scopes: bool) -> list[PageRecord]:
    rng = random.Random(7)
    return [
        PageRecord(f"https://shop.example/p/{i}", rng.getrandbits(64), f"shop#{i:016x}" if own_scopes else "shop",
                   identity=f"{i:040x}")
        for i in range(n)
    ]  # fmt: skip


async def fill(backend: Any, pages: list[PageRecord]) -> list[Any]:
    return [(await backend.check(page)).outcome for page in pages]


def bench_memory(n: int) -> dict[str, Any]:
    results = {}
    outcomes = {}
    for own in (False, True):
        pages = records(n, own)
        tracemalloc.start()
        backend = MemoryBackend(SimhashConfig())
        before = tracemalloc.get_traced_memory()[0]
        outcomes[own] = asyncio.run(fill(backend, pages))
        results["own scopes" if own else "one scope"] = (tracemalloc.get_traced_memory()[0] - before) / n
        tracemalloc.stop()
        del backend
    results["same decisions"] = outcomes[False] == outcomes[True]
    return results


async def bench_redis(n: int) -> dict[str, Any]:
    import redis.asyncio as aredis

    from backends import Server  # a throw-away redis-server (benchmarks/backends.py)
    from simhash_scrapy.backends.redis import RedisBackend, RedisSettings

    server = Server()
    results: dict[str, Any] = {}
    try:
        admin = aredis.Redis.from_url(server.url)
        for own in (False, True):
            await admin.flushdb()
            before = int((await admin.info("memory"))["used_memory"])
            backend = RedisBackend(SimhashConfig(), RedisSettings({"SIMHASH_REDIS_URL": server.url}))
            await backend.open("bench")
            start = time.perf_counter()
            await fill(backend, records(n, own))
            seconds = time.perf_counter() - start
            after = int((await admin.info("memory"))["used_memory"])
            keys = await admin.dbsize()
            await backend.close()
            results["own scopes" if own else "one scope"] = {
                "bytes_per_page": (after - before) / n, "keys": keys, "checks_per_s": n / seconds,
            }  # fmt: skip
        await admin.aclose()
    finally:
        server.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--no-redis", action="store_true")
    args = parser.parse_args()
    print("CPU per page (best of 3):")
    for name, row in bench_cpu().items():
        print(f"  {name:<20} digest {row['digest_us']:8.1f} us, analyse_tree {row['analysis_us']:9.1f} us, "
              f"ratio {row['ratio']:.3f}")  # fmt: skip
    memory = bench_memory(args.pages)
    print(f"in-process memory per page, {args.pages:,} unique pages (tracemalloc):")
    print(f"  one scope {memory['one scope']:,.0f} B, a scope per page {memory['own scopes']:,.0f} B "
          f"(x{memory['own scopes'] / memory['one scope']:.1f}); same decisions: {memory['same decisions']}")  # fmt: skip
    if not args.no_redis:
        redis = asyncio.run(bench_redis(args.pages))
        print(f"Redis, {args.pages:,} unique pages, one check at a time:")
        for name, row in redis.items():
            print(f"  {name:<10} {row['bytes_per_page']:,.0f} B/page, {row['keys']:,} keys, "
                  f"{row['checks_per_s']:,.0f} checks/s")  # fmt: skip


if __name__ == "__main__":
    main()
