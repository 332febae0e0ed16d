"""What appending an entry to a table bucket, and removing one, costs in Redis (``redis-global``), by bucket size.

    python benchmarks/redis_append_cost.py                  # buckets of 1.4 and 14 KB (1M and 10M pages at k = 4)
    python benchmarks/redis_append_cost.py --sizes 1400,5300,14000 --appends 20

Starts a throw-away ``redis-server`` (``backends.Server``), makes 200 bucket
strings of each size, appends ``--appends`` 8-byte entries to each, and reports
Redis CPU per append (``INFO cpu`` user+sys over the appends) and
``MEMORY USAGE`` per bucket after them, for:

* ``copy``: layout 2's append script (GET, concatenate, SET: the string
  stored at its size; the whole bucket copied in and out of Lua each time);
* ``APPEND``: Redis' own command (no copy; the string keeps up to as much again
  spare room);
* ``backend``: the backend's ``APPEND_LUA`` (layout 3): a 4-byte header with
  the bytes used, the entries written in place with ``SETRANGE`` inside spare
  room (``cluster_layout.room``: 1/16 + 64 bytes) made when full (copied then
  only); the buckets start as ``pack_bucket`` makes them;
* ``module``: the ``simhash`` Redis module's ``SIMHASH.APPEND`` (the same bytes as
  ``backend``, in C), when the module was built (it is loaded into the server).

And Redis CPU per read of a bucket of each size: ``GET`` (the worker scans what it reads) against ``SIMHASH.NEAR``
(the node scans it and replies with the entries near a fold: here none).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]

from backends import Server  # noqa: E402
from redis_cluster_scale import module_node_args  # noqa: E402

from simhash_scrapy.backends.redis.cluster_backend import _REMOVE, APPEND_LUA  # noqa: E402
from simhash_scrapy.backends.redis.cluster_layout import (  # noqa: E402
    ENTRY, ROOM_MIN, ROOM_SHARE, pack_bucket, pack_entry,
)

COPY_LUA = """
local data = (redis.call('GET', KEYS[1]) or '') .. ARGV[1]
redis.call('SET', KEYS[1], data)
return #data
"""

#: The removal script before ``string.find``: each entry's seq compared in a Lua loop.
SCAN_REMOVE_LUA = """
local data = redis.call('GET', KEYS[1])
if not data then return 0 end
local used, mark = struct.unpack('>I4I4', data)
for i = 9, used + 1, 8 do
  if string.sub(data, i + 4, i + 7) == ARGV[1] then
    redis.call('SET', KEYS[1], struct.pack('>I4I4', used - 8, (mark + 1) % 4294967296) .. string.sub(data, 9, i - 1)
      .. string.sub(data, i + 8) .. string.rep('\\0', 8))
    return 1
  end
end
return 0
"""


def measure_removal(client: object, kind: str, size: int, rounds: int) -> float:
    """Redis CPU µs per removal of an entry at a random place from 200 buckets of ``size`` bytes of entries."""
    import random

    import redis

    assert isinstance(client, redis.Redis)
    rng = random.Random(size)
    sha = client.script_load(_REMOVE if kind == "backend" else SCAN_REMOVE_LUA)
    count = size // ENTRY
    keys = [f"bench:remove:{kind}:{size}:{i}" for i in range(200)]
    used = 0.0
    for _ in range(rounds):
        gone = []
        for key in keys:
            seqs = rng.sample(range(1, 1 << 30), count)
            client.set(key, pack_bucket(b"".join(pack_entry(rng.getrandbits(64), seq) for seq in seqs)))
            gone.append(rng.choice(seqs))
        info = client.info("cpu")
        before = info["used_cpu_user"] + info["used_cpu_sys"]
        pipe = client.pipeline(transaction=False)
        for key, seq in zip(keys, gone):
            pipe.evalsha(sha, 1, key, seq.to_bytes(4, "big"))
        assert pipe.execute() == [1] * len(keys)
        info = client.info("cpu")
        used += info["used_cpu_user"] + info["used_cpu_sys"] - before
    return used / (rounds * len(keys)) * 1e6


def measure(client: object, kind: str, size: int, appends: int) -> tuple[float, float]:
    import redis

    assert isinstance(client, redis.Redis)
    keys = [f"bench:{kind}:{size}:{i}" for i in range(200)]
    sha = client.script_load(APPEND_LUA if kind == "backend" else COPY_LUA)
    for key in keys:
        client.set(key, pack_bucket(b"\x01" * size) if kind in ("backend", "module") else b"\x01" * size)
    info = client.info("cpu")
    before = info["used_cpu_user"] + info["used_cpu_sys"]
    pipe = client.pipeline(transaction=False)
    for _ in range(appends):
        for key in keys:
            if kind == "APPEND":
                pipe.append(key, b"\x02" * 8)
            elif kind == "module":
                pipe.execute_command("SIMHASH.APPEND", key, b"\x02" * 8, b"mark", ROOM_SHARE, ROOM_MIN)
            else:
                pipe.evalsha(sha, 1, key, b"\x02" * 8)
        pipe.execute()
    info = client.info("cpu")
    used = info["used_cpu_user"] + info["used_cpu_sys"] - before
    memory = sum(int(client.memory_usage(key, samples=0) or 0) for key in keys) / len(keys)
    return used / (appends * len(keys)) * 1e6, memory


def measure_read(client: object, kind: str, size: int, reads: int) -> float:
    """Redis CPU µs per read (``GET`` or ``SIMHASH.NEAR``, k = 4) of 200 buckets of ``size`` bytes of entries."""
    import redis

    assert isinstance(client, redis.Redis)
    keys = [f"bench:read:{size}:{i}" for i in range(200)]
    for key in keys:
        client.set(key, pack_bucket(b"\x01" * size))
    info = client.info("cpu")
    before = info["used_cpu_user"] + info["used_cpu_sys"]
    for _ in range(reads):
        pipe = client.pipeline(transaction=False)
        for key in keys:
            if kind == "GET":
                pipe.get(key)
            else:
                pipe.execute_command("SIMHASH.NEAR", key, 0xFEFEFEFE, 4)  # (no entry near: a length alone)
        pipe.execute()
    info = client.info("cpu")
    return (info["used_cpu_user"] + info["used_cpu_sys"] - before) / (reads * len(keys)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1400,14000", help="bucket sizes in bytes, comma-separated")
    parser.add_argument("--appends", type=int, default=20, help="appends per bucket")
    parser.add_argument("--removals", type=int, default=5, help="removals per bucket (each from a bucket made anew)")
    parser.add_argument("--reads", type=int, default=20, help="reads per bucket (GET against SIMHASH.NEAR)")
    args = parser.parse_args()
    import redis

    from simhash_scrapy.backends.redis.module import path

    module = path() is not None  # (else the module's rows are left out, said below)
    server = Server(extra_args=module_node_args(module))
    try:
        client = redis.Redis.from_url(server.url)
        print("| bucket bytes | kind | Redis CPU µs/append | MEMORY USAGE per bucket after | vs its entries' bytes |")
        print("|---:|---|---:|---:|---:|")
        for size in (int(s) for s in args.sizes.split(",")):
            for kind in ("copy", "APPEND", "backend") + (("module",) if module else ()):
                cpu, memory = measure(client, kind, size, args.appends)
                data = size + 8 * args.appends
                print(f"| {size:,} | {kind} | {cpu:.1f} | {memory:,.0f} | {memory / data:.2f}x |")
        print("\n| bucket bytes | kind | Redis CPU µs/removal |")
        print("|---:|---|---:|")
        for size in (int(s) for s in args.sizes.split(",")):
            for _ in range(2):  # (interleaved: the machine's load falls on both alike)
                for kind in ("scan", "backend"):
                    print(f"| {size:,} | {kind} | {measure_removal(client, kind, size, args.removals):.1f} |")
        if module:
            print("\n| bucket bytes | read | Redis CPU µs/read |")
            print("|---:|---|---:|")
            for size in (int(s) for s in args.sizes.split(",")):
                for _ in range(2):  # (interleaved)
                    for kind in ("GET", "SIMHASH.NEAR"):
                        print(f"| {size:,} | {kind} | {measure_read(client, kind, size, args.reads):.1f} |")
        else:
            print("\n(the simhash Redis module was not built: its rows are left out)")
        client.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
