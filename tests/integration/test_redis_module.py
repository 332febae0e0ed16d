"""The ``simhash`` Redis module (``backends/redis/module``), loaded into a real redis-server.

Its two commands against what they replace, on the same inputs: ``SIMHASH.APPEND`` against the append script
(``cluster_backend.APPEND_LUA``: the same bytes and replies, in damaged buckets too), ``SIMHASH.NEAR`` against the
worker's scan (``cluster_layout.near_entries_many``, C and numpy).  Then the backend on a three-node cluster with the
module on every node: the in-process verdicts, buckets the bulk loader's, workers with and without the module on
one cluster, ``SIMHASH_REDIS_MODULE`` (``True`` where a node lacks it: an error naming it), and a node that comes
back without the module (that batch fails open, the next ones use the scripts).
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis_server import RedisCluster, RedisServer, module_args
from test_redis_backend import async_test
from test_redis_global import (
    check_groups_at_once, global_backend, member_view, opened, race_between_read_and_write, steps_1_to_3,
)

from simhash_scrapy.backends import PageRecord
from simhash_scrapy.backends.base import BackendError, Outcome
from simhash_scrapy.backends.memory import MemoryBackend
from simhash_scrapy.backends.redis.cluster_backend import (
    APPEND_LUA, APPEND_NEAR_VERSION, MODULE_COMMANDS, module_version,
)
from simhash_scrapy.backends.redis.node_link import ReplyError
from simhash_scrapy.backends.redis.cluster_layout import (
    BUCKET_HEAD, ENTRY, ROOM_MIN, ROOM_SHARE, entries_of, fold, mark_of, near_entries_many, pack_bucket,
)
from simhash_scrapy.config import SimhashConfig
from simhash_scrapy.core import _native
from crawl_helpers import flip  # noqa: E402  (tests/ is on sys.path)

pytest_plugins = ["conftest_redis"]


def command_stats(cluster: RedisCluster) -> dict[str, int]:
    """Calls per command over every node (``INFO commandstats``)."""
    import redis

    calls: dict[str, int] = {}
    for port in cluster.ports:
        client = redis.Redis(host="127.0.0.1", port=port)
        try:
            for name, stat in client.info("commandstats").items():
                calls[name] = calls.get(name, 0) + int(stat["calls"])
        finally:
            client.close()
    return calls


# ------------------------------------------------------------------------------ the commands
#: Buckets as a node may hold them: none, shorter than a header, a header counting past the end, full, with room.
DAMAGED = [b"", b"abc", (1000).to_bytes(4, "big") + b"mark" + bytes(12), (8).to_bytes(4, "big") + b"mark" + bytes(8),
           (16).to_bytes(4, "big") + b"mark" + bytes(16) + bytes(80)]


def damaged_pairs(client: Any, prefixes: str, times: int) -> Iterator[tuple[int, bytes, str, str]]:
    """Each bucket of ``DAMAGED``, ``times`` over, set under two names (``prefixes``' two letters and its number):
    its number, its bytes and the two names."""
    for n, start in enumerate(DAMAGED * times):
        first, second = f"{prefixes[0]}{n}", f"{prefixes[1]}{n}"
        if start:
            client.set(first, start)
            client.set(second, start)
        yield n, start, first, second


def test_append_writes_what_the_script_writes_byte_for_byte(module_redis_server: RedisServer) -> None:
    import redis

    client = module_redis_server.client()
    rng = random.Random(7)
    try:
        for n, start, by_module, by_script in damaged_pairs(client, "ms", 3):
            for _ in range(rng.choice([1, 5, 60])):
                entry, mark = rng.randbytes(ENTRY), rng.randbytes(4)
                got = client.execute_command("SIMHASH.APPEND", by_module, entry, mark, ROOM_SHARE, ROOM_MIN)
                want = client.eval(APPEND_LUA, 1, by_script, entry, mark)
                assert got == want
                assert client.get(by_module) == client.get(by_script), (n, start)
        # a header that counts more than a string may hold: an error, the bucket left as it was (the script would
        # fail too, after making a string of 268 MB)
        client.set("m-huge", b"\xff\xff\xff\x00z")
        with pytest.raises(redis.ResponseError, match="512 MB"):
            client.execute_command("SIMHASH.APPEND", "m-huge", bytes(ENTRY), b"mark", ROOM_SHARE, ROOM_MIN)
        assert client.get("m-huge") == b"\xff\xff\xff\x00z"
        # from nothing, only appends: the bulk loader's bucket (entries, then the room the rule leaves)
        entries = b"".join(rng.randbytes(ENTRY) for _ in range(500))
        for at in range(0, len(entries), ENTRY):
            client.execute_command("SIMHASH.APPEND", "fresh", entries[at : at + ENTRY], b"MARK", ROOM_SHARE, ROOM_MIN)
        assert client.get("fresh") == pack_bucket(entries, b"MARK")
    finally:
        client.close()


@pytest.mark.parametrize("pure", [False, True])
def test_near_finds_what_the_worker_finds_in_the_bucket(module_redis_server: RedisServer, pure: bool) -> None:
    client = module_redis_server.client()
    rng = random.Random(11)
    try:
        for n in range(40):
            page = rng.getrandbits(64)
            entries = b""
            for seq in range(rng.choice([0, 1, 30, 400])):  # some within a few bits of the page's fold, most far
                near = rng.random() < 0.3
                entry_fold = fold(flip(page, rng.randint(0, 6), rng)) if near else rng.getrandbits(32)
                entries += entry_fold.to_bytes(4, "big") + (seq + 1).to_bytes(4, "big")
            data = pack_bucket(entries, rng.randbytes(4))
            buckets = [data, *DAMAGED[1:]]
            for m, bucket in enumerate(buckets):
                client.set(f"b{n}.{m}", bucket)
            for k in (0, 3, 4, 7, 32):
                with _native.switched(not pure):
                    want = near_entries_many(buckets, [page] * len(buckets), k)
                for m, bucket in enumerate(buckets):
                    length, *seqs = client.execute_command("SIMHASH.NEAR", f"b{n}.{m}", fold(page), k)
                    assert seqs == want[m], (n, m, k)
                    assert length == (int.from_bytes(bucket[:4], "big") if len(bucket) >= 4 else 0)
        assert client.execute_command("SIMHASH.NEAR", "no-such-bucket", 5, 3) == [0]
    finally:
        client.close()


def test_append_with_expected_replies_near_when_the_bucket_changed(module_redis_server: RedisServer) -> None:
    # ``SIMHASH.APPEND ... k expected``: the same writes as without; the bytes of its entries when they are
    # ``expected``, else SIMHASH.NEAR's reply for the entry's fold after the append.
    client = module_redis_server.client()
    rng = random.Random(13)
    try:
        for n, _, with_near, without in damaged_pairs(client, "wo", 4):
            page = rng.getrandbits(64)
            for _ in range(rng.choice([1, 5, 60])):
                near = rng.random() < 0.4
                entry_fold = fold(flip(page, rng.randint(0, 6), rng)) if near else rng.getrandbits(32)
                entry, mark = entry_fold.to_bytes(4, "big") + rng.randbytes(4), rng.randbytes(4)
                now = client.execute_command("SIMHASH.APPEND", without, entry, mark, ROOM_SHARE, ROOM_MIN)
                k = rng.choice([0, 3, 4, 32])
                expected = now if rng.random() < 0.5 else now + rng.choice([-ENTRY, ENTRY, 1])
                got = client.execute_command("SIMHASH.APPEND", with_near, entry, mark, ROOM_SHARE, ROOM_MIN, k,
                                             max(expected, 0))
                assert client.get(with_near) == client.get(without), n
                if expected == now:
                    assert got == now
                else:
                    assert got == client.execute_command("SIMHASH.NEAR", with_near, entry_fold, k)
                    assert got[0] == now and len(got) >= 2  # (the entry itself is within any k of its fold)
    finally:
        client.close()


def test_an_append_with_expected_is_logged_as_the_write_alone(tmp_path: Path) -> None:
    # Replicas and the AOF get SIMHASH.APPEND's five arguments (the write), never ``k expected``: a replica or a
    # restart with a version-1 module takes them, and a restart rebuilds the same buckets.
    server = RedisServer(tmp_path / "redis", appendonly=True, extra_args=module_args()).start()
    rng = random.Random(17)
    try:
        client = server.client()
        for n in range(200):
            entry = rng.randbytes(ENTRY)
            client.execute_command("SIMHASH.APPEND", f"b{n % 7}", entry, b"mark", ROOM_SHARE, ROOM_MIN, 4,
                                   rng.choice([0, 8, 800]))  # (mostly not the length: a near reply)
        before = {f"b{n}": client.get(f"b{n}") for n in range(7)}
        client.close()
        server.stop(kill=False)
        logged = b"".join(path.read_bytes() for path in sorted(tmp_path.glob("redis/**/*.aof")))
        assert logged.count(b"simhash.append") == 200
        assert logged.count(b"*6\r\n$14\r\nsimhash.append") == 200  # (the command and its five arguments)
        server.start()
        client = server.client()
        assert {f"b{n}": client.get(f"b{n}") for n in range(7)} == before
        client.close()
    finally:
        server.stop()


def test_module_version_is_read_from_module_list(module_redis_server: RedisServer) -> None:
    client = module_redis_server.client()
    try:
        modules = client.execute_command("MODULE LIST")
    finally:
        client.close()
    # redis-py parses the reply into dicts; the worker's own reader gives the flat lists Redis sends
    flat = [[field for pair in module.items() for field in pair] for module in modules]
    assert module_version(flat, b"simhash") == APPEND_NEAR_VERSION
    assert module_version(flat, b"other") == 0
    denied = ReplyError("NOPERM User has no permissions to run the 'module|list' command")
    assert module_version(denied, b"simhash") == 0 and module_version([b"junk"], b"simhash") == 0


def test_bad_arguments_are_error_replies_not_writes(module_redis_server: RedisServer) -> None:
    import redis

    client = module_redis_server.client()
    try:
        client.hset("a-hash", "f", "v")
        bad = [
            ("SIMHASH.NEAR", "b"),
            ("SIMHASH.NEAR", "b", -1, 3),
            ("SIMHASH.NEAR", "b", 2**32, 3),
            ("SIMHASH.NEAR", "b", "x", 3),
            ("SIMHASH.NEAR", "b", 5, 33),
            ("SIMHASH.NEAR", "a-hash", 5, 3),
            ("SIMHASH.APPEND", "b", b"e" * 8, b"mark", ROOM_SHARE),
            ("SIMHASH.APPEND", "b", b"e" * 8, b"mar", ROOM_SHARE, ROOM_MIN),
            ("SIMHASH.APPEND", "b", b"e" * 8, b"mark", 0, ROOM_MIN),
            ("SIMHASH.APPEND", "b", b"e" * 8, b"mark", ROOM_SHARE, -1),
            ("SIMHASH.APPEND", "a-hash", b"e" * 8, b"mark", ROOM_SHARE, ROOM_MIN),
            ("SIMHASH.APPEND", "b", b"e" * 8, b"mark", ROOM_SHARE, ROOM_MIN, 3),
            ("SIMHASH.APPEND", "b", b"e" * 8, b"mark", ROOM_SHARE, ROOM_MIN, 33, 8),
            ("SIMHASH.APPEND", "b", b"e" * 8, b"mark", ROOM_SHARE, ROOM_MIN, 3, -8),
            ("SIMHASH.APPEND", "b", b"e" * 8, b"mark", ROOM_SHARE, ROOM_MIN, "x", 8),
            ("SIMHASH.APPEND", "b", b"eee", b"mark", ROOM_SHARE, ROOM_MIN, 3, 8),
        ]
        for args in bad:
            with pytest.raises(redis.ResponseError) as error:
                client.execute_command(*args)
            assert "wrong number" in str(error.value) or "simhash" in str(error.value) or "WRONGTYPE" in str(
                error.value) or "wrong kind" in str(error.value), args
        assert client.exists("b") == 0 and client.hgetall("a-hash") == {b"f": b"v"}
    finally:
        client.close()


# ------------------------------------------------------------------------------ the backend with the module
@pytest.mark.parametrize(("k", "blocks", "bits"), [(3, 0, 16), (4, 6, 8)])
@async_test
async def test_the_module_gives_the_in_process_verdicts(module_redis_cluster: RedisCluster, k: int, blocks: int,
                                                         bits: int) -> None:
    config = SimhashConfig(max_distance=k)
    memory = MemoryBackend(config)
    async with opened(module_redis_cluster, config, SIMHASH_REDIS_TABLE_BLOCKS=blocks,
                      SIMHASH_REDIS_BUCKET_BITS=bits) as backend:
        assert backend.module is True
        sequence = steps_1_to_3(900, 51 + k, k)
        for start in range(0, len(sequence), 150):  # one at a time, then in batches
            chunk = sequence[start : start + 150]
            if start % 300:
                got = await asyncio.gather(*(backend.check(r, index) for r, index in chunk))
            else:
                got = [await backend.check(r, index) for r, index in chunk]
            assert got == [memory.check_now(r, index) for r, index in chunk]
        assert member_view(await backend.members()) == member_view(await memory.members())
        assert await backend.index_size() == await memory.index_size()
    calls = command_stats(module_redis_cluster)
    assert calls.get("cmdstat_simhash.near", 0) > 900 and calls.get("cmdstat_simhash.append", 0) > 300
    # no bucket read whole: the only GETs are the removal script's (a changed page leaves the tables)
    assert calls.get("cmdstat_get", 0) <= calls.get("cmdstat_evalsha", 0)


@pytest.mark.parametrize("append_near", [True, False])
@async_test
async def test_races_are_looked_at_again_in_the_append_or_after_it(
    module_redis_cluster: RedisCluster, monkeypatch: pytest.MonkeyPatch, append_near: bool
) -> None:
    # The race test of the scripts' backend, with the module: the same races counted; with ``SIMHASH.APPEND``'s look
    # again (a module of APPEND_NEAR_VERSION) no SIMHASH.NEAR but each check's reads, without it one more for each
    # bucket that changed.
    async with opened(module_redis_cluster) as probe:
        assert probe.module is True and probe.append_near is True  # (every node's module is this one)
        tables = len(probe.keys("myspider").buckets(0))
    checks = await race_between_read_and_write(module_redis_cluster, monkeypatch, append_near)
    near = command_stats(module_redis_cluster).get("cmdstat_simhash.near", 0)
    if append_near:
        assert near == checks * tables
    else:
        assert near > checks * tables


@async_test
async def test_workers_with_and_without_the_module_share_a_cluster(module_redis_cluster: RedisCluster) -> None:
    # Two workers append with the module, one with the script, at once: the buckets are what the bulk loader makes
    # of their entries, every group of near-duplicates is kept, and no page is a near-duplicate of another group.
    import redis

    workers = [global_backend(module_redis_cluster, SIMHASH_REDIS_MODULE=module) for module in ("auto", True, False)]
    for worker in workers:
        await worker.open("myspider")
    assert [worker.module for worker in workers] == [True, True, False]
    _, kept = await check_groups_at_once(workers, random.Random(29))
    assert await workers[0].index_size() == sum(kept.values())
    tables = 0
    for port in module_redis_cluster.ports:
        client = redis.Redis(host="127.0.0.1", port=port)
        for key in client.scan_iter(match="*.t*"):
            data = client.get(key)
            assert data == pack_bucket(entries_of(data).tobytes(), mark_of(data)), key
            tables += len(entries_of(data))
        client.close()
    assert tables == sum(kept.values()) * len(workers[0].keys("spider").buckets(0))  # each canonical page, each table
    for worker in workers:
        await worker.close()


@async_test
async def test_module_setting_names_itself_where_a_node_lacks_it(redis_cluster: RedisCluster) -> None:
    backend = global_backend(redis_cluster, SIMHASH_REDIS_MODULE=True)
    with pytest.raises(BackendError) as error:
        await backend.open("myspider")
    first_line = str(error.value).splitlines()[0]
    assert "SIMHASH_REDIS_MODULE" in first_line and "--loadmodule" in first_line
    await backend.close()
    async with opened(redis_cluster) as auto:  # "auto": the scripts, the same verdicts
        assert auto.module is False
        memory = MemoryBackend(SimhashConfig())
        for record, index in steps_1_to_3(200, 5, 3):
            assert await auto.check(record, index) == memory.check_now(record, index)
    assert command_stats(redis_cluster).get("cmdstat_simhash.near", 0) == 0


@async_test
async def test_a_node_back_without_the_module_fails_one_batch_open_then_scripts(
    module_redis_cluster: RedisCluster, caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(3)
    async with opened(module_redis_cluster) as backend:
        assert backend.module is True
        for n in range(50):
            await backend.check(PageRecord(f"https://a.example/{n}", rng.getrandbits(64), "myspider"))
        module_redis_cluster.extra_args = ()
        await asyncio.get_running_loop().run_in_executor(None, module_redis_cluster.restart_node, 0)
        with caplog.at_level(logging.WARNING, logger="simhash_scrapy.backends.redis"):
            outcomes = []
            for n in range(50, 120):
                record = PageRecord(f"https://a.example/{n}", rng.getrandbits(64), "myspider")
                outcomes.append((await backend.check(record)).outcome)
        assert backend.module is False and backend.append_near is False
        assert any("no simhash module any more" in r.getMessage() for r in caplog.records)
        # never dropped: the batches that met the node unchecked, then checked with the scripts
        assert set(outcomes) <= {Outcome.UNCHECKED, Outcome.UNIQUE}
        assert Outcome.UNCHECKED in outcomes and outcomes[-1] is Outcome.UNIQUE
        assert backend.counts["unreachable"] == outcomes.count(Outcome.UNCHECKED)
        page = rng.getrandbits(64)  # a near-duplicate is found again, by the scripts
        await backend.check(PageRecord("https://b.example/1", page, "myspider"))
        again = await backend.check(PageRecord("https://b.example/2", flip(page, 2, rng), "myspider"))
        assert again.outcome is Outcome.NEAR_DUPLICATE


@async_test
async def test_an_older_module_met_later_turns_the_look_again_in_the_append_off(
    module_redis_cluster: RedisCluster, caplog: pytest.LogCaptureFixture
) -> None:
    # A node restarted with a module older than APPEND_NEAR_VERSION refuses SIMHASH.APPEND's two more arguments: that
    # error (the node's own words, got here from this module with one argument too many) turns the worker's use of
    # them off, said once; the module's commands stay on.
    import redis

    client = redis.RedisCluster(host="127.0.0.1", port=module_redis_cluster.ports[0])
    try:
        with pytest.raises(redis.ResponseError) as refused:
            client.execute_command("SIMHASH.APPEND", "{x}", b"e" * 8, b"mark", ROOM_SHARE, ROOM_MIN, 3)
    finally:
        client.close()
    assert "wrong number of arguments" in str(refused.value)
    rng = random.Random(5)
    async with opened(module_redis_cluster) as backend:
        assert backend.append_near is True
        with caplog.at_level(logging.WARNING, logger="simhash_scrapy.backends.redis"):
            backend._module_lost(ReplyError(str(refused.value)))
            backend._module_lost(ReplyError(str(refused.value)))
        assert backend.module is True and backend.append_near is False
        assert sum("older simhash module" in r.getMessage() for r in caplog.records) == 1
        page = rng.getrandbits(64)  # checks go on, near-duplicates found
        await backend.check(PageRecord("https://b.example/1", page, "myspider"))
        again = await backend.check(PageRecord("https://b.example/2", flip(page, 2, rng), "myspider"))
        assert again.outcome is Outcome.NEAR_DUPLICATE


def test_module_commands_are_the_ones_the_module_registers() -> None:
    from pathlib import Path

    import simhash_scrapy.backends.redis.module as module

    source = (Path(module.__file__).parent / "simhash_module.c").read_text()
    for name in MODULE_COMMANDS:
        assert f'"{name.lower()}"' in source
    header = (Path(module.__file__).parents[3] / "core" / "near_scan.h").read_text()
    defined = dict(re.findall(r"#define (NEAR_BUCKET_HEAD|NEAR_ENTRY) (\d+)", header))
    assert defined == {"NEAR_BUCKET_HEAD": str(BUCKET_HEAD), "NEAR_ENTRY": str(ENTRY)}  # the C scan's layout is ours
