"""``redis-global``'s CPU per check, this tree against another checkout of the project, interleaved in one run.

    git worktree add /tmp/main-tree main      # or: git archive main | tar -x -C /tmp/main-tree (then copy the .so)
    python benchmarks/redis_global_ab.py --baseline /tmp/main-tree                 # 1,000,000 stored, 3 nodes
    python benchmarks/redis_global_ab.py --baseline /tmp/main-tree --stored 100000 --rounds 5 --in-flight 64
    python benchmarks/redis_global_ab.py --baseline /tmp/main-tree --revisit     # a recurring crawl's checks
    python benchmarks/redis_global_ab.py --baseline /tmp/main-tree --module      # the simhash module on every node
    python benchmarks/redis_global_ab.py --baseline /tmp/main-tree --module --stored 10000000 --workers 8 \
        --in-flight 64 --checks 16000 --rounds 5                                # issue 38's setting, both trees
    python benchmarks/redis_global_ab.py --baseline . --baseline-python-reader --module   # hiredis against
                                                           # node_link's Python reader, this tree in both turns

Starts two local Redis Clusters of ``--nodes`` primaries, one per tree (the
trees may differ in layout), and fills each with ``--stored`` pages by that
tree's own bulk loader (``redis_cluster_scale.fill_directly``).  Then, for
``--rounds`` rounds, one worker process per tree in turn (baseline, this
tree; the machine's load falls on both alike) checks ``--checks`` new pages
(``redis_scale.worker_pages``: 70% new, 20% near a stored page, 10% near
another worker's), ``--in-flight`` at a time.  Worker CPU per check is the
worker's process time over the checks (imports and set-up not counted);
Redis CPU per check is ``INFO cpu`` user+sys summed over that tree's nodes,
per node too.  Ratios are this tree's over the baseline's, summed over the
rounds.  ``--revisit``: every round re-checks the pages one untimed round checked
first (a recurring crawl: each page's identity has its record), not new ones.
``--module``: every node loads the ``simhash`` Redis module (this tree's
build; both trees' clusters) and the workers use it (``SIMHASH_REDIS_MODULE``).
``--workers``: that many worker processes of a tree check at once in each of
its rounds, every one its own pages, starting together; the table adds each
round's checks/s (all its checks over the time from the first worker's start
to the last one's end), as ``redis_cluster_scale.py`` counts them.
``--baseline-python-reader``: the baseline's workers read replies with
``node_link``'s Python reader (an install without hiredis, which the
``redis`` extra has); with ``--baseline .``, one tree with either reader.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
TREE = HERE.parent.parent
sys.path[:0] = [str(TREE), str(HERE.parent), str(TREE / "tests")]

from redis_cluster_scale import LocalCluster, configure, module_node_args  # noqa: E402
from redis_shards import node_info  # noqa: E402

#: Page slots of ``redis_scale.worker_pages``: a round's workers check pages no other worker or round checks.
SLOTS = 1024
PRELUDE = """
import sys
SLOTS = %d
tree = {tree!r}
sys.path[:0] = [tree, tree + "/benchmarks", tree + "/tests"]
extra = {extra!r}
""" % SLOTS
FILL = PRELUDE + """
from redis_cluster_scale import fill_directly
if __name__ == "__main__":
    fill_directly({url!r}, {stored}, {k}, extra, 2)
"""
WORKER = PRELUDE + """
if {python_reader!r}:  # (``--baseline-python-reader``: as an install without hiredis)
    sys.modules["hiredis"] = None
import asyncio, json, time
from redis_cluster_scale import SPIDER, backend_settings, check_all, config, reader_name
from redis_scale import record_of, worker_pages
from simhash_scrapy.backends.redis.cluster_backend import GlobalRedisBackend

async def main():
    pages = worker_pages({stored}, {slot}, SLOTS, {checks})
    backend = GlobalRedisBackend(config({k}), backend_settings({url!r}, extra))
    await backend.open(SPIDER)
    await backend.check(record_of(*pages[0]))  # connections made, layout checked: not timed
    await asyncio.sleep(max(0.0, {start_at!r} - time.time()))  # (every worker of the round starts at once)
    start, cpu = time.time(), time.process_time()
    outcomes = await check_all(backend, pages[1:], {in_flight})
    end, cpu = time.time(), time.process_time() - cpu
    reader = reader_name(backend)
    await backend.close()
    print(json.dumps({{"cpu": cpu, "checks": len(pages) - 1, "outcomes": outcomes, "start": start, "end": end,
                      "reader": reader}}))

asyncio.run(main())
"""


def run_code(code: str) -> str:
    return run_many([code])[0]


def run_many(codes: list[str]) -> list[str]:
    """Each of ``codes`` in a Python process of its own, all at once; their outputs."""
    paths = []
    for code in codes:
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
            handle.write(code)
        paths.append(handle.name)
    try:
        running = [subprocess.Popen([sys.executable, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True) for path in paths]
        done = [(process.communicate(), process.returncode) for process in running]
    finally:
        for path in paths:
            Path(path).unlink()
    for (_, err), code in done:
        if code:
            raise RuntimeError(err[-3000:])
    return [out for (out, _), _ in done]


def redis_cpu(cluster: LocalCluster) -> list[float]:
    return [info["used_cpu_user"] + info["used_cpu_sys"] for info in node_info(cluster, "cpu")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="another checkout of the project")
    parser.add_argument("--stored", type=int, default=1_000_000)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--checks", type=int, default=2000, help="checks per worker per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--revisit", action="store_true",
                        help="every round re-checks the pages of a first, untimed round (their records read)")
    parser.add_argument("--workers", type=int, default=1,
                        help="workers of a tree checking at once (each round: the tree's checks/s too)")
    parser.add_argument("--module", action="store_true",
                        help="load the simhash Redis module on every node, and check with it (SIMHASH_REDIS_MODULE)")
    parser.add_argument("--baseline-python-reader", action="store_true",
                        help="the baseline's workers read replies with node_link's Python reader (no hiredis)")
    args = parser.parse_args()
    extra = {"SIMHASH_REDIS_TABLE_BLOCKS": 0, "SIMHASH_REDIS_BUCKET_BITS": 16, "SIMHASH_REDIS_CAPACITY": args.stored,
             "SIMHASH_REDIS_MODULE": args.module}
    trees = {"baseline": str(args.baseline.resolve()), "this tree": str(TREE)}
    if (args.rounds * len(trees) + 1) * args.workers > SLOTS:
        parser.error(f"--rounds x 2 x --workers must stay under {SLOTS} (each worker of each round its own pages)")
    readers: dict[str, set[str]] = {name: set() for name in trees}  # the reply readers each tree's workers used
    totals: dict[str, dict[str, Any]] = {name: {"cpu": 0.0, "checks": 0, "redis": [0.0] * args.nodes, "rates": []}
                                         for name in trees}
    with tempfile.TemporaryDirectory() as folder:
        for n in range(len(trees)):
            (Path(folder) / str(n)).mkdir()
        node_args = module_node_args(args.module)
        clusters = {name: LocalCluster(Path(folder) / str(n), args.nodes, extra_args=node_args)
                    for n, name in enumerate(trees)}
        try:
            for name, tree in trees.items():
                cluster = clusters[name].start()
                configure(cluster, 128)
                run_code(FILL.format(tree=tree, extra=extra, url=cluster.url, stored=args.stored, k=args.k))
                print(f"{name}: {args.stored:,} pages filled", file=sys.stderr, flush=True)

            def check_pages(name: str, tree: str, slot: int) -> list[dict[str, Any]]:
                """``--workers`` workers of ``tree`` check the pages of ``slot`` on (``redis_scale.worker_pages``),
                one slot each, starting together (a few seconds after their imports); their outputs."""
                start_at = time.time() + 5 + args.workers
                python_reader = args.baseline_python_reader and name == "baseline"
                outs = [dict(json.loads(out.splitlines()[-1])) for out in run_many([WORKER.format(
                    tree=tree, extra=extra, url=clusters[name].url, stored=args.stored, k=args.k, slot=slot + w,
                    checks=args.checks, in_flight=args.in_flight, start_at=start_at,
                    python_reader=python_reader) for w in range(args.workers)])]
                if python_reader and any(out["reader"] != "python" for out in outs):
                    raise RuntimeError(f"--baseline-python-reader: the baseline's workers read with {outs[0]['reader']}")
                readers[name].update(out["reader"] for out in outs)
                return outs

            if args.revisit:  # the first crawl of the pages every round re-checks (not timed)
                for name, tree in trees.items():
                    check_pages(name, tree, 0)
            for number in range(args.rounds):
                for turn, (name, tree) in enumerate(trees.items()):
                    cluster = clusters[name]
                    before = redis_cpu(cluster)
                    outs = check_pages(name, tree, 0 if args.revisit else (number * len(trees) + turn + 1) * args.workers)
                    after = redis_cpu(cluster)
                    row = totals[name]
                    row["cpu"] += sum(out["cpu"] for out in outs)
                    row["checks"] += sum(out["checks"] for out in outs)
                    row["redis"] = [r + a - b for r, a, b in zip(row["redis"], after, before)]
                    row["rates"].append(sum(out["checks"] for out in outs) /
                                        (max(out["end"] for out in outs) - min(out["start"] for out in outs)))
        finally:
            for cluster in clusters.values():
                cluster.stop()
    print(f"# redis-global CPU per check: {args.stored:,} stored, {args.nodes} node(s), k={args.k}, {args.rounds} "
          f"rounds x {args.workers} worker(s) x {args.checks:,} {'revisits' if args.revisit else 'checks'} per tree, "
          f"{args.in_flight} in flight, interleaved{', the simhash module on every node' if args.module else ''}"
          f"{'; the baseline with the Python reader' if args.baseline_python_reader else ''}\n")
    print("| tree | replies read by | worker CPU µs/check | Redis CPU µs/check (all nodes) | per node | worker+Redis "
          "| checks/s each round |")
    print("|---|---|---:|---:|---|---:|---|")
    per: dict[str, tuple[float, float, float]] = {}
    for name, row in totals.items():
        worker, redis = row["cpu"] / row["checks"] * 1e6, sum(row["redis"]) / row["checks"] * 1e6
        per[name] = worker, redis, sum(row["rates"]) / len(row["rates"])
        nodes = " / ".join(f"{r / row['checks'] * 1e6:.0f}" for r in row["redis"])
        rates = ", ".join(f"{rate:,.0f}" for rate in row["rates"])
        print(f"| {name} | {', '.join(sorted(readers[name]))} | {worker:.0f} | {redis:.0f} | {nodes} | {worker + redis:.0f} | {rates} |")
    (bw, br, bc), (tw, tr, tc) = per["baseline"], per["this tree"]
    print(f"\nthis tree / baseline: worker {tw / bw:.2f}x, Redis {tr / br:.2f}x, worker+Redis {(tw + tr) / (bw + br):.2f}x"
          f", checks/s {tc / bc:.2f}x (the rounds' mean)")


if __name__ == "__main__":
    main()
