"""``SIMHASH_BACKEND = "redis-global"``: one index sharded over a real local three-node Redis Cluster.

The tests start the nodes themselves (``conftest_redis``: a temporary directory, free ports; skipped only
when redis-server is missing).  What they assert: the same verdicts as the in-process and single-node
Redis backends on a fixed order (one check at a time and in batches), the tables spread over every node,
and under concurrent workers the race's only cost: a duplicate kept twice, never a distinct page dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.crc import key_slot
from redis_server import RedisCluster
from test_redis_backend import Stats, assert_close_reads_counted, async_test, make_backend, recrawl_sequence
from test_redis_cluster import keys_per_node

from simhash_scrapy.backends import PageRecord, backend_class
from simhash_scrapy.backends.base import BackendError, Outcome
from simhash_scrapy.backends.memory import MemoryBackend
from simhash_scrapy.backends.redis import node_link
from simhash_scrapy.backends.redis.cluster_backend import GlobalRedisBackend
from simhash_scrapy.backends.redis.layout import identity_slot
from simhash_scrapy.config import SimhashConfig
from simhash_scrapy.core import _native
from simhash_scrapy.core.settings.config import RedisConfig
from crawl_helpers import flip  # noqa: E402  (tests/ is on sys.path)

pytest_plugins = ["conftest_redis"]


def global_backend(cluster: RedisCluster, config: SimhashConfig | None = None, **settings: Any) -> GlobalRedisBackend:
    values = {"SIMHASH_REDIS_URL": cluster.url, "SIMHASH_REDIS_CLUSTER": True, **settings}
    return GlobalRedisBackend(config or SimhashConfig(), RedisConfig.of(values))


@contextlib.asynccontextmanager
async def opened(cluster: RedisCluster, config: SimhashConfig | None = None,
                 **settings: Any) -> AsyncIterator[GlobalRedisBackend]:
    """``global_backend`` opened for ``myspider`` and closed however the test ends: a backend a failed or skipped
    test left open keeps its sockets until they are collected, and fails whichever test runs then."""
    backend = global_backend(cluster, config, **settings)
    await backend.open("myspider")
    try:
        yield backend
    finally:
        await backend.close()


def steps_1_to_3(count: int, seed: int, k: int) -> list[tuple[PageRecord, bool]]:
    """``recrawl_sequence`` without one-edit keys (step 4 is not applied by this backend)."""
    return [(dataclasses.replace(r, edit_keys=()), index) for r, index in recrawl_sequence(seed, count, k)]


def member_view(members: list[Any]) -> list[tuple[Any, ...]]:
    return [(m.url, m.fingerprint, m.canonical_url, m.distance, m.indexed, m.exact, m.outcome, m.digest, m.etag)
            for m in members]


@pytest.mark.parametrize(("k", "blocks", "bits"), [(3, 0, 16), (4, 6, 8)])
@async_test
async def test_same_verdicts_as_in_process_and_single_node_redis(
    redis_cluster: RedisCluster, redis_server: Any, k: int, blocks: int, bits: int
) -> None:
    config = SimhashConfig(max_distance=k)
    backend = global_backend(redis_cluster, config, SIMHASH_REDIS_TABLE_BLOCKS=blocks, SIMHASH_REDIS_BUCKET_BITS=bits)
    await backend.open("myspider")
    single = make_backend(redis_server, config)
    await single.open("myspider")
    memory = MemoryBackend(config)
    for record, index in steps_1_to_3(700, 31 + k, k):
        want = memory.check_now(record, index)
        assert await backend.check(record, index) == want, record
        assert await single.check(record, index) == want, record
    assert member_view(await backend.members()) == member_view(await memory.members())
    assert await backend.index_size() == await memory.index_size() == await single.index_size()
    spread = keys_per_node(redis_cluster)
    assert all(spread), spread  # the tables' buckets are on every node
    await single.close()
    await backend.close()


@pytest.mark.parametrize(("bucket_cache", "python_reader"), [(0, False), (64, False), (0, True)])
@async_test
async def test_batched_checks_give_the_serial_verdicts(redis_cluster: RedisCluster, bucket_cache: int,
                                                       python_reader: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # Checks that arrive together go in one batch (one read, one write per node): decided in order, with or
    # without the worker's copies of the buckets, and with node_link's Python reader (the fallback where hiredis,
    # in the redis extra, is missing or older than 2.1) as with hiredis'.
    if python_reader:
        monkeypatch.setattr(node_link, "reader_class", lambda: node_link.RespReader)
    try:
        import hiredis
    except ImportError:  # (an install without it: the Python reader either way)
        hiredis = None
    async with opened(redis_cluster, SIMHASH_REDIS_BUCKET_CACHE=bucket_cache) as backend:
        assert backend.link.reader is (node_link.RespReader if python_reader or hiredis is None else hiredis.Reader)
        memory = MemoryBackend(SimhashConfig())
        sequence = steps_1_to_3(900, 41, 3)
        for start in range(0, len(sequence), 150):
            chunk = sequence[start : start + 150]
            got = await asyncio.gather(*(backend.check(r, index) for r, index in chunk))
            assert got == [memory.check_now(r, index) for r, index in chunk]
        assert backend.counts["batches"] < backend.counts["checks"] / 10
        if bucket_cache:  # buckets read again as their new entries, and whole after a removal (a changed page)
            assert backend.counts["bucket_hits"] > 100 and backend.counts["bucket_moved"] > 0
        else:
            assert backend.counts["bucket_hits"] == backend.counts["bucket_moved"] == len(backend.buckets) == 0


def _in_a_bucket_of(keys: Any, fp: int, rng: random.Random, make: Any, among: set[str] | None = None) -> int:
    """A fingerprint ``make(rng)`` XORed into ``fp`` that falls in one of ``fp``'s table buckets (one of ``among``)."""
    buckets = set(keys.buckets(fp)) & among if among is not None else set(keys.buckets(fp))
    while True:
        other = fp ^ make(rng)
        if buckets & set(keys.buckets(other)):
            return other


def _bits(rng: random.Random, count: int, width: int) -> int:
    return sum(1 << b for b in rng.sample(range(width), count))


@async_test
async def test_races_count_entries_written_since_the_read_not_far_pages_of_the_same_fold(
    redis_cluster: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await race_between_read_and_write(redis_cluster, monkeypatch) == 14


async def race_between_read_and_write(cluster: RedisCluster, monkeypatch: pytest.MonkeyPatch,
                                      append_near: bool | None = None) -> int:
    """Worker ``b`` checks a page while worker ``a`` appends to one of its buckets between b's read and b's write (a
    check of ``a`` run inside b's step 3): b's append finds the bucket longer than it read, looks at it again and
    counts a race only for an entry near its page that the read did not find.  An old entry whose fold is the
    page's but whose fingerprint is 6+ bits away (``fold``: the halves XORed) was found by the read: no race.
    ``append_near``: b's ``append_near`` set so after open (the module's look-again in the append, or not).  The
    checks made."""
    rng = random.Random(31)
    checks = 0
    async with opened(cluster) as a, opened(cluster) as b:
        if append_near is not None:
            b.append_near = append_near
        keys = b.keys("myspider")
        original = b._canonicals
        interleaved: list[PageRecord] = []

        async def write_between(batch: Any, decisions: Any) -> Any:
            for record in interleaved:
                await a.check(record)
            interleaved.clear()
            return await original(batch, decisions)

        monkeypatch.setattr(b, "_canonicals", write_between)
        for n in range(4):
            page = rng.getrandbits(64)
            # an old page: the same fold (bits flipped in both halves alike), 6-10 bits away
            old = _in_a_bucket_of(keys, page, rng, lambda r: (x := _bits(r, r.randint(3, 5), 32)) << 32 | x)
            assert (old ^ page).bit_count() > 4 and (old >> 32) ^ (old & 0xFFFFFFFF) == (page >> 32) ^ (page & 0xFFFFFFFF)
            assert (await a.check(PageRecord(f"https://h.example/old{n}", old, "myspider"))).outcome is Outcome.UNIQUE
            # written by ``a`` between b's read and write: far from the page (8 bits, low half: fold 8 bits away) ...
            shared = set(keys.buckets(page)) & set(keys.buckets(old))  # (the bucket the old entry is read in)
            far = _in_a_bucket_of(keys, page, rng, lambda r: _bits(r, 8, 32), shared)
            interleaved.append(PageRecord(f"https://h.example/far{n}", far, "myspider"))
            verdict = await b.check(PageRecord(f"https://h.example/page{n}", page, "myspider"))
            assert verdict.outcome is Outcome.UNIQUE
            assert b.counts["races"] == 0, n
        # ... and near it (1 bit): both pages canonical, a duplicate kept twice, counted once
        page = rng.getrandbits(64)
        interleaved.append(PageRecord("https://h.example/near", page ^ 1, "myspider"))
        assert (await b.check(PageRecord("https://h.example/page", page, "myspider"))).outcome is Outcome.UNIQUE
        assert b.counts["races"] == 1
        checks = a.counts["checks"] + b.counts["checks"]
    return checks


async def check_groups_at_once(workers: list[GlobalRedisBackend], rng: random.Random,
                               groups: int = 40) -> tuple[list[PageRecord], dict[str, int]]:
    """``groups`` groups of 6 near-duplicates, shuffled, checked at once by ``workers`` in turn: every group kept, and
    a near-duplicate always of a page of its own group (no distinct page dropped).  The records, and the pages each
    group kept (more than one: a duplicate kept twice, the race's only cost)."""
    records = []
    for c in range(groups):
        base = rng.getrandbits(64)  # groups are far apart (random 64-bit fingerprints)
        for v in range(6):  # within 1 of the base: near-duplicates of each other (distance <= 2 <= k)
            records.append(PageRecord(f"https://h{c % 7}.example/{c}/{v}", flip(base, rng.randint(0, 1), rng), "spider"))
    rng.shuffle(records)
    verdicts = await asyncio.gather(*(workers[i % len(workers)].check(r) for i, r in enumerate(records)))
    canonical: dict[str, int] = {}
    for record, verdict in zip(records, verdicts):
        group = record.url.split("/")[3]
        if verdict.outcome is Outcome.UNIQUE:
            canonical[group] = canonical.get(group, 0) + 1
        else:
            assert verdict.outcome is Outcome.NEAR_DUPLICATE
            assert verdict.canonical_url.split("/")[3] == group
    assert sorted(canonical) == sorted(str(c) for c in range(groups))  # every group kept
    return records, canonical


@async_test
async def test_concurrent_workers_keep_duplicates_at_worst_never_drop_a_distinct_page(redis_cluster: RedisCluster) -> None:
    workers = [global_backend(redis_cluster) for _ in range(3)]
    for worker in workers:
        await worker.open("myspider")
    records, canonical = await check_groups_at_once(workers, random.Random(23))
    extra = sum(n - 1 for n in canonical.values())
    races = sum(worker.counts["races"] + worker.counts["unnamed"] for worker in workers)
    assert races >= extra  # every duplicate kept twice is seen and counted (an entry read before its record: unnamed)
    assert await workers[0].index_size() == sum(canonical.values())
    assert len(await workers[1].members()) == len(records)
    # Checked again, one worker at a time: every page is unchanged, nothing moves.
    again = [await workers[i % 3].check(r) for i, r in enumerate(records)]
    assert {v.outcome for v in again} == {Outcome.UNCHANGED}
    for worker in workers:
        await worker.close()


@async_test
async def test_selected_by_settings_and_a_layout_mismatch_names_the_settings(redis_cluster: RedisCluster) -> None:
    settings = {"SIMHASH_BACKEND": "redis-global", "SIMHASH_REDIS_URL": redis_cluster.url, "SIMHASH_REDIS_CLUSTER": True}
    assert backend_class(SimhashConfig.from_settings(settings)) is GlobalRedisBackend
    backend = global_backend(redis_cluster)
    await backend.open("myspider")
    await backend.check(PageRecord("https://a.example/", 1 << 40, "myspider"))
    other = global_backend(redis_cluster, SIMHASH_REDIS_TABLE_BLOCKS=6)
    await other.open("myspider")
    with pytest.raises(Exception, match="SIMHASH_REDIS_TABLE_BLOCKS"):
        await other.check(PageRecord("https://b.example/", 1 << 40, "myspider"))
    fresh = global_backend(redis_cluster, SIMHASH_REDIS_FLUSH_ON_START=True)
    await fresh.open("myspider")
    assert keys_per_node(redis_cluster) == [0, 0, 0]
    for b in (backend, other, fresh):
        await b.close()


def test_a_table_key_must_match_exactly() -> None:
    with pytest.raises(ValueError, match="SIMHASH_REDIS_TABLE_BLOCKS=3"):
        GlobalRedisBackend(SimhashConfig(), RedisConfig.of({"SIMHASH_REDIS_TABLE_BLOCKS": 3})).keys("s")


def test_records_and_entries_round_trip() -> None:
    from simhash_scrapy.backends.redis.cluster_layout import (
        ENTRY, GlobalKeys, GlobalRecord, entries_of, fold, pack_bucket, pack_entry, pack_record, parse_record,
    )

    for record in (
        GlobalRecord(7, 2**64 - 1, False, True, 0, -1, None, 1.5, 2.5, b"payload", 2**63),
        GlobalRecord(2**32 - 1, 5, True, False, 1, 0, 3, 1.0, 1.0, b""),
        GlobalRecord(9, 12345, False, True, 2, -1, None, 1.0, 3.0, b"x", 12345),
    ):
        assert parse_record(pack_record(record)) == record
    data = pack_entry(2**64 - 2, 9) + pack_entry(3, 2**32 - 1)
    assert len(data) == 2 * ENTRY
    assert entries_of(pack_bucket(data)).tolist() == [(fold(2**64 - 2), 9), (3, 2**32 - 1)]
    assert entries_of(None).tolist() == []
    assert fold(2**64 - 2) == 1
    keys = GlobalKeys("p", "s", 3, 4, 16, 12)
    assert len({key.split("{")[1] for key in keys.buckets(0)}) == 4  # one hash slot per table bucket
    assert keys.bucket_bits == 16


def test_folded_entries_find_every_fingerprint_within_k() -> None:
    # A fold's distance is never more than the fingerprints': every entry within k is found, and few others.
    from simhash_scrapy.backends.redis.cluster_layout import entries_of, fold, near_entries, pack_bucket, pack_entry

    rng = random.Random(5)
    for _ in range(2000):
        a = rng.getrandbits(64)
        b = flip(a, rng.randint(0, 6), rng)
        assert (fold(a) ^ fold(b)).bit_count() <= (a ^ b).bit_count()
    probe = rng.getrandbits(64)
    near = [flip(probe, rng.randint(0, 4), rng) for _ in range(300)]
    far = [rng.getrandbits(64) for _ in range(20000)]
    entries = entries_of(pack_bucket(b"".join(pack_entry(fp, seq) for seq, fp in enumerate(near + far))))
    found = set(near_entries(entries, probe, 4).tolist())
    assert set(range(len(near))) <= found
    assert len(found) - len(near) <= 3  # random fingerprints: ~1 in 100,000 within 4 after folding


@async_test
async def test_an_entry_whose_fold_alone_is_near_is_not_a_near_duplicate(redis_cluster: RedisCluster) -> None:
    # Flipping bit i and bit i + 32 leaves the fold unchanged: the entry is read as a candidate, and its record's
    # fingerprint (distance 6 > k = 3) keeps the page apart, as the in-process backend decides.
    from simhash_scrapy.backends.redis.cluster_layout import fold

    backend = global_backend(redis_cluster)
    await backend.open("myspider")
    memory = MemoryBackend(SimhashConfig())
    a = 0x0123456789ABCDEF
    twin = a ^ sum((1 << i) | (1 << (i + 32)) for i in (3, 17, 29))
    near = a ^ (1 << 5) ^ (1 << 40)
    assert fold(twin) == fold(a) and (a ^ twin).bit_count() == 6
    records = [PageRecord("https://a.example/", a, "myspider"), PageRecord("https://b.example/", twin, "myspider"),
               PageRecord("https://c.example/", near, "myspider")]
    got = [await backend.check(r) for r in records]
    assert got == [memory.check_now(r) for r in records]
    assert [v.outcome for v in got] == [Outcome.UNIQUE, Outcome.UNIQUE, Outcome.NEAR_DUPLICATE]
    assert got[2].canonical_url == "https://a.example/"
    assert backend.counts["cache_misses"] >= 1  # the twin's record was read to tell
    await backend.close()


@async_test
async def test_appends_leave_the_buckets_the_bulk_loader_writes(redis_cluster: RedisCluster) -> None:
    # Entries appended in place while a bucket has room, the bucket made again (entries + room) when full:
    # every bucket is what pack_bucket (the benchmark's bulk loader) makes of its entries.  A page whose content
    # changed has its old entries cut out: the header counts one entry less, the string keeps its length, and the
    # bucket's mark is one more (the workers' copies of it are read whole again).
    import redis

    from simhash_scrapy.backends.redis.cluster_layout import ENTRY, entries_of, mark_of, pack_bucket, used_of

    backend = global_backend(redis_cluster, SimhashConfig(max_distance=3), SIMHASH_REDIS_BUCKET_BITS=8)
    await backend.open("myspider")
    rng = random.Random(3)
    low_bytes = 0x00FF00FF00FF00FF  # k = 3: 4 tables keyed by 16-bit blocks, buckets by their top 8 bits: one each
    for n in range(300):
        await backend.check(PageRecord(f"https://a.example/{n}", rng.getrandbits(64) & low_bytes, "myspider"))
    canonical = await backend.index_size()

    def buckets() -> dict[bytes, bytes]:
        out = {}
        for port in redis_cluster.ports:
            client = redis.Redis(host="127.0.0.1", port=port)
            out.update({key: client.get(key) for key in client.scan_iter(match="*.t*")})
            client.close()
        return out

    before = buckets()
    assert sum(len(entries_of(data)) for data in before.values()) == canonical * 4  # 4 tables at k = 3
    assert max(len(data) for data in before.values()) > 1000  # made again many times
    for data in before.values():
        assert data == pack_bucket(entries_of(data).tobytes(), mark_of(data))
    moved = rng.getrandbits(64) | ~low_bytes & (2**64 - 1)  # changed content, in other buckets
    await backend.check(PageRecord("https://a.example/1", moved, "myspider"))
    after = buckets()
    shorter = [key for key in before if used_of(after[key]) == used_of(before[key]) - ENTRY]
    assert len(shorter) == 4 and len(after) == len(before) + 4  # its 4 entries cut out, 4 new buckets
    assert all(len(after[key]) == len(before[key]) for key in shorter)
    assert all(int.from_bytes(mark_of(after[key]), "big") == int.from_bytes(mark_of(before[key]), "big") + 1
               for key in shorter)
    assert all(mark_of(after[key]) == mark_of(before[key]) for key in before if key not in shorter)
    assert sum(len(entries_of(data)) for data in after.values()) == canonical * 4
    await backend.close()


@pytest.mark.slow  # 2.4 s and 2.2 s measured (--durations, serial, loaded 2-core machine)
@pytest.mark.parametrize("fail_open", [True, False])
@async_test
async def test_a_node_down_lets_pages_through_unchecked_never_dropped(tmp_path: Any, fail_open: bool) -> None:
    # A real three-node cluster of its own (one node is killed); no replica: the slots of the dead node stay
    # unserved.  Fail-open: every check that needs it goes through UNCHECKED, counted; fail-closed: BackendError.
    cluster = RedisCluster(tmp_path).start()
    try:
        backend = global_backend(cluster, SIMHASH_REDIS_FAIL_OPEN=fail_open)
        await backend.open("myspider")
        rng = random.Random(9)
        first = [PageRecord(f"https://a.example/{n}", rng.getrandbits(64), "myspider") for n in range(20)]
        before = await asyncio.gather(*(backend.check(r) for r in first))
        assert {v.outcome for v in before} == {Outcome.UNIQUE}
        cluster.processes[1].kill()
        cluster.processes[1].wait(timeout=20)
        later = [PageRecord(f"https://b.example/{n}", rng.getrandbits(64), "myspider") for n in range(20)]
        if not fail_open:
            with pytest.raises(BackendError, match="Redis error"):
                await backend.check(later[0])
        else:
            after = await asyncio.gather(*(backend.check(r) for r in later))
            near = await backend.check(dataclasses.replace(first[0], url="https://c.example/", identity=""))
            assert {v.outcome for v in after} == {near.outcome} == {Outcome.UNCHECKED}  # none dropped
            assert backend.counts["unreachable"] == 21
        await backend.close()
    finally:
        cluster.stop()


def kill_node_of(cluster: RedisCluster, backend: GlobalRedisBackend, key: str) -> None:
    n = cluster.ports.index(backend.link.node_of(key).port)
    cluster.processes[n].kill()
    cluster.processes[n].wait(timeout=20)


@pytest.mark.slow  # 3.8 s measured (--durations, serial, loaded 2-core machine)
@async_test
async def test_no_traceback_at_close_when_a_node_is_gone(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    # The report's reads at close (members, index_size) on a cluster whose node holding the scope's meta is gone:
    # counted (simhash/redis/unread/*) and logged once, the crawl closes normally; ``report --redis`` fails.
    cluster = RedisCluster(tmp_path).start()
    try:
        backend = global_backend(cluster)
        backend.stats = Stats()
        await backend.open("myspider")
        await backend.check(PageRecord("https://a.example/", 1 << 40, "myspider"))
        kill_node_of(cluster, backend, backend.keys("myspider").meta)
        await assert_close_reads_counted(backend, caplog)
        # ``scrapy simhash report --redis`` is not the crawl's close: an error, not an empty report.
        from command_helpers import assert_user_error, simhash

        live = next(port for n, port in enumerate(cluster.ports) if cluster.processes[n].poll() is None)
        options = ("-s", "SIMHASH_BACKEND=redis-global", "-s", "SIMHASH_REDIS_CLUSTER=True")
        assert_user_error(simhash("report", "--redis", f"redis://127.0.0.1:{live}", "--key", "myspider:simhash",
                                  *options, cwd=tmp_path), 1, "report", "cannot read Redis")
    finally:
        cluster.stop()


@async_test
async def test_a_slot_no_node_serves_is_an_outage_not_a_crash(redis_cluster: RedisCluster,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    # A slot map without the slot of a key (a cluster whose slots are not all assigned, or a map read mid-change):
    # a request's lookup finds nothing (the page is downloaded as usual), a check goes through unchecked and
    # counted (fail-open), each with a message naming the slot, never a KeyError out of the backend.
    backend = global_backend(redis_cluster)
    backend.stats = Stats()
    await backend.open("myspider")
    record = PageRecord("https://a.example/", 1 << 40, "myspider", etag='"e1"')
    await backend.check(record)
    assert await backend.previous("myspider", record.key) is not None
    keys = backend.keys("myspider")
    record_key = keys.record(identity_slot("myspider", record.key, keys.record_bits)[0])
    gone = key_slot(record_key.encode())
    manager = backend.client.nodes_manager
    manager.slots_cache = {slot: nodes for slot, nodes in manager.slots_cache.items() if slot != gone}
    assert await backend.previous("myspider", record.key) is None
    with pytest.raises(ConnectionError, match=f"no node serves hash slot {gone}"):
        backend.link.node_of(record_key)
    with caplog.at_level(logging.WARNING, logger="simhash_scrapy.backends.redis"):
        verdict = await backend.check(PageRecord("https://a.example/", 1 << 40, "myspider"))
    assert verdict.outcome is Outcome.UNCHECKED and backend.counts["unreachable"] == 1
    assert any(f"no node serves hash slot {gone}" in r.getMessage() for r in caplog.records)  # (the batch's own)
    await backend.close()


@pytest.mark.slow  # 2.2 s measured (--durations, serial, loaded 2-core machine)
@async_test
async def test_previous_skips_a_node_that_did_not_answer(tmp_path: Any) -> None:
    # A node that failed a call is not asked again by the lookups a request makes (each would wait the link's
    # timeout on a node that hangs) until the timeout has passed or it answers a check.
    cluster = RedisCluster(tmp_path).start()
    try:
        backend = global_backend(cluster)
        await backend.open("myspider")
        record = PageRecord("https://a.example/", 1 << 40, "myspider", etag='"e1"')
        await backend.check(record)
        found = await backend.previous("myspider", record.key)
        assert found is not None and found.etag == '"e1"'
        keys = backend.keys("myspider")
        kill_node_of(cluster, backend, keys.record(identity_slot("myspider", record.key, keys.record_bits)[0]))
        assert await backend.previous("myspider", record.key) is None  # refused: the node is known down
        asked: list[Any] = []
        exchange = backend.link.packed_exchange

        async def spy(groups: Any, *rest: Any) -> Any:
            asked.append(groups)
            return await exchange(groups, *rest)

        backend.link.packed_exchange = spy
        assert await backend.previous("myspider", record.key) is None
        assert asked == []  # not asked again
        backend.link.timeout = 0.0  # (the while passed: asked again)
        assert await backend.previous("myspider", record.key) is None
        assert len(asked) == 1
        await backend.close()
    finally:
        cluster.stop()


@pytest.mark.slow  # 3.2 s measured (--durations, serial, loaded 2-core machine)
@async_test
async def test_lookups_queued_on_a_hanging_node_do_not_each_wait_the_timeout(tmp_path: Any) -> None:
    # A node that hangs (SIGSTOP: the kernel still accepts connections, nothing answers): the lookups of the
    # requests in flight queue on its connection; the first waits the link's timeout, the others, which passed
    # ``is_down`` before it failed, must not each wait it again (N lookups would cost N timeouts, in a row).
    import os
    import signal

    cluster = RedisCluster(tmp_path).start()
    stopped = None
    try:
        backend = global_backend(cluster)
        await backend.open("myspider")
        records = [PageRecord(f"https://a.example/{i}", (1 << 40) + i, "myspider", etag=f'"e{i}"') for i in range(40)]
        for record in records:
            await backend.check(record)
        keys = backend.keys("myspider")

        def node(record: PageRecord) -> Any:
            return backend.link.node_of(keys.record(identity_slot("myspider", record.key, keys.record_bits)[0]))

        target = node(records[0])
        same = [r for r in records if node(r) is target][:4]
        assert len(same) == 4
        backend.link.timeout = 1.0
        timeouts: list[Any] = []
        exchange = backend.link.packed_exchange

        async def spy(*args: Any, **kwargs: Any) -> Any:
            try:
                return await exchange(*args, **kwargs)
            except TimeoutError as exc:
                timeouts.append(exc)
                raise

        backend.link.packed_exchange = spy
        stopped = cluster.processes[cluster.ports.index(target.port)]
        os.kill(stopped.pid, signal.SIGSTOP)
        found = await asyncio.gather(*(backend.previous("myspider", r.key) for r in same))
        assert found == [None] * 4
        assert len(timeouts) == 1, f"{len(timeouts)} lookups each waited the timeout"
        os.kill(stopped.pid, signal.SIGCONT)
        stopped = None
        await backend.close()
    finally:
        if stopped is not None:
            os.kill(stopped.pid, signal.SIGCONT)
        cluster.stop()


@pytest.mark.slow  # 3.5 s measured (--durations, serial, loaded 2-core machine)
@async_test
async def test_previous_with_the_meta_node_gone_leaks_nothing(tmp_path: Any) -> None:
    # A lookup before this worker checked the scope reads the scope's dictionary (its meta hash) too; with the
    # meta's node gone it answers None, and goes through node_link: redis-py's cluster client, meeting the dead
    # node, read the slot map again and dropped its node objects unclosed (ResourceWarning: the test fails).
    import gc

    cluster = RedisCluster(tmp_path).start()
    try:
        backend = global_backend(cluster)
        await backend.open("myspider")
        records = [PageRecord(f"https://a.example/{i}", (1 << 40) + i * 7777777, "myspider", etag='"e"')
                   for i in range(30)]
        for record in records:
            await backend.check(record)
        await backend.close()
        backend = global_backend(cluster)
        await backend.open("myspider")  # (a new worker: the scope not checked yet)
        keys = backend._scope_keys("myspider")  # (``keys()`` would make the scope's state)

        def node(record: PageRecord) -> Any:
            return backend.link.node_of(keys.record(identity_slot("myspider", record.key, keys.record_bits)[0]))

        meta = backend.link.node_of(keys.meta)
        record = next(r for r in records if node(r) is not meta)
        assert "myspider" not in backend._scopes
        found = await backend.previous("myspider", record.key)
        assert found is not None and found.etag == '"e"'
        kill_node_of(cluster, backend, keys.meta)
        assert await backend.previous("myspider", record.key) is None
        await backend.close()
        gc.collect()
    finally:
        cluster.stop()


def test_near_entries_of_many_buckets_at_once_are_each_buckets() -> None:
    from simhash_scrapy.backends.redis.cluster_layout import entries_of, near_entries, near_entries_many, pack_bucket, pack_entry

    rng = random.Random(8)
    probes = [rng.getrandbits(64) for _ in range(30)]
    buckets: list[bytes | None] = [None, pack_bucket(b"")]
    for n, probe in enumerate(probes[2:]):
        fps = [flip(probe, rng.randint(0, 6), rng) for _ in range(rng.randint(0, 40))] + [rng.getrandbits(64)] * 3
        buckets.append(pack_bucket(b"".join(pack_entry(fp, 1000 * n + i) for i, fp in enumerate(fps))))
    buckets[5] = buckets[5][:-20]  # (a bucket cut short: the entries its bytes hold)
    want = [near_entries(entries_of(data), fp, 4).tolist() for data, fp in zip(buckets, probes)]
    assert sum(map(len, want)) > 100
    # the compiled loop (``_speedups.near_folds``: its popcnt copy and its portable one) and numpy: the same seqs
    for compiled, popcnt in ((True, True), (True, False), (False, False)):
        with _native.switched(compiled):
            had = _native.speedups.near_popcnt(popcnt) if compiled and _native.speedups is not None else None
            try:
                assert near_entries_many(buckets, probes, 4) == want
                assert near_entries_many([], [], 4) == []
                assert near_entries_many(buckets, probes, 64) == [entries_of(data)["seq"].tolist() for data in buckets]
            finally:
                if had is not None:
                    _native.speedups.near_popcnt(True)


@async_test
async def test_a_reopened_worker_replays_the_identity_scopes_and_looks_records_up(
    redis_cluster: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pages checked in identity scopes (``plain#digest``) and in the plain one: a worker opened later reads
    # the identity scopes' pages from the key's scope registry (not the plain scope's), at most MAX_ADDRESSES.
    config = SimhashConfig(identity_signals=True)
    first = global_backend(redis_cluster, config)
    await first.open("myspider")
    assert first.restored_pages() == []
    rng = random.Random(5)
    identity = [PageRecord(f"https://shop.example/p/{n}", rng.getrandbits(64), f"myspider#{n % 4:016x}",
                           etag=f'"e{n}"') for n in range(12)]
    plain = [PageRecord(f"https://shop.example/a/{n}", rng.getrandbits(64), "myspider") for n in range(5)]
    for record in identity + plain:
        await first.check(record)
    await first.close()
    second = global_backend(redis_cluster, config)
    await second.open("myspider")
    assert sorted(second.restored_pages()) == sorted((r.url, r.scope) for r in identity)
    found = await second.previous(identity[3].scope, identity[3].key)
    assert found is not None and (found.url, found.etag, found.fingerprint) == (identity[3].url, '"e3"', identity[3].fingerprint)
    assert await second.previous(identity[3].scope, "https://shop.example/p/unknown") is None
    await second.close()
    monkeypatch.setattr("simhash_scrapy.backends.redis.cluster_backend.MAX_ADDRESSES", 5)
    capped = global_backend(redis_cluster, config)
    await capped.open("myspider")
    pages = capped.restored_pages()
    assert len(pages) == 5 and set(pages) <= {(r.url, r.scope) for r in identity}
    await capped.close()
    without = global_backend(redis_cluster, SimhashConfig(identity_signals=False))  # (nothing read)
    await without.open("myspider")
    assert without.restored_pages() == []
    await without.close()


@async_test
async def test_named_blobs_are_kept_in_the_cluster(redis_cluster: RedisCluster) -> None:
    # (the requests a page yielded, for its 304: ``load_replay``)
    backend = global_backend(redis_cluster)
    await backend.open("myspider")
    await backend.save_replay("myspider", "https://a.example/", b"requests")
    await backend.close()
    again = global_backend(redis_cluster)
    await again.open("myspider")
    assert await again.load_replay("myspider", "https://a.example/") == b"requests"
    assert await again.load_replay("myspider", "https://b.example/") is None
    await again.close()


@async_test
async def test_a_ttl_is_refused_naming_the_setting(redis_cluster: RedisCluster) -> None:
    backend = global_backend(redis_cluster, SIMHASH_REDIS_TTL=3600)
    with pytest.raises(BackendError, match=r"^SIMHASH_REDIS_TTL = 3600 is not supported with SIMHASH_BACKEND='redis-global'"):
        await backend.open("myspider")


@async_test
async def test_persist_false_is_said_not_ignored(redis_cluster: RedisCluster, caplog: pytest.LogCaptureFixture) -> None:
    # SIMHASH_REDIS_PERSIST = False (the default) cannot delete a shared global index at close (no worker registry):
    # the worker says so at open, and the keys are still there after the close.
    backend = global_backend(redis_cluster, SIMHASH_REDIS_FLUSH_ON_START=True)
    with caplog.at_level(logging.INFO, logger="simhash_scrapy.backends.redis"):
        await backend.open("persistspider")
    await backend.check(PageRecord("https://example.com/a", 0x0123456789ABCDEF, "persistspider"))
    await backend.close()
    assert any("SIMHASH_REDIS_PERSIST is False, but SIMHASH_BACKEND='redis-global' keeps its keys" in r.getMessage()
               for r in caplog.records)
    again = global_backend(redis_cluster, SIMHASH_REDIS_PERSIST=True)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="simhash_scrapy.backends.redis"):
        await again.open("persistspider")
    assert not any("SIMHASH_REDIS_PERSIST" in r.getMessage() for r in caplog.records)
    await again.close()
    reader = global_backend(redis_cluster)
    assert await reader.attach("persistspider") == ["persistspider"]
    assert [m.url for m in await reader.members()] == ["https://example.com/a"]
    await reader.close()


@async_test
async def test_report_reads_every_scope_of_a_global_index(redis_cluster: RedisCluster, tmp_path: Any) -> None:
    # ``scrapy simhash report --redis`` with SIMHASH_BACKEND = "redis-global": every scope the registry names
    # (two here), near-duplicates in their canonical page's cluster.
    from command_helpers import assert_user_error, groups, read_jsonl, simhash

    rng = random.Random(9)
    a, b = rng.getrandbits(64), rng.getrandbits(64)
    records = [PageRecord("https://a.example/1", a, "pages"), PageRecord("https://a.example/2", flip(a, 2, rng), "pages"),
               PageRecord("https://b.example/1", b, "pages#00000000000000aa"),
               PageRecord("https://b.example/2", flip(b, 1, rng), "pages#00000000000000aa")]
    backend = global_backend(redis_cluster)
    await backend.open("pages")
    verdicts = [await backend.check(record) for record in records]
    await backend.close()
    assert [v.outcome for v in verdicts] == [Outcome.UNIQUE, Outcome.NEAR_DUPLICATE] * 2
    options = ("-s", "SIMHASH_BACKEND=redis-global", "-s", "SIMHASH_REDIS_CLUSTER=True")
    proc = simhash("report", "--redis", redis_cluster.url, "--key", "pages:simhash", *options, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = sorted(groups(read_jsonl(proc.stdout)))
    assert found == [["https://a.example/1", "https://a.example/2"], ["https://b.example/1", "https://b.example/2"]]
    assert_user_error(simhash("report", "--redis", redis_cluster.url, "--key", "nothing:here", *options, cwd=tmp_path),
                      1, "report", "no global index")


@async_test
async def test_scopes_checked_by_one_worker_give_the_in_process_verdicts(redis_cluster: RedisCluster) -> None:
    # Seq numbers are per scope: the directory cache must tell scopes apart (it once took scope A's seq 1 for
    # scope B's, so B's near-duplicates were kept as unique).
    rng = random.Random(13)
    backend = global_backend(redis_cluster)
    await backend.open("myspider")
    memory = MemoryBackend(SimhashConfig())
    bases = [rng.getrandbits(64) for _ in range(30)]
    records = [PageRecord(f"https://h.example/{s}/{n}/{v}", flip(bases[n], rng.randint(0, 2), rng), f"myspider#{s:016x}")
               for v in range(3) for n in range(10) for s in range(3)]
    for record in records:
        assert await backend.check(record) == memory.check_now(record, True), record
    assert sum(1 for m in await backend.members() if m.canonical_url) == 60
    await backend.close()


@pytest.mark.parametrize(("k", "blocks", "bits"), [(4, 0, 16), (4, 6, 8), (3, 0, 16), (2, 0, 4)])
def test_kept_bucket_names_are_the_formatted_ones(k: int, blocks: int, bits: int) -> None:
    from simhash_scrapy.backends.redis.cluster_layout import GlobalKeys

    keys = GlobalKeys("p:x", "s", k, blocks or k + 1, bits, 10)
    rng = random.Random(k * 100 + bits)
    for fp in [rng.getrandbits(64) for _ in range(3000)] * 2:  # (the second time: the names kept)
        assert keys.buckets(fp) == [keys.bucket(t, table, fp) for t, table in enumerate(keys.tables)]


@pytest.mark.parametrize(("k", "blocks", "bits"), [(4, 0, 16), (4, 6, 8), (3, 0, 16), (2, 0, 4), (6, 0, 12)])
@pytest.mark.parametrize("prefix", ["p:x", "é{b}\udc80"])
def test_bucket_names_of_many_are_the_formatted_ones(k: int, blocks: int, bits: int, prefix: str) -> None:
    # ``buckets_many`` (one C call when built, for the layouts whose bucket bits are each key's first span): the
    # formatted names, table after table, fingerprint after fingerprint; with and without the C helpers.
    from simhash_scrapy.backends.redis.cluster_layout import GlobalKeys
    from simhash_scrapy.core import _native

    keys = GlobalKeys(prefix, "s", k, blocks or k + 1, bits, 10)
    rng = random.Random(k * 10 + bits)
    fps = [rng.getrandbits(64) for _ in range(500)] + [0, 2**64 - 1]
    want = [keys.bucket(t, table, fp) for fp in fps for t, table in enumerate(keys.tables)]
    for switched in ([True, False] if _native.speedups is not None else [False]):
        with _native.switched(switched):
            assert keys.buckets_many(fps) == want
            assert keys.buckets_many([]) == []


def test_bucket_names_kept_are_bounded_in_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from simhash_scrapy.backends.redis import cluster_layout
    from simhash_scrapy.backends.redis.cluster_layout import GlobalKeys

    monkeypatch.setattr(GlobalKeys, "kept_names", cluster_layout._NAMES - 3)  # (other scopes kept the rest)
    keys = GlobalKeys("p:x", "s", 4, 5, 16, 10)
    fp = random.Random(1).getrandbits(64)
    assert keys.buckets(fp) == [keys.bucket(t, table, fp) for t, table in enumerate(keys.tables)]
    assert sum(map(len, keys._names)) == 3 and GlobalKeys.kept_names == cluster_layout._NAMES


@async_test
async def test_a_worker_keeps_a_bounded_number_of_scopes_and_the_same_verdicts(
    redis_cluster: RedisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Identity scopes (``plain#digest``): a worker keeps at most MAX_SCOPES scopes' state. Each scope is forgotten
    # before it is checked again (3 kept, 12 checked in turn): its near-duplicates of earlier pages are still found,
    # the verdicts are the in-process ones, and members()/index_size() still cover every scope.
    monkeypatch.setattr("simhash_scrapy.backends.redis.cluster_backend.MAX_SCOPES", 3)
    rng = random.Random(17)
    backend = global_backend(redis_cluster, SIMHASH_REDIS_GLOBAL_CACHE=50)
    await backend.open("myspider")
    memory = MemoryBackend(SimhashConfig())
    bases = {(s, n): rng.getrandbits(64) for s in range(12) for n in range(4)}
    rounds = [[PageRecord(f"https://h.example/{s}/{n}/{v}", flip(bases[s, n], rng.randint(0, 2), rng), f"myspider#{s:016x}")
               for s in range(12) for n in range(4)] for v in range(4)]
    near = 0
    for v, records in enumerate(rounds):
        if v == 2:  # all at once: scopes forgotten while their pages wait for their batch
            got = await asyncio.gather(*(backend.check(r) for r in records))
        else:
            got = [await backend.check(r) for r in records]
        assert got == [memory.check_now(r, True) for r in records]
        assert len(backend._scopes) <= 3
        near += sum(1 for verdict in got if verdict.outcome is Outcome.NEAR_DUPLICATE)
    assert near >= 3 * 12 * 4 * 9 // 10  # (most later pages are near their scope's first one)
    assert backend._numbered >= 4 * 12  # a scope checked again gets a new number in the cache's keys
    view = sorted(member_view(await backend.members()))
    assert view == sorted(member_view(await memory.members()))
    assert {m.scope for m in await backend.members()} == {f"myspider#{s:016x}" for s in range(12)}
    assert await backend.index_size() == await memory.index_size()
    await backend.close()


@async_test
async def test_a_slot_cached_before_another_worker_flushed_is_read_again(redis_cluster: RedisCluster) -> None:
    # Worker A caches where the records of seqs 1-10 are; worker B starts with SIMHASH_REDIS_FLUSH_ON_START and its
    # pages take those seqs again (one of them, an identity A had checked: its record, in the slot A cached for seq
    # 4, now says seq 1).  A page near B's page of seq 4 is its near-duplicate, named by its own URL: A's cached
    # slots of a gone record, or of another seq's, are read again from the directory, not believed.
    rng = random.Random(7)
    async with opened(redis_cluster, SIMHASH_REDIS_FLUSH_ON_START=True) as first:
        a_fps = [rng.getrandbits(64) for _ in range(10)]
        for n, fp in enumerate(a_fps):
            assert (await first.check(PageRecord(f"https://a.example/{n}", fp, "myspider"))).outcome is Outcome.UNIQUE
        for n, fp in enumerate(a_fps):  # near each: A reads (and caches) where seqs 1-10's records are
            verdict = await first.check(PageRecord(f"https://a.example/near-{n}", fp ^ 0b11, "myspider"))
            assert verdict.canonical_url == f"https://a.example/{n}"
        assert first.counts["cache_misses"] == 10
        async with opened(redis_cluster, SIMHASH_REDIS_FLUSH_ON_START=True) as second:
            await second.check(PageRecord("https://a.example/3", rng.getrandbits(64), "myspider"))  # seq 1 now
            b_fps = [rng.getrandbits(64) for _ in range(9)]
            for n, fp in enumerate(b_fps):  # seqs 2-10
                await second.check(PageRecord(f"https://b.example/{n}", fp, "myspider"))
        for n in (2, 0, 5):  # seq 4 (a record of seq 1 in A's cached slot), 2 (a gone record: a.example/1), 7
            verdict = await first.check(PageRecord(f"https://c.example/{n}", b_fps[n] ^ 0b101, "myspider"))
            assert (verdict.outcome, verdict.canonical_url) == (Outcome.NEAR_DUPLICATE, f"https://b.example/{n}")
