"""The Redis backend against a real redis-server (Debian's ``redis-server``).

Without redis-server these tests skip (saying how to install it); with
``CI=true`` they fail instead.  The Redis Cluster tests are in
``test_redis_cluster.py``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import re
import signal
import subprocess
import time
import zlib
from collections import Counter
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from conftest import RecordingSpider, run_crawl
from loop_helpers import in_thread
from redis_server import RedisServer, free_port
from scrapy.utils.test import get_crawler
from twisted.internet.defer import Deferred

from simhash_scrapy.backends import BackendError, PageRecord, create_backend
from simhash_scrapy.backends.base import Outcome, Verdict
from simhash_scrapy.backends.memory import MemoryBackend
from simhash_scrapy.backends.redis import RedisBackend, RedisSettings, layout_string, read_members
from simhash_scrapy.backends.redis.layout import (
    ENTRY,
    ZDICT,
    Codec,
    Keys,
    bucket_bits_for,
    identity_slot,
    pack_record,
    parse_record,
)
from simhash_scrapy.backends.redis.replica import Replica
from simhash_scrapy.config import SimhashConfig
from simhash_scrapy.core.report.report import build_clusters

from crawl_helpers import (  # noqa: E402  (tests/ is on sys.path)
    PROJECT,
    crawl_command,
    crawl_env,
    flip,
    make_site,
    page_sequence,
    parse_stats,
    reached,
    read_report,
)

pytest_plugins = ["conftest_redis"]


def async_test(func: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., Deferred]:
    """Run an asyncio test coroutine on the reactor's event loop (pytest-twisted waits for the Deferred)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Deferred:
        return Deferred.fromFuture(asyncio.ensure_future(func(*args, **kwargs)))

    return wrapper


class Stats:
    def __init__(self) -> None:
        self.values: Counter[str] = Counter()

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self.values[key] += count

    def set_value(self, key: str, value: Any) -> None:
        self.values[key] = value


def make_backend(server: Any, config: SimhashConfig | None = None, **settings: Any) -> RedisBackend:
    values: dict[str, Any] = {"SIMHASH_REDIS_URL": server.url} if server is not None else {}
    values.setdefault("SIMHASH_REDIS_CAPACITY", 5000)
    values.update(settings)
    return RedisBackend(config or SimhashConfig(), RedisSettings(values), Stats())


def recrawl_sequence(seed: int, count: int, k: int = 4, scopes: tuple[str, ...] = ("spider",)) -> list[tuple[PageRecord, bool]]:
    """New pages (planted near-duplicates at 0..k+2, short pages with shared digests, pages with one-edit
    keys shared with others at any distance, three kinds of identity) mixed with re-checks of earlier
    identities (small and large changes, kind switches, new keys)."""
    rng = random.Random(seed)
    key_rng = random.Random(seed + 1000)  # its own stream: the other fields are as without keys
    text_rng = random.Random(seed + 2000)  # content digests and validators: their own stream too

    def content(earlier: PageRecord | None) -> dict[str, Any]:
        """A digest (the same text as ``earlier`` 60% of the time, none 10%) and validators, sometimes."""
        roll = text_rng.random()
        digest = None if roll < 0.1 else earlier.digest if earlier is not None and roll < 0.6 else text_rng.getrandbits(64)
        etag = text_rng.choice([None, f'"{text_rng.getrandbits(32):x}"', 'W/"é"'])
        return {"digest": digest, "etag": etag, "last_modified": text_rng.choice([None, "Mon, 02 Nov 2026 10:00:00 GMT"])}

    def some_keys() -> tuple[int, ...]:
        # A fifth of the simhash pages: 2..40 keys, one or two from a small shared pool (one token apart).
        if key_rng.random() >= 0.2:
            return ()
        shared = {key_rng.randrange(40) for _ in range(key_rng.choice([1, 2]))}
        return tuple(sorted(shared | {key_rng.getrandbits(64) for _ in range(key_rng.randint(1, 39))}))

    out: list[tuple[PageRecord, bool]] = []
    fps: list[int] = []
    for i in range(count):
        seen = 1_763_900_000 + i * 0.5
        if out and rng.random() < 0.35:
            earlier, _ = rng.choice(out)
            if rng.random() < 0.1:
                fp, exact = rng.randrange(8), not earlier.exact  # kind switch
            elif earlier.exact:
                fp, exact = (earlier.fingerprint if rng.random() < 0.6 else rng.randrange(8)), True
            else:
                fp, exact = flip(earlier.fingerprint, rng.choice([0, 1, k, k + 1, 9]), rng), False
            record = PageRecord(earlier.url, fp, earlier.scope, earlier.referer, rng.choice([None, 1]), None,
                                earlier.identity, exact, seen, () if exact else some_keys(), **content(earlier))
        else:
            exact = rng.random() < 0.1
            if exact:
                fp = rng.randrange(8)
            else:
                fp = flip(rng.choice(fps), rng.randint(0, k + 2), rng) if fps and rng.random() < 0.5 else rng.getrandbits(64)
                fps.append(fp)
            url = f"https://example.com/{i}"
            identity = rng.choice(["", f"{rng.getrandbits(160):040x}", f"key-{i}"])
            record = PageRecord(url, fp, rng.choice(scopes), rng.choice([None, "https://example.com/"]),
                                rng.choice([None, 0, 3]), rng.choice([None, f"text of page {i}"]), identity, exact, seen,
                                () if exact else some_keys(), **content(None))
        out.append((record, rng.random() > 0.05))
    return out


# ------------------------------------------------------------- no server needed
def test_missing_redis_server_skips_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    import redis_server as module

    monkeypatch.setattr(module.shutil, "which", lambda name: None)
    monkeypatch.setattr(module.os.path, "exists", lambda path: False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install redis-server"):
        module.require_redis_server()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="apt-get install redis-server"):
        module.require_redis_server()


def test_settings_follow_scrapy_redis() -> None:
    s = RedisSettings({"REDIS_HOST": "redis.internal", "REDIS_PORT": "6380"})
    assert (s.url, s.host, s.port) == (None, "redis.internal", 6380)
    assert not s.persist and not s.flush_on_start and s.fail_open and s.ttl == 0
    assert (s.heartbeat, s.capacity) == (1.0, 10_000_000)
    assert s.key("myspider") == "myspider:simhash"
    assert RedisSettings({"REDIS_URL": "redis://a:1/2", "REDIS_HOST": "ignored"}).url == "redis://a:1/2"
    assert RedisSettings({"SIMHASH_REDIS_URL": "redis://b:2/0", "REDIS_URL": "redis://a:1/2"}).url == "redis://b:2/0"
    s = RedisSettings({"SCHEDULER_PERSIST": True, "SCHEDULER_FLUSH_ON_START": "1"})
    assert s.persist and s.flush_on_start
    assert not RedisSettings({"SCHEDULER_PERSIST": True, "SIMHASH_REDIS_PERSIST": False}).persist
    assert RedisSettings({"SIMHASH_REDIS_KEY": "{%(spider)s}:dedup"}).key("x") == "{x}:dedup"
    assert RedisSettings({"SIMHASH_REDIS_URL": "redis://u:secret@h:1/0"}).describe() == "redis://u:***@h:1/0"
    s = RedisSettings({"SIMHASH_REDIS_HEARTBEAT": "0.25", "SIMHASH_REDIS_CAPACITY": "1000"})
    assert (s.heartbeat, s.capacity) == (0.25, 1000)
    for name, value in [
        ("SIMHASH_REDIS_TTL", "-1"), ("SIMHASH_REDIS_TTL", "soon"), ("SIMHASH_REDIS_FAIL_OPEN", "maybe"),
        ("REDIS_PORT", "http"), ("REDIS_PARAMS", "[1]"), ("SIMHASH_REDIS_KEY", "%(nope)s"),
        ("SIMHASH_REDIS_HEARTBEAT", "0"), ("SIMHASH_REDIS_HEARTBEAT", "61"), ("SIMHASH_REDIS_HEARTBEAT", "x"),
        ("SIMHASH_REDIS_CAPACITY", "0"), ("SIMHASH_REDIS_CAPACITY", "many"),
    ]:
        with pytest.raises(ValueError, match=name):
            RedisSettings({name: value})


def test_scrapy_redis_params_do_not_warn() -> None:
    # scrapy-redis' defaults include retry_on_timeout, which redis-py 6+ deprecates (a warning = failure here).
    from simhash_scrapy.backends.redis.connection import get_client

    params = {"socket_timeout": 30, "socket_connect_timeout": 30, "retry_on_timeout": True, "encoding": "utf-8"}
    client = get_client(RedisSettings({"REDIS_PARAMS": params, "REDIS_URL": "redis://127.0.0.1:1"}))
    assert client.get_connection_kwargs()["socket_timeout"] == 30


def test_check_script_reads_a_payloads_digest_as_the_codec_does(redis_server: RedisServer) -> None:
    # check.lua's own ``digest_of`` (cut out of the script, run by a real redis-server) against ``Codec.digest_of``:
    # the same digest for whole payloads, and none for a head cut short (unchanged, not edited, on both paths).
    import re

    from simhash_scrapy.backends.redis import layout

    script = (Path(layout.__file__).parent / "check.lua").read_text()
    function = re.search(r"^local function digest_of\(payload\)\n.*?^end\n", script, re.S | re.M)
    assert function is not None
    probe = (f"{layout.lua_constants()}\nlocal band = bit.band\n{function.group(0)}"
             "local d = digest_of(ARGV[1])\nif d then return d end\nreturn false")
    rng = random.Random(9)
    codec = Codec()
    client = redis_server.client()
    try:
        for _ in range(60):
            kept = rng.choice([b"", rng.randbytes(12)])
            digest = rng.choice([None, rng.getrandbits(64)])
            payload = codec.encode("https://e.example/", "", kept, None, None, "text", digest)
            for cut in (len(payload), 1 + len(kept) + 8, 1 + len(kept) + 5, 1 + len(kept), 1, 0):
                head = payload[:cut]
                want = Codec.digest_of(head)
                got = client.eval(probe, 0, head)
                assert (int.from_bytes(got, "big") if got is not None else None) == want, (cut, digest)
    finally:
        client.close()


def test_backend_selection() -> None:
    crawler = get_crawler(settings_dict={"SIMHASH_REDIS_URL": "redis://127.0.0.1:1"})
    assert type(create_backend(crawler, SimhashConfig(backend="redis"))) is RedisBackend


def test_identities_and_payloads_round_trip() -> None:
    rng = random.Random(5)
    codec = Codec()
    for n in range(200):
        if n == 100:
            codec.zdict = codec.proposed_dict()
            assert codec.zdict
        identity = rng.choice(["", f"{rng.getrandbits(160):040x}", "key-\u2603", "ABCDEF" * 7])
        url = f"https://e.example/{n}?q=\ud800"
        bucket, field, kept = identity_slot("s", identity or url, 12)
        assert 0 <= bucket < 4096 and len(field) == 8
        digest = rng.choice([None, rng.getrandbits(64)])
        payload = codec.encode(url, identity, kept, "https://e.example/", n % 3 or None, rng.choice([None, "text \udcff"]),
                               digest)
        # the digest is read from the payload's head, as check.lua reads it: nothing decompressed, whatever follows
        assert Codec.digest_of(payload) == codec.decode_all(payload, field)[5] == digest
        assert Codec.digest_of(payload[: 1 + len(kept) + 8] + b"damaged") == digest
        # each payload compressed with a copy of one primed compressor: the bytes of a new one
        packer = zlib.compressobj(6, zlib.DEFLATED, -12, 1, zlib.Z_DEFAULT_STRATEGY, codec.zdict or ZDICT)
        head = 1 + len(kept) + (digest is not None) * 8
        raw = zlib.decompressobj(-12, zdict=codec.zdict or ZDICT).decompress(payload[head:])
        assert payload[head:] == packer.compress(raw) + packer.flush()
        decoded = codec.decode(payload, field)
        assert decoded[:4] == (url, identity, "https://e.example/", n % 3 or None)
    assert Codec.digest_of(b"") is None
    assert Codec.digest_of(b"\x04" + b"\0" * 7) is None  # (a head cut short: no digest to read)
    # A request fingerprint costs 12 bytes, not its 40 characters.
    assert len(identity_slot("s", "ab" * 20, 12)[2]) == 12
    record = pack_record(7, 2**64 - 1, True, "changed", 0, 3, None, 5, 1.5, 2.5, b"xyz")
    parsed = parse_record(record)
    assert (parsed.seq, parsed.fingerprint, parsed.exact, parsed.outcome, parsed.own, parsed.previous) == (
        7, 2**64 - 1, True, "changed", 3, 5)
    assert (parsed.first_seen, parsed.last_seen, parsed.payload) == (1.5, 2.5, b"xyz")


def test_payload_fields_reach_every_reader_and_the_scope_keys_share_a_slot() -> None:
    """Layout 4's payload [url, identity, referer, depth, text, etag, last_modified, rel=canonical URL]: each
    field comes back where the backend, the export (``record_member``) and the verdict read it; a payload
    written without the last fields reads them as None.  drop.lua deletes meta, log and positions in one
    call: on a Redis Cluster they must share a hash tag, with shards too."""
    from simhash_scrapy.backends.redis import export
    from simhash_scrapy.backends.redis.protocol import verdict

    codec = Codec()
    identity = "ab" * 20
    _, field, kept = identity_slot("s", identity, 12)
    payload = codec.encode("https://e/1", identity, kept, "https://e/", 2, "text", 7, '"etag"', "Tue, 1 Jan 2030",
                           "https://e/canon")
    assert codec.decode_all(payload, field) == (
        "https://e/1", identity, "https://e/", 2, "text", 7, '"etag"', "Tue, 1 Jan 2030", "https://e/canon")
    member = export.record_member(codec, parse_record(pack_record(1, 5, False, "unique", 0, 0, None, None, 1.0, 2.0,
                                                                  payload)), field, "s", None)
    assert (member.etag, member.last_modified, member.canonical_link, member.referer, member.depth) == (
        '"etag"', "Tue, 1 Jan 2030", "https://e/canon", "https://e/", 2)
    found = verdict(codec, 3, 1, 1, (5).to_bytes(8, "big"), field, payload, None)
    assert (found.canonical_url, found.canonical_identity, found.canonical_link) == (
        "https://e/1", identity, "https://e/canon")
    old = codec.encode("https://e/2", "", b"", None, None, None, None, '"e"')  # no Last-Modified, no link
    assert codec.decode_all(old, field)[5:] == (None, '"e"', None, None)
    for prefix, cluster, shards in (("simhash", True, 1), ("simhash", True, 4), ("{app}:simhash", True, 4)):
        sk = Keys(prefix, cluster=cluster, shards=shards).scope("example.com")
        tags = {re.search(r"\{([^}]*)\}", key).group(1) for key in (sk.meta, sk.log, sk.positions)}  # type: ignore[union-attr]
        assert len(tags) == 1, (prefix, shards, sk)



def test_replica_finds_what_a_scan_finds() -> None:
    rng = random.Random(9)
    replica = Replica(4)
    entries, live = [], {}
    for pos in range(3000):
        if live and rng.random() < 0.1:
            gone = rng.choice(sorted(live))
            del live[gone]
            entries.append(b"\2" + gone.to_bytes(4, "big") + bytes(ENTRY - 5))
            continue
        fp = flip(rng.choice(list(live.values())), rng.randint(0, 6), rng) if live and rng.random() < 0.5 else rng.getrandbits(64)
        live[pos] = fp
        entries.append(b"\1" + fp.to_bytes(8, "big") + pos.to_bytes(4, "big") + bytes(11))
    data = b"".join(entries)
    for start in range(0, len(entries), 700):  # applied in pieces, overlapping
        replica.apply(data[max(0, start - 5) * ENTRY : (start + 700) * ENTRY], max(0, start - 5))
    assert replica.sync == len(entries)
    for _ in range(300):
        fp = flip(rng.choice(list(live.values())), rng.randint(0, 6), rng)
        found = replica.candidates(fp, False)
        got = sorted((int.from_bytes(found[i : i + 4], "big"), found[i + 8]) for i in range(0, len(found), 9))
        assert got == sorted((p, (f ^ fp).bit_count()) for p, f in live.items() if (f ^ fp).bit_count() <= 4)


def test_replica_keeps_what_a_chunk_removes_and_adds_again() -> None:
    # One chunk of the log removes a page's add entry and adds an entry holding the same one-edit key
    # (a short page re-crawled with a word changed) or the same exact digest: the new owner keeps it.
    def add(op: int, fp: int, seq: int) -> bytes:
        return bytes([op]) + fp.to_bytes(8, "big") + seq.to_bytes(4, "big") + bytes(11)

    def key(k: int, seq: int, owner: int) -> bytes:
        return b"\4" + k.to_bytes(8, "big") + seq.to_bytes(4, "big") + owner.to_bytes(4, "big") + bytes(7)

    def remove(pos: int) -> bytes:
        return b"\2" + pos.to_bytes(4, "big") + bytes(ENTRY - 5)

    replica = Replica(4)
    replica.apply(add(1, 0xAAAA, 0) + key(77, 0, 0) + add(3, 5, 1), 0)
    replica.apply(remove(0) + add(1, 0xFFFF_0000, 0) + key(77, 0, 4) + remove(2) + add(3, 5, 1), 3)
    assert replica.edits.owners([77]) == {4}
    assert replica.exact.get(5) == 7
    found = replica.edit_candidates((77,))
    assert int.from_bytes(found[:4], "big") == 4


@async_test
async def test_unreachable_redis_stops_at_start() -> None:
    backend = make_backend(None, SIMHASH_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(BackendError, match=r"Cannot reach Redis at redis://127\.0\.0\.1:\d+/0 ") as info:
        await backend.open("spider")
    assert "start Redis, or fix SIMHASH_REDIS_URL / REDIS_URL" in str(info.value)


# ------------------------------------------------------------------ real Redis
async def same_as_memory(backends: list[RedisBackend], config: SimhashConfig, pages: list[tuple[PageRecord, bool]],
                         concurrent: bool = False) -> None:
    memory = MemoryBackend(config)
    expected = [memory.check_now(record, index) for record, index in pages]
    if concurrent:  # queued together: one script call checks them in order
        got = await asyncio.gather(*(backends[0].check(record, index) for record, index in pages))
    else:
        got = [await backends[i % len(backends)].check(record, index) for i, (record, index) in enumerate(pages)]
    for (record, index), want, have in zip(pages, expected, got):
        assert have == want, (record, index)
    if any(record.edit_keys for record, _ in pages):  # the rule was exercised: pages found by keys alone
        assert sum(verdict.one_edit for verdict in expected) >= 5
    if any(record.digest is not None for record, _ in pages):
        outcomes = Counter(verdict.outcome.value for verdict in expected)
        assert outcomes["edited"] >= 5 and outcomes["unchanged"] >= 5, outcomes  # digests told them apart
    assert await backends[-1].members() == await memory.members()
    assert await backends[0].index_size() == await memory.index_size()
    for backend in backends:
        assert backend.stats.values["simhash/backend_errors"] == 0


@pytest.mark.slow  # long sequences against a real Redis
@pytest.mark.parametrize(("k", "blocks", "seed"), [(4, None, 1), (3, None, 2), (3, 6, 3), (4, 5, 4), (0, None, 5), (6, 8, 6)])
@async_test
async def test_same_decisions_as_the_in_process_backend(redis_server: RedisServer, k: int, blocks: int | None, seed: int) -> None:
    config = SimhashConfig(max_distance=k, blocks=blocks)
    redis = make_backend(redis_server, config)
    await redis.open("spider")
    await same_as_memory([redis], config, recrawl_sequence(seed, 1200, k, scopes=("a.example", "b.example", "ü.example")))
    await redis.close()


@async_test
async def test_same_decisions_batched_and_across_workers(redis_server: RedisServer) -> None:
    config = SimhashConfig()
    workers = [make_backend(redis_server, config, SIMHASH_REDIS_PERSIST=True) for _ in range(3)]
    for worker in workers:
        await worker.open("spider")
    # Three workers taking turns: each one's replica lags behind the others' additions.
    await same_as_memory(workers, config, recrawl_sequence(7, 900, scopes=("a", "b")))
    for worker in workers:
        await worker.close()
    batched = make_backend(redis_server, config)
    await batched.open("other")
    await same_as_memory([batched], config, recrawl_sequence(8, 600), concurrent=True)
    await batched.close()


@pytest.mark.parametrize("shards", [1, 3])
@async_test
async def test_canonical_changed_then_unchanged(redis_server: RedisServer, shards: int) -> None:
    # Seed 11 re-checks a canonical page that changed (re-indexed at a later log entry) and then
    # drifted within k (unchanged): its members' verdicts name the fingerprint it is indexed with
    # now, as in process (page 594 of this sequence), with and without shards.
    config = SimhashConfig()
    redis = make_backend(redis_server, config, SIMHASH_REDIS_SHARDS=shards)
    await redis.open("spider")
    await same_as_memory([redis], config, recrawl_sequence(11, 700, scopes=("a",)))
    await redis.close()


@async_test
async def test_identity_records_in_shards_same_decisions(redis_server: RedisServer) -> None:
    # SIMHASH_REDIS_SHARDS: each identity's record is read (and claimed) on its shard, the decision is
    # taken on the scope's log, the record written back: the same decisions as in process, with
    # re-checks, kind switches and three workers whose replicas lag behind one another.
    config = SimhashConfig()
    workers = [make_backend(redis_server, config, SIMHASH_REDIS_SHARDS=4, SIMHASH_REDIS_PERSIST=True) for _ in range(3)]
    for worker in workers:
        await worker.open("spider")
    await same_as_memory(workers, config, recrawl_sequence(9, 900, scopes=("a", "b")))
    import redis as redis_py

    client = redis_py.Redis.from_url(redis_server.url)
    try:
        names = [key.decode() for key in client.keys("spider:simhash:*")]
        shards = {name.split("}")[0].rsplit(".", 1)[1] for name in names if ":i:" in name}
        assert shards == {"0", "1", "2", "3"}, names  # the records are spread over the four shards
        # Every claim released: a shard's claims keep only its marker (the epoch of the scope it holds).
        for name in names:
            if name.endswith(":claims"):
                assert list(client.hgetall(name)) == [b"#epoch"], name
    finally:
        client.close()
    # An export (``scrapy simhash report``) finds the shards from the stored layout, whatever its settings say.
    reader = make_backend(redis_server, config)
    await reader.attach("spider")
    assert await reader.members() == await workers[0].members()
    await reader.close()
    for worker in workers:
        await worker.close()
    batched = make_backend(redis_server, config, SIMHASH_REDIS_SHARDS=3)
    await batched.open("other")
    await same_as_memory([batched], config, recrawl_sequence(10, 600), concurrent=True)
    await batched.close()


@async_test
async def test_a_claim_left_by_a_dead_worker_expires(redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from simhash_scrapy.backends.redis import shards as redis_shards

    monkeypatch.setattr(redis_shards, "CLAIM_MS", 300)
    dead, alive = (make_backend(redis_server, SIMHASH_REDIS_SHARDS=2, SIMHASH_REDIS_PERSIST=True) for _ in range(2))
    await dead.open("spider")
    await alive.open("spider")
    page = PageRecord("https://e/claimed", 12345, "spider")
    # The dead worker claimed the identity and never wrote its record back (killed mid-check).
    await dead._shards.claim(dead.keys.scope("spider"), [redis_shards.slot_of("spider", page.url, dead.bucket_bits)])
    monkeypatch.setattr(redis_shards, "TRIES", 2)
    assert (await alive.check(page)).outcome is Outcome.UNCHECKED  # still claimed: not checked, counted
    assert alive.stats.values["simhash/redis/claimed_elsewhere"] == 1
    monkeypatch.setattr(redis_shards, "TRIES", 40)
    assert (await alive.check(page)).outcome is Outcome.UNIQUE  # the claim expired: taken over
    assert (await alive.check(page)).outcome is Outcome.UNCHANGED
    await dead.close()
    await alive.close()


@async_test
async def test_the_plain_page_sequence_too(redis_server: RedisServer) -> None:
    config = SimhashConfig(max_distance=3)
    redis = make_backend(redis_server, config)
    await redis.open("spider")
    await same_as_memory([redis], config, page_sequence(1, 800, scopes=("a.example", "b.example")))
    await redis.close()


@async_test
async def test_concurrent_near_duplicates_make_exactly_one_canonical(redis_server: RedisServer) -> None:
    rng = random.Random(11)
    workers = [make_backend(redis_server) for _ in range(3)]
    for worker in workers:
        await worker.open("spider")
    bases = [rng.getrandbits(64) for _ in range(20)]
    records = []
    for c, base in enumerate(bases):
        for v in range(15):  # every variant within 1 of its base: all within k of each other
            records.append(PageRecord(f"https://e/{c}/{v}", flip(base, rng.randint(0, 1), rng), "spider"))
    rng.shuffle(records)
    verdicts = await asyncio.gather(*(workers[i % 3].check(r) for i, r in enumerate(records)))
    canonical_urls = [r.url for r, v in zip(records, verdicts) if v.outcome is Outcome.UNIQUE]
    assert sorted(u.split("/")[3] for u in canonical_urls) == sorted(str(c) for c in range(20))
    for record, verdict in zip(records, verdicts):
        if verdict.canonical_url is not None:
            assert verdict.canonical_url.split("/")[3] == record.url.split("/")[3]
    assert await workers[0].index_size() == 20
    members = await workers[1].members()
    assert len(members) == 300
    assert sum(m.indexed for m in members) == 20
    for worker in workers:
        await worker.close()


@pytest_twisted.ensureDeferred
async def test_usable_from_a_twisted_driven_coroutine(redis_server: RedisServer) -> None:
    # Deferred.fromCoroutine cannot await asyncio futures: the backend bridges them.
    backend = make_backend(redis_server, SCHEDULER_PERSIST=True)
    await backend.open("s")
    assert (await backend.check(PageRecord("https://e/1", 1, "s"))).outcome is Outcome.UNIQUE
    verdict = await backend.check(PageRecord("https://e/2", 3, "s"))
    assert (verdict.outcome, verdict.canonical_url, verdict.distance, verdict.canonical_fingerprint) == (
        Outcome.NEAR_DUPLICATE, "https://e/1", 1, 1)
    assert len(await backend.members()) == 2 and await backend.index_size() == 1
    await backend.save_extra("rules", b"\x00rules")
    assert await backend.load_extra("rules") == b"\x00rules"
    assert await backend.load_extra("nothing") is None
    await backend.close()


@async_test
async def test_any_text_round_trips(redis_server: RedisServer) -> None:
    backend = make_backend(redis_server)
    await backend.open("s")
    record = PageRecord("https://e/ü?q=\u2603", 7, "s", referer="https://e/\ud800", depth=0,
                        text="zero-width \u200b, lone surrogate \udcff, emoji \U0001f600, comma, quote \"")
    await backend.check(record)
    (member,) = await backend.members()
    assert (member.url, member.referer, member.text, member.depth) == (record.url, record.referer, record.text, 0)
    await backend.close()


@async_test
async def test_key_layout_is_as_documented(redis_server: RedisServer) -> None:
    config = SimhashConfig(max_distance=3)
    backend = make_backend(redis_server, config, SIMHASH_REDIS_CAPACITY=1000)
    await backend.open("myspider")
    await backend.check(PageRecord("https://e/1", 0x0123456789ABCDEF, "myspider", referer="https://e/", depth=1, seen=5.0))
    v = await backend.check(PageRecord("https://e/2", 0x0123456789ABCDEE, "myspider", identity="ab" * 20))
    assert (v.outcome, v.canonical_url, v.distance) == (Outcome.NEAR_DUPLICATE, "https://e/1", 1)
    client = redis_server.client()
    keys = Keys("myspider:simhash")
    sk = keys.scope("myspider")
    assert sk.base == "myspider:simhash:{" + sk.base.split("{")[1]
    bits = bucket_bits_for(1000)
    b1, f1, _ = identity_slot("myspider", "https://e/1", bits)
    b2, f2, kept = identity_slot("myspider", "ab" * 20, bits)
    assert (b2, f2, kept) == (0xABABABAB >> (32 - bits), bytes.fromhex("ab" * 8), bytes.fromhex("ab" * 12))
    expected = {keys.meta, keys.workers, keys.scopes, sk.meta, sk.log, sk.bucket(b1), sk.bucket(b2)}
    assert {k.decode() for k in client.keys("*")} == expected
    meta = client.hgetall(keys.meta)
    assert meta[b"layout"].decode() == layout_string(config) and meta[b"seq"] == b"2" and int(meta[b"bucket_bits"]) == bits
    assert client.hgetall(sk.meta)[b"canonicals"] == b"1" and client.hgetall(sk.meta)[b"records"] == b"2"
    log = client.get(sk.log)
    assert log == b"\1" + bytes.fromhex("0123456789abcdef") + (0).to_bytes(4, "big") + b1.to_bytes(3, "big") + f1
    first = parse_record(client.hget(sk.bucket(b1), f1))
    assert (first.seq, first.fingerprint, first.outcome, first.own, first.first_seen) == (0, 0x0123456789ABCDEF, "unique", 0, 5.0)
    second = parse_record(client.hget(sk.bucket(b2), f2))
    assert (second.seq, second.outcome, second.canonical, second.distance) == (1, "near_duplicate", 0, 1)
    assert Codec().decode(second.payload, f2)[:2] == ("https://e/2", "ab" * 20)
    client.close()
    await backend.close()


@async_test
async def test_persist_and_flush_like_scrapy_redis(redis_server: RedisServer) -> None:
    client = redis_server.client()
    # Default (no SCHEDULER_PERSIST): the state is deleted when the crawl ends.
    backend = make_backend(redis_server)
    await backend.open("s")
    await backend.check(PageRecord("https://e/1", 1, "s"))
    await backend.save_extra("rules", b"x")
    await backend.close()
    assert client.keys("*") == []
    # SCHEDULER_PERSIST = True keeps it; the next crawl starts with it (simhash/initial).
    for _ in range(2):
        backend = make_backend(redis_server, SCHEDULER_PERSIST=True)
        await backend.open("s")
        await backend.check(PageRecord(f"https://e/{backend.initial}", 1 << backend.initial * 8, "s"))
        await backend.close()
    assert backend.initial == 1
    # Flush on start deletes it, unless another worker is running.
    other = make_backend(redis_server, SCHEDULER_PERSIST=True)
    await other.open("s")
    flusher = make_backend(redis_server, SCHEDULER_PERSIST=True, SCHEDULER_FLUSH_ON_START=True)
    await flusher.open("s")
    assert flusher.initial == 2
    await flusher.close()
    await other.close()
    flusher = make_backend(redis_server, SIMHASH_REDIS_PERSIST=True, SIMHASH_REDIS_FLUSH_ON_START=True)
    await flusher.open("s")
    assert flusher.initial == 0 and await flusher.members() == []
    await flusher.close()
    # Several workers without persistence: the last one to close deletes the state.
    a, b = make_backend(redis_server), make_backend(redis_server)
    await a.open("t")
    await b.open("t")
    await a.check(PageRecord("https://e/1", 1, "t"))
    await a.close()
    assert len(await b.members()) == 1
    await b.close()
    assert client.keys("{t:*") == [] and client.keys("t:*") == []
    client.close()


@async_test
async def test_ttl(redis_server: RedisServer) -> None:
    backend = make_backend(redis_server, SIMHASH_REDIS_TTL=3600, SIMHASH_REDIS_PERSIST=True)
    await backend.open("s")
    await backend.check(PageRecord("https://e/1", 1, "s"))
    await backend.save_extra("rules", b"x")
    client = redis_server.client()
    keys = client.keys("*")
    assert len(keys) == 7
    for key in keys:
        assert 3_500_000 < client.pttl(key) <= 3_600_000, key
    await backend.close()
    client.close()


@async_test
async def test_other_settings_are_refused(redis_server: RedisServer) -> None:
    base = {"max_distance": 3, "blocks": None, "weighting": "tf", "word_ngram": 1, "text_mode": "main"}
    first = make_backend(redis_server, SimhashConfig(**base), SCHEDULER_PERSIST=True)
    await first.open("s")
    await first.check(PageRecord("https://e/1", 1, "s"))
    for change, setting in [
        ({"max_distance": 4}, "SIMHASH_MAX_DISTANCE"),
        ({"word_ngram": 2}, "SIMHASH_WORD_NGRAM"),
        ({"weighting": "log"}, "SIMHASH_WEIGHTING"),  # the default weights against a key written with "tf"
        ({"text_mode": "visible"}, "SIMHASH_TEXT_MODE"),
    ]:
        # The message names the one setting that differs (not the group of feature settings).
        with pytest.raises(BackendError, match=rf"\({setting}\), but"):
            await make_backend(redis_server, SimhashConfig(**{**base, **change})).open("s")
    # Where the identity records live: every worker must agree.
    with pytest.raises(BackendError, match="SIMHASH_REDIS_SHARDS"):
        await make_backend(redis_server, SimhashConfig(**base), SIMHASH_REDIS_SHARDS=3).open("s")
    # The block layout is each worker's own business (the index in Redis does not depend on it).
    other = make_backend(redis_server, SimhashConfig(**{**base, "blocks": 6}))
    await other.open("s")
    assert (await other.check(PageRecord("https://e/2", 3, "s"))).canonical_url == "https://e/1"
    await other.close()
    await first.close()


@async_test
async def test_any_worker_can_export_the_clusters(redis_server: RedisServer) -> None:
    writer = make_backend(redis_server, SCHEDULER_PERSIST=True)
    await writer.open("s")
    for record, index in recrawl_sequence(4, 100):
        await writer.check(record, index)
    expected = await writer.members()
    await writer.close()
    reader = make_backend(redis_server)
    await reader.attach("s")
    assert await reader.members() == expected
    assert build_clusters(await reader.members())
    await reader.close()
    assert await read_members({"REDIS_URL": redis_server.url, "SIMHASH_REDIS_CAPACITY": 5000}, "s") == expected
    assert len(await read_members({"REDIS_URL": redis_server.url}, "s")) == len(expected) < 100  # never flushed


# ---------------------------------------------------------------- outages
async def wait_until_up(backend: RedisBackend) -> None:
    for _ in range(2000):  # a deadline, not a timing: the probe backs off to one heartbeat at most
        if not backend.redis_down:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the backend never saw Redis again")


@pytest.mark.parametrize("fail_open", [True, False])
@async_test
async def test_redis_restart_with_aof_loses_nothing(tmp_path: Path, fail_open: bool, caplog: pytest.LogCaptureFixture) -> None:
    server = RedisServer(tmp_path / "redis", appendonly=True).start()
    try:
        backend = make_backend(server, SIMHASH_REDIS_FAIL_OPEN=fail_open, SCHEDULER_PERSIST=True,
                               SIMHASH_REDIS_HEARTBEAT=0.2)
        await backend.open("s")
        assert (await backend.check(PageRecord("https://e/1", 1, "s"))).outcome is Outcome.UNIQUE
        server.stop()  # SIGKILL
        if fail_open:
            assert await backend.check(PageRecord("https://e/2", 1, "s")) == Verdict(Outcome.UNCHECKED)
        else:
            with pytest.raises(BackendError, match="fail-closed"):
                await backend.check(PageRecord("https://e/2", 1, "s"))
        assert backend.redis_down
        assert backend.stats.values["simhash/backend_errors"] == 1
        server.start()
        await wait_until_up(backend)
        # The first check after the probe saw Redis goes through: no back-off left to sit out.
        verdict = await backend.check(PageRecord("https://e/3", 1, "s"))
        # Written before the kill, kept by the append-only file: page 1 is still the canonical page.
        assert (verdict.outcome, verdict.canonical_url) == (Outcome.NEAR_DUPLICATE, "https://e/1")
        assert backend.stats.values["simhash/backend_errors"] == 1
        assert [m.url for m in await backend.members()] == ["https://e/1", "https://e/3"]
        again = [r for r in caplog.records if "answers again" in r.getMessage()]
        assert len(again) == 1 and "1 page(s) went unchecked" in again[0].getMessage()
        await backend.close()
    finally:
        server.stop()


@async_test
async def test_no_traceback_at_close_when_redis_is_gone(redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    backend = make_backend(redis_server)
    await backend.open("s")
    await backend.check(PageRecord("https://e/1", 1, "s"))
    redis_server.stop()
    await assert_close_reads_counted(backend, caplog)


async def assert_close_reads_counted(backend: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The reads at close of a backend whose Redis is gone: empty answers, counted (``simhash/redis/unread/*``),
    one warning and no traceback, and the close ends."""
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="simhash_scrapy"):
        assert await backend.index_size() == 0
        assert await backend.members() == []
        await backend.close()
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1 and "did not answer at close" in errors[0].getMessage(), [r.getMessage() for r in errors]
    assert all(r.exc_info is None for r in caplog.records)
    assert backend.stats.values["simhash/redis/unread/index_size"] == 1
    assert backend.stats.values["simhash/redis/unread/members"] == 1


@async_test
async def test_close_ends_when_the_heartbeat_loses_its_cancellation(redis_server: RedisServer) -> None:
    # redis-py sends every command through asyncio.wait_for (Connection.send_packed_command).  Before
    # Python 3.12, wait_for returns the result instead of raising CancelledError when what it waits for
    # is done as its task is cancelled: a heartbeat sending its script as close() cancels it beat on, and
    # close() (the spider's close) waited for it for ever (tests stalled under load, a crawl never ended).
    # Here the heartbeat's send is a future finished in the same loop turn as close() starts.
    backend = make_backend(redis_server, SIMHASH_REDIS_HEARTBEAT=0.05)
    await backend.open("s")
    real = backend._scripts["heartbeat"]
    sending = asyncio.Event()
    sent: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def heartbeat(*args: Any, **kwargs: Any) -> Any:
        if not sent.done():
            sending.set()
            await asyncio.wait_for(sent, 60)  # as redis-py sends it
        return await real(*args, **kwargs)

    backend._scripts["heartbeat"] = heartbeat
    await asyncio.wait_for(sending.wait(), 60)
    beat = backend._heartbeat
    assert beat is not None
    sent.set_result(None)
    closing = asyncio.ensure_future(backend.close())
    await asyncio.wait({closing}, timeout=60)  # a deadline, not a timing: it ends at once
    assert closing.done() and beat.done()
    assert int(redis_server.command("ZCARD", "{s:simhash}:workers")) == 0  # close.lua ran: deregistered


@async_test
async def test_close_ends_when_the_outage_probe_loses_its_cancellation(redis_server: RedisServer) -> None:
    # The probe that waits for a lost Redis pings it through redis-py (asyncio.wait_for, as above) with a
    # Retry that never gives up.  A ping failing in the loop turn close() cancels the probe raised its
    # ConnectionError instead of CancelledError (Python < 3.12), the Retry pinged on, and close() waited
    # for the probe for as long as Redis stayed down.  Here Redis "stays down" for the probe's pings.
    from redis.exceptions import ConnectionError as RedisConnectionError

    backend = make_backend(redis_server, SIMHASH_REDIS_HEARTBEAT=0.05)
    await backend.open("s")
    pinging = asyncio.Event()
    failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    pings = 0

    async def ping(*args: Any, **kwargs: Any) -> Any:
        nonlocal pings
        pings += 1
        if not failed.done():
            pinging.set()
            await asyncio.wait_for(failed, 60)  # as redis-py sends it
        raise RedisConnectionError("Redis is down")

    class Probe:
        """The probe task, whose ping fails in the loop turn close() cancels it (the window that loses it)."""

        def __init__(self, task: asyncio.Task[None]) -> None:
            self.task = task

        def done(self) -> bool:
            return self.task.done()

        def cancel(self) -> bool:
            failed.set_exception(RedisConnectionError("Redis is down"))
            return self.task.cancel()

        def __await__(self) -> Any:
            return self.task.__await__()

    backend.client.ping = ping  # type: ignore[method-assign]
    backend._mark_down(RedisConnectionError("Redis is down"))
    probe = backend._probe
    assert probe is not None
    await asyncio.wait_for(pinging.wait(), 60)
    backend._probe = Probe(probe)  # type: ignore[assignment]
    closing = asyncio.ensure_future(backend.close())
    await asyncio.wait({closing}, timeout=60)  # a deadline, not a timing: it ends at once
    assert closing.done() and probe.done(), f"close() still waits for the probe after {pings} pings"
    assert int(redis_server.command("ZCARD", "{s:simhash}:workers")) == 0  # close.lua ran: deregistered


# -------------------------------------------------------------- real crawls
def redis_pages(server: RedisServer, spider: str = "pages") -> list[Any]:
    """Every page recorded in Redis under a spider's key (members, first-check order)."""
    return in_thread(read_members({"REDIS_URL": server.url}, spider))


class KillRedisMiddleware:
    """Kills the Redis server just before the ``kill_after``-th response reaches SimhashMiddleware.

    Its ``process_response`` runs before SimhashMiddleware's (priority 545 > 540:
    responses go through downloader middlewares in descending priority).
    """

    def __init__(self, crawler: Any) -> None:
        self.pid: int = crawler.settings.getint("TEST_REDIS_PID")
        self.kill_after: int = crawler.settings.getint("TEST_KILL_AFTER")
        self.responses = 0

    @classmethod
    def from_crawler(cls, crawler: Any) -> KillRedisMiddleware:
        return cls(crawler)

    def process_response(self, request: Any, response: Any, spider: Any = None) -> Any:
        self.responses += 1
        if self.responses == self.kill_after:
            os.kill(self.pid, signal.SIGKILL)
            while True:  # wait until it is gone (it is our child: reap it)
                try:
                    if os.waitpid(self.pid, os.WNOHANG)[0]:
                        break
                except ChildProcessError:
                    break
                time.sleep(0.01)
        return response


@pytest.mark.parametrize("fail_open", [True, False])
@pytest_twisted.ensureDeferred
async def test_in_process_crawl_when_redis_dies(serve: Any, tmp_path: Path, fail_open: bool) -> None:
    server = RedisServer(tmp_path / "redis").start()
    count = 10
    site = serve(make_site(count))
    urls = [site.url(f"/a{i}") for i in range(count)] + [site.url(f"/b{i}") for i in range(count)]
    try:
        crawler = await run_crawl(
            RecordingSpider,
            {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_BACKEND": "redis", "SIMHASH_REDIS_URL": server.url,
             "SIMHASH_REDIS_FAIL_OPEN": fail_open, "TEST_REDIS_PID": server.process.pid, "TEST_KILL_AFTER": 5,
             "DOWNLOADER_MIDDLEWARES": {f"{__name__}.KillRedisMiddleware": 545}},
            start_urls=urls,
        )
    finally:
        server.stop()
    stats = crawler.stats.get_stats()
    assert stats["simhash/backend_errors"] >= 1
    if fail_open:
        # Fail-open: the crawl goes on; every page after the kill passes unchecked.
        assert stats["finish_reason"] == "finished"
        assert len(crawler.spider.seen) == 2 * count
        assert stats["simhash/backend_errors"] == 2 * count - 4
        assert stats["simhash/fingerprinted"] == 2 * count
        # Pages nobody checked are counted as such, never as unique.
        assert stats["simhash/unchecked"] == 2 * count - 4
        assert stats.get("simhash/unique", 0) + stats.get("simhash/near_duplicates", 0) == 4
    else:
        # Fail-closed: the crawl stops instead of letting unchecked pages through.
        assert stats["finish_reason"] == "simhash_backend_error"
        assert 1 <= stats["simhash/backend_errors"] <= 2
        assert stats["simhash/fingerprinted"] <= 6
        assert stats["simhash/skipped/backend_error"] == stats["simhash/backend_errors"]
        assert "simhash/unchecked" not in stats
        # Only pages that were checked reached the spider.
        assert len(crawler.spider.seen) <= stats["simhash/fingerprinted"]


@pytest.mark.slow  # long sequences against a real Redis
def test_two_workers_share_one_index(serve: Any, redis_server: RedisServer, tmp_path: Path) -> None:
    count = 12
    site = serve(make_site(2 * count))
    # Every original /a<i> is in one half, its edited copy /b<i> in the other.
    halves = [
        [f"/a{i}" for i in range(count)] + [f"/b{i}" for i in range(count, 2 * count)],
        [f"/a{i}" for i in range(count, 2 * count)] + [f"/b{i}" for i in range(count)],
    ]
    procs = []
    for n, paths in enumerate(halves):
        args = [
            "-a", f"base={site.base}", "-a", "paths=" + ",".join(paths),
            "-s", "SIMHASH_BACKEND=redis", "-s", f"REDIS_URL={redis_server.url}",
            "-s", "SCHEDULER_PERSIST=True", "-s", "DOWNLOAD_DELAY=0.1",
            "-s", f"SIMHASH_REPORT_URI={tmp_path}/report-{n}.jsonl",
        ]
        procs.append(subprocess.Popen(crawl_command(*args), cwd=PROJECT, env=crawl_env(),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    logs = [p.communicate(timeout=300)[1] for p in procs]
    for proc, log in zip(procs, logs):
        assert proc.returncode == 0, log[-3000:]
    stats = [parse_stats(log) for log in logs]
    for s in stats:
        assert s["finish_reason"] == "finished" and "simhash/backend_errors" not in s
        assert s["simhash/fingerprinted"] == 2 * count
    # Every duplicate crosses the halves: together the workers find all of them, once.
    assert sum(s.get("simhash/near_duplicates", 0) for s in stats) == 2 * count
    assert sum(s.get("simhash/unique", 0) for s in stats) == 2 * count
    reached_urls = reached(logs[0]) + reached(logs[1])
    assert len(reached_urls) == 2 * count
    # Exactly one page of each pair reached a spider: the one checked first.
    assert sorted(re.sub(r".*/[ab]", "", u) for u in reached_urls) == sorted(str(i) for i in range(2 * count))
    # The shared record in Redis, and the report of the worker that closed last, have all pairs.
    pages = redis_pages(redis_server)
    assert len(pages) == 4 * count
    pairs = {frozenset((p.url, p.canonical_url)) for p in pages if p.canonical_url is not None}
    assert pairs == {frozenset((site.url(f"/a{i}"), site.url(f"/b{i}"))) for i in range(2 * count)}
    reports = [read_report(tmp_path / f"report-{n}.jsonl") for n in range(2)]
    full = max(reports, key=len)
    assert len(full) == 2 * count
    assert {frozenset(m["url"] for m in c["members"]) for c in full} == pairs
    assert all(c["size"] == 2 and c["members"][0]["url"] == c["canonical"] for c in full)


def crawl_across_a_redis_restart(
    site: Any, server: RedisServer, count: int, *settings: str
) -> tuple[int | None, str, list[str]]:
    """Crawl ``count`` pages and ``count`` copies in a subprocess with the Redis backend; once 8 pages
    reached the spider, kill ``server`` (SIGKILL), and start it again as soon as the crawl logs a Redis
    error (a few pages go through unchecked meanwhile).  ``(exit code, log, URLs reached before the kill)``."""
    paths = [f"/a{i}" for i in range(count)] + [f"/b{i}" for i in range(count)]
    args = [
        "-a", f"base={site.base}", "-a", "paths=" + ",".join(paths),
        "-s", "SIMHASH_BACKEND=redis", "-s", f"SIMHASH_REDIS_URL={server.url}",
        "-s", "SIMHASH_REDIS_PERSIST=True", "-s", "DOWNLOAD_DELAY=0.2", *settings,
    ]
    proc = subprocess.Popen(crawl_command(*args), cwd=PROJECT, env=crawl_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    rest = ""
    killed_after: list[str] = []
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            lines.append(line)
            if not killed_after and "Reached the spider" in line and len(reached("".join(lines))) == 8:
                killed_after = reached("".join(lines))
                server.stop()  # SIGKILL, mid-crawl
            if killed_after and "Redis error" in line:
                time.sleep(0.6)  # a few pages go through unchecked
                server.start()
                break
        rest = proc.communicate(timeout=300)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, "".join(lines) + rest, killed_after


@pytest.mark.slow  # long sequences against a real Redis
def test_redis_killed_and_restarted_during_a_crawl(serve: Any, persistent_redis_server: RedisServer, tmp_path: Path) -> None:
    server = persistent_redis_server
    count = 20
    site = serve(make_site(count))
    returncode, log, killed_after = crawl_across_a_redis_restart(site, server, count)
    assert returncode == 0, log[-3000:]
    stats = parse_stats(log)
    assert stats["finish_reason"] == "finished"
    errors = stats["simhash/backend_errors"]
    assert errors >= 1
    assert stats["simhash/fingerprinted"] == 2 * count
    # The append-only file kept the scope: no false alarm of lost data.
    assert "simhash/redis/lost_pages" not in stats and "no longer holds" not in log
    # Nothing recorded before the kill was lost, and every page checked afterwards is there too.
    pages = redis_pages(server)
    recorded = [p.url for p in pages]
    assert set(killed_after) <= set(recorded)
    unchecked = stats.get("simhash/unchecked", 0)
    assert len(recorded) == 2 * count - unchecked
    # Unchecked pages only during the outage: once the probe saw Redis again, every page was checked.
    (again,) = re.findall(r"answers again after ([0-9.]+) s; (\d+) page\(s\) went unchecked", log)
    assert int(again[1]) == unchecked == errors
    # Copies checked after the restart were still recognised as duplicates of pre-kill originals.
    canonical_urls = {p.canonical_url for p in pages if p.canonical_url is not None}
    assert canonical_urls & set(killed_after)


@pytest.mark.parametrize("shards", [1, 3])
def test_a_worker_reads_the_recorded_identities_with_one_scan(
    redis_server: RedisServer, shards: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``RedisBackend._read_identities`` at open: the pages of every identity's scope (``plain#digest``), not
    the plain scope's, with one SCAN of the key space for all those scopes (a shop has one scope a product:
    a SCAN a scope read the whole key space once a scope, hours at open)."""
    from simhash_scrapy.backends.redis import backend as backend_module
    from simhash_scrapy.backends.redis import export

    rng = random.Random(5)
    pages = [PageRecord(f"http://shop.test/p{n}", rng.getrandbits(64), f"spider#{n:012x}", identity=f"http://shop.test/p{n}")
             for n in range(12)]  # fmt: skip
    pages += [PageRecord(f"http://shop.test/list{n}", rng.getrandbits(64), "spider") for n in range(5)]

    decoded: list[Any] = []  # members decoded by each open's read (export.record_member, patched below)

    async def run() -> tuple[list[tuple[str, str]], int]:
        first = make_backend(redis_server, SimhashConfig(), SIMHASH_REDIS_PERSIST=True, SIMHASH_REDIS_SHARDS=shards)
        await first.open("ids")
        try:
            for page in pages:
                await first.check(page)
        finally:
            await first.close()
        scans = []
        real = export._scan

        async def counted(client: Any, pattern: str) -> list[bytes]:
            scans.append(pattern)
            return await real(client, pattern)

        monkeypatch.setattr(export, "_scan", counted)
        later = make_backend(redis_server, SimhashConfig(), SIMHASH_REDIS_PERSIST=True, SIMHASH_REDIS_SHARDS=shards)
        beating = []
        read = later._read_identities

        async def watched() -> None:  # (a long read: other workers must not take this one for gone meanwhile)
            beating.append(later._heartbeat is not None)
            decoded.clear()
            await read()
            decoded.append(len(decoded))

        monkeypatch.setattr(later, "_read_identities", watched)
        await later.open("ids")
        try:
            assert beating == [True]
            return sorted(later.restored_pages()), len(scans)
        finally:
            await later.close()

    restored, scans = in_thread(run())
    assert restored == sorted((page.url, page.scope) for page in pages[:12])
    assert scans == 1
    # bounded like the replay: at most MAX_ADDRESSES pages decoded and kept (here 5 of the 12)
    real_member = export.record_member

    def counted_member(*args: Any) -> Any:
        decoded.append(args)
        return real_member(*args)

    monkeypatch.setattr(backend_module, "MAX_ADDRESSES", 5)
    monkeypatch.setattr(export, "record_member", counted_member)
    restored, _ = in_thread(run())
    assert len(restored) == 5 and set(restored) <= {(page.url, page.scope) for page in pages[:12]}
    assert decoded[-1] == 5


@pytest.mark.slow  # two ``scrapy simhash`` subprocesses
@async_test
async def test_report_on_a_damaged_record_is_an_error_not_an_empty_report(redis_server: RedisServer, tmp_path: Path) -> None:
    # ``members()`` at a crawl's close counts a failed read and returns none (the crawl closes normally); ``scrapy
    # simhash report --redis`` reads with ``read_members()``, which raises: a key it cannot read is an error, never
    # a report that says the key holds no pages.
    from command_helpers import assert_user_error, simhash

    backend = make_backend(redis_server, SIMHASH_REDIS_PERSIST=True)
    await backend.open("pages")
    for n in range(5):
        await backend.check(PageRecord(f"https://a.example/{n}", n << 20, "pages"))
    await backend.close()
    command = ("report", "--redis", redis_server.url, "--key", "pages:simhash")
    whole = simhash(*command, cwd=tmp_path)
    assert whole.returncode == 0 and "has 5 pages" in whole.stderr, whole.stderr[-2000:]
    client = redis_server.client()
    damaged = 0
    for key in client.scan_iter(match="pages:simhash*"):
        if client.type(key) == b"hash" and not key.endswith(b":meta"):
            for field in client.hkeys(key):
                client.hset(key, field, b"\x00\x01")  # a record cut short: its head does not parse
                damaged += 1
                break
        if damaged:
            break
    assert damaged == 1
    assert_user_error(simhash(*command, cwd=tmp_path), 1, "report", "cannot read Redis")
