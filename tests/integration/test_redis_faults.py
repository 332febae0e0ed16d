"""The Redis backend when Redis loses data: a real redis-server restarted empty (no AOF) or with its
append-only file, during checks and during real crawls; a log that lost its tail; global keys lost alone.

After a loss the worker drops its replica, counts the pages lost (``simhash/redis/lost_pages``), logs
one ERROR line, makes the scope anew and goes on checking: every later decision is the one a fresh
in-process backend makes from the pages checked after the loss.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time
from pathlib import Path
from typing import Any

import pytest
from redis_server import RedisServer
from test_redis_backend import (
    async_test, crawl_across_a_redis_restart, make_backend, recrawl_sequence, redis_pages, wait_until_up,
)

from simhash_scrapy.backends import PageRecord
from simhash_scrapy.backends.base import Outcome
from simhash_scrapy.backends.memory import MemoryBackend
from simhash_scrapy.backends.redis import RedisBackend
from simhash_scrapy.config import SimhashConfig

from crawl_helpers import make_site, parse_stats  # noqa: E402

pytest_plugins = ["conftest_redis"]

LOST = "no longer holds the simhash data"


async def check_all(backends: list[RedisBackend], memory: MemoryBackend, pages: list[tuple[PageRecord, bool]]) -> None:
    """Every page's verdict from the workers (taking turns) equals the in-process backend's."""
    for i, (record, index) in enumerate(pages):
        want = memory.check_now(record, index)
        have = await backends[i % len(backends)].check(record, index)
        assert have == want, (i, record, index)


async def back_up(backend: RedisBackend) -> None:
    """After a restart: the first call on a dropped connection fails (one page unchecked, in a scope of its
    own), the probe sees Redis again."""
    await backend.check(PageRecord("https://probe/", 1, "probe-scope"))
    await wait_until_up(backend)


def loss_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if LOST in r.getMessage()]


# 3 workers on 3 shards: 2.5 s measured (--durations, serial, loaded 2-core machine)
@pytest.mark.parametrize(("workers", "shards"), [(1, 1), (1, 3), (3, 1), pytest.param(3, 3, marks=pytest.mark.slow)])
@async_test
async def test_restarted_empty_decides_as_a_fresh_in_process_backend(
    tmp_path: Path, shards: int, workers: int, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisServer(tmp_path / "redis").start()  # no AOF: a restart loses everything
    config = SimhashConfig()
    scopes = ("a", "b")
    try:
        backends = [make_backend(server, config, SIMHASH_REDIS_SHARDS=shards, SIMHASH_REDIS_PERSIST=True,
                                 SIMHASH_REDIS_HEARTBEAT=0.2) for _ in range(workers)]
        for backend in backends:
            await backend.open("spider")
        before = MemoryBackend(config)
        await check_all(backends, before, recrawl_sequence(21, 400, scopes=scopes))
        recorded = len(await before.members())
        server.stop()
        server.start()  # empty
        for backend in backends:
            await back_up(backend)
        caplog.clear()
        # Pages of the first crawl come back (re-checks of lost identities), and new ones: every verdict is
        # the one of an in-process backend that never saw the pages Redis lost.
        after = MemoryBackend(config)
        with caplog.at_level(logging.DEBUG, logger="simhash_scrapy"):
            await check_all(backends, after, recrawl_sequence(21, 300, scopes=scopes) + recrawl_sequence(22, 300, scopes=scopes))
        members = await backends[0].members()
        assert [m for m in members if m.scope != "probe-scope"] == await after.members()
        probes = sum(m.indexed for m in members if m.scope == "probe-scope")
        assert await backends[-1].index_size() == await after.index_size() + probes
        # Each worker counts, for each scope, the pages the scope recorded as of its own last check of it:
        # one worker knew them all; several each knew most (their counts overlap).
        counts = [b.stats.values["simhash/redis/lost_pages"] for b in backends]
        assert all(0.9 * recorded <= c <= recorded for c in counts), (counts, recorded)
        if workers == 1:
            assert counts == [recorded]
        assert all(b.stats.values["simhash/redis/lost_scopes"] == len(scopes) for b in backends)
        assert len(loss_lines(caplog)) == workers  # one ERROR line for each worker
        assert all(r.levelno == logging.ERROR for r in loss_lines(caplog))
        # At most the probe page failed (on the connection the restart closed); no check after it failed.
        assert all(b.stats.values["simhash/backend_errors"] <= 1 for b in backends)
        for backend in backends:
            await backend.close()
    finally:
        server.stop()


@pytest.mark.parametrize("shards", [1, pytest.param(3, marks=pytest.mark.slow)])  # 3: 2.5 s measured (--durations, serial, loaded 2-core machine)
@async_test
async def test_restarted_with_aof_goes_on_without_an_alarm(tmp_path: Path, shards: int, caplog: pytest.LogCaptureFixture) -> None:
    server = RedisServer(tmp_path / "redis", appendonly=True).start()
    config = SimhashConfig()
    try:
        backend = make_backend(server, config, SIMHASH_REDIS_SHARDS=shards, SIMHASH_REDIS_PERSIST=True,
                               SIMHASH_REDIS_HEARTBEAT=0.2)
        await backend.open("spider")
        memory = MemoryBackend(config)
        pages = recrawl_sequence(23, 700, scopes=("a", "b"))
        await check_all([backend], memory, pages[:350])
        server.stop()
        server.start()  # the append-only file restores everything
        await back_up(backend)
        with caplog.at_level(logging.DEBUG, logger="simhash_scrapy"):
            await check_all([backend], memory, pages[350:])  # as if Redis had never gone
        assert [m for m in await backend.members() if m.scope != "probe-scope"] == await memory.members()
        assert "simhash/redis/lost_pages" not in backend.stats.values
        assert "simhash/redis/lost_scopes" not in backend.stats.values
        assert loss_lines(caplog) == []
        await backend.close()
    finally:
        server.stop()


@async_test
async def test_a_log_that_lost_its_tail_is_reloaded(redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    # Same scope (same epoch), but its log is shorter than the worker's replica (a failover to a lagging
    # replica, an append-only file cut short): the replica is rebuilt from the log as it is now.
    config = SimhashConfig()
    backend = make_backend(redis_server, config, SIMHASH_REDIS_PERSIST=True)
    await backend.open("spider")
    rng = random.Random(5)
    pages = [PageRecord(f"https://e/{i}", rng.getrandbits(64), "s") for i in range(10)]
    for page in pages:
        assert (await backend.check(page)).outcome is Outcome.UNIQUE
    sk = backend.keys.scope("s")
    client = redis_server.client()
    log = client.get(sk.log)
    client.set(sk.log, log[: 6 * 24])  # pages 6..9 lost from the log (their records stay)
    client.hset(sk.meta, "records", 6)
    client.close()
    with caplog.at_level(logging.ERROR, logger="simhash_scrapy"):
        # Page 8 is no longer in the index; page 2 still is.
        assert (await backend.check(PageRecord("https://e/x", pages[8].fingerprint ^ 1, "s"))).outcome is Outcome.UNIQUE
        verdict = await backend.check(PageRecord("https://e/y", pages[2].fingerprint ^ 1, "s"))
    assert (verdict.outcome, verdict.canonical_url) == (Outcome.NEAR_DUPLICATE, "https://e/2")
    assert backend.stats.values["simhash/redis/lost_pages"] == 4
    (line,) = loss_lines(caplog)
    assert "its log lost its last entries" in line.getMessage()
    assert backend.stats.values["simhash/backend_errors"] == 0
    await backend.close()


@async_test
async def test_a_scope_made_before_epochs(redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    # A scope written by an earlier version has no epoch: every worker reads it as the epoch "" and goes on
    # without an alarm; its loss is still found (no meta, or another epoch).
    config = SimhashConfig()
    writer = make_backend(redis_server, config, SIMHASH_REDIS_PERSIST=True)
    await writer.open("spider")
    memory = MemoryBackend(config)
    pages = recrawl_sequence(41, 300, scopes=("a",))
    await check_all([writer], memory, pages[:100])
    await writer.close()
    client = redis_server.client()
    client.hdel(writer.keys.scope("a").meta, "epoch")  # as an earlier version wrote it
    workers = [make_backend(redis_server, config, SIMHASH_REDIS_PERSIST=True) for _ in range(2)]
    for worker in workers:
        await worker.open("spider")
    with caplog.at_level(logging.DEBUG, logger="simhash_scrapy"):
        await check_all(workers, memory, pages[100:200])
        assert loss_lines(caplog) == [] and client.hget(writer.keys.scope("a").meta, "epoch") is None
        client.flushall()  # lost
        fresh = MemoryBackend(config)
        await check_all(workers, fresh, pages[200:])
    client.close()
    assert [len(loss_lines(caplog)), workers[0].stats.values["simhash/redis/lost_scopes"]] == [2, 1]
    for worker in workers:
        await worker.close()


@async_test
async def test_many_lost_scopes_list_the_scopes_again_once(tmp_path: Path) -> None:
    # A scope per page (SIMHASH_DISTINCT_SELECTORS on SKUs): after a flush the scopes are found lost one by
    # one. The worker lists its scopes again once for the loss (SADD of them all), not once per lost scope
    # (n SADDs of n scopes); each scope made anew is listed by its own SADD as before.
    server = RedisServer(tmp_path / "redis").start()
    n = 200
    try:
        backend = make_backend(server, SimhashConfig(), SIMHASH_REDIS_PERSIST=True, SIMHASH_REDIS_HEARTBEAT=60)
        await backend.open("spider")
        rng = random.Random(5)
        pages = [PageRecord(f"https://shop/p{i}", rng.getrandbits(64), f"shop#{i:016x}") for i in range(n)]
        for record in pages:
            await backend.check(record)
        client = server.client()
        client.flushall()
        client.config_resetstat()
        fresh = MemoryBackend(SimhashConfig())
        start = time.monotonic()
        for record in pages:
            assert await backend.check(record) == fresh.check_now(record)
        heartbeats = int((time.monotonic() - start) // 60)  # a relist is allowed once a heartbeat (60 s)
        sadd_calls = client.info("commandstats").get("cmdstat_sadd", {}).get("calls", 0)
        assert backend.stats.values["simhash/redis/lost_scopes"] == n
        assert backend.stats.values["simhash/redis/lost_pages"] == n
        # 2n before: every lost scope listed all the scopes again.
        assert n + 1 <= sadd_calls <= n + 1 + heartbeats, sadd_calls
        assert client.scard(backend.keys.scopes) == n
        assert client.hget(backend.keys.meta, "layout") is not None  # registered again
        client.close()
        assert sorted(m.url for m in await backend.members()) == sorted(p.url for p in pages)
        await backend.close()
    finally:
        server.stop()


@async_test
async def test_redis_going_down_while_a_lost_scope_is_made_anew_marks_it_down(tmp_path: Path) -> None:
    # The connection fails inside the loss handling (injected into the one call that registers again, on
    # a real server): the check is unchecked and Redis is marked down (checks then fail at once while the
    # probe waits), as for a failure anywhere else in a check.
    from redis.exceptions import ConnectionError as RedisConnectionError

    server = RedisServer(tmp_path / "redis").start()
    try:
        backend = make_backend(server, SimhashConfig(), SIMHASH_REDIS_PERSIST=True)
        await backend.open("spider")
        await backend.check(PageRecord("https://e/1", 1, "s"))
        client = server.client()
        client.flushall()
        client.close()

        async def cut(*args: Any, **kwargs: Any) -> Any:
            raise RedisConnectionError("Connection closed by server.")

        backend._register = cut  # type: ignore[method-assign]
        verdict = await backend.check(PageRecord("https://e/2", 2, "s"))
        assert verdict.outcome is Outcome.UNCHECKED
        assert backend.redis_down
        assert backend.stats.values["simhash/backend_errors"] == 1
        del backend._register
        await wait_until_up(backend)
        await backend.close()
    finally:
        server.stop()


@async_test
async def test_global_keys_lost_alone(redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    # A Redis Cluster node holding only the global keys restarted empty: the heartbeat registers the
    # worker again and lists its scopes again; no page is lost, no alarm.
    backend = make_backend(redis_server, SIMHASH_REDIS_PERSIST=True, SIMHASH_REDIS_HEARTBEAT=0.05)
    await backend.open("spider")
    for i in range(5):
        await backend.check(PageRecord(f"https://e/{i}", 1 << (8 * i), f"s{i % 2}"))
    client = redis_server.client()
    client.delete(backend.keys.meta, backend.keys.scopes, backend.keys.workers)
    for _ in range(500):  # a deadline, not a timing
        if client.hget(backend.keys.meta, "layout") and client.scard(backend.keys.scopes) == 2:
            break
        await asyncio.sleep(0.01)
    assert client.hget(backend.keys.meta, "layout") is not None
    assert client.zscore(backend.keys.workers, backend.worker_id) is not None
    client.close()
    assert sorted(m.url for m in await backend.members()) == [f"https://e/{i}" for i in range(5)]
    assert "simhash/redis/lost_pages" not in backend.stats.values
    assert loss_lines(caplog) == []
    await backend.close()


# -------------------------------------------------------------- real crawls
@pytest.mark.slow  # a crawl across a Redis restart
@pytest.mark.parametrize("shards", [1, 3])
def test_crawl_goes_on_after_redis_restarted_empty(serve: Any, tmp_path: Path, shards: int) -> None:
    server = RedisServer(tmp_path / "redis").start()  # no AOF: it comes back empty
    count = 20
    site = serve(make_site(count))
    try:
        returncode, log, killed_after = crawl_across_a_redis_restart(
            site, server, count, "-s", f"SIMHASH_REDIS_SHARDS={shards}", "-s", "SIMHASH_REDIS_HEARTBEAT=0.2"
        )
        assert returncode == 0, log[-3000:]
        stats = parse_stats(log)
        assert stats["finish_reason"] == "finished"
        assert stats["simhash/fingerprinted"] == 2 * count
        # Unchecked pages only during the outage; after it, every check went through (none failed on the
        # lost layout).
        unchecked = stats.get("simhash/unchecked", 0)
        (again,) = re.findall(r"answers again after ([0-9.]+) s; (\d+) page\(s\) went unchecked", log)
        assert int(again[1]) == unchecked == stats["simhash/backend_errors"] >= 1
        assert "ResponseError" not in log and "Traceback" not in log
        # One ERROR line says what happened; the pages recorded before are counted as lost.
        losses = [line for line in log.splitlines() if LOST in line]
        assert len(losses) == 1 and " ERROR: " in losses[0], losses
        lost = stats["simhash/redis/lost_pages"]
        assert lost >= len(killed_after)
        # Every page is accounted for: lost with the restart, unchecked in the outage, or in Redis now.
        after = redis_pages(server)
        assert lost + unchecked + len(after) == 2 * count
        assert {p.url for p in after}.isdisjoint(killed_after)
        # Pages checked after the restart were checked against each other: copies found their originals.
        assert stats.get("simhash/near_duplicates", 0) >= 1
        assert all(p.canonical_url in {q.url for q in after} for p in after if p.canonical_url is not None)
    finally:
        server.stop()


# ------------------------------------------------------------ Redis Cluster
HOSTS = tuple(f"h{n}.example" for n in range(8))


@pytest.mark.parametrize("shards", [1, 3])
@async_test
async def test_a_cluster_node_restarted_empty(redis_cluster: Any, shards: int, caplog: pytest.LogCaptureFixture) -> None:
    # One node of a three-node Redis Cluster restarts empty: the scopes whose keys it held are lost (and
    # made anew), the others go on as before; the global keys come back if they were there.
    backend = make_backend(None, SimhashConfig(), SIMHASH_REDIS_URL=redis_cluster.url, SIMHASH_REDIS_CLUSTER=True,
                           SIMHASH_REDIS_SHARDS=shards, SIMHASH_REDIS_PERSIST=True, SIMHASH_REDIS_HEARTBEAT=0.2)
    await backend.open("myspider")
    memories = {host: MemoryBackend(SimhashConfig()) for host in HOSTS}
    for record, index in recrawl_sequence(31, 500, scopes=HOSTS):
        assert await backend.check(record, index) == memories[record.scope].check_now(record, index)
    client = redis_cluster.client()
    try:
        node_of = {host: client.get_node_from_key(backend.keys.scope(host).meta).port for host in HOSTS}
    finally:
        client.close()
    port = max(redis_cluster.ports, key=lambda p: sum(1 for n in node_of.values() if n == p))
    lost_hosts = {host for host, p in node_of.items() if p == port}
    if shards > 1:  # and every scope with a shard there (each scope's shards spread over the nodes)
        client = redis_cluster.client()
        try:
            for host in HOSTS:
                sk = backend.keys.scope(host)
                if any(client.get_node_from_key(sk.claims(s)).port == port for s in range(shards)):
                    lost_hosts.add(host)
        finally:
            client.close()
    recorded = 0
    for host in lost_hosts:
        recorded += len(await memories[host].members())
    redis_cluster.restart_node(redis_cluster.ports.index(port))
    # A scope whose shard (not its log) was lost is found when one of its checks reads that shard's marker,
    # or reads them all (once a heartbeat): the first checks after this pause do.
    await asyncio.sleep(0.3)
    for host in lost_hosts:
        memories[host] = MemoryBackend(SimhashConfig())  # what a fresh in-process backend decides
    caplog.clear()
    unchecked = []
    with caplog.at_level(logging.DEBUG, logger="simhash_scrapy"):
        pages = recrawl_sequence(31, 300, scopes=HOSTS) + recrawl_sequence(32, 300, scopes=HOSTS)
        for n, (record, index) in enumerate(pages):
            have = await backend.check(record, index)
            if have.outcome is Outcome.UNCHECKED:  # on the connection the restart closed: never recorded
                unchecked.append(n)
                await wait_until_up(backend)
                continue
            want = memories[record.scope].check_now(record, index)
            # A scope's keys are lost together or kept together (with shards: a scope one of whose shards
            # lost its records is made anew as a whole).
            assert have == want, (n, record)
    # Only checks on connections the restart closed fail (the client then finds the node again).
    assert len(unchecked) <= 3, unchecked
    assert backend.stats.values["simhash/backend_errors"] == len(unchecked)
    assert backend.stats.values["simhash/redis/lost_scopes"] == len(lost_hosts)
    assert backend.stats.values["simhash/redis/lost_pages"] == recorded
    assert len(loss_lines(caplog)) == 1
    want_members = []
    for host in HOSTS:
        want_members += await memories[host].members()
    want_members.sort(key=lambda m: (m.scope, m.key))
    assert sorted(await backend.members(), key=lambda m: (m.scope, m.key)) == want_members
    await backend.close()
