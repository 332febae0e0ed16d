"""``backends.redis.bucket_cache.BucketCache``: a worker's copies of the global index's table buckets (units; the
script's replies made by hand, as ``TAIL_LUA`` makes them; ``tests/integration/test_redis_bucket_cache.py`` runs it
against a real redis-server)."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest

from simhash_scrapy.backends.redis.bucket_cache import BucketCache, copy_cost
from simhash_scrapy.backends.redis.cluster_layout import entries_of, mark_of, pack_bucket, pack_entry, used_of

MARK = b"\x01\x02\x03\x04"


def bucket(seqs: range, mark: bytes = MARK) -> bytes:
    return pack_bucket(b"".join(pack_entry(seq * 977, seq) for seq in seqs), mark)


def tail(data: bytes, had: int) -> bytes:
    """``TAIL_LUA``'s reply when the copy has ``had`` bytes of entries and the bucket's mark."""
    return data[:8] + data[8 + had : 8 + used_of(data)]


def seqs_of(data: bytes | bytearray | None) -> list[int]:
    return entries_of(bytes(data) if data is not None else None)["seq"].tolist()


def test_a_bucket_read_whole_is_kept_then_read_as_its_new_entries() -> None:
    counts: dict[str, int] = {}
    cache = BucketCache(1 << 20, counts)
    assert cache.kept("b") is None
    first = bucket(range(1, 40))
    got = cache.take("b", None, first)
    assert seqs_of(got) == list(range(1, 40)) and len(got) == 8 + 39 * 8  # the spare room not kept
    kept = cache.kept("b")
    assert kept is got and mark_of(kept) == MARK
    later = bucket(range(1, 45))
    got = cache.take("b", kept, tail(later, used_of(kept)))
    assert seqs_of(got) == list(range(1, 45)) and used_of(got) == 44 * 8
    got = cache.take("b", got, tail(later, used_of(got)))  # nothing new: the header alone
    assert seqs_of(got) == list(range(1, 45))
    assert counts == {"bucket_hits": 2, "bucket_misses": 1, "bucket_moved": 0}
    assert cache.size == copy_cost("b", got)  # (the bytes, the spare room they grew with, the key and LRU entry)


def test_a_bucket_whose_mark_changed_is_taken_whole() -> None:
    # A removal moves entries and changes the mark: the script returns every entry, the copy is replaced.
    counts: dict[str, int] = {}
    cache = BucketCache(1 << 20, counts)
    kept = cache.take("b", None, bucket(range(1, 20)))
    assert isinstance(kept, bytearray)
    removed = bucket([n for n in range(1, 25) if n != 3], b"\x01\x02\x03\x05")  # type: ignore[arg-type]
    got = cache.take("b", kept, removed[: 8 + used_of(removed)])
    assert seqs_of(got) == [n for n in range(1, 25) if n != 3]
    assert cache.kept("b") is got and counts["bucket_moved"] == 1 and counts["bucket_hits"] == 0
    assert cache.size == copy_cost("b", got)


def test_a_bucket_gone_or_damaged_is_dropped() -> None:
    counts: dict[str, int] = {}
    cache = BucketCache(1 << 20, counts)
    kept = cache.take("b", None, bucket(range(1, 10)))
    assert isinstance(kept, bytearray)
    assert cache.take("b", kept, None) is None  # (flushed)
    assert cache.kept("b") is None and cache.size == 0
    kept = cache.take("b", None, bucket(range(1, 10)))
    assert isinstance(kept, bytearray)
    short = bucket(range(1, 14))
    damaged = short[:8] + short[8 + 9 * 8 : 8 + 11 * 8]  # a header that counts more entries than came
    got = cache.take("b", kept, damaged)
    assert seqs_of(got) == list(range(1, 10)) + [10, 11] and cache.kept("b") is None


def test_the_budget_keeps_the_buckets_read_last() -> None:
    counts: dict[str, int] = {}
    cache = BucketCache(3 * copy_cost("a", bytearray(bucket(range(1, 11))[: 8 + 80])), counts)
    for name in "abcd":
        cache.take(name, None, bucket(range(1, 11)))
        assert cache.size <= cache.budget
    assert cache.kept("a") is None and [cache.kept(name) is not None for name in "bcd"] == [True] * 3
    cache.kept("b")  # read again: the least recently read is now c
    cache.take("e", None, bucket(range(1, 11)))
    assert cache.kept("c") is None and cache.kept("b") is not None and len(cache) == 3
    nothing = BucketCache(0, {})
    assert seqs_of(nothing.take("a", None, bucket(range(1, 5)))) == [1, 2, 3, 4] and len(nothing) == 0


def test_a_copy_the_budget_let_go_before_its_reply_came_is_not_counted() -> None:
    # A batch asks for its copies (kept), then takes the replies one by one: keeping one bucket read whole (a mark
    # changed) may let go of another copy of the same batch before its reply is taken.  That copy's new entries
    # are then the batch's, not the cache's: counting them would leave ``size`` above the bytes kept for good,
    # and the cache would keep less and less, then nothing.
    cache = BucketCache(2 * copy_cost("a", bytearray(bucket(range(1, 11))[: 8 + 80])), {})
    cache.take("a", None, bucket(range(1, 11)))
    cache.take("b", None, bucket(range(1, 11)))
    had_a, had_b = cache.kept("a"), cache.kept("b")
    assert had_a is not None and had_b is not None
    moved = bucket(range(1, 16), b"\x09\x09\x09\x09")  # (a removal since: read whole, larger)
    cache.take("a", had_a, moved[: 8 + used_of(moved)])
    assert cache.kept("b") is None  # (let go to keep a)
    got = cache.take("b", had_b, tail(bucket(range(1, 13)), used_of(had_b)))
    assert seqs_of(got) == list(range(1, 13))  # (this check still sees the bucket whole)
    assert cache.size == copy_cost("a", cache.kept("a")) and cache.kept("b") is None  # type: ignore[arg-type]
    cache.take("c", None, bucket(range(1, 6)))  # (a bucket that fits beside a)
    assert cache.kept("a") is not None and cache.kept("c") is not None
    assert cache.size == sum(copy_cost(name, cache.kept(name)) for name in "ac") <= cache.budget  # type: ignore[arg-type]


def held_by(fill: Any) -> int:
    """The bytes Python holds after ``fill()`` (traced allocations: what the cache keeps, its keys included)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = fill()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del kept
    return after - before


@pytest.mark.parametrize("entries", [1, 3, pytest.param(200, marks=pytest.mark.slow)])  # 200: 20.7 s measured (--durations, serial, loaded 2-core machine)
def test_the_budget_bounds_the_memory_the_copies_take(entries: int) -> None:
    # Small buckets (a scope per host, a young crawl: one entry or a few a bucket) cost more in their object, key
    # and LRU entry than in their bytes: the budget counts all of it.  Large ones grow in place (a bytearray keeps
    # spare room when it grows): counted too.
    budget = 1 << 20

    def fill() -> BucketCache:
        cache = BucketCache(budget, {})
        for n in range(8_000):
            name = f"simhash:myspider:{{0123456789ab.t{n % 5}.{n:x}}}"
            cache.take(name, None, bucket(range(1, entries + 1)))
            kept = cache.kept(name)
            if kept is not None:  # read again: a few entries came
                cache.take(name, kept, tail(bucket(range(1, entries + 3)), used_of(kept)))
        return cache

    held = held_by(fill)
    assert held <= budget * 1.1, held
