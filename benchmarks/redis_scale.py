"""The Redis backend at scale: checks/s of concurrent workers and Redis bytes per page, 100k vs 10M stored.

    python benchmarks/redis_scale.py                          # 10,000,000 stored vs a 100,000 baseline (~15 min here)
    python benchmarks/redis_scale.py --stored 1000000         # a smaller run
    python benchmarks/redis_scale.py --quick                  # 20,000 vs 5,000 stored, 2 workers: about a minute
    python benchmarks/redis_scale.py --json benchmarks/results/redis_scale.json
    python benchmarks/redis_scale.py --rdb-cache /tmp/simhash-fills    # keep the filled Redis: reruns skip the fill
    python benchmarks/redis_scale.py --stored 1000000 --steps        # pages with steps 5-7 data (second simhash, sketch)
    python benchmarks/redis_scale.py --quick --steps --profile /tmp/p   # cProfile of a worker's checks: /tmp/p-<stored>.prof

For each size (the baseline first, then ``--stored``), in one run:

1. Starts Debian's ``redis-server`` (no persistence) on a free loopback port.
2. Fills it with the pages: the baseline through real ``RedisBackend.check``
   calls, the big size by writing the same key layout directly (pipelines;
   ``pack_record``/``Codec`` are the functions the backend uses, and the
   baseline's bytes per page show that both ways give the same layout).
   Pages are like a crawl's: 70% new, 30% within distance 0..4 of an earlier
   canonical page; URLs ``https://www.example.com/section-N/article-I.html``,
   identities are SHA-1 hex digests (like Scrapy's request fingerprints),
   referers, depths and times are set.
3. Redis memory: ``INFO memory`` ``used_memory`` minus ``used_memory_startup``
   (the empty server) after the fill, divided by the recorded pages
   (everything the report needs is in Redis).
4. Starts ``--workers`` processes, each with its own ``RedisBackend``; each
   loads its replica of the canonical log, waits at a barrier, then checks
   ``--checks`` new pages with ``--in-flight`` pages in flight (70% new, 20%
   near a stored canonical page, 10% near another worker's page).  checks/s =
   all checks / (last finish - first start).
5. Decisions: the timed pages are replayed, in the order Redis checked them,
   through the in-process ``MemoryBackend`` loaded with the same canonical
   pages; every outcome, canonical URL and distance must be the same.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import multiprocessing as mp
import os
import resource
import shutil
import struct
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve()
#: SIMHASH_BENCH_TREE: import simhash_scrapy from that source tree instead (a baseline: replica_memory.py).
sys.path[:0] = [os.environ.get("SIMHASH_BENCH_TREE") or str(HERE.parent.parent), str(HERE.parent)]

from simhash_scrapy.backends.base import ClusterMember, PageRecord  # noqa: E402
from simhash_scrapy.config import SimhashConfig  # noqa: E402

from backends import Server  # noqa: E402  (benchmarks/backends.py: a throw-away redis-server)

from simhash_scrapy.backends.redis.layout import LAYOUT_VERSION  # noqa: E402

SCOPE = "bench"
T0 = 1_763_900_000.0


# --------------------------------------------------------------------------- server
def sync_client(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


def settings(url: str, capacity: int, extra: dict[str, Any] | None = None) -> Any:
    from simhash_scrapy.backends.redis import RedisSettings

    return RedisSettings({"SIMHASH_REDIS_URL": url, "SIMHASH_REDIS_PERSIST": True, "SIMHASH_REDIS_CAPACITY": capacity,
                          **(extra or {})})


# ---------------------------------------------------------------------------- pages
def url_of(i: int) -> str:
    return f"https://www.example.com/section-{i % 50}/article-{i}.html"


#: ``--steps``: pages carry what clustering steps 5-7 use (set in the environment for the worker processes).
STEPS = os.environ.get("SIMHASH_BENCH_STEPS") == "1"
#: ``--profile PATH``: the first worker's timed checks are profiled into PATH-<stored>.prof (cProfile).
PROFILE = os.environ.get("SIMHASH_BENCH_PROFILE", "")
#: ``--spy PATH``: py-spy (on the PATH) samples the first worker's timed checks into PATH-<stored>.txt (collapsed stacks).
SPY = os.environ.get("SIMHASH_BENCH_SPY", "")


def bench_config() -> SimhashConfig:
    """The workers' settings: the defaults, clustering steps 5-7 off unless ``--steps`` (pages without their data
    are checked by steps 1-4, and a worker then keeps no mirror of them: ``backends/redis/mirror.py``)."""
    if STEPS:
        return SimhashConfig()
    return SimhashConfig(templates=False, second_simhash=False, containment=False)


def record_of(i: int, fp: int) -> PageRecord:
    url = url_of(i)
    extra: dict[str, Any] = {}
    if STEPS:  # a second simhash and a full 32-sentence sketch, random: their cost, not their matches
        from simhash_scrapy.core.cluster.containment import Sketch

        digest = b"".join(hashlib.blake2b(i.to_bytes(8, "big"), digest_size=64, person=bytes([n])).digest()
                          for n in range(5))  # fmt: skip
        hashes = sorted(int.from_bytes(digest[8 * n : 8 * n + 8], "big") for n in range(1, 33))
        extra = {"second": int.from_bytes(digest[:8], "big"), "sketch": Sketch(tuple(hashes), 40)}
    return PageRecord(
        url=url, fingerprint=fp, scope=SCOPE, identity=hashlib.sha1(url.encode()).hexdigest(),
        referer=f"https://www.example.com/section-{i % 50}/", depth=2, seen=T0 + i * 0.01, **extra,
    )


def flip(fp: int, bits: int, rng: np.random.Generator) -> int:
    for bit in rng.choice(64, size=bits, replace=False).tolist():
        fp ^= 1 << bit
    return fp


def fill_plan(stored: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Fingerprints of pages 0..stored-1 and which are near-duplicates (by construction)."""
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64, stored, dtype=np.uint64, endpoint=False)
    dup = rng.random(stored) < 0.3
    dup[0] = False
    canon_pages = np.flatnonzero(~dup)
    dup_pages = np.flatnonzero(dup)
    # Each near-duplicate copies an earlier canonical page with 0..4 bits flipped.
    earlier = np.searchsorted(canon_pages, dup_pages) - 1  # canonical pages before it: [0, earlier]
    source = canon_pages[(rng.random(len(dup_pages)) * (earlier + 1)).astype(np.int64)]
    flips = np.zeros(len(dup_pages), dtype=np.uint64)
    counts = rng.integers(0, 5, len(dup_pages))
    for n in range(1, 5):
        rows = np.flatnonzero(counts >= n)
        flips[rows] |= np.left_shift(np.uint64(1), rng.integers(0, 64, len(rows)).astype(np.uint64))
    fps[dup_pages] = fps[source] ^ flips
    return fps, dup


async def fill_through_backend(url: str, stored: int, capacity: int, extra: dict[str, Any] | None = None) -> None:
    from simhash_scrapy.backends.redis import RedisBackend

    backend = RedisBackend(bench_config(), settings(url, capacity, extra))
    await backend.open("bench")
    await check_plan(backend, stored)
    await backend.close()


async def check_plan(backend: Any, stored: int) -> None:
    """Check the fill plan's first ``stored`` pages through ``backend``, 64 in flight."""
    fps, _ = fill_plan(stored)
    pages = iter(range(stored))

    async def worker() -> None:
        for i in pages:
            await backend.check(record_of(i, int(fps[i])))

    await asyncio.gather(*(worker() for _ in range(64)))


def _encode_chunk(
    args: tuple[str, int, int, int, bytes, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple[int, bytes]:
    """Write identity records of pages [start, stop) (runs in a pool process); with ``--steps``, return the
    extras records of its canonical pages (``backends.redis.mirror``: what a check appends for a page that
    reached step 7), in page order."""
    from simhash_scrapy.backends.redis.layout import Codec, Keys, identity_slot, pack_record
    from simhash_scrapy.backends.redis.mirror import record_of as extras_of
    from simhash_scrapy.core.cluster.sitetemplate import host_of
    from simhash_scrapy.core.cluster.views import page_address

    url, start, stop, bits, zdict, fps, own, canon, dist, _ = args
    keys = Keys("bench:simhash").scope(SCOPE)
    codec = Codec(zdict)
    client = sync_client(url)
    pipe = client.pipeline(transaction=False)
    extras = []
    for n, i in enumerate(range(start, stop)):
        record = record_of(i, int(fps[n]))
        if STEPS and canon[n] < 0:  # a canonical page: its log position is its number among them
            data = extras_of(record, host_of(record.url), page_address(record.url, record.sketch))
            extras.append(struct.pack(">IH", int(own[n]), len(data)) + data)
        bucket, field, kept = identity_slot(SCOPE, record.identity, bits)
        payload = codec.encode(record.url, record.identity, kept, record.referer, record.depth, None)
        member = canon[n] >= 0
        value = pack_record(
            i, record.fingerprint, False, "near_duplicate" if member else "unique", int(dist[n]) if member else 0,
            None if member else int(own[n]), int(canon[n]) if member else None, None, record.seen, record.seen, payload,
        )
        pipe.hset(keys.bucket(bucket), field, value)
        if n % 5000 == 4999:
            pipe.execute()
    pipe.execute()
    client.close()
    return stop - start, b"".join(extras)


def fill_directly(url: str, stored: int, capacity: int) -> None:
    """Write the state ``stored`` checks would leave, without running them (same layout, same decisions)."""
    from simhash_scrapy.backends.redis.layout import ENTRY, Codec, Keys, bucket_bits_for, identity_slot, layout_string
    from simhash_scrapy.core.index.index import BlockPermutedIndex

    config = bench_config()
    bits = bucket_bits_for(capacity)
    fps, dup = fill_plan(stored)
    canon_pages = np.flatnonzero(~dup)
    own = np.full(stored, -1, dtype=np.int64)
    own[canon_pages] = np.arange(len(canon_pages))
    # Decisions of the near-duplicates: the nearest earlier canonical page (ties: the oldest), as a check makes them.
    index = BlockPermutedIndex(config.max_distance, config.max_distance + 2)
    index.add_many(np.arange(len(canon_pages)).tolist(), fps[canon_pages])
    dup_pages = np.flatnonzero(dup)
    q, row, d = index.query_many_arrays(fps[dup_pages])
    before = np.searchsorted(canon_pages, dup_pages)  # canonical positions < before[j] precede page j
    ok = row < before[q]
    q, row, d = q[ok], row[ok], d[ok]
    first = np.unique(q, return_index=True)[1]
    canon = np.full(stored, -1, dtype=np.int64)
    dist = np.zeros(stored, dtype=np.int64)
    canon[dup_pages[q[first]]] = row[first]
    dist[dup_pages[q[first]]] = d[first]
    unmatched = dup & (canon < 0)  # flipped 0..4 bits, so never: kept for honesty
    if unmatched.any():
        raise RuntimeError(f"{int(unmatched.sum())} planted near-duplicates have no canonical page within k")
    del index
    # The scope's compression dictionary, made as a worker makes it: from the first payloads.
    codec = Codec()
    for i in range(64):
        record = record_of(i, int(fps[i]))
        codec.encode(record.url, record.identity, identity_slot(SCOPE, record.identity, bits)[2], record.referer,
                     record.depth, None)
    zdict = codec.proposed_dict()
    keys = Keys("bench:simhash")
    sk = keys.scope(SCOPE)
    client = sync_client(url)
    # The canonical log: op 1, fingerprint, seq (page number), bucket (3 bytes), field (8 bytes).
    log = np.zeros(len(canon_pages), dtype=np.dtype(
        [("op", "u1"), ("fp", ">u8"), ("seq", ">u4"), ("bucket", "V3"), ("field", "V8")]))
    log["op"] = 1
    log["fp"] = fps[canon_pages]
    log["seq"] = canon_pages
    slots = [identity_slot(SCOPE, record_of(int(i), 0).identity, bits) for i in canon_pages.tolist()]
    log["bucket"] = np.array([b.to_bytes(3, "big") for b, _, _ in slots], dtype="V3")
    log["field"] = np.array([f for _, f, _ in slots], dtype="V8")
    del slots
    raw = log.tobytes()
    assert len(raw) == ENTRY * len(canon_pages)
    for start in range(0, len(raw), 1 << 24):
        client.append(sk.log, raw[start : start + (1 << 24)])
    del raw, log
    layout = layout_string(config)
    client.hset(keys.meta, mapping={"layout": layout, "created": int(time.time()), "seq": stored, "bucket_bits": bits})
    client.hset(sk.meta, mapping={"layout": layout, "scope": SCOPE, "canonicals": len(canon_pages), "records": stored,
                                  "zdict": zdict})
    client.sadd(keys.scopes, SCOPE)
    client.close()
    chunk = 250_000
    jobs = [(url, s, min(stored, s + chunk), bits, zdict, fps[s : s + chunk], own[s : s + chunk],
             canon[s : s + chunk], dist[s : s + chunk], None) for s in range(0, stored, chunk)]
    with mp.get_context("spawn").Pool(2) as pool:
        done = pool.map(_encode_chunk, jobs)
    assert sum(count for count, _ in done) == stored
    client = sync_client(url)
    for _, extras in done:  # (--steps) the extras records, in log order
        for at in range(0, len(extras), 1 << 24):
            client.append(sk.extras, extras[at : at + (1 << 24)])
    client.close()


# --------------------------------------------------------------------------- workers
def random_fp(page: int) -> int:
    return int.from_bytes(hashlib.blake2b(page.to_bytes(8, "big"), digest_size=8).digest(), "big")


def worker_pages(stored: int, worker: int, workers: int, checks: int) -> list[tuple[int, int]]:
    """(page number, fingerprint) of a worker's timed pages (deterministic, so the parent can rebuild them)."""
    fps, dup = fill_plan(stored)
    canon_pages = np.flatnonzero(~dup)
    rng = np.random.default_rng(1000 + worker)
    out = []
    for j in range(checks):
        page = stored + j * workers + worker
        r = rng.random()
        if r < 0.2:  # near a stored canonical page
            fp = flip(int(fps[canon_pages[rng.integers(len(canon_pages))]]), int(rng.integers(0, 6)), rng)
        elif r < 0.3 and j >= 5:  # near a page another worker checks at about the same time
            fp = flip(random_fp(stored + (j - 5) * workers + (worker + 1) % workers), int(rng.integers(0, 5)), rng)
        else:
            fp = random_fp(page)
        out.append((page, fp))
    return out


def _proc_status(field: str) -> int:
    """A field of /proc/self/status in bytes (VmRSS: resident now, VmHWM: the peak since the last reset)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> bool:
    """Reset VmHWM to the resident size now (Linux: clear_refs 5); False where that is not allowed."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def run_worker(url: str, stored: int, capacity: int, worker: int, workers: int, checks: int, in_flight: int,
               barrier: Any, results: Any, extra: dict[str, Any] | None = None) -> None:
    from simhash_scrapy.backends.redis import RedisBackend

    pages = worker_pages(stored, worker, workers, checks)

    async def main() -> None:
        backend = RedisBackend(bench_config(), settings(url, capacity, extra))
        await backend.open("bench")
        gc.collect()
        reset = _reset_peak()
        before = _proc_status("VmRSS")
        load_cpu = time.process_time()
        await backend.preload(SCOPE)
        load_cpu = time.process_time() - load_cpu
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        gc.collect()
        # The replica at rest (RSS after the load minus before it), and the peak while it loaded.
        memory = {"before": before, "rest": _proc_status("VmRSS"), "peak": _proc_status("VmHWM") if reset else rss,
                  "load_cpu_s": load_cpu}
        records = [record_of(page, fp) for page, fp in pages]  # (made before the clock starts)
        await asyncio.get_running_loop().run_in_executor(None, barrier.wait)
        verdicts: list[Any] = [None] * len(pages)
        queue = iter(enumerate(records))

        async def one() -> None:
            for n, record in queue:
                verdicts[n] = await backend.check(record)

        profile = None
        if PROFILE and worker == 0:  # ``--profile``: the first worker's timed checks under cProfile
            import cProfile

            profile = cProfile.Profile(time.process_time)  # CPU time: 8 workers share 2 cores
            profile.enable()
        spy = None
        if SPY and worker == 0:  # ``--spy``: py-spy samples the first worker's timed checks (not slowed down)
            import signal
            import subprocess

            spy = subprocess.Popen(["py-spy", "record", "--pid", str(os.getpid()), "--format", "raw", "--rate", "500",
                                    "-o", f"{SPY}-{stored}.txt"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            await asyncio.sleep(1.0)  # (py-spy attaches)
        start, cpu = time.time(), time.process_time()
        await asyncio.gather(*(one() for _ in range(in_flight)))
        end, cpu = time.time(), time.process_time() - cpu
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait()
        if profile is not None:
            profile.disable()
            profile.dump_stats(f"{PROFILE}-{stored}.prof")
        errors = backend.stats.values.get("simhash/backend_errors", 0) if backend.stats is not None else 0
        await backend.close()
        results.put((worker, start, end, cpu, rss, [
            (page, v.outcome.value, v.canonical_url, v.distance) for (page, _), v in zip(pages, verdicts)
        ], errors, memory))

    asyncio.run(main())


def timed_run(url: str, stored: int, capacity: int, workers: int, checks: int, in_flight: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(workers + 1), ctx.Queue()
    procs = [ctx.Process(target=run_worker, args=(url, stored, capacity, w, workers, checks, in_flight, barrier, results))
             for w in range(workers)]
    for p in procs:
        p.start()
    client = sync_client(url)
    barrier.wait()  # every replica is loaded: from here on Redis' CPU is the checks'
    client.config_resetstat()
    cpu_before = client.info("cpu")
    out = [results.get() for _ in procs]
    cpu_after = client.info("cpu")
    script = client.info("commandstats").get("cmdstat_evalsha", {})
    client.close()
    for p in procs:
        p.join()
    redis_cpu = sum(cpu_after[k] - cpu_before[k] for k in ("used_cpu_user", "used_cpu_sys"))
    start, end = min(o[1] for o in out), max(o[2] for o in out)
    return {
        "checks": workers * checks,
        "seconds": end - start,
        "checks_per_s": workers * checks / (end - start),
        "worker_cpu_us_per_check": sum(o[3] for o in out) / (workers * checks) * 1e6,
        "redis_cpu_us_per_check": redis_cpu / (workers * checks) * 1e6,
        "script_calls": script.get("calls", 0),
        "worker_peak_rss_mb_after_load": max(o[4] for o in out) / 1e6,
        "worker_memory": [o[7] for o in out],
        "verdicts": [v for o in out for v in o[5]],
    }


# ------------------------------------------------------------------------- decisions
def same_decisions(url: str, stored: int, capacity: int, workers: int, checks: int, verdicts: list[Any]) -> dict[str, Any]:
    """Replay the timed pages, in Redis' order, through the in-process backend loaded with the same canonical pages."""
    from simhash_scrapy.backends.memory import MemoryBackend
    from simhash_scrapy.backends.redis.layout import Keys, identity_slot, parse_record

    client = sync_client(url)
    sk = Keys("bench:simhash").scope(SCOPE)
    bits = int(client.hget(Keys("bench:simhash").meta, "bucket_bits"))
    pages = {page: fp for w in range(workers) for page, fp in worker_pages(stored, w, workers, checks)}
    pipe = client.pipeline(transaction=False)
    order = sorted(pages)
    for page in order:
        bucket, field, _ = identity_slot(SCOPE, record_of(page, 0).identity, bits)
        pipe.hget(sk.bucket(bucket), field)
    seqs = {page: parse_record(v).seq for page, v in zip(order, pipe.execute())}
    client.close()
    fps, dup = fill_plan(stored)
    memory = MemoryBackend(bench_config())
    # The fill's canonical pages, restored the way a resumed crawl restores them (PersistentBackend._restore:
    # Clusterer.restore_many, then one bulk index add); the stored near-duplicates never matter for pages of
    # new identities.
    members = [
        ClusterMember(url=url_of(i), fingerprint=int(fps[i]), scope=SCOPE, indexed=True, identity=record_of(i, 0).identity)
        for i in np.flatnonzero(~dup).tolist()
    ]
    count = len(members)
    fingerprints = [m.fingerprint for m in members]
    memory._clusters.restore_many(
        [SCOPE] * count, [m.key for m in members], fingerprints, [False] * count, [-1] * count, [-1] * count,
        list(fingerprints),
    )
    memory._clusters.restore_indexes()
    memory._members.extend(members)
    got = {page: (outcome, canonical, distance) for page, outcome, canonical, distance in verdicts}
    differ = 0
    for page in sorted(pages, key=seqs.__getitem__):
        v = memory.check_now(record_of(page, pages[page]))
        if (v.outcome.value, v.canonical_url, v.distance) != got[page]:
            differ += 1
    return {"compared": len(pages), "different": differ,
            "near_duplicates": sum(1 for v in got.values() if v[0] == "near_duplicate")}


# ------------------------------------------------------------------------------ main
def save_rdb(client: Any, server: Server, path: Path) -> None:
    """Copy the server's data to ``path`` as an RDB snapshot (``Server(str(path))`` starts with it loaded)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    client.bgsave()  # SAVE of a big dataset outlasts a client timeout: poll instead
    while True:
        time.sleep(0.5)
        persistence = client.info("persistence")
        if not persistence["rdb_bgsave_in_progress"]:
            break
    if persistence["rdb_last_bgsave_status"] != "ok":
        raise RuntimeError("BGSAVE failed")
    shutil.copyfile(Path(server.dir) / "dump.rdb", path)


def measure(stored: int, capacity: int, direct: bool, workers: int, checks: int, in_flight: int, compare: bool,
            rdb_cache: Path | None = None) -> dict[str, Any]:
    # (-steps-x: a direct fill with the extras records, since 2026-11-28)
    name = f"fill-{stored}-{'direct' if direct else 'checks'}{'-steps-x' if STEPS else ''}-v{LAYOUT_VERSION}.rdb"
    cached = rdb_cache / name if rdb_cache is not None else None
    loaded = cached is not None and cached.exists()
    server = Server(str(cached) if loaded else None)
    try:
        client = sync_client(server.url)
        t = time.perf_counter()
        if not loaded:
            if direct:
                fill_directly(server.url, stored, capacity)
            else:
                asyncio.run(fill_through_backend(server.url, stored, capacity))
        fill_seconds = time.perf_counter() - t
        memory = client.info("memory")
        bytes_per_page = (int(memory["used_memory"]) - int(memory["used_memory_startup"])) / stored
        if loaded:  # a reloaded snapshot is more compact than a live fill: report the fill's own figure
            bytes_per_page = json.loads(cached.with_suffix(".json").read_text())["redis_bytes_per_page"]
        elif cached is not None:
            save_rdb(client, server, cached)
            cached.with_suffix(".json").write_text(json.dumps({"redis_bytes_per_page": bytes_per_page}))
        client.close()
        run = timed_run(server.url, stored, capacity, workers, checks, in_flight)
        out = {
            "stored": stored, "fill": ("loaded " if loaded else "") + ("direct" if direct else "checks"),
            "fill_seconds": fill_seconds, "redis_bytes_per_page": bytes_per_page,
            **{k: v for k, v in run.items() if k != "verdicts"},
        }
        if compare:
            out["decisions"] = same_decisions(server.url, stored, capacity, workers, checks, run["verdicts"])
        return out
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stored", type=int, default=10_000_000)
    parser.add_argument("--baseline", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--checks", type=int, default=5000, help="timed checks per worker")
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--no-compare", action="store_true", help="skip the in-process replay (saves time and memory)")
    parser.add_argument("--quick", action="store_true", help="5,000 vs 20,000 stored, 2 workers, 2,000 checks each")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--rdb-cache", type=Path, help="keep each filled Redis here as an RDB file; later runs load it")
    parser.add_argument("--steps", action="store_true",
                        help="pages carry a second simhash and a 32-sentence sketch (steps 5-7: random, so their cost "
                             "only); the big fill writes their extras records too (each canonical page's)")
    parser.add_argument("--profile", type=Path, help="profile the first worker's timed checks (cProfile) into "
                        "PROFILE-<stored>.prof (its CPU per check is then inflated)")
    parser.add_argument("--spy", type=Path, help="sample the first worker's timed checks with py-spy (on the PATH) "
                        "into SPY-<stored>.txt, collapsed stacks (its CPU per check is not inflated)")
    args = parser.parse_args()
    if args.spy:
        os.environ["SIMHASH_BENCH_SPY"] = str(args.spy.resolve())  # (the spawned workers read it)
    if args.profile:
        os.environ["SIMHASH_BENCH_PROFILE"] = str(args.profile.resolve())  # (the spawned workers read it)
    if args.steps:
        global STEPS
        STEPS = True
        os.environ["SIMHASH_BENCH_STEPS"] = "1"  # (the spawned workers read it)
    if args.quick:
        args.stored, args.baseline, args.workers, args.checks = 20_000, 5_000, 2, 2000
    rows = []
    for stored, direct in ((args.baseline, False), (args.stored, True)):
        row = measure(stored, stored, direct, args.workers, args.checks, args.in_flight, not args.no_compare, args.rdb_cache)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"\n## Redis backend, {args.workers} worker processes, {args.in_flight} pages in flight each "
          f"({os.cpu_count()} cores)\n")
    print("| stored pages | filled by | checks/s (all workers) | worker CPU µs/check | Redis CPU µs/check "
          "| checks per script call | Redis bytes/page | same decisions |")
    print("|---:|---|---:|---:|---:|---:|---:|:---:|")
    for r in rows:
        same = "-" if "decisions" not in r else f"{r['decisions']['compared'] - r['decisions']['different']:,}/{r['decisions']['compared']:,}"
        print(f"| {r['stored']:,} | {r['fill']} | {r['checks_per_s']:,.0f} | {r['worker_cpu_us_per_check']:.0f} | "
              f"{r['redis_cpu_us_per_check']:.0f} | {r['checks'] / max(1, r['script_calls']):.1f} | "
              f"{r['redis_bytes_per_page']:.1f} | {same} |")
    for r in rows:
        print(f"\n{r['stored']:,} stored: a worker's peak RSS after loading its replica {r['worker_peak_rss_mb_after_load']:,.0f} MB; "
              f"{r['checks']:,} checks in {r['seconds']:.1f} s")
    print(f"\nchecks/s at {rows[1]['stored']:,} / at {rows[0]['stored']:,}: {rows[1]['checks_per_s'] / rows[0]['checks_per_s']:.2f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
