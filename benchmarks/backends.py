"""Dedup backends compared: Redis vs in-process speed, Redis memory, store load time.

    python benchmarks/backends.py                      # 100,000 stored, 10,000 timed checks, 1,000,000-entry store
    python benchmarks/backends.py --stored 200000 --store-entries 1000000 --json benchmarks/results/backends.json
    python benchmarks/backends.py --redis-url redis://127.0.0.1:6379/15   # use a running server (db is flushed!)

What it does, in one run:

1. Starts Debian's ``redis-server`` on a free loopback port (no persistence,
   temporary folder), unless ``--redis-url`` is given.
2. Fills the Redis backend and the in-process (memory) backend with the same
   ``--stored`` fingerprints (random, with planted near-duplicates, like a
   crawl: 70% new pages, 30% within distance 0..5 of an earlier page).
3. Times ``--checks`` further checks through each backend, the same pages in
   the same order: one at a time (one page in flight, latency-bound) and with
   16 in flight (``CONCURRENT_REQUESTS = 16``).  Prints pages/s and the ratio
   Redis / in-process, and checks that both backends made the same decisions.
4. Redis memory per stored fingerprint: ``INFO memory`` ``used_memory`` before
   filling and after, divided by the pages recorded; plus ``MEMORY USAGE`` of
   each key (index of canonical pages, page record, canonical URLs).
5. Writes a ``--store-entries`` store (JOBDIR format) and times loading it
   the way a resumed crawl does (``benchmarks/store.py``, which also compares
   it with another revision's format).

A check costs the same work in both backends except the round trip and the
Lua script, so the ratio is the price of sharing the index between machines.
Timings on a busy machine are noisy; compare the ratios, not the absolutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent.parent))

from simhash_scrapy.backends.base import PageRecord  # noqa: E402
from simhash_scrapy.backends.memory import MemoryBackend  # noqa: E402
from simhash_scrapy.config import SimhashConfig  # noqa: E402

# Pages like a crawl's, shared with the store's fault trials (tests/store_faults.py).
sys.path.insert(0, str(HERE.parent.parent / "tests"))
from store_faults import pages  # noqa: E402


# --------------------------------------------------------------------- redis-server
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A throw-away redis-server on a free loopback port; ``rdb``: start with that snapshot loaded."""

    def __init__(self, rdb: str | None = None, extra_args: tuple[str, ...] = ()) -> None:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not os.path.exists(binary):
            sys.exit("redis-server is not installed: sudo apt-get install redis-server")
        self.dir = tempfile.mkdtemp(prefix="simhash-bench-redis-")
        self.port = free_port()
        if rdb is not None:
            shutil.copyfile(rdb, os.path.join(self.dir, "dump.rdb"))
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--dbfilename", "dump.rdb", "--logfile", os.path.join(self.dir, "redis.log"),
             *extra_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + (600 if rdb else 20)
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                time.sleep(0.05)
        else:
            self.stop()
            sys.exit("redis-server did not start")
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def redis_version(url: str) -> str:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return str(client.info("server")["redis_version"])
    finally:
        client.close()


# ------------------------------------------------------------------------ pages
async def fill(backend: Any, records: list[PageRecord], in_flight: int = 64) -> None:
    queue = iter(records)

    async def worker() -> None:
        for record in queue:
            await backend.check(record)

    await asyncio.gather(*(worker() for _ in range(in_flight)))


async def timed(backend: Any, records: list[PageRecord], in_flight: int) -> tuple[float, list[Any]]:
    verdicts: list[Any] = [None] * len(records)
    queue = iter(enumerate(records))

    async def worker() -> None:
        for i, record in queue:
            verdicts[i] = await backend.check(record)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return time.perf_counter() - started, verdicts


# ------------------------------------------------------------------- benchmarks
async def bench_speed_and_memory(url: str, stored: int, checks: int) -> dict[str, Any]:
    import redis.asyncio as aredis

    from simhash_scrapy.backends.redis import RedisBackend, RedisSettings

    config = SimhashConfig()
    admin = aredis.Redis.from_url(url)
    await admin.flushdb()
    used_before = int((await admin.info("memory"))["used_memory"])
    # The key layout sized for the pages it will hold (SIMHASH_REDIS_CAPACITY).
    backend = RedisBackend(config, RedisSettings({"SIMHASH_REDIS_URL": url, "SIMHASH_REDIS_CAPACITY": stored + 2 * checks}))
    await backend.open("bench")
    memory = MemoryBackend(config)
    earlier: list[int] = []
    # 1. Fill both with the same pages, one at a time (same order: same state).
    prefill = pages(1, stored, earlier=earlier)
    fill_memory, v_mem = await timed(memory, prefill, 1)
    fill_redis, v_red = await timed(backend, prefill, 1)
    fill_same = v_mem == v_red
    used_after = int((await admin.info("memory"))["used_memory"])
    canonical = await backend.index_size()
    scope_keys = backend.keys.scope("spider")
    key_usage = {"log": int(await admin.memory_usage(scope_keys.log, samples=0) or 0), "identities": 0}
    async for key in admin.scan_iter(match=scope_keys.bucket_prefix + "*", count=10_000):
        key_usage["identities"] += int(await admin.memory_usage(key, samples=0) or 0)
    results: dict[str, Any] = {}
    # 2. Timed checks on top of the filled index: 1 page in flight, then 16 (new pages each time).
    for seed, in_flight in ((2, 1), (3, 16)):
        workload = pages(seed, checks, start=stored + seed * checks, earlier=list(earlier))
        t_mem, v_mem = await timed(memory, workload, in_flight)
        t_red, v_red = await timed(backend, workload, in_flight)
        results[f"in_flight_{in_flight}"] = {
            "memory_pages_per_s": checks / t_mem,
            "redis_pages_per_s": checks / t_red,
            "ratio_redis_over_memory": t_mem / t_red,
            "same_decisions": v_mem == v_red,
            "duplicates": sum(v.canonical_url is not None for v in v_red),
        }
    results.update(
        stored=stored,
        checks=checks,
        canonical=canonical,
        fill_same_decisions=fill_same,
        fill_seconds_memory=fill_memory,
        fill_seconds_redis=fill_redis,
        used_memory_delta=used_after - used_before,
        bytes_per_stored_page=(used_after - used_before) / stored,
        bytes_per_canonical_in_index=key_usage["log"] / max(1, canonical),
        key_memory_usage=key_usage,
    )
    await backend.close()  # not persistent: deletes the keys
    await admin.flushdb()
    await admin.aclose()
    return results


def bench_store(entries: int, reps: int) -> dict[str, Any]:
    """The store's load time: ``benchmarks/store.py`` (this tree's format only)."""
    sys.path.insert(0, str(HERE.parent))
    from store import bench_new  # noqa: PLC0415 - benchmarks/store.py

    r = bench_new(entries, reps)
    return {
        "entries": entries,
        "file_bytes": r["file_bytes"],
        "bytes_per_entry": r["file_bytes"] / entries,
        "read_store_seconds_median": r["read_store_seconds"],
        "backend_open_seconds_median": r["open_seconds"],
        "backend_open_cpu_seconds_median": r["open_cpu_seconds"],
    }


def _drive(coro: Any) -> Any:
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("unexpected await")


# ------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stored", type=int, default=100_000, help="fingerprints stored before timing (>= 100,000)")
    parser.add_argument("--checks", type=int, default=10_000, help="timed checks per backend and mode")
    parser.add_argument("--store-entries", type=int, default=1_000_000, help="entries of the store whose load is timed")
    parser.add_argument("--reps", type=int, default=3, help="store loads timed (median)")
    parser.add_argument("--redis-url", help="use this Redis (its database is FLUSHED) instead of starting one")
    parser.add_argument("--skip-redis", action="store_true")
    parser.add_argument("--skip-store", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()

    out: dict[str, Any] = {"python": sys.version.split()[0]}
    if not args.skip_redis:
        server = None if args.redis_url else Server()
        url = args.redis_url or server.url  # type: ignore[union-attr]
        try:
            out["redis_version"] = redis_version(url)
            out["redis"] = asyncio.run(bench_speed_and_memory(url, args.stored, args.checks))
        finally:
            if server is not None:
                server.stop()
        r = out["redis"]
        print(f"## Redis backend vs in-process, {r['stored']:,} stored fingerprints, {r['checks']:,} checks "
              f"(Redis {out['redis_version']}, loopback)\n")
        print("| pages in flight | in-process pages/s | Redis pages/s | Redis / in-process | same decisions |")
        print("|---:|---:|---:|---:|:---:|")
        for n in (1, 16):
            row = r[f"in_flight_{n}"]
            same = "yes" if row["same_decisions"] else "NO"
            print(f"| {n} | {row['memory_pages_per_s']:,.0f} | {row['redis_pages_per_s']:,.0f} | "
                  f"{row['ratio_redis_over_memory']:.3f} | {same} |")
        print(f"\nFilling {r['stored']:,} pages one at a time: in-process {r['fill_seconds_memory']:.1f} s, "
              f"Redis {r['fill_seconds_redis']:.1f} s; same decisions: {'yes' if r['fill_same_decisions'] else 'NO'}")
        print(f"\nRedis memory: {r['used_memory_delta'] / 1e6:.1f} MB for {r['stored']:,} recorded pages "
              f"({r['canonical']:,} canonical) = {r['bytes_per_stored_page']:.0f} bytes per stored page; "
              f"canonical log {r['bytes_per_canonical_in_index']:.0f} bytes per canonical page "
              f"(MEMORY USAGE: {', '.join(f'{k} {v / 1e6:.1f} MB' for k, v in r['key_memory_usage'].items())})")
    if not args.skip_store:
        s = out["store"] = bench_store(args.store_entries, args.reps)
        print(f"\n## Store of {s['entries']:,} entries ({s['file_bytes'] / 1e6:.0f} MB, "
              f"{s['bytes_per_entry']:.0f} bytes per entry)\n")
        print(f"- load as a resumed crawl does (PersistentBackend.open: every row checked + index rebuild): "
              f"{s['backend_open_seconds_median']:.2f} s wall, {s['backend_open_cpu_seconds_median']:.2f} s CPU "
              f"(median of {args.reps}; on a busy machine the CPU time is the better guide)")
        print(f"- read_store alone: {s['read_store_seconds_median']:.2f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2))
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
