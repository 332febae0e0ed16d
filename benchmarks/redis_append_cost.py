"""What appending an entry to a table bucket costs in Redis (``redis-global``), by bucket size: CPU and memory.

    python benchmarks/redis_append_cost.py                  # buckets of 1.4 and 14 KB (1M and 10M pages at k = 4)
    python benchmarks/redis_append_cost.py --sizes 1400,5300,14000 --appends 20

Starts a throw-away ``redis-server`` (``backends.Server``), makes 200 bucket
strings of each size, appends ``--appends`` 8-byte entries to each, and reports
Redis CPU per append (``INFO cpu`` user+sys over the appends) and
``MEMORY USAGE`` per bucket after them, for:

* ``script``: the backend's ``APPEND_LUA`` (GET, concatenate, SET: the string
  stored at its size; the whole bucket copied in and out of Lua each time);
* ``APPEND``: Redis' own command (no copy; the string keeps up to as much again
  spare room);
* ``capacity``: a candidate layout, not the backend's: a 4-byte header with
  the bytes used, the entries written in place with ``SETRANGE`` inside spare
  room that grows by 1/16 (+64 bytes) when full (copied then only).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]

from backends import Server  # noqa: E402

from simhash_scrapy.backends.redis.cluster_backend import APPEND_LUA  # noqa: E402

CAPACITY_LUA = """
local head = redis.call('GETRANGE', KEYS[1], 0, 3)
local used = 0
if #head == 4 then used = struct.unpack('>I4', head) end
if used + 4 + #ARGV[1] > redis.call('STRLEN', KEYS[1]) then
  local data = redis.call('GET', KEYS[1]) or ''
  local room = math.floor((used + #ARGV[1]) / 16) + 64
  redis.call('SET', KEYS[1], string.sub(data, 1, used + 4) .. string.rep('\\0', #ARGV[1] + room))
end
redis.call('SETRANGE', KEYS[1], used + 4, ARGV[1])
redis.call('SETRANGE', KEYS[1], 0, struct.pack('>I4', used + #ARGV[1]))
return used + #ARGV[1]
"""


def measure(client: object, kind: str, size: int, appends: int) -> tuple[float, float]:
    import redis

    assert isinstance(client, redis.Redis)
    keys = [f"bench:{kind}:{size}:{i}" for i in range(200)]
    sha = client.script_load(APPEND_LUA if kind == "script" else CAPACITY_LUA)
    for key in keys:
        client.set(key, (size.to_bytes(4, "big") if kind == "capacity" else b"") + b"\x01" * size)
    info = client.info("cpu")
    before = info["used_cpu_user"] + info["used_cpu_sys"]
    pipe = client.pipeline(transaction=False)
    for _ in range(appends):
        for key in keys:
            if kind == "APPEND":
                pipe.append(key, b"\x02" * 8)
            else:
                pipe.evalsha(sha, 1, key, b"\x02" * 8)
        pipe.execute()
    info = client.info("cpu")
    used = info["used_cpu_user"] + info["used_cpu_sys"] - before
    memory = sum(int(client.memory_usage(key, samples=0) or 0) for key in keys) / len(keys)
    return used / (appends * len(keys)) * 1e6, memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1400,14000", help="bucket sizes in bytes, comma-separated")
    parser.add_argument("--appends", type=int, default=20, help="appends per bucket")
    args = parser.parse_args()
    import redis

    server = Server()
    try:
        client = redis.Redis.from_url(server.url)
        print("| bucket bytes | kind | Redis CPU µs/append | MEMORY USAGE per bucket after | vs its entries' bytes |")
        print("|---:|---|---:|---:|---:|")
        for size in (int(s) for s in args.sizes.split(",")):
            for kind in ("script", "APPEND", "capacity"):
                cpu, memory = measure(client, kind, size, args.appends)
                data = size + 8 * args.appends
                print(f"| {size:,} | {kind} | {cpu:.1f} | {memory:,.0f} | {memory / data:.2f}x |")
        client.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
