"""What a ``redis-global`` check costs with no decision in it: the floor of this design's I/O on this machine.

    python benchmarks/redis_global_floor.py --stored 10000000                       # 3 nodes, 8 workers, 3 rounds
    python benchmarks/redis_global_floor.py --stored 50000 --checks 300 --rounds 1  # about a minute
    python benchmarks/redis_global_floor.py --stored 10000000 --module               # and the module's backend

Fills one local Redis Cluster once (``redis_cluster_scale``'s fill: ``--stored`` pages in the backend's layout), then
alternates two kinds of worker, ``--rounds`` times, each time ``--workers`` processes checking ``--checks`` new pages
each with 16 in flight (``--in-flight``; ``redis_cluster_scale.run_worker``: its pages and its timing):

* **backend**: ``GlobalRedisBackend`` as it is;
* **I/O only**: the same backend whose batch step (``_run``) sends the same round trips, with the same keys and about
  the same bytes, and decides nothing: the seq ``HINCRBY``, each page's record ``HGET`` and its bucket ``GET`` in
  every table; the filter of the buckets (``near_entries_many``); the directory slots and the records of the entries
  near a page's fold; then each page's record ``HSET`` (its payload encoded as the backend does) and, for a page
  whose buckets held no entry near its fold (a new canonical page), its directory slot and its append to every
  table bucket.  Every verdict is ``UNIQUE``.  Its commands are packed as the backend packs them (``packed_calls``:
  one C call a verb).
* **module** (``--module``: the ``simhash`` Redis module loaded on every node): the backend with
  ``SIMHASH_REDIS_MODULE = True``, each bucket scanned in its node (``SIMHASH.NEAR``) and appended to there
  (``SIMHASH.APPEND``).  The other two kinds use ``GET`` and the scripts (``SIMHASH_REDIS_MODULE = False``) on the
  same nodes.
* **I/O only, module** (``--module``): the I/O-only worker with the module's commands (``SIMHASH.NEAR`` for each
  bucket ``GET``, ``SIMHASH.APPEND`` for each append): the floor of the module's design, what a check costs with no
  decision at all.
* **module on uvloop** (``--module --uvloop``): the module's backend with the workers' event loop uvloop's (``pip
  install uvloop``), as a crawl with Scrapy's ``ASYNCIO_EVENT_LOOP = "uvloop.Loop"`` runs.

Each round's workers check pages of their own (new identities: ``worker_pages`` numbered by round).  Reports, for
each kind of worker, the checks/s and the worker's and Redis' CPU a check (best and mean of the rounds), and what
the decision logic costs (backend minus I/O only).  The I/O-only CPU a check is the floor that 2 cores divide: with no
decision at all, ``2 s / (worker + Redis CPU a check)`` checks/s at most.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve()
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent), str(HERE.parent.parent / "tests")]

import redis_cluster_scale as scale  # noqa: E402


def io_only_backend(base: Any) -> Any:
    """``GlobalRedisBackend`` whose batch step does the round trips and decides nothing (module docstring)."""
    from simhash_scrapy.backends.base import Outcome, Verdict
    from simhash_scrapy.backends.redis.cluster_layout import (
        DIR, DIR_SPAN, ROOM_MIN, ROOM_SHARE, GlobalRecord, fold, near_entries_many, pack_entry, pack_record,
    )
    from simhash_scrapy.backends.redis.node_link import packed_calls

    class IoOnly(base):  # type: ignore[misc,valid-type]
        async def _run(self, pages: list[Any]) -> list[Any]:
            self.counts["batches"] += 1
            self.counts["checks"] += len(pages)
            keys, codec, k = pages[0].keys, pages[0].scope.codec, self.config.max_distance
            read = self.link.batch()
            read.call(keys.meta, "HINCRBY", keys.meta, "seq", len(pages))
            # (packed as the backend packs them: one C call a verb)
            packed_calls(read.commands, "HGET", [keys.record(page.bucket) for page in pages], 1,
                         [page.fieldname for page in pages])
            fps = [page.record.fingerprint for page in pages]
            names = keys.buckets_many(fps)
            tables = [fp for fp in fps for _ in keys.tables]
            if self.module:
                packed_calls(read.commands, "SIMHASH.NEAR", names, len(keys.tables), [fold(fp) for fp in fps], (k,))
            else:
                packed_calls(read.commands, "GET", names, 1, [()] * len(names))
            out = await read.execute()
            first = int(out[0]) - len(pages) + 1
            if self.module:
                near = [reply[1:] for reply in out[1 + len(pages) :]]
            else:
                near = near_entries_many(out[1 + len(pages) :], tables, k)
            per_page = len(tables) // len(pages)
            new = [not any(near[p * per_page : (p + 1) * per_page]) for p in range(len(pages))]
            seqs = sorted({seq for seqs in near for seq in seqs})
            if seqs:  # the candidates' directory slots, then their records
                slots = self.link.batch()
                for seq in seqs:
                    key, offset = keys.directory(seq)
                    slots.call(key, "GETRANGE", key, offset, offset + DIR - 1)
                found = [raw for raw in await slots.execute() if len(raw) == DIR and raw != bytes(DIR)]
                if found:
                    records = self.link.batch()
                    for raw in found:
                        rkey = keys.record(int.from_bytes(raw[:3], "big"))
                        records.call(rkey, "HGET", rkey, raw[3:])
                    await records.execute()
            write = self.link.batch()
            rows, appended = [], []
            for n, (page, canonical) in enumerate(zip(pages, new)):
                record, seq = page.record, first + n
                payload = codec.encode(record.url, record.key, page.keep, record.referer, record.depth, record.text,
                                       None, record.etag, record.last_modified, record.canonical_link)
                rec = GlobalRecord(seq, record.fingerprint, False, canonical, 0, 0, None, record.seen, record.seen,
                                   payload, record.fingerprint if canonical else None)
                rows.append((page.fieldname, pack_record(rec)))
                if canonical:
                    dkey, offset = keys.directory(seq)
                    slot = page.bucket.to_bytes(3, "big") + page.fieldname
                    write.call(dkey, "EVALSHA", self._directory_sha, 1, dkey, offset, slot, DIR_SPAN * DIR)
                    appended.append((record.fingerprint, seq))
            packed_calls(write.commands, "HSET", [keys.record(page.bucket) for page in pages], 1, rows)
            names = keys.buckets_many([fp for fp, _ in appended])
            entries = [pack_entry(fp, seq) for fp, seq in appended]
            if self.module:
                packed_calls(write.commands, "SIMHASH.APPEND", names, len(keys.tables), entries,
                             (b"mark", ROOM_SHARE, ROOM_MIN))
            else:
                for i, key in enumerate(names):
                    write.call(key, "EVALSHA", self._append_sha, 1, key, entries[i // len(keys.tables)], b"mark")
            await write.execute()
            return [Verdict(Outcome.UNIQUE)] * len(pages)

    return IoOnly


class Kind(NamedTuple):
    """A kind of worker (module docstring): its row's name, and how it runs."""

    name: str
    io_only: bool  # the I/O-only subclass (``io_only_backend``), else the backend as it is
    module: bool  # ``SIMHASH_REDIS_MODULE = True``: the module's commands, else ``GET`` and the scripts
    uvloop: bool = False  # the workers on uvloop's event loop


KINDS = {
    "backend": Kind("the backend (GET, scripts)", io_only=False, module=False),
    "io": Kind("I/O only (no decision)", io_only=True, module=False),
    "module": Kind("the backend (module)", io_only=False, module=True),
    "io-module": Kind("I/O only, module (no decision)", io_only=True, module=True),
    "uvloop": Kind("the backend (module), uvloop", io_only=False, module=True, uvloop=True),
}


def run_worker(kind: str, *args: Any) -> None:
    """``redis_cluster_scale.run_worker`` with the backend or its I/O-only subclass (``KINDS``)."""
    from simhash_scrapy.backends.redis import cluster_backend

    if KINDS[kind].io_only:
        cluster_backend.GlobalRedisBackend = io_only_backend(cluster_backend.GlobalRedisBackend)
    scale.run_worker(*args)


def one_round(cluster: Any, kind: str, number: int, args: argparse.Namespace, extra: dict[str, Any]) -> dict[str, Any]:
    slots = args.workers * (4 * args.rounds + 1)  # every worker of every round (up to 4 kinds) a page number of its own
    before, after, commands, _, out = scale.timed_round(
        cluster, args.workers, run_worker,
        lambda w, barrier, results: (kind, cluster.url, args.stored, number * args.workers + w, slots, args.checks,
                                     args.k, extra, barrier, results, args.in_flight, 0))
    return scale.summary(len(cluster.ports), args.stored, args.workers, args.checks, args.k, extra, 0.0, [0], 0,
                         before, after, commands, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stored", type=int, default=10_000_000)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--checks", type=int, default=2000, help="timed checks per worker")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--in-flight", type=int, default=16, help="checks a worker has in flight (a batch takes up to 64)")
    parser.add_argument("--module", action="store_true",
                        help="load the simhash Redis module on every node and add its backend to the rounds")
    parser.add_argument("--uvloop", action="store_true", help="with --module: the module's backend on uvloop too")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.uvloop and not args.module:
        parser.error("--uvloop needs --module")
    extra = {"SIMHASH_REDIS_TABLE_BLOCKS": 0, "SIMHASH_REDIS_BUCKET_BITS": 16, "SIMHASH_REDIS_CAPACITY": args.stored,
             "SIMHASH_REDIS_MODULE": False}
    kinds = ("backend", "io") + (("module", "io-module") if args.module else ()) + (("uvloop",) if args.uvloop else ())
    rows: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory() as folder:
        cluster = scale.LocalCluster(folder, args.nodes, extra_args=scale.module_node_args(args.module)).start()
        try:
            scale.configure(cluster, 128)
            start = time.time()
            scale.fill_directly(cluster.url, args.stored, args.k, extra, 2)
            print(f"{args.stored:,} pages filled in {time.time() - start:.0f} s", file=sys.stderr, flush=True)
            number = 0
            for _ in range(args.rounds):
                for kind in kinds:
                    os.environ[scale.UVLOOP_ENV] = "1" if KINDS[kind].uvloop else "0"  # (the workers spawned next)
                    run = one_round(cluster, kind, number, args, {**extra, "SIMHASH_REDIS_MODULE": KINDS[kind].module})
                    number += 1
                    rows[kind].append(run)
                    print(f"{kind}: {run['checks_per_s']:,.0f} checks/s, worker {run['worker_cpu_us_per_check']:.0f} "
                          f"+ Redis {run['redis_cpu_us_per_check']:.0f} µs of CPU a check", file=sys.stderr, flush=True)
        finally:
            cluster.stop()
    print(f"\n# redis-global at {args.stored:,} pages on {args.nodes} local nodes, {args.workers} workers x "
          f"{args.checks:,} checks, {args.in_flight} in flight, k = {args.k}; {args.rounds} alternated rounds (load average "
          f"{os.getloadavg()[0]:.1f} at the end)\n")
    print("| worker | checks/s (mean; best) | worker CPU µs/check | Redis CPU µs/check | both | 2 s ÷ both |")
    print("|---|---:|---:|---:|---:|---:|")
    means = {}
    for kind in kinds:
        name = KINDS[kind].name
        rate = [r["checks_per_s"] for r in rows[kind]]
        worker = statistics.mean(r["worker_cpu_us_per_check"] for r in rows[kind])
        redis = statistics.mean(r["redis_cpu_us_per_check"] for r in rows[kind])
        means[kind] = (statistics.mean(rate), worker, redis)
        print(f"| {name} | {statistics.mean(rate):,.0f}; {max(rate):,.0f} | {worker:.0f} | {redis:.0f} | "
              f"{worker + redis:.0f} | {2e6 / (worker + redis):,.0f} |")
    (rate_b, worker_b, _), (rate_io, worker_io, _) = means["backend"], means["io"]
    print(f"\nThe decision logic: {worker_b - worker_io:.0f} µs of worker CPU a check ({(worker_b - worker_io) / worker_b:.0%} "
          f"of the backend's); I/O only runs {rate_io / rate_b:.2f}x the backend's checks/s.")
    if args.module:
        rate_m, worker_m, redis_m = means["module"]
        _, _, redis_b = means["backend"]
        print(f"The module: {rate_m / rate_b:.2f}x the backend's checks/s, {worker_m / worker_b:.2f}x its worker CPU "
              f"and {redis_m / redis_b:.2f}x its Redis CPU a check.")
        _, worker_mio, redis_mio = means["io-module"]
        print(f"The module's floor (I/O only, no decision): {worker_mio + redis_mio:.0f} µs of CPU a check, so at most "
              f"{2e6 / (worker_mio + redis_mio):,.0f} checks/s on 2 cores; its decision logic {worker_m - worker_mio:.0f} "
              f"µs of worker CPU a check.")
    if args.uvloop:
        rate_u, worker_u, _ = means["uvloop"]
        print(f"On uvloop: {rate_u / rate_m:.2f}x the module's checks/s and {worker_u / worker_m:.2f}x its worker CPU "
              f"a check.")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
