"""``node_link``: the global index's round trips to a real local three-node Redis Cluster.

What they assert: replies come back in the order the commands were added, whichever node holds each key; a
stale slot map (every slot said to be on one node) is corrected by the nodes' ``MOVED`` replies and every
command runs once, as during a real resharding, half done (``ASK``) and done (``MOVED``); a node without the
append script (``SCRIPT FLUSH``) gets ``EVAL``; an error reply raises; the Python reply reader reads what
hiredis reads, however the bytes are cut; replies of megabytes, which come in many reads, arrive whole.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from redis.crc import key_slot
from redis_server import RedisCluster
from test_redis_backend import async_test
from test_redis_global import opened

from simhash_scrapy.backends import PageRecord
from simhash_scrapy.backends.redis.node_link import NodeLink, ReplyError, RespReader, _python_pack, pack, packed_calls

pytest_plugins = ["conftest_redis"]

REPLIES = b"+OK\r\n:42\r\n:-3\r\n$5\r\nhello\r\n$0\r\n\r\n$-1\r\n*2\r\n$1\r\na\r\n*1\r\n:1\r\n*-1\r\n-ERR bad thing\r\n"
WANT = [b"OK", 42, -3, b"hello", b"", None, [b"a", [1]], None, "ERR bad thing"]


def read_all(reader: Any, chunks: list[bytes]) -> list[Any]:
    out = []
    for chunk in chunks:
        reader.feed(chunk)
        while (reply := reader.gets()) is not False:
            out.append(str(reply) if isinstance(reply, ReplyError) else reply)
    return out


@pytest.mark.parametrize("size", [1, 3, 7, len(REPLIES)])
def test_the_python_reader_reads_every_reply_however_the_bytes_are_cut(size: int) -> None:
    chunks = [REPLIES[i : i + size] for i in range(0, len(REPLIES), size)]
    assert read_all(RespReader(replyError=ReplyError), chunks) == WANT


def test_hiredis_reads_what_the_python_reader_reads() -> None:
    hiredis = pytest.importorskip("hiredis")  # optional: used when installed
    for size in (1, 3, 7, len(REPLIES)):
        chunks = [REPLIES[i : i + size] for i in range(0, len(REPLIES), size)]
        assert read_all(hiredis.Reader(replyError=ReplyError), chunks) == WANT


@pytest.mark.parametrize("packer", [pack, _python_pack])  # hiredis' when installed, and the Python one
def test_pack_is_resp(packer: Any) -> None:
    assert packer(("SET", b"k\r\n", 12, "é")) == b"*4\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$2\r\n12\r\n$2\r\n\xc3\xa9\r\n"
    # a lone surrogate (a scope named by an undecodable byte) as the C router packs it: surrogatepass
    assert packer(("SADD", "s:{\udc80}", "\udc80é")) == b"*3\r\n$4\r\nSADD\r\n$7\r\ns:{\xed\xb2\x80}\r\n$5\r\n\xed\xb2\x80\xc3\xa9\r\n"


@async_test
async def test_replies_in_order_and_a_stale_slot_map_is_corrected_by_moved(redis_cluster: RedisCluster) -> None:
    async with opened(redis_cluster) as backend:
        link: NodeLink = backend.link
        keys = [f"t:{{k{i}}}" for i in range(60)]
        assert len({link.node_of(key).port for key in keys}) == 3  # the keys are on every node
        batch = link.batch()
        for i, key in enumerate(keys):
            batch.call(key, "SET", key, b"v%d" % i)
            batch.call(key, "APPEND", key, b"!")
        want: list[Any] = []
        for i in range(60):
            want += [b"OK", len(f"v{i}!")]
        assert await batch.execute() == want
        # Every slot said to be on the first node: the other nodes' keys come back MOVED, are sent again, run once.
        manager = backend.client.nodes_manager
        first = manager.slots_cache[0][0]
        manager.slots_cache = {slot: [first] for slot in range(16384)}
        odd = [f"t:{{\udc80{i}}}" for i in range(20)]  # lone surrogates (a scope from an undecodable URL byte)
        batch = link.batch()
        for key in keys:
            batch.call(key, "APPEND", key, b"?")
            batch.call(key, "GET", key)
        for key in odd[:10]:  # sent again after MOVED: the same bytes as the first time (not refused by hiredis' packer)
            batch.call(key, "SET", key, key)
        packed_calls(batch.commands, "SET", odd[10:], 1, odd[10:])  # packed, sent again as they are
        replies = await batch.execute()
        assert replies[1:120:2] == [b"v%d!?" % i for i in range(60)]
        assert replies[120:] == [b"OK"] * 20
        assert len({link.node_of(key).port for key in keys}) == 3  # the map was read again
        batch = link.batch()
        for key in odd:
            batch.call(key, "GET", key)
        assert await batch.execute() == [key.encode("utf-8", "surrogatepass") for key in odd]
        batch = link.batch()
        batch.call(keys[0], "HGET", keys[0], "f")  # a string key: WRONGTYPE
        with pytest.raises(ReplyError, match="WRONGTYPE"):
            await batch.execute()


@pytest.mark.parametrize("packed", [False, True], ids=["calls", "packed"])
@async_test
async def test_a_slot_moving_between_nodes_runs_each_command_once(redis_cluster: RedisCluster, packed: bool) -> None:
    # A real resharding, half done (the slot MIGRATING on its node, IMPORTING on the other, its key moved): the
    # old node answers ASK (ASKING, then the command, to the new one); then done: MOVED.  Each command runs once,
    # added by ``call`` or packed (``packed_calls``, as the table buckets' commands are: sent again as they are).
    async with opened(redis_cluster) as backend:
        link: NodeLink = backend.link
        keys = [f"m:{{k{i}}}" for i in range(30)]
        moving = keys[0]
        source = link.node_of(moving)
        target = next(link.node_of(key) for key in keys if link.node_of(key) is not source)

        async def append_all(value: bytes) -> list[Any]:
            batch = link.batch()
            if packed:
                packed_calls(batch.commands, "APPEND", keys, 1, [value] * len(keys))
            for key in keys if not packed else ():
                batch.call(key, "APPEND", key, value)
            return await batch.execute()

        assert await append_all(b"a") == [1] * 30
        slot = key_slot(moving.encode())
        nodes = {port: redis.Redis(host="127.0.0.1", port=port) for port in redis_cluster.ports}
        ids = {port: client.execute_command("CLUSTER MYID").decode() for port, client in nodes.items()}
        try:
            nodes[target.port].execute_command("CLUSTER SETSLOT", slot, "IMPORTING", ids[source.port])
            nodes[source.port].execute_command("CLUSTER SETSLOT", slot, "MIGRATING", ids[target.port])
            nodes[source.port].execute_command("MIGRATE", "127.0.0.1", target.port, moving, 0, 5000)
            assert await append_all(b"b") == [2] * 30  # (ASK)
            for client in nodes.values():  # the slot now the target's, every node told
                client.execute_command("CLUSTER SETSLOT", slot, "NODE", ids[target.port])
            assert await append_all(b"c") == [3] * 30  # (MOVED)
            assert link.node_of(moving) is target
            batch = link.batch()
            for key in keys:
                batch.call(key, "GET", key)
            assert await batch.execute() == [b"abc"] * 30
        finally:
            for client in nodes.values():
                client.close()


@async_test
async def test_a_node_that_drops_the_connection_marks_only_itself_down(redis_cluster: RedisCluster) -> None:
    # One node of a round trip closes the connection (a protocol error) while another is still answering (BLPOP,
    # 2 s): the round trip fails, but the other node answered nothing wrong; ``previous()`` must keep asking it.
    async with opened(redis_cluster) as backend:
        link: NodeLink = backend.link
        keys = [f"d:{{k{i}}}" for i in range(30)]
        broken = link.node_of(keys[0])
        slow_key = next(key for key in keys if link.node_of(key) is not broken)
        slow = link.node_of(slow_key)
        with pytest.raises(ConnectionError):
            await link.exchange([(broken, [b"*1\r\n$-5\r\n", pack(("PING",))]),
                                 (slow, [pack(("BLPOP", slow_key, "2"))])])
        assert link.is_down(keys[0])
        assert not link.is_down(slow_key), "a node that was still answering is marked down"


@async_test
async def test_a_round_trip_cancelled_waiting_for_a_lock_holds_no_other(redis_cluster: RedisCluster) -> None:
    # A round trip takes its nodes' locks one after the other; cancelled while waiting for the second (another
    # round trip holds it), it must let go of the first, or every later round trip to that node waits forever.
    import asyncio

    async with opened(redis_cluster) as backend:
        link: NodeLink = backend.link
        keys = [f"c:{{k{i}}}" for i in range(30)]
        first, second = sorted({id(n): n for n in map(link.node_of, keys)}.values(), key=lambda n: (n.host, n.port))[:2]
        await second.lock.acquire()
        task = asyncio.ensure_future(link.exchange([(first, [pack(("PING",))]), (second, [pack(("PING",))])]))
        for _ in range(5):
            await asyncio.sleep(0)
        assert first.lock.locked()  # (the round trip holds it, waiting for the second's)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        second.lock.release()
        assert not first.lock.locked(), "the first node's lock is held by a cancelled round trip"
        assert await link.exchange([(first, [pack(("PING",))])]) == [[b"PONG"]]


@async_test
async def test_a_node_without_the_script_gets_eval(redis_cluster: RedisCluster) -> None:
    async with opened(redis_cluster) as backend:
        first = await backend.check(PageRecord("https://a.example/", 1 << 40, "myspider"))
        await backend.client.execute_command("SCRIPT FLUSH", target_nodes=backend.client.ALL_NODES)
        second = await backend.check(PageRecord("https://b.example/", (1 << 40) | 1, "myspider"))
        third = await backend.check(PageRecord("https://c.example/", 0x5555555555555555, "myspider"))
        assert (first.outcome.value, second.outcome.value, third.outcome.value) == ("unique", "near_duplicate", "unique")
        assert second.canonical_url == "https://a.example/"
        assert await backend.index_size() == 2


@async_test
async def test_replies_longer_than_a_read_arrive_whole(redis_cluster: RedisCluster) -> None:
    # A bucket of millions of pages is megabytes: its reply comes in many reads, fed to the reader as they come.
    async with opened(redis_cluster) as backend:
        link: NodeLink = backend.link
        keys = [f"big:{{k{i}}}" for i in range(6)]
        values = [bytes([65 + i]) * (3_000_000 + i) for i in range(6)]
        batch = link.batch()
        for key, value in zip(keys, values):
            batch.call(key, "SET", key, value)
        assert await batch.execute() == [b"OK"] * 6
        batch = link.batch()
        for key in keys:
            batch.call(key, "GET", key)
            batch.call(key, "STRLEN", key)
        replies = await batch.execute()
        assert replies[0::2] == values
        assert replies[1::2] == [len(value) for value in values]


@pytest.mark.parametrize("python", [True, False])
@async_test
async def test_zero_and_missing_replies_are_replies_with_either_reader(redis_cluster: RedisCluster, python: bool) -> None:
    # A node's replies are read until as many as it was sent commands: an integer 0 (EXISTS, HSETNX lost) equals
    # False, the value hiredis' reader returned for "not whole yet" by default: each must count as a reply.
    if not python:
        pytest.importorskip("hiredis")  # (before the backend opens: a skip after it would leak its connections)
    async with opened(redis_cluster) as backend:
        link = NodeLink(backend.client, reader=RespReader) if python else backend.link
        keys = [f"z:{{k{i}}}" for i in range(30)]
        batch = link.batch()
        for key in keys:
            batch.call(key, "EXISTS", key)
            batch.call(key, "GET", key)
            batch.call(key, "SET", key, b"")
            batch.call(key, "GET", key)
            batch.call(key, "HSETNX", key + "h", "f", 0)
            batch.call(key, "HSETNX", key + "h", "f", 1)
        assert await batch.execute() == [0, None, b"OK", b"", 1, 0] * 30
        await link.close()


@async_test
async def test_an_empty_batch_is_no_round_trip(redis_cluster: RedisCluster) -> None:
    # A batch with no command (``_fetch`` when every record it looked for was not named yet) answers [] at once: a
    # round trip to no node waited for replies no node would send, till the link's timeout (then the batch failed).
    async with opened(redis_cluster) as backend:
        link: NodeLink = backend.link
        link.timeout = 0.5
        assert await link.batch().execute() == []
        assert await link.exchange([]) == []
