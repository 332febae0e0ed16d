"""The worker's scan of a batch's table buckets (``_speedups.near_folds``, ``redis-global``): CPU a call and an entry.

    python benchmarks/near_folds_cost.py                          # this tree: popcnt copy and portable copy
    python benchmarks/near_folds_cost.py --tree /path/to/checkout  # and another checkout's build, interleaved

A batch of 16 checks at k = 4 reads 5 buckets a page: 80 buckets.  At 10 million pages a bucket holds ~1,250-1,700
entries of 8 bytes (``cluster_layout``), at 1 million ~170.  Each round times ``--calls`` calls of ``near_folds`` on
the same 80 random buckets (a few entries within k of each probe) with ``time.process_time`` in each variant, one
after the other (this tree with the popcnt instruction, this tree with its portable copy, then each ``--tree``, in a
process of its own with that checkout first on ``sys.path``: its own compiled ``_speedups``); the best round of each
is kept.  The seqs found are checked to be the same in every variant.  Prints the CPU a call, a check (a sixteenth of
a call) and an entry, and each variant's ratio to this tree's popcnt copy.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
TREE = HERE.parent.parent


def buckets(entries: int, seed: int = 5) -> tuple[list[bytes], list[int]]:
    """80 buckets of ``entries`` random entries (and 3 near the probe each), with 1/16 spare room; the 80 probes."""
    rng = random.Random(seed)
    out, probes = [], []
    for _ in range(80):
        probe = rng.getrandbits(64)
        fold = (probe >> 32) ^ (probe & 0xFFFFFFFF)
        folds = [rng.getrandbits(32) for _ in range(entries - 3)] + [fold ^ (1 << rng.randrange(32)) for _ in range(3)]
        rng.shuffle(folds)
        body = b"".join(f.to_bytes(4, "big") + rng.getrandbits(32).to_bytes(4, "big") for f in folds)
        out.append(len(body).to_bytes(4, "big") + b"mark" + body + bytes(len(body) // 16 + 64))
        probes.append(probe)
    return out, probes


def measure(entries: int, calls: int, portable: bool) -> dict[str, Any]:
    """One round in this process: CPU seconds a call, and the seqs found (to compare the variants)."""
    from simhash_scrapy.core import _native

    speedups = _native.speedups
    if speedups is None:
        raise SystemExit("the C helpers are not built in this tree")
    if hasattr(speedups, "near_popcnt"):
        speedups.near_popcnt(not portable)
    elif portable:
        return {"skip": True}
    data, probes = buckets(entries)
    found = speedups.near_folds(data, probes, 4)
    start = time.process_time()
    for _ in range(calls):
        speedups.near_folds(data, probes, 4)
    return {"cpu": (time.process_time() - start) / calls, "found": found}


def run(tree: Path, entries: int, calls: int, portable: bool) -> dict[str, Any]:
    code = (f"import sys, json; sys.path.insert(0, {str(tree)!r}); sys.path.insert(1, {str(HERE.parent)!r}); "
            f"import near_folds_cost as m; print(json.dumps(m.measure({entries}, {calls}, {portable})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, action="append", default=[], help="another checkout (its own build)")
    parser.add_argument("--entries", type=int, action="append", help="entries a bucket (default: 170 and 1,250)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    variants = [("this tree, popcnt", TREE, False), ("this tree, portable", TREE, True)]
    variants += [(f"{tree} ", tree.resolve(), False) for tree in args.tree]
    for entries in args.entries or [170, 1250]:
        best: dict[str, float] = {}
        found: dict[str, Any] = {}
        for _ in range(args.rounds):
            for name, tree, portable in variants:
                got = run(tree, entries, args.calls, portable)
                if got.get("skip"):
                    continue
                best[name] = min(best.get(name, float("inf")), got["cpu"])
                found[name] = got["found"]
        assert all(seqs == found[variants[0][0]] for seqs in found.values()), "the variants found different seqs"
        base = best[variants[0][0]]
        print(f"\n80 buckets of {entries:,} entries (a batch of 16 checks, k = 4), best of {args.rounds} rounds "
              f"x {args.calls} calls:")
        print("| variant | µs CPU a call | µs a check | ns an entry | ratio to this tree's popcnt copy |")
        print("|---|---:|---:|---:|---:|")
        for name, cpu in best.items():
            print(f"| {name.strip()} | {cpu * 1e6:.1f} | {cpu * 1e6 / 16:.2f} | {cpu / (80 * entries) * 1e9:.2f} "
                  f"| {cpu / base:.2f}x |")


if __name__ == "__main__":
    main()
