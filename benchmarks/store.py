"""Load time of the persistent store: how long a resumed crawl waits for 1,000,000 pages.

    python benchmarks/store.py                          # 1,000,000 entries, 3 loads, compared with main's format
    python benchmarks/store.py --entries 200000 --old-ref none

What it does, in one run:

1. Writes a store of ``--entries`` pages (the rows a crawl writes: URL,
   40-hex request-fingerprint identity, referer, depth, 80% canonical pages,
   20% near-duplicates) with ``PageStore`` in transactions of 10,000.
2. Times ``PersistentBackend.open`` (what a resumed crawl does: every row
   read and checked - types, ranges, checksums, ``PRAGMA quick_check`` -
   then the clustering state and the index of canonical pages rebuilt) and
   ``read_store`` alone; median of ``--reps``, wall and CPU time.
3. With ``--old-ref REF`` (default ``main``), the same pages in the store
   format of that git revision (extracted with ``git archive``), written and
   loaded by that revision's code in a subprocess, timed the same way.

Timings on a busy machine are noisy: compare the CPU times and the ratio.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent


def _drive(coro: Any) -> Any:
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("unexpected await")


def bench_new(entries: int, reps: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from simhash_scrapy.backends.persistent import PersistentBackend
    from simhash_scrapy.config import SimhashConfig
    from simhash_scrapy.core.store import PageStore, StoreRecord, read_store

    folder = Path(tempfile.mkdtemp(prefix="simhash-bench-store-"))
    try:
        config = SimhashConfig(jobdir=str(folder))
        backend = PersistentBackend(config)
        store = PageStore(folder / "simhash.store", backend.store_config())
        store.open()
        rng = np.random.default_rng(3)
        fps = rng.integers(0, 2**64, entries, dtype=np.uint64, endpoint=False).tolist()
        ids = rng.integers(0, 2**63, (entries, 3), dtype=np.int64).tolist()
        canonical = (rng.random(entries) < 0.8).tolist()
        started = time.perf_counter()
        for i, fp in enumerate(fps):
            is_canonical = canonical[i] or i == 0
            store.put(
                StoreRecord(
                    entry=i, scope="spider", identity="%016x%016x%08x" % (ids[i][0], ids[i][1], ids[i][2] & 0xFFFFFFFF),
                    url=f"https://www.example.com/section-{i % 50}/article-{i}.html", fingerprint=fp,
                    outcome="unique" if is_canonical else "near_duplicate",
                    canonical=None if is_canonical else i // 2, distance=None if is_canonical else 2,
                    indexed=fp if is_canonical else None, referer=f"https://www.example.com/section-{i % 50}/",
                    depth=2, first_seen=1.76e9 + i, last_seen=1.76e9 + i,
                )
            )  # fmt: skip
            if i % 10_000 == 9_999:
                store.flush()
        store.close()
        write_seconds = time.perf_counter() - started
        size = (folder / "simhash.store").stat().st_size
        load, load_cpu, read, read_cpu = [], [], [], []
        for _ in range(reps):
            t, c = time.perf_counter(), time.process_time()
            read_store(folder / "simhash.store")
            read.append(time.perf_counter() - t)
            read_cpu.append(time.process_time() - c)
            backend = PersistentBackend(config)
            t, c = time.perf_counter(), time.process_time()
            _drive(backend.open("bench"))
            load.append(time.perf_counter() - t)
            load_cpu.append(time.process_time() - c)
            assert backend.initial == entries
            _drive(backend.close())
        return {
            "format": "SQLite (this tree)",
            "entries": entries,
            "file_bytes": size,
            "write_seconds": write_seconds,
            "read_store_seconds": statistics.median(read),
            "read_store_cpu_seconds": statistics.median(read_cpu),
            "open_seconds": statistics.median(load),
            "open_cpu_seconds": statistics.median(load_cpu),
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


_OLD = textwrap.dedent(
    """
    import json, statistics, sys, tempfile, time, shutil
    from pathlib import Path
    import numpy as np
    from simhash_scrapy.backends.persistent import PersistentBackend
    from simhash_scrapy.config import SimhashConfig
    from simhash_scrapy.core.store import PageStore, read_store
    entries, reps = int(sys.argv[1]), int(sys.argv[2])
    folder = Path(tempfile.mkdtemp(prefix="simhash-bench-oldstore-"))
    def drive(coro):
        try:
            coro.send(None)
        except StopIteration as stop:
            return stop.value
    try:
        config = SimhashConfig(jobdir=str(folder))
        store = PageStore(folder / "simhash.store", PersistentBackend(config).store_config())
        store.open()
        rng = np.random.default_rng(3)
        fps = rng.integers(0, 2**64, entries, dtype=np.uint64, endpoint=False).tolist()
        canonical = (rng.random(entries) < 0.8).tolist()
        for i, fp in enumerate(fps):
            c = canonical[i] or i == 0
            store.append(f"https://www.example.com/section-{i % 50}/article-{i}.html", fp, "spider",
                         canonical=None if c else i // 2, distance=None if c else 2,
                         referer=f"https://www.example.com/section-{i % 50}/", depth=2, indexed=c)
        store.close()
        load, cpu, read, read_cpu = [], [], [], []
        for _ in range(reps):
            t, c = time.perf_counter(), time.process_time()
            read_store(folder / "simhash.store")
            read.append(time.perf_counter() - t); read_cpu.append(time.process_time() - c)
            backend = PersistentBackend(config)
            t, c = time.perf_counter(), time.process_time()
            drive(backend.open("bench"))
            load.append(time.perf_counter() - t); cpu.append(time.process_time() - c)
            drive(backend.close())
        print(json.dumps({"entries": entries, "file_bytes": (folder / "simhash.store").stat().st_size,
                          "read_store_seconds": statistics.median(read), "read_store_cpu_seconds": statistics.median(read_cpu),
                          "open_seconds": statistics.median(load), "open_cpu_seconds": statistics.median(cpu)}))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    """
)


def bench_old(ref: str, entries: int, reps: int, repo: Path = ROOT) -> dict[str, Any]:
    tree = Path(tempfile.mkdtemp(prefix="simhash-bench-ref-"))
    try:
        archive = subprocess.run(["git", "-C", str(repo), "archive", ref, "simhash_scrapy"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
        proc = subprocess.run(
            [sys.executable, "-c", _OLD, str(entries), str(reps)], cwd=tree, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if proc.returncode:
            raise RuntimeError(f"the {ref} format could not be timed: {proc.stderr[-2000:]}")
        return {"format": f"custom append-only ({ref})", **json.loads(proc.stdout.strip().splitlines()[-1])}
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--old-ref", default="main", help="git revision whose store format is timed too ('none': skip)")
    parser.add_argument("--repo", type=Path, default=ROOT, help="git repository holding --old-ref (default: this one)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = [bench_new(args.entries, args.reps)]
    if args.old_ref != "none":
        rows.append(bench_old(args.old_ref, args.entries, args.reps, args.repo))
    print(f"## Loading a store of {args.entries:,} pages (median of {args.reps})\n")
    print("| format | file | PersistentBackend.open wall / CPU | read_store wall / CPU |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['format']} | {r['file_bytes'] / 1e6:.0f} MB | {r['open_seconds']:.2f} s / {r['open_cpu_seconds']:.2f} s | "
              f"{r['read_store_seconds']:.2f} s / {r['read_store_cpu_seconds']:.2f} s |")
    if len(rows) == 2:
        print(f"\nCPU time of a load, this tree / {args.old_ref}: {rows[0]['open_cpu_seconds'] / rows[1]['open_cpu_seconds']:.1f}x")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
