"""Load time of the persistent store: how long a resumed crawl waits for 1,000,000 pages.

    python benchmarks/store.py                          # 1,000,000 and 100,000 entries, 3 loads each, against format 4
    python benchmarks/store.py --entries 100000 --reps 1 --old-ref none

What it does, in one run, for each ``--entries`` size:

1. Writes a store of that many pages (the rows a crawl writes: URL, 40-hex
   request-fingerprint identity, referer, depth, 80% canonical pages, 20%
   near-duplicates) with ``PageStore``, committed every 10,000 pages.
2. Times, in a fresh process, ``PersistentBackend.open`` (what a resumed crawl does: every record
   read and checked - chunk checksums, types, ranges, ``PRAGMA quick_check`` -
   then the clustering state and the index of canonical pages rebuilt) and
   ``read_store`` alone; median of ``--reps``, CPU and wall time.
3. With ``--old-ref REF`` (default ``4394f4f``, the last commit of store
   format 4), the same pages written and opened by that revision's code
   (extracted with ``git archive``, with this tree's compiled C helpers, in a
   subprocess), timed the same way; then that format-4 store opened by this
   tree: the first open upgrades it in place and folds its rows into chunks
   (once), the next opens are format 5.

Every run is a subprocess of its own (the same Python).  Timings on a busy
machine are noisy: compare the CPU times of one run, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
#: The last commit whose store is format 4 (rows of ``pages`` only).
FORMAT_4_REF = "4394f4f"

# Run in a subprocess with PYTHONPATH set to the tree under test; prints one JSON line.  Mode "write":
# writes the store (unless the folder holds one: then its first open, timed alone, e.g. an upgrade);
# mode "open": times the opens, in a fresh process as a resumed crawl is.
_RUN = textwrap.dedent(
    """
    import json, statistics, sys, time
    from pathlib import Path
    import numpy as np
    from simhash_scrapy.backends.persistent import PersistentBackend
    from simhash_scrapy.config import SimhashConfig
    from simhash_scrapy.core.store.store import PageStore, StoreRecord, read_store
    folder, entries, reps, mode = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    def drive(coro):
        try:
            coro.send(None)
        except StopIteration as stop:
            return stop.value
        raise RuntimeError("unexpected await")
    config = SimhashConfig(jobdir=str(folder))
    path = folder / "simhash.store"
    out = {"entries": entries}
    if mode == "open":
        pass
    elif not path.exists():
        store = PageStore(path, PersistentBackend(config).store_config())
        store.open()
        rng = np.random.default_rng(3)
        fps = rng.integers(0, 2**64, entries, dtype=np.uint64, endpoint=False).tolist()
        ids = rng.integers(0, 2**63, (entries, 3), dtype=np.int64).tolist()
        canonical = (rng.random(entries) < 0.8).tolist()
        started = time.process_time()
        for i, fp in enumerate(fps):
            c = canonical[i] or i == 0
            store.put(StoreRecord(
                entry=i, scope="spider", identity="%016x%016x%08x" % (ids[i][0], ids[i][1], ids[i][2] & 0xFFFFFFFF),
                url=f"https://www.example.com/section-{i % 50}/article-{i}.html", fingerprint=fp,
                outcome="unique" if c else "near_duplicate", canonical=None if c else i // 2,
                distance=None if c else 2, indexed=fp if c else None,
                referer=f"https://www.example.com/section-{i % 50}/", depth=2, first_seen=1.76e9 + i,
                last_seen=1.76e9 + i))
            if i % 10_000 == 9_999:
                store.flush()
        store.close()
        out["write_cpu_seconds"] = time.process_time() - started
    else:  # an existing store (an older format): its first open, timed alone
        backend = PersistentBackend(config)
        t, c = time.perf_counter(), time.process_time()
        drive(backend.open("bench"))
        out["first_open_seconds"], out["first_open_cpu_seconds"] = time.perf_counter() - t, time.process_time() - c
        drive(backend.close())
    out["file_bytes"] = path.stat().st_size
    if mode == "write":
        print(json.dumps(out))
        sys.exit(0)
    load, cpu, read, read_cpu = [], [], [], []
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        read_store(path)
        read.append(time.perf_counter() - t); read_cpu.append(time.process_time() - c)
        backend = PersistentBackend(config)
        t, c = time.perf_counter(), time.process_time()
        drive(backend.open("bench"))
        load.append(time.perf_counter() - t); cpu.append(time.process_time() - c)
        assert backend.initial == entries, backend.initial
        drive(backend.close())
    out.update(read_store_seconds=statistics.median(read), read_store_cpu_seconds=statistics.median(read_cpu),
               open_seconds=statistics.median(load), open_cpu_seconds=statistics.median(cpu))
    print(json.dumps(out))
    """
)


def run_tree(tree: Path, folder: Path, entries: int, reps: int) -> dict[str, Any]:
    """Write the store (or open an existing one the first time), then time its opens in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out: dict[str, Any] = {}
    for mode in ("write", "open"):
        proc = subprocess.run(
            [sys.executable, "-c", _RUN, str(folder), str(entries), str(reps), mode], cwd=tree, env=env,
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if proc.returncode:
            raise RuntimeError(f"{tree}: the store could not be timed: {proc.stderr[-2000:]}")
        out.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    return out


def extract(ref: str, repo: Path) -> Path:
    """``ref``'s package in a temporary folder, with this tree's compiled C helpers (the same C file)."""
    tree = Path(tempfile.mkdtemp(prefix="simhash-bench-ref-"))
    archive = subprocess.run(["git", "-C", str(repo), "archive", ref, "simhash_scrapy"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    for built in (ROOT / "simhash_scrapy" / "core").glob("_speedups*.so"):
        shutil.copy(built, tree / "simhash_scrapy" / "core" / built.name)
    return tree


def bench(entries: int, reps: int, old_ref: str, repo: Path) -> list[dict[str, Any]]:
    rows = []
    work = Path(tempfile.mkdtemp(prefix="simhash-bench-store-"))
    try:
        rows.append({"format": "5 (this tree)", **run_tree(ROOT, work / "new", entries, reps)})
        if old_ref != "none":
            tree = extract(old_ref, repo)
            try:
                rows.append({"format": f"4 ({old_ref})", **run_tree(tree, work / "old", entries, reps)})
            finally:
                shutil.rmtree(tree, ignore_errors=True)
            rows.append({"format": f"4 ({old_ref}), upgraded by this tree", **run_tree(ROOT, work / "old", entries, reps)})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[1_000_000, 100_000])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--old-ref", default=FORMAT_4_REF, help="git revision whose store format is timed too ('none': skip)")
    parser.add_argument("--repo", type=Path, default=ROOT, help="git repository holding --old-ref (default: this one)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = {}
    for entries in args.entries:
        rows = bench(entries, args.reps, args.old_ref, args.repo)
        results[entries] = rows
        print(f"## Loading a store of {entries:,} pages (median of {args.reps})\n")
        print("| format | file | PersistentBackend.open CPU / wall | read_store CPU / wall | first open (upgrade) CPU |")
        print("|---|---:|---:|---:|---:|")
        for r in rows:
            first = f"{r['first_open_cpu_seconds']:.2f} s" if "first_open_cpu_seconds" in r else ""
            print(f"| {r['format']} | {r['file_bytes'] / 1e6:.0f} MB | {r['open_cpu_seconds']:.2f} s / {r['open_seconds']:.2f} s | "
                  f"{r['read_store_cpu_seconds']:.2f} s / {r['read_store_seconds']:.2f} s | {first} |")
        if len(rows) > 1:
            ratio = rows[0]["open_cpu_seconds"] / rows[1]["open_cpu_seconds"]
            print(f"\nCPU time of an open, format 5 / format 4: {ratio:.2f}x\n", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
