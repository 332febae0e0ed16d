"""A redis-global worker's memory with many scopes (``SIMHASH_IDENTITY_SIGNALS``: every product a scope of its own).

    python benchmarks/redis_global_scopes.py                    # 100,000 scopes, about 10 minutes
    python benchmarks/redis_global_scopes.py --scopes 20000     # about two minutes

Starts a local three-node Redis Cluster (``tests/redis_server.RedisCluster``), then, one child process each and
one after the other (a key of its own each):

- ``bounded``: the worker as shipped (``cluster_backend.MAX_SCOPES`` scopes' state kept);
- ``unbounded``: ``MAX_SCOPES`` set to 10**9 (every scope kept, as before the bound).

Each checks ``--scopes`` identity scopes (``shop#<16 hex>``), two pages a scope: a first round of one page in every
scope, then a second round of a page within 2 bits of its scope's first one (by then the bounded worker forgot the
scope: it reads the scope's meta again).  ``--in-flight`` checks at once.  Prints each worker's resident memory
grown from after ``open`` to after the checks (VmRSS), its peak (VmHWM), the scopes kept, the CPU seconds, and
whether the two workers gave the same verdicts (a digest of every outcome, distance and canonical URL).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import multiprocessing as mp
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent), str(HERE.parent.parent / "tests")]

from redis_scale import _proc_status, _reset_peak  # noqa: E402
from redis_server import RedisCluster  # noqa: E402  (tests/redis_server.py)


def pages(scopes: int, seed: int = 7) -> list[list[Any]]:
    """Two rounds: a page in every scope, then one within 2 bits of it."""
    from simhash_scrapy.backends import PageRecord

    rng = random.Random(seed)
    bases = [rng.getrandbits(64) for _ in range(scopes)]
    rounds = []
    for v in range(2):
        batch = []
        for s, base in enumerate(bases):
            fp = base
            for bit in rng.sample(range(64), 2 * v):
                fp ^= 1 << bit
            batch.append(PageRecord(f"https://shop.example/p/{s}/{v}", fp, f"shop#{s:016x}"))
        rounds.append(batch)
    return rounds


def worker(url: str, mode: str, scopes: int, in_flight: int, out: Any) -> None:
    from simhash_scrapy.backends.redis import cluster_backend
    from simhash_scrapy.backends.redis.cluster_backend import GlobalRedisBackend
    from simhash_scrapy.config import SimhashConfig
    from simhash_scrapy.core.settings.config import RedisConfig

    if mode == "unbounded":
        cluster_backend.MAX_SCOPES = 10**9
    rounds = pages(scopes)
    settings = RedisConfig.of({"SIMHASH_REDIS_URL": url, "SIMHASH_REDIS_CLUSTER": True, "SIMHASH_REDIS_PERSIST": True})
    backend = GlobalRedisBackend(SimhashConfig(identity_signals=True), settings)

    async def run() -> dict[str, Any]:
        await backend.open(mode)
        rss0 = _proc_status("VmRSS")
        _reset_peak()
        cpu0 = time.process_time()
        digest = hashlib.blake2b(digest_size=8)
        near = 0
        for records in rounds:
            for start in range(0, len(records), in_flight):
                chunk = records[start : start + in_flight]
                for verdict in await asyncio.gather(*(backend.check(r) for r in chunk)):
                    digest.update(f"{verdict.outcome.value} {verdict.distance} {verdict.canonical_url}\n".encode())
                    near += verdict.outcome.value == "near_duplicate"
        result = {
            "mode": mode, "scopes": scopes, "checks": scopes * 2, "near_duplicates": near,
            "rss_grown_mb": (_proc_status("VmRSS") - rss0) / 2**20, "peak_mb": _proc_status("VmHWM") / 2**20,
            "scopes_kept": len(backend._scopes), "cpu_s": time.process_time() - cpu0, "verdicts": digest.hexdigest(),
        }
        await backend.close()
        return result

    out.put(asyncio.run(run()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scopes", type=int, default=100_000)
    parser.add_argument("--in-flight", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = RedisCluster(tmp).start()
        try:
            results = []
            for mode in ("bounded", "unbounded"):
                queue: Any = mp.get_context("spawn").Queue()
                proc = mp.get_context("spawn").Process(target=worker, args=(cluster.url, mode, args.scopes,
                                                                            args.in_flight, queue))
                proc.start()
                results.append(queue.get())
                proc.join()
        finally:
            cluster.stop()
    for r in results:
        print(f"{r['mode']:>9}: {r['scopes']:,} scopes, {r['checks']:,} checks ({r['near_duplicates']:,} near-duplicates): "
              f"RSS grown {r['rss_grown_mb']:.0f} MB, peak {r['peak_mb']:.0f} MB, {r['scopes_kept']:,} scopes kept, "
              f"{r['cpu_s']:.1f} s CPU, verdicts {r['verdicts']}")
    print("same verdicts:", results[0]["verdicts"] == results[1]["verdicts"])


if __name__ == "__main__":
    main()
