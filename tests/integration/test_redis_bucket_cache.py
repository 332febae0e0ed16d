"""The bucket cache's reads (``bucket_cache.TAIL_LUA``) against the backend's own append and removal scripts on a
real redis-server: a worker's copy, read again as its new entries, is always the bucket as it is."""

from __future__ import annotations

import random

import pytest
import redis
from redis_server import RedisServer

from simhash_scrapy.backends.redis.bucket_cache import TAIL_LUA, BucketCache, tail_args
from simhash_scrapy.backends.redis.cluster_backend import _REMOVE, APPEND_LUA
from simhash_scrapy.backends.redis.cluster_layout import entries_of, mark_of, pack_entry

pytest_plugins = ["conftest_redis"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_kept_copy_read_again_is_the_bucket_through_appends_removals_and_a_flush(
    redis_server: RedisServer, seed: int
) -> None:
    rng = random.Random(seed)
    client = redis.Redis(host="127.0.0.1", port=redis_server.port)
    append, remove, read = (client.register_script(body) for body in (APPEND_LUA, _REMOVE, TAIL_LUA))
    counts: dict[str, int] = {}
    readers = [BucketCache(1 << 20, counts), BucketCache(1 << 20, {})]  # two workers, reading at other moments
    present: list[int] = []
    next_seq = 1
    for step in range(600):
        roll = rng.random()
        if roll < 0.6 or not present:
            append(keys=["b"], args=[pack_entry(rng.getrandbits(64), next_seq), rng.randbytes(4)])
            present.append(next_seq)
            next_seq += 1
        elif roll < 0.75:
            gone = rng.choice(present)
            assert remove(keys=["b"], args=[gone.to_bytes(4, "big")]) == 1
            present.remove(gone)
        elif roll < 0.77:
            client.delete("b")  # (flushed: the next append makes it again, with a mark of its own)
            present.clear()
        for cache in readers if rng.random() < 0.5 else readers[:1]:
            kept = cache.kept("b")
            reply = client.get("b") if kept is None else read(keys=["b"], args=[*tail_args(kept)])
            got = cache.take("b", kept, reply)
            whole = client.get("b")
            assert entries_of(bytes(got) if got is not None else None).tolist() == entries_of(whole).tolist(), step
            assert entries_of(whole)["seq"].tolist() == present
    assert counts["bucket_hits"] > 300 and counts["bucket_moved"] > 50  # read as tails, and whole after a removal
    client.close()


def test_a_copy_is_read_whole_when_the_bucket_lost_writes_then_grew_again(redis_server: RedisServer) -> None:
    # A failover: the replica made primary never got the last appends (Redis replicates after it answers).  The
    # bucket keeps its mark; new entries take the places of those lost.  A copy that holds the lost entries is no
    # longer a prefix of the bucket, though its mark is the bucket's and the bucket holds as many entries.
    client = redis.Redis(host="127.0.0.1", port=redis_server.port)
    append, read = (client.register_script(body) for body in (APPEND_LUA, TAIL_LUA))
    mark = b"\x00\x00\x00\x07"
    for seq in range(1, 11):
        append(keys=["b"], args=[pack_entry(seq * 977, seq), mark])
    replica = client.get("b")  # (what the replica had when its primary failed)
    for seq in range(11, 16):
        append(keys=["b"], args=[pack_entry(seq * 977, seq), mark])
    counts: dict[str, int] = {}
    cache = BucketCache(1 << 20, counts)
    cache.take("b", None, client.get("b"))  # a worker's copy: 15 entries
    client.set("b", replica)  # the failover: entries 11-15 lost
    for seq in range(11, 19):  # other pages' entries, in their places
        append(keys=["b"], args=[pack_entry(seq * 1013 + 5, seq + 100), mark])
    kept = cache.kept("b")
    assert kept is not None and mark_of(kept) == mark_of(client.get("b"))
    got = cache.take("b", kept, read(keys=["b"], args=[*tail_args(kept)]))
    assert entries_of(bytes(got) if got is not None else None).tolist() == entries_of(client.get("b")).tolist()
    assert counts["bucket_moved"] == 1 and counts["bucket_hits"] == 0
    kept = cache.kept("b")  # (kept whole: read as its new entries again)
    assert kept is not None
    append(keys=["b"], args=[pack_entry(12345, 500), mark])
    got = cache.take("b", kept, read(keys=["b"], args=[*tail_args(kept)]))
    assert entries_of(bytes(got) if got is not None else None).tolist() == entries_of(client.get("b")).tolist()
    assert counts["bucket_hits"] == 1
    client.close()
