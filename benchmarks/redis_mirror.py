"""A Redis worker's mirror of steps 5-7 (``backends/redis/mirror.py``): CPU per mirrored page and per hint.

    python benchmarks/redis_mirror.py                    # 20,000 and 100,000 canonical pages
    python benchmarks/redis_mirror.py --pages 100000
    python benchmarks/redis_mirror.py --pages 200000 --reply 90    # as with 8 workers at 1M pages (see below)
    SIMHASH_BENCH_TREE=/path/to/other/tree python benchmarks/redis_mirror.py    # another tree's code, same pages

Every worker's mirror adds every canonical page any worker records (with 8
workers and 70% new pages: ~6 pages a check of its own), then asks the rule
for its own pages' hints.  Here, without Redis: the pages of
``redis_scale.py --steps`` (a second simhash and a random 32-sentence sketch
each) as the check script's replies bring them, 16 log entries and their
extras records a reply, into an empty mirror (``Mirror.apply``); then the
hints of 2,000 new pages, ``BATCH`` at a time (``_hints``' work: host,
address, ``Mirror.hints``, the page's extras record).  CPU time (``time.process_time``), best of
``--rounds``.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path[:0] = [os.environ.get("SIMHASH_BENCH_TREE") or str(HERE.parent.parent), str(HERE.parent)]
os.environ["SIMHASH_BENCH_STEPS"] = "1"  # redis_scale's pages carry steps 5-7 data

import numpy as np  # noqa: E402

import redis_scale  # noqa: E402
from simhash_scrapy.backends.redis.mirror import Mirror, record_of  # noqa: E402
from simhash_scrapy.backends.redis.replica import _LOG_DTYPE  # noqa: E402
from simhash_scrapy.config import SimhashConfig  # noqa: E402
from simhash_scrapy.core.cluster.containment import MAX_PAGES  # noqa: E402
from simhash_scrapy.core.cluster.sitetemplate import host_of  # noqa: E402
from simhash_scrapy.core.cluster.views import page_address  # noqa: E402

#: Log entries (and extras records) a check script's reply brings (``--reply``): with 8 workers, ~15 pages a
#: script call and ~0.77 canonical pages a check, ~90 (every worker's pages since this worker's last call).
REPLY = 16
#: Pages a script call checks (16 in flight: ~15), whose hints a worker makes together (``Mirror.hints``).
BATCH = 15


def replies(pages: int, reply: int = REPLY) -> list[tuple[int, bytes, bytes]]:
    """(first log position, log entries, extras records) of each reply, every page canonical."""
    records = [redis_scale.record_of(i, redis_scale.random_fp(i)) for i in range(pages)]
    log = np.zeros(pages, dtype=_LOG_DTYPE)
    log["op"], log["fp"], log["seq"] = 1, [r.fingerprint for r in records], np.arange(pages)
    raw, size = log.tobytes(), _LOG_DTYPE.itemsize
    out = []
    for start in range(0, pages, reply):
        extras = []
        for pos in range(start, min(pages, start + reply)):
            r = records[pos]
            data = record_of(r, host_of(r.url), page_address(r.url, r.sketch))
            extras.append(struct.pack(">IH", pos, len(data)) + data)
        out.append((start, raw[start * size : (start + reply) * size], b"".join(extras)))
    return out


def measure(pages: int, reply: int = REPLY) -> tuple[float, float, float]:
    """(µs of CPU a mirrored page, of one past the sketch bound, µs a hint) for a mirror of ``pages`` canonical
    pages (``containment.MAX_PAGES`` of them sketched: the pages after those are as at 1M pages)."""
    chunks = replies(pages, reply)
    mirror = Mirror(SimhashConfig())
    mirror.load(redis_scale.SCOPE, b"", b"")
    xstart = 0
    cpu = time.process_time()
    bound, past = None, 0
    for start, log, extras in chunks:
        if bound is None and start >= MAX_PAGES:
            bound, past = time.process_time(), pages - start
        mirror.apply(redis_scale.SCOPE, log, start, extras, xstart)
        xstart += len(extras)
    end = time.process_time()
    apply = (end - cpu) / pages * 1e6
    beyond = (end - bound) / past * 1e6 if bound is not None else float("nan")
    new = [redis_scale.record_of(pages + i, redis_scale.random_fp(pages + i)) for i in range(2000)]
    cpu = time.process_time()
    for start in range(0, len(new), BATCH):
        pages = []
        for r in new[start : start + BATCH]:
            host = host_of(r.url)
            pages.append((r, host, page_address(r.url, r.sketch, host)))
            record_of(r, host, pages[-1][2])
        if hasattr(mirror, "hints"):  # (a tree without Mirror.hints: one at a time)
            mirror.hints(redis_scale.SCOPE, pages)
        else:
            for page in pages:
                mirror.hint(redis_scale.SCOPE, *page)
    return apply, beyond, (time.process_time() - cpu) / len(new) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--reply", type=int, default=REPLY, help="log entries a reply brings (8 workers: ~90)")
    args = parser.parse_args()
    print(f"tree: {os.environ.get('SIMHASH_BENCH_TREE') or HERE.parent.parent}; {args.reply} pages a reply")
    print("| canonical pages in the mirror | µs CPU a mirrored page (apply) | past the first "
          f"{MAX_PAGES:,} (sketches full) | µs CPU a hint (and its record) |")
    print("|---:|---:|---:|---:|")
    for pages in args.pages:
        best = [min(values) for values in zip(*(measure(pages, args.reply) for _ in range(args.rounds)))]
        print(f"| {pages:,} | {best[0]:.1f} | {best[1]:.1f} | {best[2]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
