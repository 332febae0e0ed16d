"""The machine's speed at this moment: a yardstick to read other runs by (no baseline; run it before and after).

    python benchmarks/machine_speed.py

Three fixed pieces of work, each timed: a plain Python loop (three million multiply-adds, CPU time), a copy of
400 MB with numpy (memory bandwidth) and two million random reads from it (memory latency).  On the shared 2-core
machine these docs were measured on, the loop took 340-400 ms in the usual half hours and 630-680 ms in the slow
ones, when the same benchmark took ~1.5x the CPU a check (``docs/guides/redis.md``).
"""

from __future__ import annotations

import time

import numpy as np


# (At module level, not in a function: the loop's names are globals, as in the runs the docs quote; in a
# function the same loop takes about half the time.)
if __name__ == "__main__":
    start = time.process_time()
    total = 0
    for i in range(3_000_000):
        total += i * i
    loop = time.process_time() - start
    source = np.ones(50_000_000, dtype=np.uint64)
    target = np.empty_like(source)
    start = time.perf_counter()
    for _ in range(5):
        np.copyto(target, source)
    copy = (time.perf_counter() - start) / 5
    rows = np.random.default_rng(1).integers(0, len(source), 2_000_000)
    start = time.perf_counter()
    int(source[rows].sum())
    reads = time.perf_counter() - start
    print(f"python loop {loop * 1000:.0f} ms; copy 400 MB {copy * 1000:.0f} ms ({0.8 / copy:.1f} GB/s); "
          f"2M random reads {reads * 1000:.0f} ms")
