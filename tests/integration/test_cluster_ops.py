"""``cluster_ops.Ops``: a round trip of the global index as one script call per node, on a real three-node cluster.

What they assert: the replies are those of the same commands sent one by one; a node given a key it does not
serve (a stale slot map; a slot half moved by a real resharding, ``MIGRATING``/``IMPORTING`` then ``MIGRATE``)
runs none of that call's commands, and the commands then sent one by one run once each, with the same replies;
a backend whose slot map goes stale again and again gives the in-process verdicts.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.crc import key_slot
from redis_server import RedisCluster
from test_redis_backend import async_test
from test_redis_global import global_backend, steps_1_to_3

from simhash_scrapy.backends.memory import MemoryBackend
from simhash_scrapy.backends.redis.cluster_ops import Ops, plain
from simhash_scrapy.backends.redis.node_link import NodeLink
from simhash_scrapy.config import SimhashConfig

pytest_plugins = ["conftest_redis"]


def some_commands(keys: list[str]) -> list[tuple[str, str, tuple[Any, ...]]]:
    """Every command ``Ops`` knows, over ``keys`` (twice each: the second sees the first's effect)."""
    out: list[tuple[str, str, tuple[Any, ...]]] = []
    for i, key in enumerate(keys):
        h, d = f"{key}h", f"{key}d"  # (the same hash tag: the same slot)
        for _ in range(2):
            out += [
                ("a", key, (bytes([i % 256]) * 4 + b"\0\0\0\1",)), ("g", key, ()), ("s", key, (0, 3)),
                ("h", h, (b"f", b"v%d" % i)), ("f", h, (b"f",)), ("x", h, (b"g", b"1")), ("n", h, ("c", 2)),
                ("d", d, (11 * i, b"slot%07d" % i, 4096)), ("s", d, (11 * i, 11 * i + 10)),
            ]
        out += [("r", key, (b"\0\0\0\1",)), ("u", h, (b"g", b"1")), ("u", h, (b"g", b"1")), ("f", h, (b"missing",))]
    return out


async def run(link: NodeLink, commands: list[tuple[str, str, tuple[Any, ...]]]) -> list[Any]:
    ops = Ops(link)
    for code, key, args in commands:
        ops.add(code, key, *args)
    return await ops.execute()


async def one_by_one(link: NodeLink, commands: list[tuple[str, str, tuple[Any, ...]]]) -> list[Any]:
    replies = []
    for code, key, args in commands:  # (one round trip each: each sees the ones before)
        pipe = link.batch()
        pipe.call(key, *plain(code, key, args))
        replies += await pipe.execute()
    return replies


def stale(backend: Any) -> None:
    """Every slot said to be on the first node (the link's routes forgotten)."""
    manager = backend.client.nodes_manager
    first = manager.slots_cache[0][0]
    manager.slots_cache = {slot: [first] for slot in range(16384)}
    backend.link.routes.clear()


@async_test
async def test_replies_are_those_of_the_commands_sent_alone_even_with_a_stale_slot_map(
    redis_cluster: RedisCluster,
) -> None:
    backend = global_backend(redis_cluster)
    await backend.open("myspider")
    link: NodeLink = backend.link
    keys = [f"o:{{k{i}}}" for i in range(30)]
    assert len({link.node_of(key).port for key in keys}) == 3  # the keys are on every node
    want = await one_by_one(link, some_commands([f"w:{{k{i}}}" for i in range(30)]))
    assert await run(link, some_commands(keys)) == want
    stale(backend)  # the script sent to the first node finds keys it does not serve: runs none, sent one by one
    again = [f"s:{{k{i}}}" for i in range(30)]
    assert await run(link, some_commands(again)) == want
    assert len({link.node_of(key).port for key in again}) == 3  # the map was read again
    await backend.close()


@async_test
async def test_a_slot_moving_between_nodes_runs_each_command_once(redis_cluster: RedisCluster) -> None:
    backend = global_backend(redis_cluster)
    await backend.open("myspider")
    link: NodeLink = backend.link
    keys = [f"m:{{k{i}}}" for i in range(30)]
    moving = keys[0]
    source = link.node_of(moving)
    target = next(link.node_of(key) for key in keys if link.node_of(key) is not source)
    assert await run(link, [("a", key, (b"\0\0\0\7\0\0\0\1",)) for key in keys]) == [8] * 30
    slot = key_slot(moving.encode())
    nodes = {port: redis.Redis(host="127.0.0.1", port=port) for port in redis_cluster.ports}
    ids = {port: client.execute_command("CLUSTER MYID").decode() for port, client in nodes.items()}
    try:
        # A real resharding, half done: the slot MIGRATING on its node, IMPORTING on the other, its key moved.
        nodes[target.port].execute_command("CLUSTER SETSLOT", slot, "IMPORTING", ids[source.port])
        nodes[source.port].execute_command("CLUSTER SETSLOT", slot, "MIGRATING", ids[target.port])
        nodes[source.port].execute_command("MIGRATE", "127.0.0.1", target.port, moving, 0, 5000)
        # The source no longer holds the key (ASK): its script runs nothing, each command is sent alone.
        assert await run(link, [("a", key, (b"\0\0\0\7\0\0\0\2",)) for key in keys]) == [16] * 30
        for client in nodes.values():  # the slot now the target's (every node told)
            client.execute_command("CLUSTER SETSLOT", slot, "NODE", ids[target.port])
        assert link.node_of(moving) is source  # (the link's map is stale: MOVED)
        assert await run(link, [("a", key, (b"\0\0\0\7\0\0\0\3",)) for key in keys]) == [24] * 30
        assert link.node_of(moving) is target
        replies = await run(link, [("g", key, ()) for key in keys])
        assert {reply[:28] for reply in replies} == {b"\0\0\0\x18\0\0\0\7\0\0\0\1\0\0\0\7\0\0\0\2\0\0\0\7\0\0\0\3"}
    finally:
        for client in nodes.values():
            client.close()
        await backend.close()


@async_test
async def test_a_slot_map_gone_stale_again_and_again_gives_the_in_process_verdicts(redis_cluster: RedisCluster) -> None:
    config = SimhashConfig(max_distance=3)
    backend = global_backend(redis_cluster, config)
    await backend.open("myspider")
    memory = MemoryBackend(config)
    for n, (record, index) in enumerate(steps_1_to_3(300, 41, 3)):
        if n % 7 == 0:
            stale(backend)
        assert await backend.check(record, index) == memory.check_now(record, index), record
    assert await backend.index_size() == await memory.index_size()
    await backend.close()
