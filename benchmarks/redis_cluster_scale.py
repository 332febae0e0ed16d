"""The global index sharded over a Redis Cluster (``SIMHASH_BACKEND = "redis-global"``): checks/s and bytes/page.

    python benchmarks/redis_cluster_scale.py                              # 1,000,000 stored, 1 and 3 nodes, 8 workers
    python benchmarks/redis_cluster_scale.py --stored 10000000 --nodes 3  # 10M pages
    python benchmarks/redis_cluster_scale.py --stored 50000 --checks 300 --nodes 1,3   # about two minutes
    python benchmarks/redis_cluster_scale.py --json benchmarks/results/redis_cluster_scale.json

For each node count of ``--nodes``, in one run:

1. Starts a fresh local Redis Cluster of that many ``redis-server`` primaries
   (no persistence; one node: ``CLUSTER ADDSLOTSRANGE 0 16383``).
2. Fills one scope (the spider's, one global scope) with ``--stored`` pages of
   ``redis_scale.py`` (70% new, 30% within 0..4 bits of an earlier canonical
   page; SHA-1 identities, URLs, referers, depths, times), written directly in
   the backend's layout with its own functions (``cluster_layout``:
   ``pack_record``, ``GlobalKeys``, ``ENTRY_DTYPE`` of ``fold``; ``layout.Codec`` with the
   scope's dictionary made from the first 32 pages, as the backend makes it):
   records by pool processes, one HSET per record hash; each table bucket and
   directory string whole, as the backend's scripts leave them (entries in seq
   order; strings at their size; directory strings at their full size: the
   same bytes by kind of key as the former fill through the append script,
   checked at 20,000 pages).  ``--fill-checks`` fills through real checks
   instead (slow; to show both give the same bytes/page).
3. Redis memory: ``used_memory`` minus ``used_memory_startup`` per node, summed
   over the nodes, divided by the stored pages.
4. ``--workers`` processes, each with its own ``GlobalRedisBackend``, check
   ``--checks`` new pages each with ``--in-flight`` (16) in flight (``redis_scale.worker_pages``:
   70% new, 20% near a stored canonical page, 10% near another worker's
   page).  checks/s = all checks / (last finish - first start); worker CPU
   per check (process time); Redis CPU per node (``INFO cpu``); each worker's
   peak RSS; the cost per check by step (the backend's ``timing``); the
   directory cache's and the bucket cache's hit rates; races (duplicates kept
   twice); the bytes the nodes sent and received a check (``INFO stats``).
   ``--warm-checks N``: each worker checks N pages first, not timed (a worker
   well into its crawl: its bucket cache filled, ``--bucket-cache MB``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

#: Set to "1" (``--python-reader``): the workers read replies with ``node_link``'s Python reader, as an install
#: without hiredis (the ``redis`` extra has it) does.
READER_ENV = "SIMHASH_BENCH_PYTHON_READER"
# In the processes this script spawns (where it is ``__mp_main__``; not where another benchmark imports it): hiredis
# blocked before redis-py looks for it.
if __name__ == "__mp_main__" and os.environ.get(READER_ENV) == "1":
    sys.modules["hiredis"] = None  # type: ignore[assignment]

HERE = Path(__file__).resolve()
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent), str(HERE.parent.parent / "tests")]

from redis_scale import SCOPE, _proc_status, _reset_peak, check_plan, fill_plan, record_of, worker_pages  # noqa: E402
from redis_shards import node_info  # noqa: E402
from redis_server import RedisCluster  # noqa: E402  (tests/redis_server.py)

from simhash_scrapy.config import SimhashConfig  # noqa: E402

SPIDER = SCOPE  # the scope is the spider's name: one global scope
#: Set to "1" (``--uvloop``, inherited by the spawned workers): the workers run on uvloop's event loop, as a crawl
#: with Scrapy's ``ASYNCIO_EVENT_LOOP = "uvloop.Loop"`` does.
UVLOOP_ENV = "SIMHASH_BENCH_UVLOOP"


def reader_name(backend: Any) -> str:
    """The reply reader a backend's round trips use: ``hiredis`` or ``python``."""
    from simhash_scrapy.backends.redis.node_link import RespReader

    return "python" if backend.link.reader is RespReader else "hiredis"


class LocalCluster(RedisCluster):
    """``tests/redis_server.RedisCluster`` with any number of nodes (one: all slots assigned by hand)."""

    def start(self, timeout: float = 60.0) -> LocalCluster:
        if len(self.ports) >= 3:
            super().start(timeout)
            return self
        for port in self.ports:
            self.processes.append(self._node(port))
        deadline = time.monotonic() + timeout
        for port in self.ports:
            while subprocess.run([self.cli, "-p", str(port), "ping"], capture_output=True, text=True).stdout.strip() != "PONG":
                if time.monotonic() > deadline:
                    raise RuntimeError(f"node {port} did not start")
                time.sleep(0.05)
        subprocess.run([self.cli, "-p", str(self.ports[0]), "cluster", "addslotsrange", "0", "16383"], check=True,
                       capture_output=True)
        if not self._wait_ok(deadline):
            raise RuntimeError("the one-node cluster did not reach cluster_state:ok")
        return self


def module_node_args(wanted: bool) -> tuple[str, ...]:
    """redis-server's ``--loadmodule`` of the package's ``simhash`` module when ``wanted`` (else none); exits saying
    why when it was not built."""
    if not wanted:
        return ()
    from simhash_scrapy.backends.redis.module import path

    built = path()
    if built is None:
        sys.exit("--module: the simhash Redis module was not built (pip install -e . with a C compiler)")
    return ("--loadmodule", str(built))


def backend_settings(url: str, extra: dict[str, Any]) -> Any:
    from simhash_scrapy.core.settings.config import RedisConfig

    return RedisConfig.of({"SIMHASH_REDIS_URL": url, "SIMHASH_REDIS_CLUSTER": True, **extra})


def config(k: int) -> SimhashConfig:
    return SimhashConfig(max_distance=k)


def memory_by_kind(cluster: RedisCluster) -> dict[str, int]:
    """``MEMORY USAGE`` summed by kind of key (``t``: table buckets, ``r``: records, ``d``: directory, ``m``: meta,
    ``x``: short pages), over every node: where the bytes of a page go."""
    import redis

    out: dict[str, int] = {}
    for port in cluster.ports:
        client = redis.Redis(host="127.0.0.1", port=port)
        try:
            keys = list(client.scan_iter(count=10_000))
            pipe = client.pipeline(transaction=False)
            for key in keys:
                pipe.memory_usage(key, samples=0)
            for key, used in zip(keys, pipe.execute()):
                tail = key.decode().rsplit("{", 1)[-1].split(".")
                kind = tail[1][0] if len(tail) > 1 else "?"
                out[kind] = out.get(kind, 0) + int(used or 0)
        finally:
            client.close()
    return out


def configure(cluster: RedisCluster, listpack_value: int) -> None:
    """``hash-max-listpack-value`` on every node: records of ~70-90 bytes stay in the compact encoding."""
    import redis

    for port in cluster.ports:
        client = redis.Redis(host="127.0.0.1", port=port)
        try:
            client.config_set("hash-max-listpack-value", listpack_value)
        finally:
            client.close()


def reset_stats(cluster: RedisCluster) -> None:
    import redis

    for port in cluster.ports:
        client = redis.Redis(host="127.0.0.1", port=port)
        try:
            client.config_resetstat()
        finally:
            client.close()


# ------------------------------------------------------------------------------ fill
def sources(stored: int) -> np.ndarray:
    """The canonical page each near-duplicate of ``fill_plan`` copies (-1: a canonical page), rebuilt by
    replaying ``fill_plan``'s random draws."""
    rng = np.random.default_rng(1)
    rng.integers(0, 2**64, stored, dtype=np.uint64, endpoint=False)
    dup = rng.random(stored) < 0.3
    dup[0] = False
    canon_pages, dup_pages = np.flatnonzero(~dup), np.flatnonzero(dup)
    earlier = np.searchsorted(canon_pages, dup_pages) - 1
    out = np.full(stored, -1, dtype=np.int64)
    out[dup_pages] = canon_pages[(rng.random(len(dup_pages)) * (earlier + 1)).astype(np.int64)]
    return out


def scope_dict(stored: int) -> bytes:
    """The scope's payload dictionary as the backend makes it: from the first ``DICT_SAMPLES`` pages' payloads."""
    from simhash_scrapy.backends.redis.layout import DICT_SAMPLES, Codec, identity_slot

    fps, _ = fill_plan(min(stored, DICT_SAMPLES))
    codec = Codec()
    for i in range(min(stored, DICT_SAMPLES)):
        record = record_of(i, int(fps[i]))
        _, _, kept = identity_slot(SCOPE, record.key, 12)
        codec.encode(record.url, record.key, kept, record.referer, record.depth, None)
    return codec.proposed_dict() or b""


def _fill_records(args: tuple[str, int, int, int, int, dict[str, Any], bytes]) -> tuple[np.ndarray, bytes]:
    """The records of pages [start, stop) (a pool process): one HSET per record hash with every field of the chunk
    in it; returns the canonical pages' seq numbers and directory slots (11 bytes each)."""
    from redis.cluster import RedisCluster as SyncCluster

    from simhash_scrapy.backends.redis.cluster_backend import GlobalRedisBackend
    from simhash_scrapy.backends.redis.cluster_layout import GlobalRecord, pack_record
    from simhash_scrapy.backends.redis.layout import DICT_SAMPLES, Codec, identity_slot
    from simhash_scrapy.core.cluster.clustering import RECORDED_OUTCOMES, Outcome

    url, stored, start, stop, k, extra, zdict = args
    fps, _ = fill_plan(stored)  # (the plan of all the pages: its draws depend on the count)
    source = sources(stored)
    backend = GlobalRedisBackend(config(k), backend_settings(url, extra))
    backend.prefix = backend.settings.key(SPIDER)
    keys = backend.keys(SCOPE)
    codecs = Codec(), Codec(zdict or None)  # the first pages' payloads before the scope's dictionary was made
    unique, near = RECORDED_OUTCOMES.index(Outcome.UNIQUE), RECORDED_OUTCOMES.index(Outcome.NEAR_DUPLICATE)
    hashes: dict[str, list[bytes]] = {}
    seqs, slots = [], []
    for i in range(start, stop):
        record, seq, fp = record_of(i, int(fps[i])), i + 1, int(fps[i])
        bucket, field, kept = identity_slot(SCOPE, record.key, keys.record_bits)
        payload = codecs[i >= DICT_SAMPLES].encode(record.url, record.key, kept, record.referer, record.depth, None)
        canon = int(source[i])
        if canon < 0:
            value = GlobalRecord(seq, fp, False, True, unique, -1, None, record.seen, record.seen, payload, fp)
            seqs.append(seq)
            slots.append(bucket.to_bytes(3, "big") + field)
        else:
            cfp = int(fps[canon])
            value = GlobalRecord(seq, fp, False, False, near, (fp ^ cfp).bit_count(), canon + 1, record.seen,
                                 record.seen, payload)
        hashes.setdefault(keys.record(bucket), []).extend((field, pack_record(value)))
    client = SyncCluster.from_url(url)
    pipe = client.pipeline(transaction=False)
    for n, (key, fields) in enumerate(hashes.items()):
        pipe.execute_command("HSET", key, *fields)
        if n % 1000 == 999:
            pipe.execute()
    pipe.execute()
    client.close()
    return np.array(seqs, dtype=np.int64), b"".join(slots)


def _write_strings(url: str, strings: Any) -> None:
    """``SET key value`` for every (key, value) of ``strings``, pipelined."""
    from redis.cluster import RedisCluster as SyncCluster

    client = SyncCluster.from_url(url)
    pipe = client.pipeline(transaction=False)
    for n, (key, value) in enumerate(strings):
        pipe.set(key, value)
        if n % 500 == 499:
            pipe.execute()
    pipe.execute()
    client.close()


def table_strings(keys: Any, fps: np.ndarray, canonical: np.ndarray) -> Any:
    """Every table bucket's string: the canonical pages' entries (``ENTRY_DTYPE``) in seq order, as the backend's
    append script leaves them (``pack_bucket``: header, entries, spare room)."""
    from simhash_scrapy.backends.redis.cluster_layout import ENTRY_DTYPE, pack_bucket

    entries = np.zeros(len(canonical), dtype=ENTRY_DTYPE)
    cfps = fps[canonical]
    entries["fold"], entries["seq"] = (cfps >> np.uint64(32)) ^ (cfps & np.uint64(0xFFFFFFFF)), canonical + 1  # fold()
    for t, table in enumerate(keys.tables):
        buckets = table.keys(fps[canonical]) >> np.uint64(table.key_bits - keys.bucket_bits)
        order = np.argsort(buckets, kind="stable")  # seq order within a bucket
        values, first = np.unique(buckets[order], return_index=True)
        for b, lo, hi in zip(values.tolist(), first.tolist(), [*first[1:].tolist(), len(order)]):
            yield f"{keys.base}.t{t}.{b:x}}}", pack_bucket(entries[order[lo:hi]].tobytes())


def directory_strings(keys: Any, stored: int, seqs: np.ndarray, slots: bytes) -> Any:
    """The directory's strings, each at its full size (as ``DIRECTORY_LUA`` makes them), the canonical pages' slots
    written."""
    from simhash_scrapy.backends.redis.cluster_layout import DIR, DIR_SPAN

    data = np.zeros(((stored // DIR_SPAN) + 1) * DIR_SPAN * DIR, dtype=np.uint8)
    offsets = (seqs[:, None] * DIR + np.arange(DIR)[None, :]).ravel()
    data[offsets] = np.frombuffer(slots, dtype=np.uint8)
    for n in range(stored // DIR_SPAN + 1):
        yield keys.directory(n * DIR_SPAN)[0], data[n * DIR_SPAN * DIR : (n + 1) * DIR_SPAN * DIR].tobytes()


def fill_directly(url: str, stored: int, k: int, extra: dict[str, Any], processes: int) -> None:
    """Writes the layout at once: records by ``processes`` pool processes (one HSET per record hash and chunk), then
    the table buckets and the directory strings whole (numpy): the bytes that checks leave, much faster."""
    from redis.cluster import RedisCluster as SyncCluster

    from simhash_scrapy.backends.redis.cluster_backend import GlobalRedisBackend

    step = max(50_000, -(-stored // (4 * processes)))
    zdict = scope_dict(stored)
    chunks = [(url, stored, s, min(s + step, stored), k, extra, zdict) for s in range(0, stored, step)]
    seqs, slots = [], []
    with mp.get_context("spawn").Pool(processes) as pool:
        for chunk_seqs, chunk_slots in pool.imap(_fill_records, chunks):
            seqs.append(chunk_seqs)
            slots.append(chunk_slots)
    backend = GlobalRedisBackend(config(k), backend_settings(url, extra))
    backend.prefix = backend.settings.key(SPIDER)
    keys = backend.keys(SCOPE)
    fps, _ = fill_plan(stored)
    canonical = np.flatnonzero(sources(stored) < 0)
    _write_strings(url, table_strings(keys, fps, canonical))
    _write_strings(url, directory_strings(keys, stored, np.concatenate(seqs), b"".join(slots)))
    client = SyncCluster.from_url(url)
    client.hset(keys.meta, mapping={"layout": backend.layout(), "seq": stored, "canonicals": len(canonical),
                                    "zdict": zdict})
    client.close()


async def fill_through_checks(url: str, stored: int, k: int, extra: dict[str, Any]) -> None:
    from simhash_scrapy.backends.redis.cluster_backend import GlobalRedisBackend

    backend = GlobalRedisBackend(config(k), backend_settings(url, extra))
    await backend.open(SPIDER)
    await check_plan(backend, stored)
    await backend.close()


# ------------------------------------------------------------------------------ timed
async def check_all(backend: Any, pages: list[tuple[int, int]], in_flight: int = 16) -> dict[str, int]:
    """Check every ``(page, fingerprint)`` of ``pages`` through ``backend``, ``in_flight`` checks at a time, as a
    crawl's concurrent requests do; the count of each outcome."""
    queue = iter(pages)
    outcomes: dict[str, int] = {}

    async def one() -> None:
        for page, fp in queue:
            verdict = await backend.check(record_of(page, fp))
            outcomes[verdict.outcome.value] = outcomes.get(verdict.outcome.value, 0) + 1

    await asyncio.gather(*(one() for _ in range(in_flight)))
    return outcomes


def run_worker(url: str, stored: int, worker: int, workers: int, checks: int, k: int, extra: dict[str, Any],
               barrier: Any, results: Any, in_flight: int = 16, warm: int = 0) -> None:
    from simhash_scrapy.backends.redis.cluster_backend import GlobalRedisBackend

    pages = worker_pages(stored, worker, workers, warm + checks)
    warm_pages, pages = pages[:warm], pages[warm:]

    async def main() -> None:
        backend = GlobalRedisBackend(config(k), backend_settings(url, extra))
        await backend.open(SPIDER)
        if warm_pages:  # a worker that has checked ``warm`` pages already (its bucket cache filled): not timed
            await check_all(backend, warm_pages, in_flight)
            backend.counts.update(dict.fromkeys(backend.counts, 0))
            backend.timing.update(dict.fromkeys(backend.timing, 0.0))
        gc.collect()
        reset = _reset_peak()
        await asyncio.get_running_loop().run_in_executor(None, barrier.wait)
        start, cpu = time.time(), time.process_time()
        outcomes = await check_all(backend, pages, in_flight)
        end, cpu = time.time(), time.process_time() - cpu
        peak = _proc_status("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        reader = reader_name(backend)
        await backend.close()
        results.put({"start": start, "end": end, "cpu": cpu, "peak_rss": peak, "counts": backend.counts,
                     "timing": backend.timing, "outcomes": outcomes, "reader": reader})

    if os.environ.get(UVLOOP_ENV) == "1":  # (``--uvloop``: the workers' event loop is uvloop's)
        import uvloop

        uvloop.run(main())
    else:
        asyncio.run(main())


def timed_round(cluster: RedisCluster, workers: int, target: Any, args_of: Any) -> tuple[Any, Any, Any, Any, list[Any]]:
    """``workers`` processes of ``target`` (``args_of(w, barrier, results)``: worker ``w``'s arguments; each waits at
    the barrier, then puts its result), timed from the barrier with the nodes' stats reset: the nodes' CPU before and
    after, their command and network stats since the reset (the bytes they sent and got), and the workers' results."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(workers + 1), ctx.Queue()
    procs = [ctx.Process(target=target, args=args_of(w, barrier, results)) for w in range(workers)]
    for p in procs:
        p.start()
    barrier.wait()
    reset_stats(cluster)
    cpu_before = node_info(cluster, "cpu")
    out = [results.get() for _ in procs]
    cpu_after = node_info(cluster, "cpu")
    commands, net = node_info(cluster, "commandstats"), node_info(cluster, "stats")
    for p in procs:
        p.join()
    return cpu_before, cpu_after, commands, net, out


def measure(nodes: int, stored: int, workers: int, checks: int, k: int, extra: dict[str, Any], through_checks: bool,
            processes: int, listpack_value: int, in_flight: int = 16, warm: int = 0,
            node_args: tuple[str, ...] = ()) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        cluster = LocalCluster(folder, nodes, extra_args=node_args).start()
        try:
            configure(cluster, listpack_value)
            fill_start = time.time()
            if through_checks:
                asyncio.run(fill_through_checks(cluster.url, stored, k, extra))
            else:
                fill_directly(cluster.url, stored, k, extra, processes)
            fill_s = time.time() - fill_start
            print(f"{nodes} node(s): {stored:,} pages filled in {fill_s:.0f} s", file=sys.stderr, flush=True)
            memory = [m["used_memory"] - m["used_memory_startup"] for m in node_info(cluster, "memory")]
            keys = sum(int(db.get("db0", {}).get("keys", 0)) for db in node_info(cluster, "keyspace"))
            by_kind = memory_by_kind(cluster)
            cpu_before, cpu_after, commands, net, out = timed_round(
                cluster, workers, run_worker,
                lambda w, barrier, results: (cluster.url, stored, w, workers, checks, k, extra, barrier, results,
                                             in_flight, warm))
        finally:
            cluster.stop()
    result = summary(nodes, stored, workers, checks, k, extra, fill_s, memory, keys, cpu_before, cpu_after, commands, out)
    result["warm_checks_per_worker"] = warm
    result["redis_bytes_out_per_check"] = sum(n["total_net_output_bytes"] for n in net) / (workers * checks)
    result["redis_bytes_in_per_check"] = sum(n["total_net_input_bytes"] for n in net) / (workers * checks)
    result["bytes_per_page_by_kind"] = {kind: round(used / stored, 1) for kind, used in sorted(by_kind.items())}
    return result


def summary(nodes: int, stored: int, workers: int, checks: int, k: int, extra: dict[str, Any], fill_s: float,
            memory: list[int], keys: int, cpu_before: list[dict[str, Any]], cpu_after: list[dict[str, Any]],
            commands: list[dict[str, Any]], out: list[dict[str, Any]]) -> dict[str, Any]:
    total = workers * checks
    node_cpu = [sum(a[f] - b[f] for f in ("used_cpu_user", "used_cpu_sys")) for a, b in zip(cpu_after, cpu_before)]
    start, end = min(o["start"] for o in out), max(o["end"] for o in out)
    per_command: dict[str, list[float]] = {}  # command -> [calls, usec]
    for node in commands:
        for name, stat in node.items():
            row = per_command.setdefault(name.removeprefix("cmdstat_"), [0, 0.0])
            row[0] += stat["calls"]
            row[1] += stat["usec"]
    counts = {name: sum(o["counts"][name] for o in out) for name in out[0]["counts"]}
    timing = {name: sum(o["timing"][name] for o in out) / total * 1e6 for name in out[0]["timing"]}
    outcomes: dict[str, int] = {}
    for o in out:
        for name, n in o["outcomes"].items():
            outcomes[name] = outcomes.get(name, 0) + n
    lookups = counts["cache_hits"] + counts["cache_misses"]
    reads = sum(counts.get(name, 0) for name in ("bucket_hits", "bucket_misses", "bucket_moved"))
    return {
        "nodes": nodes, "stored": stored, "workers": workers, "checks": total, "k": k, "settings": extra,
        "fill_s": round(fill_s, 1),
        "redis_bytes_per_node": memory, "redis_bytes_per_page": sum(memory) / stored, "keys": keys,
        "checks_per_s": total / (end - start), "seconds": end - start,
        "worker_cpu_us_per_check": sum(o["cpu"] for o in out) / total * 1e6,
        "redis_cpu_us_per_check": sum(node_cpu) / total * 1e6,
        "redis_cpu_s_per_node": [round(c, 2) for c in node_cpu],
        "redis_cpu_share_per_node": [round(c / (end - start), 2) for c in node_cpu],
        "worker_peak_rss_mb": max(o["peak_rss"] for o in out) / 1e6,
        "step_us_per_check": timing,
        "redis_usec_per_check_by_command": {name: round(row[1] / total, 2) for name, row in per_command.items()},
        "redis_calls_per_check_by_command": {name: round(row[0] / total, 2) for name, row in per_command.items()},
        "cache_hit_rate": counts["cache_hits"] / lookups if lookups else None,
        "bucket_hit_rate": counts.get("bucket_hits", 0) / reads if reads else None,
        "counts": counts, "outcomes": outcomes, "reader": ",".join(sorted({o["reader"] for o in out})),
    }


def print_table(runs: list[dict[str, Any]]) -> None:
    print("| nodes | stored | bytes/page | checks/s | worker CPU µs/check | Redis CPU µs/check (all nodes) | "
          "Redis CPU share per node | worker peak RSS | directory cache hits | bucket cache hits | races |")
    print("|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for r in runs:
        share = " / ".join(f"{c:.2f}" for c in r["redis_cpu_share_per_node"])
        hit = "-" if r["cache_hit_rate"] is None else f"{r['cache_hit_rate']:.0%}"
        buckets = "-" if r.get("bucket_hit_rate") is None else f"{r['bucket_hit_rate']:.0%}"
        print(f"| {r['nodes']} | {r['stored']:,} | {r['redis_bytes_per_page']:.1f} | {r['checks_per_s']:,.0f} | "
              f"{r['worker_cpu_us_per_check']:.0f} | {r['redis_cpu_us_per_check']:.0f} | {share} | "
              f"{r['worker_peak_rss_mb']:.0f} MB | {hit} | {buckets} | {r['counts']['races']} |")
    for r in runs:
        steps = ", ".join(f"{name} {us:.0f}" for name, us in r["step_us_per_check"].items())
        top = sorted(r["redis_usec_per_check_by_command"].items(), key=lambda item: -item[1])[:6]
        redis = ", ".join(f"{name} {us:.1f} ({r['redis_calls_per_check_by_command'][name]:.2f} calls)" for name, us in top)
        kinds = ", ".join(f"{name} {b}" for name, b in r["bytes_per_page_by_kind"].items())
        print(f"\n{r['nodes']} node(s): MEMORY USAGE bytes/page by key kind (t tables, r records, d directory): {kinds}")
        print(f"{r['nodes']} node(s): bytes a check, sent by the nodes {r['redis_bytes_out_per_check']:,.0f}, "
              f"received {r['redis_bytes_in_per_check']:,.0f}")
        print(f"{r['nodes']} node(s): worker wall µs/check by step (all in-flight checks share it): {steps}; "
              f"Redis µs/check by command: {redis}; outcomes {r['outcomes']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stored", type=int, default=1_000_000)
    parser.add_argument("--nodes", default="1,3", help="node counts, comma-separated (e.g. 1,3,6)")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--checks", type=int, default=2000, help="timed checks per worker")
    parser.add_argument("--k", type=int, default=4, help="SIMHASH_MAX_DISTANCE")
    parser.add_argument("--blocks", type=int, default=0, help="SIMHASH_REDIS_TABLE_BLOCKS (0: k + 1)")
    parser.add_argument("--bucket-bits", type=int, default=16, help="SIMHASH_REDIS_BUCKET_BITS")
    parser.add_argument("--fill-checks", action="store_true", help="fill through real checks (slow)")
    parser.add_argument("--processes", type=int, default=2, help="fill processes")
    parser.add_argument("--listpack-value", type=int, default=128, help="hash-max-listpack-value of the nodes")
    parser.add_argument("--in-flight", type=int, default=16, help="checks in flight per worker (CONCURRENT_REQUESTS)")
    parser.add_argument("--warm-checks", type=int, default=0,
                        help="checks per worker before the timed ones (not timed): a worker well into its crawl")
    parser.add_argument("--bucket-cache", type=int, default=None, help="SIMHASH_REDIS_BUCKET_CACHE (MB)")
    parser.add_argument("--module", action="store_true",
                        help="load the simhash Redis module on every node (SIMHASH_REDIS_MODULE = True)")
    parser.add_argument("--uvloop", action="store_true",
                        help='the workers on uvloop (pip install uvloop; ASYNCIO_EVENT_LOOP = "uvloop.Loop" in a crawl)')
    parser.add_argument("--python-reader", action="store_true",
                        help="the workers read replies with node_link's Python reader (an install without hiredis)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    extra = {"SIMHASH_REDIS_TABLE_BLOCKS": args.blocks, "SIMHASH_REDIS_BUCKET_BITS": args.bucket_bits,
             "SIMHASH_REDIS_CAPACITY": args.stored}  # records sized for the crawl: ~64 a hash
    if args.bucket_cache is not None:
        extra["SIMHASH_REDIS_BUCKET_CACHE"] = args.bucket_cache
    extra["SIMHASH_REDIS_MODULE"] = args.module  # (without it, the scripts: as before the module)
    os.environ[UVLOOP_ENV] = "1" if args.uvloop else "0"
    os.environ[READER_ENV] = "1" if args.python_reader else "0"
    runs = []
    for nodes in [int(n) for n in args.nodes.split(",")]:
        runs.append(measure(nodes, args.stored, args.workers, args.checks, args.k, extra, args.fill_checks,
                            args.processes, args.listpack_value, args.in_flight, args.warm_checks,
                            module_node_args(args.module)))
        print(json.dumps(runs[-1]), flush=True)
    print(f"\n# redis-global: {args.stored:,} stored pages, one scope, k={args.k}, blocks={args.blocks or args.k + 1}, "
          f"bucket bits {args.bucket_bits}, hash-max-listpack-value {args.listpack_value}; {args.workers} workers x {args.checks:,} checks "
          f"(after {args.warm_checks:,} not timed), {args.in_flight} in flight each; "
          f"{'the simhash module on every node' if args.module else 'GET and scripts (no module)'}; "
          f"replies read by {runs[0]['reader']}\n")
    print_table(runs)
    if len(runs) > 1:
        print(f"\nchecks/s, {runs[-1]['nodes']} nodes vs {runs[0]['nodes']}: "
              f"{runs[-1]['checks_per_s'] / runs[0]['checks_per_s']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2) + "\n")


if __name__ == "__main__":
    main()
