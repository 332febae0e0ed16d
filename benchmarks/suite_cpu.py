"""The test suite's CPU time, test by test: what the fast and slow sets cost, whatever the machine's load.

Wall times of a busy 2-core machine say little (a test that takes 1 s alone takes 10 s at load 15); the CPU
a test uses (its worker process, and the subprocesses it waited for: crawls, commands) moves less, though
it grows with the load too (shared caches and cores): compare two sets of tests within one run.
Run the suite with this file as a pytest plugin, then read the totals::

    PYTHONPATH=benchmarks SUITE_CPU_OUT=/tmp/cpu pytest -n 4 -p suite_cpu --durations=0
    python benchmarks/suite_cpu.py /tmp/cpu

Each worker appends ``cpu seconds, wall seconds, slow (0/1), test id`` lines to ``$SUITE_CPU_OUT.<worker>``
(remove the files before a new run), and first the CPU it used to start and collect the suite.  The summary
gives that fixed cost, the fast set's and the slow set's tests and CPU, and the tests that used the most CPU.  On two cores with ``-n 4``, a test of more than about 15 s of CPU
takes more than 30 s when the other workers are busy too.
"""

from __future__ import annotations

import argparse
import glob
import os
import resource
import time
from collections.abc import Iterator
from typing import Any

import pytest


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _write(row: str) -> None:
    out = os.environ.get("SUITE_CPU_OUT")
    if out:
        with open(f"{out}.{os.environ.get('PYTEST_XDIST_WORKER', 'main')}", "a", encoding="utf-8") as handle:
            handle.write(row)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The process's CPU from its start to the end of collection (start-up, imports, collecting every test
    module): a fixed cost each worker pays, whatever tests it then runs."""
    _write(f"{_cpu():.3f}\t0\t-\t(start-up and collection)\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    cpu, wall = _cpu(), time.perf_counter()
    yield
    slow = int(item.get_closest_marker("slow") is not None)
    _write(f"{_cpu() - cpu:.3f}\t{time.perf_counter() - wall:.3f}\t{slow}\t{item.nodeid}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the SUITE_CPU_OUT prefix of the run")
    parser.add_argument("--top", type=int, default=15, help="list this many tests by CPU (default 15)")
    args = parser.parse_args()
    rows, collections = [], []
    for path in sorted(glob.glob(glob.escape(args.out) + ".*")):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                cpu, wall, slow, test = line.rstrip("\n").split("\t", 3)
                if slow == "-":
                    collections.append(float(cpu))
                else:
                    rows.append((float(cpu), float(wall), slow == "1", test))
    if not rows:
        raise SystemExit(f"no {args.out}.* files: run pytest with -p suite_cpu and SUITE_CPU_OUT={args.out}")
    if collections:
        print(f"start-up and collection: {len(collections)} processes, {sum(collections):.1f} s of CPU "
              f"({max(collections):.1f} s the most)")  # fmt: skip
    for name, part in (("fast set", [r for r in rows if not r[2]]), ("slow set", [r for r in rows if r[2]])):
        print(f"{name}: {len(part):,} tests, {sum(r[0] for r in part):.1f} s of CPU, "
              f"{sum(r[1] for r in part):.1f} s of test time (all workers)")  # fmt: skip
    print(f"the {args.top} tests that used the most CPU (cpu s, wall s):")
    for used, took, marked, test in sorted(rows, reverse=True)[: args.top]:
        print(f"  {used:7.2f} {took:7.2f}  {test}{'  [slow]' if marked else ''}")


if __name__ == "__main__":
    main()
