"""The Redis worker's hint path alone (steps 5-7, ``backends/redis/mirror.py``): CPU per check, and its answers.

    python benchmarks/redis_hints.py --rdb-cache /tmp/r59-fills                    # 1,000,000 stored
    python benchmarks/redis_hints.py --stored 20000 --rdb-cache /tmp/fills
    python benchmarks/redis_hints.py --rdb-cache /tmp/r59-fills --dump /tmp/a.json  # then, another tree:
    SIMHASH_BENCH_TREE=/other/tree python benchmarks/redis_hints.py --rdb-cache /tmp/r59-fills --compare /tmp/a.json

``redis_scale.py --steps`` measures a whole check; this times the parts of it a worker spends before the
script call on steps 5-7, in one process, with nothing else running: a worker of ``redis_scale.py`` (its
filled Redis, loaded from ``--rdb-cache`` when that has it, else filled as ``redis_scale.py`` fills it) loads
its mirror, then its first worker's timed pages are asked in batches of 16, as the backend asks them:

* ``hints``: ``RedisBackend._hints`` (the mirror's hints and extras records, and the local candidates of a
  delegated replica);
* ``cut``: ``RedisBackend._first_related`` (where a batch is cut).

The mirror is not changed in between (no script runs), so every repetition asks the same thing.  Two sets:
``random``, the pages of ``redis_scale.py`` (random sentences: step 7 finds nothing), and ``copies``, the
same with one page in five given the sketch of a canonical page of the fill (step 7 matches it, through an
anchor, or several).  ``--dump`` writes every answer (hint, via, extras record, local candidates) and
``--compare`` checks them against another run's: the same answers from two trees.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ["SIMHASH_BENCH_STEPS"] = "1"  # (read by redis_scale at import)
HERE = Path(__file__).resolve()
sys.path[:0] = [os.environ.get("SIMHASH_BENCH_TREE") or str(HERE.parent.parent), str(HERE.parent)]

import redis_scale as rs  # noqa: E402

from backends import Server  # noqa: E402

BATCH = 16


def page_sets(stored: int) -> dict[str, list[Any]]:
    """The timed pages of ``redis_scale.py``'s first worker (of 8), and the same with copied sketches."""
    pages = rs.worker_pages(stored, 0, 8, 5000)
    records = [rs.record_of(page, fp) for page, fp in pages]
    _, dup = rs.fill_plan(stored)
    canonical = [int(i) for i in (~dup).nonzero()[0][:50_000]]  # (sketched in the mirror: the first 100,000)
    copies = []
    for n, (page, fp) in enumerate(pages):
        record = rs.record_of(page, fp)
        if n % 5 == 2:
            source = rs.record_of(canonical[(n * 7919) % len(canonical)], 0)
            record.sketch = source.sketch
            if n % 10 == 2:  # another address of the same host: no view, anchors only
                record.url = f"https://www.example.com/print/{page}.html"
        copies.append(record)
    return {"random": records, "copies": copies}


async def measure(url: str, stored: int, reps: int) -> tuple[dict[str, Any], dict[str, Any]]:
    from simhash_scrapy.backends.redis import RedisBackend

    backend = RedisBackend(rs.bench_config(), rs.settings(url, stored))
    await backend.open("bench")
    cpu = time.process_time()
    await backend.preload(rs.SCOPE)
    load = time.process_time() - cpu
    mirror, replica = backend._mirror, backend._replicas[rs.SCOPE]
    assert mirror is not None and rs.SCOPE in mirror.scopes
    timings: dict[str, Any] = {"load_cpu_s": round(load, 2)}
    answers: dict[str, Any] = {}
    for name, records in page_sets(stored).items():
        batches = [records[at : at + BATCH] for at in range(0, len(records), BATCH)]
        batch_items = [[(record, True, None) for record in batch] for batch in batches]
        for part, run in (
            ("hints", lambda batch, items: backend._hints(rs.SCOPE, mirror, batch, (replica.sync, {}))),
            ("cut", lambda batch, items: backend._first_related(items)),
        ):
            best = None
            for _ in range(reps):
                cpu = time.process_time()
                for batch, items in zip(batches, batch_items):
                    run(batch, items)
                spent = time.process_time() - cpu
                best = spent if best is None else min(best, spent)
            timings[f"{name}_{part}_us_per_check"] = round(1e6 * best / len(records), 2)
        got = []
        for batch in batches:
            local: dict[int, bytes] = {}
            extras = backend._hints(rs.SCOPE, mirror, batch, (replica.sync, local))
            for at, (extra, via) in enumerate(extras):
                hint = None if extra is None or extra[0] is None else list(extra[0])
                got.append([hint, via, None if extra is None else extra[1].hex(), local.get(at, b"").hex()])
            got.append(["cut", backend._first_related([(record, True, None) for record in batch])])
        answers[name] = got
        timings[f"{name}_matched"] = sum(1 for row in got if row[0] not in ("cut", None))
    await backend.close()
    return timings, answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stored", type=int, default=1_000_000)
    parser.add_argument("--rdb-cache", type=Path)
    parser.add_argument("--reps", type=int, default=3, help="repetitions of each timing (the fastest is kept)")
    parser.add_argument("--dump", type=Path, help="write every answer here (JSON)")
    parser.add_argument("--compare", type=Path, help="compare every answer with a --dump of another run")
    args = parser.parse_args()
    name = f"fill-{args.stored}-direct-steps-x-v{rs.LAYOUT_VERSION}.rdb"
    cached = args.rdb_cache / name if args.rdb_cache is not None else None
    loaded = cached is not None and cached.exists()
    server = Server(str(cached) if loaded else None)
    try:
        if not loaded:
            rs.fill_directly(server.url, args.stored, args.stored)
        timings, answers = asyncio.run(measure(server.url, args.stored, args.reps))
    finally:
        server.stop()
    print(json.dumps({"stored": args.stored, **timings}))
    if args.dump:
        args.dump.write_text(json.dumps(answers))
    if args.compare:
        theirs = json.loads(args.compare.read_text())
        for name, rows in answers.items():
            differ = sum(1 for a, b in zip(rows, theirs[name]) if a != b) + abs(len(rows) - len(theirs[name]))
            print(f"{name}: {len(rows) - differ:,}/{len(rows):,} answers the same")
            if differ:
                sys.exit(1)


if __name__ == "__main__":
    main()
