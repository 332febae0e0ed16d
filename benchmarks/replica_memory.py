"""A Redis worker's replica: bytes per canonical page at rest, peak RSS during its load, checks/s; this tree vs a baseline.

    python benchmarks/replica_memory.py --stored 1000000                 # against the branch point, 8 workers (~10 min)
    python benchmarks/replica_memory.py --stored 1000000 --against 7e14ac5 --rounds 2
    python benchmarks/replica_memory.py --quick                          # 20,000 stored, 2 workers
    python benchmarks/replica_memory.py --rdb-cache /tmp/simhash-fills    # keep the filled Redis: reruns skip the fill

In one run:

1. Fills a throw-away ``redis-server`` with ``--stored`` pages the way
   ``redis_scale.py`` does (``fill_directly``: 70% canonical pages, the rest
   near-duplicates of them) and keeps it as an RDB snapshot.
2. Extracts the baseline (``git archive`` of ``--against``, default the commit
   where this branch left ``main``: it must use the same Redis key layout)
   into a temporary directory (its C helpers copied when their sources are the
   same, else built there as a wheel).
3. For each tree, baseline first, ``--rounds`` times: a fresh server from the
   snapshot, then ``redis_scale.timed_run`` in a process importing that tree
   (``SIMHASH_BENCH_TREE``): ``--workers`` processes each load their replica
   of the scope, then check ``--checks`` new pages each.  Each worker reads
   ``/proc/self/status``: VmRSS just before the load, VmRSS after it (the
   replica at rest, after a ``gc.collect()``), VmHWM reset just before the load
   (``/proc/self/clear_refs``) and read after it (the peak during the load).
   For this tree the checked pages' decisions are replayed through the
   in-process backend (``redis_scale.same_decisions``): they must all agree.

Reported per tree (median over workers, then the median round): bytes a
canonical page at rest ((rest - before) / canonical pages), peak during the
load over the rest figure ((peak - before) / (rest - before)), the process's
peak RSS, the load's CPU seconds, checks/s of all workers, and the ratio of
checks/s to the baseline's in the same run (rounds alternate the trees).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
sys.path[:0] = [str(HERE.parent)]

import redis_scale  # noqa: E402  (puts SIMHASH_BENCH_TREE, or this tree, first on sys.path)
from backends import Server  # noqa: E402

#: The C helpers' sources: their builds are copied into the baseline when its sources are this tree's.
HELPERS = ("simhash_scrapy/core/_speedups.c", "simhash_scrapy/core/extract/_walker.c")
LAYOUT = "simhash_scrapy/backends/redis/layout.py"


def filled_rdb(stored: int, cache: Path | None, scratch: Path) -> Path:
    """An RDB snapshot of a Redis filled with ``stored`` pages (from ``cache`` when it is there)."""
    from simhash_scrapy.backends.redis.layout import LAYOUT_VERSION

    path = (cache or scratch) / f"fill-{stored}-direct-v{LAYOUT_VERSION}.rdb"
    if path.exists():
        return path
    server = Server()
    try:
        redis_scale.fill_directly(server.url, stored, stored)
        client = redis_scale.sync_client(server.url)
        redis_scale.save_rdb(client, server, path)
        client.close()
    finally:
        server.stop()
    return path


def baseline_tree(ref: str, scratch: Path) -> Path:
    """``ref`` of this repository as a source tree with its C helpers, in ``scratch``."""
    tree = scratch / "baseline"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    same_c = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", ref, "--", *HELPERS, "setup.py"]).returncode == 0
    built = [[so for so in (ROOT / source).parent.glob(Path(source).stem + "*.so")] for source in HELPERS]
    if same_c and all(built):
        for so in (so for found in built for so in found):
            shutil.copy(so, tree / so.relative_to(ROOT))
    else:
        build_helpers(tree, scratch)
    return tree


def build_helpers(tree: Path, scratch: Path) -> None:
    """The baseline's C helpers built from its own sources: a wheel (pip, in an isolated build environment: a
    virtualenv's own setuptools may be too old for ``pyproject.toml``, or absent), its compiled modules unpacked
    into the tree."""
    wheels = scratch / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(tree)], check=True,
                   capture_output=True)
    with zipfile.ZipFile(next(wheels.glob("*.whl"))) as wheel:
        for name in wheel.namelist():
            if name.endswith(".so"):
                (tree / name).write_bytes(wheel.read(name))


def run_tree(tree: Path, rdb: Path, args: argparse.Namespace, compare: bool) -> dict[str, Any]:
    """One round for one tree: a fresh server from ``rdb``, the workers in a process importing ``tree``."""
    server = Server(str(rdb))
    try:
        command = [sys.executable, str(HERE), "--child", server.url, "--stored", str(args.stored),
                   "--workers", str(args.workers), "--checks", str(args.checks), "--in-flight", str(args.in_flight)]
        if compare:
            command.append("--compare")
        env = {**os.environ, "SIMHASH_BENCH_TREE": str(tree)}
        out = subprocess.run(command, env=env, check=True, stdout=subprocess.PIPE, text=True)  # stderr: the log
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        server.stop()


def child(url: str, args: argparse.Namespace) -> None:
    """In a process importing one tree: the timed run (and the decisions) against the server at ``url``."""
    import simhash_scrapy

    fps, dup = redis_scale.fill_plan(args.stored)
    canonical = int((~dup).sum())
    del fps, dup
    run = redis_scale.timed_run(url, args.stored, args.stored, args.workers, args.checks, args.in_flight)
    rest = [(m["rest"] - m["before"]) / canonical for m in run["worker_memory"]]
    peak = [(m["peak"] - m["before"]) / max(1, m["rest"] - m["before"]) for m in run["worker_memory"]]
    out = {
        "tree": str(Path(simhash_scrapy.__file__).parent.parent),
        "canonical_pages": canonical,
        "bytes_per_canonical_page_at_rest": statistics.median(rest),
        "peak_over_rest": statistics.median(peak),
        "worst_peak_over_rest": max(peak),
        "process_peak_rss_mb": max(m["peak"] for m in run["worker_memory"]) / 1e6,
        "process_rest_rss_mb": max(m["rest"] for m in run["worker_memory"]) / 1e6,
        "load_cpu_s": statistics.median(m["load_cpu_s"] for m in run["worker_memory"]),
        **{k: run[k] for k in ("checks", "checks_per_s", "worker_cpu_us_per_check", "redis_cpu_us_per_check")},
    }
    if args.compare:
        out["decisions"] = redis_scale.same_decisions(url, args.stored, args.stored, args.workers, args.checks,
                                                      run["verdicts"])
    print(json.dumps(out), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stored", type=int, default=1_000_000)
    parser.add_argument("--against", help="the baseline: a git ref of this repository (default: where this branch "
                        "left main, `git merge-base HEAD main`; its Redis key layout must be this tree's)")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--checks", type=int, default=2000, help="timed checks per worker")
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1, help="rounds of (baseline, this tree)")
    parser.add_argument("--quick", action="store_true", help="20,000 stored, 2 workers, 1,000 checks each")
    parser.add_argument("--rdb-cache", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--compare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.stored, args.workers, args.checks = 20_000, 2, 1000
    if args.child:
        child(args.child, args)
        return
    if args.against is None:
        args.against = subprocess.run(["git", "-C", str(ROOT), "merge-base", "HEAD", "main"], check=True,
                                      capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="simhash-replica-") as scratch:
        rdb = filled_rdb(args.stored, args.rdb_cache, Path(scratch))
        base = baseline_tree(args.against, Path(scratch))
        layouts = {tree: re.search(r"^LAYOUT_VERSION = (\d+)", (tree / LAYOUT).read_text(), re.M).group(1)  # type: ignore[union-attr]
                   for tree in (base, ROOT)}
        if layouts[base] != layouts[ROOT]:
            sys.exit(f"{args.against} writes Redis key layout v{layouts[base]}, this tree v{layouts[ROOT]}: "
                     "the same filled Redis cannot serve both; pick another --against")
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.against], check=True,
                                capture_output=True, text=True).stdout.strip()
        rows: dict[str, list[dict[str, Any]]] = {"baseline": [], "this": []}
        for _ in range(args.rounds):
            for name, tree in (("baseline", base), ("this", ROOT)):
                row = run_tree(tree, rdb, args, compare=name == "this")
                rows[name].append(row)
                print(json.dumps({"tree": name, **{k: v for k, v in row.items() if k != "tree"}}), flush=True)
    med = {name: {k: statistics.median(r[k] for r in runs) for k in runs[0] if isinstance(runs[0][k], (int, float))}
           for name, runs in rows.items()}
    print(f"\n## A Redis worker's replica at {args.stored:,} stored ({med['this']['canonical_pages']:,.0f} canonical "
          f"pages), {args.workers} workers, {args.rounds} round(s); baseline {commit}\n")
    print("| tree | bytes/canonical page at rest | peak during load / rest | worker peak RSS MB | load CPU s "
          "| checks/s | checks/s vs baseline | same decisions |")
    print("|---|---:|---:|---:|---:|---:|---:|:---:|")
    for name, label in (("baseline", f"baseline {commit}"), ("this", "this tree")):
        m = med[name]
        decisions = [r["decisions"] for r in rows[name] if "decisions" in r]
        same = "-" if not decisions else ", ".join(f"{d['compared'] - d['different']:,}/{d['compared']:,}" for d in decisions)
        print(f"| {label} | {m['bytes_per_canonical_page_at_rest']:.1f} | {m['peak_over_rest']:.2f} "
              f"(worst {m['worst_peak_over_rest']:.2f}) | {m['process_peak_rss_mb']:.0f} | {m['load_cpu_s']:.2f} "
              f"| {m['checks_per_s']:,.0f} | {m['checks_per_s'] / med['baseline']['checks_per_s']:.2f} | {same} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
