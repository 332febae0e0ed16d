"""The Redis backend on a real local three-node Redis Cluster (Debian's redis-server, started by the tests).

Each scope's keys share one hash slot (``P:{<scope id>}:...``), so the scopes
of one spider (``SIMHASH_SCOPE = "domain"``: one per host) spread over the
nodes, and a check stays one atomic script on one node.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from redis_server import RedisCluster
from test_redis_backend import async_test, make_backend, recrawl_sequence

from simhash_scrapy.backends import PageRecord
from simhash_scrapy.backends.base import Outcome
from simhash_scrapy.backends.memory import MemoryBackend
from simhash_scrapy.config import SimhashConfig
from crawl_helpers import flip  # noqa: E402  (tests/ is on sys.path)

pytest_plugins = ["conftest_redis"]

HOSTS = tuple(f"h{n}.example" for n in range(12))


def keys_per_node(cluster: RedisCluster) -> list[int]:
    import redis

    counts = []
    for port in cluster.ports:
        client = redis.Redis(host="127.0.0.1", port=port)
        try:
            counts.append(int(client.dbsize()))
        finally:
            client.close()
    return counts


def cluster_backend(cluster: RedisCluster, **settings: Any) -> Any:
    return make_backend(None, SimhashConfig(), SIMHASH_REDIS_URL=cluster.url, SIMHASH_REDIS_CLUSTER=True, **settings)


@async_test
async def test_one_spider_spread_over_the_nodes_same_decisions(redis_cluster: RedisCluster) -> None:
    backend = cluster_backend(redis_cluster)
    await backend.open("myspider")
    memory = MemoryBackend(SimhashConfig())
    for record, index in recrawl_sequence(12, 600, scopes=HOSTS):
        assert await backend.check(record, index) == memory.check_now(record, index), record
    # Scopes on different nodes have no common counter: members come in first-check order per scope.
    by_key = sorted(await memory.members(), key=lambda m: (m.scope, m.key))
    assert sorted(await backend.members(), key=lambda m: (m.scope, m.key)) == by_key
    assert await backend.index_size() == await memory.index_size()
    spread = keys_per_node(redis_cluster)
    assert sum(1 for n in spread if n) >= 2, spread
    await backend.close()  # not persistent: every key of the spider is deleted, on every node
    assert keys_per_node(redis_cluster) == [0, 0, 0]


@async_test
async def test_concurrent_workers_on_the_cluster_make_exactly_one_canonical(redis_cluster: RedisCluster) -> None:
    rng = random.Random(21)
    workers = [cluster_backend(redis_cluster, SIMHASH_REDIS_PERSIST=True) for _ in range(3)]
    for worker in workers:
        await worker.open("myspider")
    records = []
    groups = 0
    for host in HOSTS[:6]:
        for c in range(5):
            base = rng.getrandbits(64)
            groups += 1
            for v in range(8):  # within 1 of the base: all near-duplicates of each other
                records.append(PageRecord(f"https://{host}/{c}/{v}", flip(base, rng.randint(0, 1), rng), host))
    rng.shuffle(records)
    verdicts = await asyncio.gather(*(workers[i % 3].check(r) for i, r in enumerate(records)))
    canonical = [r for r, v in zip(records, verdicts) if v.outcome is Outcome.UNIQUE]
    assert sorted((r.scope, r.url.split("/")[3]) for r in canonical) == sorted(
        (h, str(c)) for h in HOSTS[:6] for c in range(5)
    )
    for record, verdict in zip(records, verdicts):
        if verdict.outcome is Outcome.NEAR_DUPLICATE:
            assert verdict.canonical_url.split("/")[2:4] == record.url.split("/")[2:4]
    assert await workers[0].index_size() == groups
    assert len(await workers[2].members()) == len(records)
    assert sum(1 for n in keys_per_node(redis_cluster) if n) >= 2
    for worker in workers:
        await worker.close()


@async_test
async def test_a_hash_tag_keeps_everything_in_one_slot(redis_cluster: RedisCluster) -> None:
    backend = cluster_backend(redis_cluster, SIMHASH_REDIS_KEY="{%(spider)s}:simhash")
    await backend.open("myspider")
    memory = MemoryBackend(SimhashConfig())
    for record, index in recrawl_sequence(13, 200, scopes=HOSTS[:4]):
        assert await backend.check(record, index) == memory.check_now(record, index)
    assert await backend.members() == await memory.members()  # one counter: global first-check order
    assert sorted(keys_per_node(redis_cluster)).count(0) == 2
    await backend.close()


@async_test
async def test_one_scope_sharded_over_the_nodes(redis_cluster: RedisCluster) -> None:
    # SIMHASH_REDIS_SHARDS: one scope's identity records spread over the nodes (the log, where the
    # decision is taken atomically, stays in the scope's slot): the same decisions as in process.
    backend = cluster_backend(redis_cluster, SIMHASH_REDIS_SHARDS=6)
    await backend.open("myspider")
    memory = MemoryBackend(SimhashConfig())
    for record, index in recrawl_sequence(14, 600):
        assert await backend.check(record, index) == memory.check_now(record, index), record
    assert await backend.members() == await memory.members()
    assert await backend.index_size() == await memory.index_size()
    spread = keys_per_node(redis_cluster)
    assert sum(1 for n in spread if n) >= 2, spread
    await backend.close()
    assert keys_per_node(redis_cluster) == [0, 0, 0]


@async_test
async def test_concurrent_workers_on_one_sharded_scope_make_exactly_one_canonical(redis_cluster: RedisCluster) -> None:
    rng = random.Random(22)
    workers = [cluster_backend(redis_cluster, SIMHASH_REDIS_PERSIST=True, SIMHASH_REDIS_SHARDS=6) for _ in range(3)]
    for worker in workers:
        await worker.open("myspider")
    records = []
    for c in range(30):
        base = rng.getrandbits(64)
        for v in range(8):  # within 1 of the base: all near-duplicates of each other
            records.append(PageRecord(f"https://one.example/{c}/{v}", flip(base, rng.randint(0, 1), rng), "spider"))
    # The same identities checked by two workers at once: the claim makes the second wait for the first.
    again = [PageRecord(r.url, r.fingerprint, r.scope) for r in records[:40]]
    rng.shuffle(records)
    checks = [workers[i % 3].check(r) for i, r in enumerate(records)]
    checks += [workers[(i + 1) % 3].check(r) for i, r in enumerate(again)]
    verdicts = await asyncio.gather(*checks)
    first = verdicts[: len(records)]
    canonical = [r for r, v in zip(records, first) if v.outcome is Outcome.UNIQUE]
    assert sorted(r.url.split("/")[3] for r in canonical) == sorted(str(c) for c in range(30))
    for record, verdict in zip(records, first):
        if verdict.outcome is Outcome.NEAR_DUPLICATE:
            assert verdict.canonical_url.split("/")[3] == record.url.split("/")[3]
    # Each identity checked twice: once as a new page, once as an unchanged one, in either order.
    by_url: dict[str, list[Outcome]] = {}
    for record, verdict in zip([*records, *again], verdicts):
        by_url.setdefault(record.url, []).append(verdict.outcome)
    for record in again:
        outcomes = by_url[record.url]
        assert Outcome.UNCHANGED in outcomes and len(outcomes) == 2, (record.url, outcomes)
    assert await workers[0].index_size() == 30
    assert len(await workers[2].members()) == len(records)
    assert sum(1 for n in keys_per_node(redis_cluster) if n) >= 2
    assert all(worker.stats.values.get("simhash/backend_errors", 0) == 0 for worker in workers)
    for worker in workers:
        await worker.close()
