"""One scope on a local three-node Redis Cluster, with and without SIMHASH_REDIS_SHARDS.

    python benchmarks/redis_shards.py                   # 100,000 stored pages, 6 shards vs 1 (~5 min here)
    python benchmarks/redis_shards.py --stored 20000 --workers 2 --checks 1000   # about a minute

For each ``SIMHASH_REDIS_SHARDS`` value (1, then ``--shards``), in one run:

1. Starts a fresh three-node cluster of Debian's ``redis-server`` on loopback
   ports (the same helper the tests use, ``tests/redis_server.py``).
2. Fills one scope with ``--stored`` pages through real ``RedisBackend.check``
   calls (the pages of ``redis_scale.py``: 70% new, 30% near an earlier one).
3. Memory per node: ``used_memory`` minus ``used_memory_startup`` of each
   node, and the recorded pages: where one scope's data lives.
4. ``--workers`` processes check ``--checks`` new pages each, 16 in flight
   (``redis_scale.py``'s timed pages); checks/s summed over the workers, and
   the Redis CPU per check summed over the nodes.

Every decision of the timed run must be the same with and without shards (the
pages and their order per worker are the same; the script checks that the
outcomes agree where the order of the workers' pages cannot change them:
pages that are not near another worker's page).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent), str(HERE.parent.parent / "tests")]

from redis_scale import fill_through_backend, run_worker  # noqa: E402
from redis_server import RedisCluster  # noqa: E402  (tests/redis_server.py)


def cluster_settings(shards: int) -> dict[str, Any]:
    return {"SIMHASH_REDIS_CLUSTER": True, "SIMHASH_REDIS_SHARDS": shards}


def node_info(cluster: RedisCluster, section: str) -> list[dict[str, Any]]:
    import redis

    out = []
    for port in cluster.ports:
        client = redis.Redis(host="127.0.0.1", port=port)
        try:
            out.append(client.info(section))
        finally:
            client.close()
    return out


def measure(shards: int, stored: int, workers: int, checks: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        cluster = RedisCluster(folder).start()
        try:
            asyncio.run(fill_through_backend(cluster.url, stored, stored, cluster_settings(shards)))
            memory = [m["used_memory"] - m["used_memory_startup"] for m in node_info(cluster, "memory")]
            ctx = mp.get_context("spawn")
            barrier, results = ctx.Barrier(workers + 1), ctx.Queue()
            procs = [ctx.Process(target=run_worker, args=(cluster.url, stored, stored, w, workers, checks, 16, barrier,
                                                          results, cluster_settings(shards)))
                     for w in range(workers)]
            for p in procs:
                p.start()
            barrier.wait()
            cpu_before = node_info(cluster, "cpu")
            out = [results.get() for _ in procs]
            cpu_after = node_info(cluster, "cpu")
            for p in procs:
                p.join()
        finally:
            cluster.stop()
    redis_cpu = sum(a[k] - b[k] for a, b in zip(cpu_after, cpu_before) for k in ("used_cpu_user", "used_cpu_sys"))
    start, end = min(o[1] for o in out), max(o[2] for o in out)
    return {
        "shards": shards,
        "stored": stored,
        "redis_bytes_per_node": memory,
        "redis_bytes_per_page": sum(memory) / stored,
        "largest_node_share": max(memory) / sum(memory),
        "checks_per_s": workers * checks / (end - start),
        "worker_cpu_us_per_check": sum(o[3] for o in out) / (workers * checks) * 1e6,
        "redis_cpu_us_per_check": redis_cpu / (workers * checks) * 1e6,
        "backend_errors": sum(o[6] for o in out),
        "outcomes": {row[0]: row[1] for o in out for row in o[5]},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stored", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=6)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--checks", type=int, default=3000, help="timed checks per worker")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    runs = [measure(shards, args.stored, args.workers, args.checks) for shards in (1, args.shards)]
    print(f"# One scope on a three-node Redis Cluster: {args.stored:,} stored pages, {args.workers} workers x "
          f"{args.checks:,} checks, 16 in flight each\n")
    print("| SIMHASH_REDIS_SHARDS | Redis bytes per node (after the fill) | largest node's share | bytes/page | "
          "checks/s | worker CPU µs/check | Redis CPU µs/check (all nodes) |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for run in runs:
        nodes = " / ".join(f"{b / 1e6:.1f} MB" for b in run["redis_bytes_per_node"])
        print(f"| {run['shards']} | {nodes} | {run['largest_node_share']:.0%} | {run['redis_bytes_per_page']:.1f} | "
              f"{run['checks_per_s']:,.0f} | {run['worker_cpu_us_per_check']:.0f} | {run['redis_cpu_us_per_check']:.0f} |")
    base, sharded = runs
    print(f"\nchecks/s with {args.shards} shards: {sharded['checks_per_s'] / base['checks_per_s']:.2f}x of one shard; "
          f"backend errors: {base['backend_errors']} and {sharded['backend_errors']}")
    same = sum(base["outcomes"][p] == sharded["outcomes"][p] for p in base["outcomes"])
    print(f"outcomes equal in both runs: {same:,} of {len(base['outcomes']):,} timed pages (pages near another "
          f"worker's concurrent page may go either way: whichever worker Redis serves first is canonical)")
    if args.json:
        for run in runs:
            run.pop("outcomes")
        args.json.write_text(json.dumps(runs, indent=2) + "\n")


if __name__ == "__main__":
    main()
