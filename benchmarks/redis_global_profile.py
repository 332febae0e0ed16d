"""Worker CPU per check of ``redis-global``, by round-trip client, in one run: redis-py's cluster pipeline vs ``node_link``.

    python benchmarks/redis_global_profile.py                         # 100,000 stored, 3 nodes, 3 x 1,500 checks a client
    python benchmarks/redis_global_profile.py --nodes 1 --stored 1000000
    python benchmarks/redis_global_profile.py --profile link          # cProfile of one client's checks, top functions

Starts a local Redis Cluster (``redis_cluster_scale.LocalCluster``), fills one
global scope directly (``redis_cluster_scale.fill_directly``), then one worker
(this process) checks new pages (``redis_scale.worker_pages``: 70% new, 20%
near a stored page, 10% near another worker's), 16 in flight, with each
round-trip client in turn, ``--rounds`` times (interleaved: the machine's
load falls on every client alike):

* ``redis-py``: the backend's commands through redis-py's cluster pipeline
  (what the backend used before ``node_link``);
* ``link``: ``node_link`` with the Python reply reader (``RespReader``);
* ``link+hiredis``: ``node_link`` with hiredis' C reader (when installed).

Worker CPU per check is the process time of the checks (``time.process_time``)
over their count; Redis CPU per check is ``INFO cpu`` user+sys summed over the
nodes.  Ratios are against ``redis-py`` in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent), str(HERE.parent.parent / "tests")]

from redis_cluster_scale import (  # noqa: E402
    SPIDER,
    LocalCluster,
    backend_settings,
    check_all,
    config,
    configure,
    fill_directly,
)
from redis_scale import record_of, worker_pages  # noqa: E402
from redis_shards import node_info  # noqa: E402


class RedisPyLink:
    """``node_link.NodeLink``'s interface over redis-py's cluster pipeline (the client before ``node_link``)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def batch(self) -> RedisPyBatch:
        return RedisPyBatch(self.client.pipeline(transaction=False))

    async def close(self) -> None:
        pass


class RedisPyBatch:
    def __init__(self, pipe: Any) -> None:
        self.pipe = pipe
        self.commands: list[tuple[str, tuple[Any, ...]]] = []  # (key, args), as node_link.Batch

    def __len__(self) -> int:
        return len(self.commands)

    def call(self, key: str, *args: Any) -> None:
        self.commands.append((key, args))

    async def execute(self) -> list[Any]:
        for _, args in self.commands:
            self.pipe.execute_command(*args)
        return list(await self.pipe.execute())


def clients() -> list[str]:
    names = ["redis-py", "link"]
    try:
        import hiredis  # noqa: F401

        names.append("link+hiredis")
    except ImportError:
        pass
    return names


def use(backend: Any, name: str) -> None:
    from simhash_scrapy.backends.redis.node_link import NodeLink, RespReader, reader_class

    if name == "redis-py":
        backend.link = RedisPyLink(backend.client)
    else:
        link = NodeLink(backend.client, reader=RespReader if name == "link" else reader_class())
        link.scripts = backend.link.scripts
        backend.link = link


async def run(url: str, stored: int, name: str, pages: list[tuple[int, int]], k: int, extra: dict[str, Any],
              profile: cProfile.Profile | None) -> tuple[float, dict[str, int]]:
    from simhash_scrapy.backends.redis.cluster_backend import GlobalRedisBackend

    backend = GlobalRedisBackend(config(k), backend_settings(url, extra))
    await backend.open(SPIDER)
    use(backend, name)
    await backend.check(record_of(*pages[0]))  # connections made, layout checked: not timed
    if profile is not None:
        profile.enable()
    cpu = time.process_time()
    outcomes = await check_all(backend, pages)
    cpu = time.process_time() - cpu
    if profile is not None:
        profile.disable()
    await backend.close()
    return cpu, outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stored", type=int, default=100_000)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--checks", type=int, default=1500, help="checks per client per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--profile", default="", help="a client to profile (cProfile), e.g. link+hiredis")
    args = parser.parse_args()
    extra = {"SIMHASH_REDIS_TABLE_BLOCKS": 0, "SIMHASH_REDIS_BUCKET_BITS": 16, "SIMHASH_REDIS_CAPACITY": args.stored}
    names = clients()
    profile = cProfile.Profile() if args.profile else None
    cpu = {name: 0.0 for name in names}
    redis_cpu = {name: 0.0 for name in names}
    count = {name: 0 for name in names}
    with tempfile.TemporaryDirectory() as folder:
        cluster = LocalCluster(folder, args.nodes).start()
        try:
            configure(cluster, 128)
            fill_directly(cluster.url, args.stored, args.k, extra, 2)
            slot = 0
            for _ in range(args.rounds):
                for name in names:
                    pages = worker_pages(args.stored, slot, 64, args.checks)
                    slot += 1
                    before = node_info(cluster, "cpu")
                    used, _ = asyncio.run(run(cluster.url, args.stored, name, pages, args.k, extra, None))
                    after = node_info(cluster, "cpu")
                    redis_cpu[name] += sum(a[f] - b[f] for a, b in zip(after, before)
                                           for f in ("used_cpu_user", "used_cpu_sys"))
                    cpu[name] += used
                    count[name] += len(pages)
            if profile is not None:  # a round of its own: cProfile's overhead is in no figure above
                asyncio.run(run(cluster.url, args.stored, args.profile, worker_pages(args.stored, slot, 64, args.checks),
                                args.k, extra, profile))
        finally:
            cluster.stop()
    print(f"# redis-global worker CPU per check: {args.stored:,} stored, {args.nodes} node(s), k={args.k}, "
          f"{args.rounds} rounds x {args.checks:,} checks per client, 16 in flight\n")
    print("| client | worker CPU µs/check | vs redis-py | Redis CPU µs/check (all nodes) |")
    print("|---|---:|---:|---:|")
    base = cpu["redis-py"] / count["redis-py"]
    for name in names:
        per = cpu[name] / count[name]
        print(f"| {name} | {per * 1e6:.0f} | {per / base:.2f}x | {redis_cpu[name] / count[name] * 1e6:.0f} |")
    if profile is not None:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(25)
        print(f"\ncProfile of {args.profile} (tottime, {args.checks:,} checks):\n{out.getvalue()}")


if __name__ == "__main__":
    main()
