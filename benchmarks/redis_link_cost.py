"""``node_link``'s CPU per round trip, in the worker and in Redis: N ``GET``s of S-byte strings spread over the nodes.

    python benchmarks/redis_link_cost.py                                  # 60 GETs of 14,000 bytes, 3 nodes
    python benchmarks/redis_link_cost.py --size 1400 --keys 30
    python benchmarks/redis_link_cost.py --tree /tmp/main-tree            # another checkout's node_link, same run

Starts a local Redis Cluster (``redis_cluster_scale.LocalCluster``), writes
``--keys`` strings of ``--size`` bytes (each its own hash slot: on every node),
then sends them as ``GET``s in one ``Batch`` (one send per node, as a batch of
checks reads its table buckets), ``--rounds`` times, for each tree of
``--tree`` (this one by default) in turn, ``--repeat`` times interleaved.
Worker CPU is this process's time over the round trips; Redis CPU is
``INFO cpu`` user+sys summed over the nodes.  14,000 bytes is a table bucket at
10 million pages (k = 4), 1,400 at 1 million.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent), str(HERE.parent.parent / "tests")]

from redis_cluster_scale import LocalCluster  # noqa: E402
from redis_shards import node_info  # noqa: E402


def redis_cpu(cluster: LocalCluster) -> float:
    return sum(info["used_cpu_user"] + info["used_cpu_sys"] for info in node_info(cluster, "cpu"))


def link_module(tree: str) -> Any:
    """``simhash_scrapy.backends.redis.node_link`` of ``tree`` (a checkout), imported under a name of its own (in
    this tree's package: its relative imports, ``_native``, are this tree's)."""
    if tree == str(HERE.parent.parent):
        return importlib.import_module("simhash_scrapy.backends.redis.node_link")
    path = Path(tree) / "simhash_scrapy" / "backends" / "redis" / "node_link.py"
    spec = importlib.util.spec_from_file_location(f"simhash_scrapy.backends.redis.node_link_{abs(hash(tree))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def rounds(cluster: LocalCluster, module: Any, keys: list[str], count: int) -> tuple[float, float]:
    """(worker, Redis) CPU seconds of ``count`` round trips, each every key's GET."""
    import redis.asyncio as redis_async

    client = redis_async.RedisCluster.from_url(cluster.url)
    await client.ping()
    link = module.NodeLink(client)
    batch = link.batch()
    batch.call(keys[0], "GET", keys[0])
    await batch.execute()  # connected
    cpu, before = time.process_time(), redis_cpu(cluster)
    for _ in range(count):
        batch = link.batch()
        for key in keys:
            batch.call(key, "GET", key)
        replies = await batch.execute()
    cpu, used = time.process_time() - cpu, redis_cpu(cluster) - before
    assert all(len(reply) == len(replies[0]) for reply in replies)
    await link.close()
    await client.aclose()
    return cpu, used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=14_000)
    parser.add_argument("--keys", type=int, default=60)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tree", action="append", default=[], help="a checkout whose node_link to measure too")
    args = parser.parse_args()
    trees = [str(HERE.parent.parent), *args.tree]
    totals = {tree: [0.0, 0.0] for tree in trees}
    with tempfile.TemporaryDirectory() as folder:
        cluster = LocalCluster(folder, args.nodes).start()
        try:
            import redis

            keys = [f"cost:{{{n}}}" for n in range(args.keys)]
            for port in cluster.ports:
                node = redis.Redis(host="127.0.0.1", port=port)
                for key in keys:
                    try:
                        node.set(key, b"x" * args.size)
                    except redis.ResponseError:  # (another node's slot)
                        pass
                node.close()
            modules = {tree: link_module(tree) for tree in trees}
            for _ in range(args.repeat):
                for tree in trees:
                    cpu, used = asyncio.run(rounds(cluster, modules[tree], keys, args.rounds))
                    totals[tree][0] += cpu
                    totals[tree][1] += used
        finally:
            cluster.stop()
    count = args.rounds * args.repeat
    print(f"# node_link: {args.keys} GETs of {args.size:,} bytes a round trip, {args.nodes} nodes, "
          f"{args.repeat} x {args.rounds:,} round trips per tree, interleaved\n")
    print("| tree | worker CPU µs a round trip | µs a GET | Redis CPU µs a round trip (all nodes) |")
    print("|---|---:|---:|---:|")
    for tree, (cpu, used) in totals.items():
        print(f"| {tree} | {cpu / count * 1e6:.0f} | {cpu / count / args.keys * 1e6:.1f} | {used / count * 1e6:.0f} |")


if __name__ == "__main__":
    main()
