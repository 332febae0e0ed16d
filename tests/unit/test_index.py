"""BlockPermutedIndex against brute force: it must find every stored fingerprint within k."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_scrapy import BlockPermutedIndex, IndexFormatError, Match, hamming_distance
from simhash_scrapy.core._native import switched
from simhash_scrapy.core.index.index import block_widths


# Every test runs on the compiled helpers and on the pure-Python path (conftest.implementation).
pytestmark = pytest.mark.usefixtures("implementation")

# (k, B): B > k is the classic layout (B - k blocks match exactly); B <= k matches a block within
# floor(k / B) bits ((4, 3) is the default at k = 4, (4, 2) and (5, 2) flip two bits).
LAYOUTS = [(0, 1), (0, 3), (1, 2), (2, 3), (3, 4), (3, 5), (3, 6), (4, 5), (4, 7), (6, 8), (1, 1), (2, 2), (3, 2), (4, 3), (4, 2), (5, 3), (5, 2), (6, 3)]


def flip(fp: int, distance: int, rng: random.Random) -> int:
    for bit in rng.sample(range(64), distance):
        fp ^= 1 << bit
    return fp


def planted(seed: int, count: int, k: int) -> list[int]:
    """Random fingerprints, about half of them planted at every distance 0..k+2 from earlier ones."""
    rng = random.Random(seed)
    fps: list[int] = []
    for i in range(count):
        if fps and i % 2:
            fps.append(flip(rng.choice(fps), rng.randint(0, k + 2), rng))
        else:
            fps.append(rng.getrandbits(64))
    return fps


def brute(stored: list[int], query: int, k: int) -> list[tuple[int, int]]:
    """(distance, row) of every stored fingerprint within k, nearest first then oldest."""
    return sorted((hamming_distance(fp, query), row) for row, fp in enumerate(stored) if hamming_distance(fp, query) <= k)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=st.sampled_from(LAYOUTS), seed=st.integers(0, 2**32), count=st.integers(1, 300), compiled=st.booleans())
def test_query_and_add_matches_brute_force(layout: tuple[int, int], seed: int, count: int, compiled: bool) -> None:
    k, blocks = layout
    with switched(compiled):
        index = BlockPermutedIndex(max_distance=k, blocks=blocks)
        stored: list[int] = []
        for row, fp in enumerate(planted(seed, count, k)):
            found = index.query_and_add(row, fp)
            assert [(m.distance, m.key) for m in found] == brute(stored, fp, k)
            assert all(m.fingerprint == stored[m.key] for m in found)
            stored.append(fp)
        assert len(index) == len(stored)


def brute_array(stored: np.ndarray, query: int, k: int) -> list[tuple[int, int]]:
    """``brute`` over a uint64 array: the same exhaustive scan, vectorised."""
    distances = np.bitwise_count(stored ^ np.uint64(query))
    rows = np.flatnonzero(distances <= k)
    return sorted(zip(distances[rows].tolist(), rows.tolist()))


@pytest.mark.parametrize("k,blocks", LAYOUTS)
def test_large_index_with_merged_tables(k: int, blocks: int) -> None:
    # Enough rows that the unsorted tail is merged into the tables several times.
    fps = planted(k * 100 + blocks, 7000, k)
    index = BlockPermutedIndex(k, blocks)
    for row, fp in enumerate(fps):
        index.add(row, fp)
    rng = random.Random(5)
    stored = np.array(fps, dtype=np.uint64)
    queries = rng.sample(fps, 300) + [flip(fp, k, rng) for fp in rng.sample(fps, 100)]
    assert all(brute_array(stored, q, k) == brute(fps, q, k) for q in queries[295:305])  # the same reference
    for query in queries:
        assert [(m.distance, m.key) for m in index.query(query)] == brute_array(stored, query, k)


@settings(max_examples=25, deadline=None)
@given(layout=st.sampled_from(LAYOUTS), seed=st.integers(0, 2**32), compiled=st.booleans())
def test_batch_query_and_find_all_match_brute_force(layout: tuple[int, int], seed: int, compiled: bool) -> None:
    k, blocks = layout
    fps = planted(seed, 400, k)
    index = BlockPermutedIndex(k, blocks)
    index.add_many(range(len(fps)), fps)
    queries = planted(seed + 1, 50, k) + fps[:50]
    with switched(compiled):
        results = index.query_many(queries)
    assert len(results) == len(queries)
    stored = np.array(fps, dtype=np.uint64)  # (brute_array: brute's exhaustive scan, vectorised)
    for query, found in zip(queries, results):
        assert [(m.distance, m.key) for m in found] == brute_array(stored, query, k)
    expected_pairs = sorted(
        (distance, a, a + 1 + row) for a in range(len(fps)) for distance, row in brute_array(stored[a + 1 :], fps[a], k)
    )
    assert sorted((d, a, b) for a, b, d in index.find_all()) == expected_pairs


def test_exact_duplicates_are_reported() -> None:
    index = BlockPermutedIndex()
    index.add("a", 12345)
    index.add("b", 12345)
    assert index.query(12345) == [Match("a", 12345, 0), Match("b", 12345, 0)]
    assert index.find_all() == [("a", "b", 0)]


def test_matches_sorted_by_distance_then_age() -> None:
    index = BlockPermutedIndex(max_distance=3)
    base = 0xF0F0_F0F0_0F0F_0F0F
    index.add("far", base ^ 0b111)
    index.add("near", base ^ 0b1)
    index.add("same", base)
    index.add("near2", base ^ 0b10)
    assert [m.key for m in index.query(base)] == ["same", "near", "near2", "far"]


@pytest.mark.parametrize("compiled", [False, True])
def test_batch_query_with_many_matches_is_sorted_by_distance_then_age(compiled: bool) -> None:
    # More matches per query than the C loop sorts by insertion (32): the long runs take
    # another sort, and must come out in the same order.
    base = 0x0123_4567_89AB_CDEF
    rng = random.Random(5)
    stored = [base ^ (1 << rng.randrange(64)) ^ (1 << rng.randrange(64)) for _ in range(200)] + [base] * 50
    index = BlockPermutedIndex(4)
    with switched(compiled):
        index.add_many(range(len(stored)), stored)
        q, r, d = index.query_many_arrays([base, base ^ 1])
    for query_number, query in enumerate([base, base ^ 1]):
        rows = r[q == query_number].tolist()
        want = sorted(range(len(stored)), key=lambda row: (bin(stored[row] ^ query).count("1"), row))
        assert rows == [row for row in want if bin(stored[row] ^ query).count("1") <= 4]
        assert d[q == query_number].tolist() == [bin(stored[row] ^ query).count("1") for row in rows]


def test_remove_and_iteration() -> None:
    index = BlockPermutedIndex()
    fps = planted(3, 3000, 3)
    for row, fp in enumerate(fps):
        index.add(f"u{row}", fp)
    assert index.remove("u10") == 1
    assert index.remove("u10") == 0
    assert index.remove("missing") == 0
    assert "u10" not in index and "u11" in index
    assert len(index) == len(fps) - 1
    assert all(m.key != "u10" for m in index.query(fps[10]))
    assert [key for key, _ in index][:11] == [f"u{i}" for i in range(12) if i != 10]
    # Remove most entries: the index compacts itself and stays exact.
    for row in range(0, 2900):
        index.remove(f"u{row}")
    remaining = fps[2900:]
    assert len(index) == len(remaining)
    for fp in remaining[:20]:
        assert [(m.distance, m.key) for m in index.query(fp)] == [
            (d, f"u{2900 + r}") for d, r in brute(remaining, fp, index.max_distance)
        ]


def test_int_keys_stay_compact_and_mixed_keys_work() -> None:
    index = BlockPermutedIndex()
    index.add(1, 1)
    index.add(2**70, 2)  # too big for int64 storage: switches to object keys
    index.add("x", 3)
    assert [key for key, _ in index] == [1, 2**70, "x"]
    assert index.remove(2**70) == 1


def test_int_keys_widen_from_uint32_to_int64_then_objects() -> None:
    # Keys in 0..2**32-1 take 4 bytes a row; a negative or larger key widens the array, never wraps.
    index = BlockPermutedIndex()
    index.add_many(np.arange(3, dtype=np.uint32), [10, 11, 12])
    assert index._keys.ints is not None and index._keys.ints.dtype == np.uint32
    assert index.remove(-1) == 0 and index.remove(2**32 + 1) == 0  # not found: no wrap-around to a stored key
    index.add(2**32 + 1, 13)
    index.add_many(np.array([-5], dtype=np.int64), [14])
    assert index._keys.ints is not None and index._keys.ints.dtype == np.int64
    index.add(2**64, 15)
    keys = [0, 1, 2, 2**32 + 1, -5, 2**64]
    assert list(index) == list(zip(keys, range(10, 16)))
    assert {m.key for m in index.query(2**40 + 13)} == {key for key, fp in zip(keys, range(10, 16))
                                                      if hamming_distance(fp, 2**40 + 13) <= 4}
    assert index.remove(2**32 + 1) == 1 and index.remove(-5) == 1


@pytest.mark.parametrize("k,blocks", [(3, 4), (4, 3), (4, 6)])
def test_bulk_load_into_reserved_room_then_build_matches_brute_force(k: int, blocks: int) -> None:
    # reserve + add_many(build=False) in chunks + build: the bulk load of the Redis replica.
    fps = planted(k + blocks, 5000, k)
    index = BlockPermutedIndex(k, blocks)
    index.reserve(6000)  # more than is added: the room left over is never used
    rng = random.Random(2)
    for start in range(0, len(fps), 700):
        chunk = fps[start : start + 700]
        index.add_many(np.arange(start, start + len(chunk), dtype=np.int64), np.array(chunk, dtype=np.uint64),
                       build=False)
        if start == 2100:  # queries before the build are answered from the unsorted rows, exactly
            for query in rng.sample(fps[: start + len(chunk)], 20):
                assert [(m.distance, m.key) for m in index.query(query)] == brute(fps[: start + len(chunk)], query, k)
    index.build()
    assert len(index) == len(fps)
    every = np.array(fps, dtype=np.uint64)
    for query in rng.sample(fps, 200) + [flip(fp, k, rng) for fp in rng.sample(fps, 100)]:
        assert [(m.distance, m.key) for m in index.query(query)] == brute_array(every, query, k)
    q, r, d = index.query_many_arrays(fps[:50])
    assert sorted(zip(q.tolist(), r.tolist(), d.tolist())) == sorted(
        (i, row, dist) for i, fp in enumerate(fps[:50]) for dist, row in brute_array(every, fp, k))


def test_memory_per_fingerprint_is_small() -> None:
    rng = np.random.default_rng(0)
    index = BlockPermutedIndex()
    n = 200_000
    index.add_many(range(n), rng.integers(0, 2**63, n, dtype=np.int64).astype(np.uint64))
    assert index.nbytes() / n <= 40


@pytest.mark.parametrize("keys", [list(range(500)), [f"https://example.com/{i}?é" for i in range(500)]])
def test_save_and_load_round_trip(tmp_path, keys) -> None:
    fps = planted(11, len(keys), 3)
    index = BlockPermutedIndex(3, 5)
    index.add_many(keys, fps)
    index.remove(keys[7])
    path = tmp_path / "index.bin"
    index.save(path)
    loaded = BlockPermutedIndex.load(path)
    assert (loaded.max_distance, loaded.blocks) == (3, 5)
    assert list(loaded) == list(index)
    for fp in fps[:30]:
        assert loaded.query(fp) == index.query(fp)
    assert BlockPermutedIndex.load(path, max_distance=3, blocks=5).blocks == 5


def test_load_refuses_other_layout_and_truncated_files(tmp_path) -> None:
    index = BlockPermutedIndex(3)
    index.add_many(range(100), planted(1, 100, 3))
    path = tmp_path / "index.bin"
    index.save(path)
    with pytest.raises(IndexFormatError, match="max_distance=3, asked for max_distance=4"):
        BlockPermutedIndex.load(path, max_distance=4)
    with pytest.raises(IndexFormatError, match="blocks=4, asked for blocks=6"):
        BlockPermutedIndex.load(path, blocks=6)
    data = path.read_bytes()
    for cut in (5, 40, len(data) // 2, len(data) - 1):
        (tmp_path / "cut.bin").write_bytes(data[:cut])
        with pytest.raises(IndexFormatError, match="truncated"):
            BlockPermutedIndex.load(tmp_path / "cut.bin")
    (tmp_path / "junk.bin").write_bytes(b"x" * 100)
    with pytest.raises(IndexFormatError, match="not a simhash-scrapy index"):
        BlockPermutedIndex.load(tmp_path / "junk.bin")


def test_save_refuses_unsupported_keys(tmp_path) -> None:
    index = BlockPermutedIndex()
    index.add(("tuple", "key"), 1)
    with pytest.raises(ValueError, match="int or all str"):
        index.save(tmp_path / "x.bin")


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"max_distance": -1}, "max_distance"),
        ({"max_distance": 64}, "max_distance"),
        ({"max_distance": 2.5}, "max_distance"),
        ({"max_distance": True}, "max_distance"),
        ({"max_distance": 3, "blocks": 0}, "blocks"),
        ({"max_distance": 9, "blocks": 3}, "blocks"),
        ({"max_distance": 3, "blocks": 65}, "blocks"),
        ({"max_distance": 10, "blocks": 40}, "blocks"),
    ],
)
def test_invalid_arguments_name_the_argument(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        BlockPermutedIndex(**kwargs)


@pytest.mark.parametrize("bad", [-1, 2**64, "12", 1.0, None])
def test_fingerprint_outside_range_is_refused(bad) -> None:
    index = BlockPermutedIndex()
    with pytest.raises(ValueError, match="fingerprint"):
        index.add("k", bad)
    with pytest.raises(ValueError, match="fingerprint"):
        index.query(bad)
    with pytest.raises(ValueError, match="fingerprints"):
        index.query_many([1, bad])


def test_block_widths_cover_64_bits() -> None:
    for blocks in range(1, 65):
        widths = block_widths(blocks)
        assert sum(widths) == 64 and len(widths) == blocks and max(widths) - min(widths) <= 1


def test_default_layout_at_k4_is_three_blocks_matched_within_one_bit() -> None:
    from simhash_scrapy.core import defaults

    index = BlockPermutedIndex(4)
    assert (index.blocks, index.table_count, index.key_errors) == (3, 3, 1)
    assert defaults.default_blocks(4) == 3 and defaults.default_blocks(3) == 4
    assert BlockPermutedIndex(3).blocks == 4 and BlockPermutedIndex(4, 5).table_count == 5


@pytest.mark.parametrize("k,blocks", [(4, 3), (5, 3), (4, 2), (5, 2), (3, 2)])
def test_every_spread_of_errors_over_the_blocks_is_found(k: int, blocks: int) -> None:
    # Matches whose k flipped bits fall in every possible way over the blocks, and on the
    # bits around each table's bucket/filter boundary, with enough rows for a real directory.
    rng = random.Random(k * 10 + blocks)
    widths = block_widths(blocks)
    lows = [64 - sum(widths[: b + 1]) for b in range(blocks)]
    base = [rng.getrandbits(64) for _ in range(3000)]
    stored = list(base)
    for fp in base[:300]:
        per_block = [0] * blocks
        for _ in range(k):
            per_block[rng.randrange(blocks)] += 1
        flipped = fp
        for b, count in enumerate(per_block):
            for bit in rng.sample(range(widths[b]), min(count, widths[b])):
                flipped ^= 1 << (lows[b] + bit)
        stored.append(flipped)
    index = BlockPermutedIndex(k, blocks)
    index.add_many(range(len(stored)), stored)
    every = np.array(stored, dtype=np.uint64)
    for query in base[:300]:
        assert [(m.distance, m.key) for m in index.query(query)] == brute_array(every, query, k)
    q, r, _ = index.query_many_arrays(base[:300])
    got = sorted(zip(q.tolist(), r.tolist()))
    want = sorted((i, row) for i, query in enumerate(base[:300]) for _, row in brute_array(every, query, k))
    assert got == want


def test_adds_merge_into_spare_room_in_place() -> None:
    # Many single adds: the tables grow by merging the tail into spare room (insert_sorted),
    # and answers stay exact throughout.
    rng = random.Random(3)
    index = BlockPermutedIndex(4)
    stored: list[int] = []
    for row in range(9000):
        fp = rng.getrandbits(64) if row % 3 else flip(stored[rng.randrange(len(stored))], rng.randint(0, 5), rng) if stored else 1
        index.add(row, fp)
        stored.append(fp)
    assert any(len(t.room) > len(t.entries) for t in index._tables) or index._indexed < len(stored)
    every = np.array(stored, dtype=np.uint64)
    for query in rng.sample(stored, 200):
        assert [(m.distance, m.key) for m in index.query(query)] == brute_array(every, query, 4)


def test_a_layered_index_answers_as_one_index() -> None:
    """``LayeredIndex`` (a big and a small index, ``core.index.layered``): the same matches, in the same order,
    as one ``BlockPermutedIndex`` of the same rows, through moves into the big index and removals."""
    import random

    from simhash_scrapy.core.index.layered import LayeredIndex

    rng = random.Random(11)
    layered, single = LayeredIndex(4, None, recent_rows=50), BlockPermutedIndex(4, None)
    fps = [rng.getrandbits(64) for _ in range(400)]
    for key, fp in enumerate(fps):
        near = fp ^ (1 << rng.randrange(64)) if key % 3 == 0 else fp  # near-duplicates of earlier rows too
        if key % 7 == 0:
            layered.add_many(np.array([key, key]), np.array([fp, near], dtype=np.uint64))
            single.add_many([key, key], [fp, near])
        else:
            layered.add(key, fp)
            single.add(key, fp)
        if key % 11 == 10:
            assert layered.remove(key - 5) == single.remove(key - 5)
    assert len(layered.big) and len(layered) == len(single)
    row_keys, row_fps = single.rows()  # (what the small index hands over: every live row, in order)
    assert list(zip(list(row_keys), row_fps.tolist())) == list(single) == list(layered)
    probes = fps + [fp ^ 0b10101 for fp in fps[:100]]
    for fp in probes:
        assert layered.query(fp) == single.query(fp)
    assert layered.query_many(probes) == [single.query(fp) for fp in probes]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=st.sampled_from(LAYOUTS), seed=st.integers(0, 2**32), count=st.integers(0, 120), compiled=st.booleans())
def test_a_scan_index_answers_as_a_block_permuted_index(layout: tuple[int, int], seed: int, count: int,
                                                         compiled: bool) -> None:
    """``ScanIndex`` (a batch's few rows scanned, ``core.index.scan``): the same matches, in the same order (nearest
    first, ties the oldest row first), as a ``BlockPermutedIndex`` of the same rows, through single and bulk
    additions (list and array keys), repeated keys and removals; and both are brute force's."""
    from simhash_scrapy.core.index.scan import ScanIndex

    k, blocks = layout
    rng = random.Random(seed)
    with switched(compiled):  # (the C scan, or Python's; the block-permuted index the same way)
        _scan_against_tables(ScanIndex(k, blocks), BlockPermutedIndex(k, blocks), k, planted(seed, count, k), rng)


def _scan_against_tables(scan: Any, tables: BlockPermutedIndex, k: int, fps: list[int], rng: random.Random) -> None:
    live: list[tuple[int, int]] = []  # (key, fingerprint) of the live rows, oldest first
    for key, fp in enumerate(fps):
        action = rng.randrange(6)
        if action == 0:  # a bulk addition, the key repeated
            scan.add_many(np.array([key, key]), np.array([fp, fp ^ 1], dtype=np.uint64))
            tables.add_many([key, key], [fp, fp ^ 1])
            live += [(key, fp), (key, fp ^ 1)]
        else:
            scan.add(key, fp)
            tables.add(key, fp)
            live.append((key, fp))
        if action == 1 and live:
            gone = rng.choice(live)[0]
            assert scan.remove(gone) == tables.remove(gone) > 0
            live = [row for row in live if row[0] != gone]
    assert len(scan) == len(tables) == len(live) and list(scan) == live
    probes = fps + [flip(fp, rng.randint(0, k + 2), rng) for fp in fps] + [rng.getrandbits(64)]
    for fp in probes:
        found = scan.query(fp)
        assert found == tables.query(fp)
        assert [(m.distance, m.key) for m in found] == [
            (d, live[row][0]) for d, row in brute([f for _, f in live], fp, k)]
    assert scan.query_many(probes) == [tables.query(fp) for fp in probes]
    assert scan.query_many(np.array(probes, dtype=np.uint64)) == scan.query_many(probes)


def test_a_scan_index_refuses_what_a_block_permuted_index_refuses() -> None:
    from simhash_scrapy.core.index.scan import ScanIndex

    for bad in (-1, 64, True, 2.0):
        with pytest.raises(ValueError, match="max_distance"):
            ScanIndex(bad)  # type: ignore[arg-type]
    scan = ScanIndex(3)
    for fp in (-1, 1 << 64, "7", None):
        with pytest.raises(ValueError, match="fingerprint"):
            scan.add(1, fp)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="fingerprint"):
            scan.query(fp)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="same length"):
        scan.add_many([1, 2], [3])
    with pytest.raises(ValueError, match="uint64"):
        scan.add_many([1], np.array([3], dtype=np.int64))
    assert len(scan) == 0 and scan.query(0) == [] and scan.remove(1) == 0


@pytest.mark.parametrize("compiled", [True, False])
def test_query_many_answers_as_query_of_each(compiled: bool) -> None:
    """``BlockPermutedIndex.query_many`` (the Redis replica's batch of candidates): each fingerprint's
    ``query``, in order, with rows in the tables, rows in the unsorted tail and removed rows."""
    rng = random.Random(12)
    index = BlockPermutedIndex(4, None)
    fps = [rng.getrandbits(64) for _ in range(3000)]
    index.add_many(range(2500), fps[:2500])
    for key in range(2500, 3000):
        index.add(key, fps[key] if key % 2 else fps[key - 2000] ^ 0b1001)  # some near earlier rows
    for key in range(0, 3000, 9):
        index.remove(key)
    assert index._n > index._indexed  # (some rows are still in the unsorted tail)
    probes = [fp ^ (1 << rng.randrange(64)) if n % 2 else fp for n, fp in enumerate(fps[::7])]
    with switched(compiled):
        assert index.query_many(probes) == [index.query(fp) for fp in probes]
        assert sum(map(len, index.query_many(probes))) > len(probes) // 2
        assert index.query_many([]) == [] and index.query_many(probes[:1]) == [index.query(probes[0])]


def test_rows_are_sorted_by_bucket_as_a_stable_argsort_sorts_them() -> None:
    """``_by_bucket`` (the merges' and rebuilds' sort): numpy's stable argsort, ties in insertion order."""
    from simhash_scrapy.core.index.index import _by_bucket

    rng = np.random.default_rng(9)
    for size, top in ((0, 1), (1, 1), (50, 3), (2048, 1 << 14), (20_000, 1 << 22), (5000, 1 << 31)):
        buckets = rng.integers(0, top, size, dtype=np.int64)
        assert _by_bucket(buckets).tolist() == np.argsort(buckets, kind="stable").tolist()


def test_integer_key_arrays_of_any_width_are_kept_as_given() -> None:
    """``add_many`` with uint32 keys (the rule's entries) into an index whose keys are uint32, or int64 after a
    key past 2**32 - 1, and int64 keys past it: every key comes back as it was added."""
    index = BlockPermutedIndex(3, 4)
    index.add_many(np.arange(5, dtype=np.uint32), np.arange(5, dtype=np.uint64))
    index.add_many(np.array([1 << 40, -3], dtype=np.int64), np.array([5, 6], dtype=np.uint64))
    index.add_many(np.arange(7, 9, dtype=np.uint32), np.array([7, 8], dtype=np.uint64))
    assert [key for key, _ in index] == [0, 1, 2, 3, 4, 1 << 40, -3, 7, 8]
    assert [m.key for m in index.query(6)][:1] == [-3]
