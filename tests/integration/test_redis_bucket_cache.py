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


def _removed(data: bytes, seq: bytes) -> bytes | None:
    """What removing ``seq``'s entry leaves of the bucket ``data`` (the first entry with that seq; None if none):
    the rule ``_REMOVE`` follows, entry by entry."""
    used, mark = int.from_bytes(data[:4], "big"), int.from_bytes(data[4:8], "big")
    for at in range(8, 8 + used, 8):
        if data[at + 4 : at + 8] == seq:
            head = (used - 8).to_bytes(4, "big") + ((mark + 1) % (1 << 32)).to_bytes(4, "big")
            return head + data[8:at] + data[at + 8 :] + bytes(8)
    return None


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_removal_finds_the_seqs_own_entry_never_its_bytes_in_a_fold_or_across_entries(
    redis_server: RedisServer, seed: int
) -> None:
    # The script looks for the seq's 4 bytes with string.find: the same bytes inside another entry's fold, or
    # across two entries (a seq's end and the next fold's start), come first here and must be passed over.
    rng = random.Random(seed)
    client = redis.Redis(host="127.0.0.1", port=redis_server.port)
    remove = client.register_script(_REMOVE)
    for round_ in range(60):
        target = rng.randrange(1, 1 << 32).to_bytes(4, "big")
        entries: list[bytes] = []
        count = rng.randrange(1, 40)
        while len(entries) < count:
            if rng.random() < 0.3:  # its bytes as another entry's fold
                entries.append(target + rng.randrange(1, 1 << 32).to_bytes(4, "big"))
            elif rng.random() < 0.4:  # across two entries: a seq's last bytes, then the next fold's first
                cut = rng.randrange(1, 4)
                entries.append(rng.randbytes(4 + 4 - cut) + target[:cut])
                entries.append(target[cut:] + rng.randbytes(cut) + rng.randrange(1, 1 << 32).to_bytes(4, "big"))
            else:
                entries.append(rng.randbytes(4) + rng.randrange(1, 1 << 32).to_bytes(4, "big"))
        raw = b"".join(entries)
        if rng.random() < 0.7:  # (the seq's own entry somewhere, or none)
            at = rng.randrange(0, len(raw) // 8 + 1) * 8
            raw = raw[:at] + rng.randbytes(4) + target + raw[at:]
        room = bytes(rng.randrange(0, 10) * 8)
        if rng.random() < 0.2:  # (an entry past the header's count: not the bucket's, never removed)
            room = rng.randbytes(4) + target + room
        data = len(raw).to_bytes(4, "big") + rng.randbytes(4) + raw + room
        client.set("b", data)
        want = _removed(data, target)
        assert remove(keys=["b"], args=[target]) == (want is not None), round_
        assert client.get("b") == (want if want is not None else data), round_
    client.close()
