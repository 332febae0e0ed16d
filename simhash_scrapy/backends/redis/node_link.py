"""Lean round trips to a Redis Cluster for the global index: one connection per primary, the slot map read once.

redis-py's cluster pipeline cost ~450 of the ~600 µs of worker CPU a check
measured at 1 million pages (routing, packing and parsing ~13 commands a
check, in Python).  A ``Batch`` here groups its commands by the primary that
owns their key's hash slot (CRC16 of the hash tag, as redis-py's
``key_slot``; a table of the 16,384 slots' nodes, made again from redis-py's
slot map each time it is a new one) and packs them (RESP2), in one C call a
batch (``_speedups.route_commands``; in Python without the C helpers, with
hiredis' ``pack_command`` when installed), writes each node's group in one
send, all nodes at once, then waits for the nodes' replies (one future a
round trip): each connection is an asyncio protocol whose ``data_received``
feeds the bytes as they come to hiredis' C reader when the ``hiredis``
package is installed (``RespReader``, a small Python reader, otherwise: the
same replies); no stream buffer in between, which copied every bucket read
twice more (a 14 KB ``GET``, a table bucket at 10 million pages, cost the
worker 17.0 µs of CPU with streams, 11.5 without, in one run of
``benchmarks/redis_link_cost.py --tree CHECKOUT``).

Redirections, answered as redis-py's cluster client answers them: a
``MOVED`` reply (a slot moved: resharding, failover) refreshes the slot map
and sends that command again to the node named, where it was refused (not
run); ``ASK`` sends ``ASKING`` and the command to the node named; a
``NOSCRIPT`` reply (a node that never loaded a script) sends ``EVAL`` with
the script's body.  Any other error reply raises ``ReplyError``; a broken
connection raises and is dropped (the next batch connects again).

A batch's many commands of one verb (a check's ``SIMHASH.NEAR`` and
``SIMHASH.APPEND`` in each table, the records' ``HGET`` and ``HSET``, the
directory's ``GETRANGE``) are packed at once (``packed_calls``: one C call a
verb, no tuple a command) and added as ``(slot, RESP2 bytes)``: the same
bytes, sent again as they are when redirected.  A node's replies are put in
their places in one C call too (``place_replies``).
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
import sys
import time
from array import array
from collections.abc import AsyncIterator
from typing import Any

from redis.crc import key_slot

from ...core import _native

if sys.version_info >= (3, 11):
    from asyncio import timeout as time_limit, timeout_at as time_limit_at
else:  # pragma: no cover - Python 3.10 (redis-py depends on async-timeout there)
    from async_timeout import (  # type: ignore[import-not-found,no-redef,unused-ignore]
        timeout as time_limit,
        timeout_at as time_limit_at,
    )

__all__ = ["NodeLink", "Batch", "ReplyError", "RespReader", "pack", "time_limit"]

_REDIRECTS = 5
_SLOTS = 16384
#: A slot the slot map names no node for (in ``NodeLink.table``).
_NO_NODE = 0xFFFF
#: ``ASKING``, before a command ``ASK`` redirected.
_ASKING = b"*1\r\n$6\r\nASKING\r\n"
#: What the readers' ``gets`` return while a reply is not whole (``notEnoughData``: not ``False``, which an
#: integer reply 0 equals).
MORE = object()


class ReplyError(Exception):
    """An error reply from a node (``-ERR ...``)."""


def _bulk(arg: Any) -> bytes:
    """One argument as a RESP2 bulk string (a str as UTF-8, ``surrogatepass``; an int in decimal)."""
    if isinstance(arg, str):
        arg = arg.encode("utf-8", "surrogatepass")
    elif isinstance(arg, int):
        arg = b"%d" % arg
    return b"$%d\r\n%b\r\n" % (len(arg), arg)


def _python_pack(args: tuple[Any, ...]) -> bytes:
    """One command in RESP2: ``*N`` then each argument as a bulk string."""
    return b"*%d\r\n" % len(args) + b"".join(map(_bulk, args))


class RespReader:
    """hiredis.Reader's interface (``feed``, ``gets``: a reply or ``False``) in Python, for RESP2 replies."""

    def __init__(self, replyError: type[Exception] = ReplyError, notEnoughData: Any = False) -> None:  # noqa: N803 (hiredis' names)
        self.buffer = bytearray()
        self.error = replyError
        self.more = notEnoughData

    def feed(self, data: bytes) -> None:
        self.buffer += data

    def gets(self) -> Any:
        reply, end = self._parse(0)
        if end < 0:
            return self.more
        del self.buffer[:end]
        return reply

    def _parse(self, start: int) -> tuple[Any, int]:
        buf = self.buffer
        line_end = buf.find(b"\r\n", start)
        if line_end < 0:
            return None, -1
        kind, line, after = buf[start : start + 1], bytes(buf[start + 1 : line_end]), line_end + 2
        if kind == b"$":
            size = int(line)
            if size < 0:
                return None, after
            if len(buf) < after + size + 2:
                return None, -1
            return bytes(buf[after : after + size]), after + size + 2
        if kind == b":":
            return int(line), after
        if kind == b"+":
            return line, after
        if kind == b"-":
            return self.error(line.decode("utf-8", "replace")), after
        if kind == b"*":
            items = []
            for _ in range(max(int(line), 0)):
                item, after = self._parse(after)
                if after < 0:
                    return None, -1
                items.append(item)
            return (items if int(line) >= 0 else None), after
        raise ReplyError(f"unexpected reply type {kind!r} from Redis")


def _packer() -> Any:
    """hiredis' ``pack_command`` (C, the same bytes) when installed, else the Python one.  hiredis encodes a str
    strictly, and refuses a lone surrogate (a scope named by an undecodable URL byte); such a command is packed by
    the Python packer, as the C router (``route_commands``) packs it the first time (``surrogatepass``): a command
    sent again after ``MOVED`` or ``ASK`` has the same bytes."""
    try:
        from hiredis import pack_command  # type: ignore[import-not-found,unused-ignore]  # (optional)
    except ImportError:
        return _python_pack

    def pack(args: tuple[Any, ...]) -> bytes:
        try:
            packed: bytes = pack_command(args)
        except UnicodeEncodeError:
            return _python_pack(args)
        return packed

    return pack


#: One command in RESP2 (hiredis' packer when installed).
pack = _packer()


def reader_class() -> Any:
    """hiredis' C reader when installed (2.1 or later: ``notEnoughData``), else ``RespReader``."""
    try:
        import hiredis  # type: ignore[import-not-found,unused-ignore]  # (optional)

        hiredis.Reader(notEnoughData=MORE)
    except (ImportError, TypeError):  # (hiredis 2.0 returns False while a reply is not whole: an integer 0 equals it)
        return RespReader
    return hiredis.Reader


#: Bytes fed to a reply reader at a time.  A reader moves the bytes it has not parsed yet to the front of its buffer
#: after each reply it returns (hiredis' ``sdsrange``; ``RespReader``'s ``del``): a 256 KB read of bucket replies fed
#: whole moves ~3 MB.  Fed in pieces, only the rest of a piece moves: a round trip of 80 GETs of 10 KB (a batch's
#: table buckets at 10 million pages) costs the worker ~0.67x the CPU (``benchmarks/redis_link_cost.py --tree``).
FEED_PIECE = 32768


def new_reader(cls: Any, error: type[Exception]) -> Any:
    """A reply reader of ``cls`` (hiredis' or ``RespReader``) for a ``_Node``: error replies as ``error``, ``MORE``
    while a reply is not whole."""
    return cls(replyError=error, notEnoughData=MORE)


def _slot_python(key: str | bytes) -> int:
    return key_slot(key.encode("utf-8", "surrogatepass") if isinstance(key, str) else key)


def slot_of(key: str | bytes) -> int:
    """Redis Cluster's hash slot of ``key`` (``redis.crc.key_slot`` of its UTF-8; C when built)."""
    if _native.speedups is not None:
        return int(_native.speedups.key_slot(key))
    return _slot_python(key)


def _route_python(commands: list[tuple[Any, Any]], table: Any, nodes: int) -> list[Any]:
    """``route_commands`` in Python (``_speedups.route_commands`` is the C twin, the same result)."""
    groups: list[Any] = [None] * (nodes + 1)
    for i, (key, args) in enumerate(commands):
        packed = isinstance(args, bytes)
        n = min(table[key if packed else _slot_python(key)], nodes)
        group = groups[n]
        if group is None:
            group = groups[n] = ([], [])
        group[0].append(i)
        group[1].append(args if packed else pack(args))
    return [None if group is None else (group[0], b"".join(group[1])) for group in groups]


def route_commands(commands: list[tuple[Any, Any]], table: Any, nodes: int) -> list[Any]:
    """A batch's commands (``(key, args)``, or ``(slot, RESP2 bytes)`` from ``packed_calls``) grouped by node:
    ``groups[n]`` is ``(indexes, RESP2 bytes)`` of the commands whose key's slot ``table`` (16,384 uint16) maps to
    node ``n`` (``None`` if none), ``groups[nodes]`` those of a slot mapped to ``nodes`` or more (no node serves
    it).  One C call a batch when built."""
    if _native.speedups is not None:
        return _native.speedups.route_commands(commands, table, nodes)
    return _route_python(commands, table, nodes)


def _place_python(indexes: list[int], answer: list[Any], replies: list[Any]) -> list[int]:
    """``place_replies`` in Python (``_speedups.place_replies`` is the C twin)."""
    if any(not 0 <= i < len(replies) for i in indexes[: len(answer)]):
        raise IndexError("place_replies: a position out of the replies' range")
    errors = []
    for n, (i, reply) in enumerate(zip(indexes, answer)):
        if isinstance(reply, ReplyError):
            errors.append(n)
        replies[i] = reply
    return errors


def place_replies(indexes: list[int], answer: list[Any], replies: list[Any]) -> list[int]:
    """One node's replies put in their places (``replies[indexes[n]] = answer[n]``); returns the ``n`` of each
    ``ReplyError`` among them (a redirect, or an error), in order.  One C call when built: a batch's ~13 replies a
    check cost no Python each."""
    if _native.speedups is not None:
        errors: list[int] = _native.speedups.place_replies(indexes, answer, replies, ReplyError)
        return errors
    return _place_python(indexes, answer, replies)


def packed_calls(commands: list[tuple[Any, Any]], verb: str, keys: list[str], group: int, per: list[Any],
                 tail: tuple[Any, ...] = (), lengths: dict[str, int] | None = None, step: int = 0,
                 sent: bool = False) -> list[int] | None:
    """Appends to ``commands`` the command ``verb key *args *tail`` for each key of ``keys``, where ``args`` is
    ``per[i // group]`` (a tuple of arguments, or one), packed: ``(its key's slot, its RESP2 bytes)``, the bytes
    ``pack`` makes of those arguments.  With ``lengths``: each key's value there grows by ``step`` (from 0), and the
    values after each command are returned; with ``sent`` too, each command ends with its value (``SIMHASH.APPEND``'s
    ``expected``).  One C call (``_speedups.bucket_commands``) when built: a batch's commands cost no Python each."""
    if _native.speedups is not None:
        packed_verb, packed_tail = _bulk(verb), b"".join(map(_bulk, tail))
        if lengths is None:
            return _native.speedups.bucket_commands(commands, keys, group, per, packed_verb, packed_tail, len(tail))
        return _native.speedups.bucket_commands(commands, keys, group, per, packed_verb, packed_tail, len(tail),
                                                lengths, step, sent)
    if group < 1 or len(per) * group != len(keys):
        raise ValueError("bucket_commands: group >= 1 keys for each of per, and lengths a dict or None")
    expected: list[int] = []
    for i, key in enumerate(keys):
        args = per[i // group] if isinstance(per[i // group], tuple) else (per[i // group],)
        last: tuple[int, ...] = ()
        if lengths is not None:
            lengths[key] = now = lengths.get(key, 0) + step
            expected.append(now)
            last = (now,) if sent else ()
        commands.append((_slot_python(key), _python_pack((verb, key, *args, *tail, *last))))
    return None if lengths is None else expected


def unserved(slot: int) -> ConnectionError:
    """The error of a command whose hash slot no node serves (a cluster with slots unassigned, or a map read
    mid-change): an outage, as a node down is."""
    return ConnectionError(f"no node serves hash slot {slot} (the cluster's slot map names none)")


class _Exchange:
    """One round trip's wait: done when every node of it has all its replies (one future, not one per node)."""

    def __init__(self, nodes: int) -> None:
        self.left = nodes
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def node_done(self) -> None:
        self.left -= 1
        if self.left == 0 and not self.future.done():
            self.future.set_result(None)

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)

    def time_out(self) -> None:
        self.fail(asyncio.TimeoutError())  # (as asyncio.timeout's: the same type on every Python)


class _Node(asyncio.Protocol):
    """One connection to one primary: an asyncio protocol whose ``data_received`` feeds the reply reader with the
    bytes as they come (no stream buffer: two copies fewer of every bucket read)."""

    def __init__(self, host: str, port: int, number: int = 0) -> None:
        self.host, self.port = host, port
        self.number = number  # (its number in its ``NodeLink``: the slot table's values)
        self.transport: asyncio.Transport | None = None
        self.reader: Any = None
        self.lock = asyncio.Lock()
        self.replies: list[Any] = []
        self.wanted = 0
        self.waiter: _Exchange | None = None
        #: When the node did not answer an exchange (no connection, a timeout, a connection lost before all its
        #: replies), if it has not answered one since: a lookup that can wait (``GlobalRedisBackend.previous``)
        #: skips it for a while (``NodeLink.is_down``).
        self.down_at: float | None = None

    @property
    def connected(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def expect(self, count: int, waiter: _Exchange) -> None:
        self.replies, self.wanted, self.waiter = [], count, waiter

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.waiter is None:  # (nothing asked: read with the next exchange's replies, as it comes)
            self.reader.feed(data)
            return
        replies, reader = self.replies, self.reader
        view = memoryview(data) if len(data) > FEED_PIECE else data  # (a read of one piece is fed as it is)
        for at in range(0, len(data), FEED_PIECE):
            reader.feed(view[at : at + FEED_PIECE])
            replies.extend(iter(reader.gets, MORE))  # (no more than asked: one exchange at a time a node)
        if len(replies) >= self.wanted:
            waiter, self.waiter = self.waiter, None
            self.down_at = None
            waiter.node_done()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.waiter is not None:
            waiter, self.waiter = self.waiter, None
            self.down_at = time.monotonic()
            waiter.fail(ConnectionError(f"Redis node {self.host}:{self.port} closed the connection"))

    def close(self) -> None:
        # abort, not close: a command still in the write buffer is discarded (never run after its caller was told
        # it failed), and the transport's connection_lost comes at once, before a new connection's (this protocol
        # serves the next one: a late one would fail the next call)
        if self.transport is not None:
            self.transport.abort()
        self.transport = None
        self.waiter = None


class NodeLink:
    """Round trips to the primaries of a cluster whose slot map ``client`` (a ``redis.asyncio.RedisCluster``) knows."""

    def __init__(self, client: Any, timeout: float = 10.0, reader: Any = None) -> None:
        self.client = client
        self.timeout = timeout
        self.reader = reader or reader_class()
        self.nodes: dict[str, _Node] = {}
        self.order: list[_Node] = []  # by number (``_Node.number``)
        #: slot -> the number of its primary (``_NO_NODE``: none), read from the slot map ``mapped`` (redis-py's
        #: ``slots_cache``; a new one, after ``refresh`` or redis-py's own reading, makes the table again)
        self.table = array("H")
        self.mapped: Any = None
        self.scripts: dict[str, bytes] = {}  # sha -> body (NOSCRIPT: EVAL)
        kwargs = client.connection_kwargs
        self.auth: tuple[Any, ...] = ()
        if kwargs.get("password"):
            user = kwargs.get("username")
            self.auth = (b"AUTH", user, kwargs["password"]) if user else (b"AUTH", kwargs["password"])
        self.tls = "ssl_cert_reqs" in kwargs or "SSL" in getattr(kwargs.get("connection_class"), "__name__", "")

    def batch(self, skip_down: bool = False) -> Batch:
        return Batch(self, skip_down)

    def remember_script(self, sha: str, body: str) -> None:
        self.scripts[sha] = body.encode()

    def slot_table(self) -> array[int]:
        """slot -> its primary's number, made again when redis-py's slot map is a new one."""
        slots = self.client.nodes_manager.slots_cache
        if slots is not self.mapped:
            table = array("H", [_NO_NODE]) * _SLOTS
            for slot, served in slots.items():
                if served:
                    table[slot] = self.node_at(served[0].host, served[0].port).number
            self.table, self.mapped = table, slots
        return self.table

    def node_of(self, key: str | int) -> _Node:
        """The primary serving ``key`` (or the hash slot ``key``, a packed command's)."""
        slot = key if isinstance(key, int) else slot_of(key)
        number = self.slot_table()[slot]
        if number >= len(self.order):  # (a cluster with slots unassigned, or a map read mid-change: an outage)
            raise unserved(slot)
        return self.order[number]

    def is_down(self, key: str) -> bool:
        """Whether the node of ``key`` did not answer the last exchange it was in, less than the link's timeout ago
        (``_Node.down_at``; after that, a lookup asks it again: a node back up, not yet reached by a check)."""
        return self._down(self.node_of(key))

    def _down(self, node: _Node) -> bool:
        return node.down_at is not None and time.monotonic() - node.down_at < self.timeout

    def node_at(self, host: str, port: int) -> _Node:
        name = f"{host}:{port}"
        node = self.nodes.get(name)
        if node is None:
            node = self.nodes[name] = _Node(host, port, len(self.order))
            self.order.append(node)
        return node

    async def _connect(self, node: _Node) -> None:
        context = ssl_module.create_default_context() if self.tls else None
        node.reader = new_reader(self.reader, ReplyError)
        await asyncio.get_running_loop().create_connection(lambda: node, node.host, node.port, ssl=context)
        if self.auth:
            (reply,) = await self._send(node, [pack(self.auth)])
            if isinstance(reply, ReplyError):
                raise reply

    async def _connect_or_down(self, node: _Node) -> None:
        try:
            await self._connect(node)
        except BaseException:
            node.down_at = time.monotonic()
            raise

    async def _send(self, node: _Node, commands: list[bytes]) -> list[Any]:
        """One node's commands, then its replies."""
        waiter = _Exchange(1)
        node.expect(len(commands), waiter)
        assert node.transport is not None
        node.transport.write(b"".join(commands))
        await waiter.future
        return node.replies

    async def refresh(self) -> None:
        await self.client.nodes_manager.initialize()  # (a new slot map: ``slot_table`` makes the table again)

    async def exchange(self, groups: list[tuple[_Node, list[bytes]]], skip_down: bool = False) -> list[list[Any]]:
        """One round trip to each node of ``groups`` (its commands, packed) at once: ``packed_exchange``."""
        return await self.packed_exchange([(node, len(commands), b"".join(commands)) for node, commands in groups],
                                          skip_down)

    async def _connect_all(self, nodes: list[_Node], deadline: float) -> None:
        """Connects the nodes not connected, by ``deadline``; ``ConnectionError`` when one connected before has
        been cut meanwhile (nothing is sent then, as with any cut)."""
        if not all(node.connected for node in nodes):
            async with time_limit_at(deadline):
                for node in nodes:
                    if not node.connected:
                        await self._connect_or_down(node)
        lost = next((node for node in nodes if node.transport is None), None)
        if lost is not None:
            raise ConnectionError(f"Redis node {lost.host}:{lost.port} closed the connection")

    async def packed_exchange(self, groups: list[tuple[_Node, int, bytes]], skip_down: bool = False) -> list[list[Any]]:
        """One round trip to each node of ``groups`` (``(node, how many commands, their RESP2 bytes)``) at once: every
        node's commands sent, then one wait until every node's protocol has read all its replies.  ``skip_down``: a
        node ``is_down`` once its lock is had (it failed the call queued before) raises ``ConnectionError`` at once,
        nothing sent."""
        if not groups:  # (a batch of no command: no node would answer, the wait would last till the timeout)
            return []
        nodes = [groups[0][0]] if len(groups) == 1 else sorted(
            {id(node): node for node, _, _ in groups}.values(), key=lambda node: (node.host, node.port))
        held: list[_Node] = []
        try:
            for node in nodes:  # (in one order: two exchanges never wait for each other's locks)
                await node.lock.acquire()
                held.append(node)
        except BaseException:  # (cancelled waiting for one: the ones had, let go)
            for node in held:
                node.lock.release()
            raise
        down = [node for node in nodes if skip_down and self._down(node)]
        if down:
            for node in nodes:
                node.lock.release()
            raise ConnectionError(f"Redis node {down[0].host}:{down[0].port} did not answer its last call")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout  # (connecting and the replies: one time limit in all)
        try:
            await self._connect_all([node for node, _, _ in groups], deadline)
            waiter = _Exchange(len(groups))
            for node, count, data in groups:
                node.expect(count, waiter)
                node.transport.write(data)  # type: ignore[union-attr]
            # (a timer that fails the wait, not asyncio.timeout: that cost 4 µs of CPU a round trip, this 1)
            timer = loop.call_at(deadline, waiter.time_out)
            try:
                await waiter.future
            finally:
                timer.cancel()
            return [node.replies for node, _, _ in groups]
        except BaseException as exc:
            for node in nodes:  # a reply half read leaves a stream out of step: connect again next time
                # (it did not answer in time: known down till it does; not when another node failed the round
                # trip, or the caller was cancelled, while it was answering)
                if node.waiter is not None and isinstance(exc, asyncio.TimeoutError):
                    node.down_at = time.monotonic()
                node.close()
            raise
        finally:
            for node in nodes:
                node.lock.release()

    def primaries(self) -> list[_Node]:
        """Every primary of the slot map (each once)."""
        found: dict[tuple[str, int], Any] = {}
        for nodes in self.client.nodes_manager.slots_cache.values():
            found.setdefault((nodes[0].host, nodes[0].port), nodes[0])
        return [self.node_at(host, port) for host, port in sorted(found)]

    async def scan(self, match: str, count: int = 10_000) -> AsyncIterator[bytes]:
        """The keys matching ``match`` on every primary (``SCAN``, one node after the other)."""
        for node in self.primaries():
            cursor = b"0"
            while True:
                ((reply,),) = await self.exchange([(node, [pack(("SCAN", cursor, "MATCH", match, "COUNT", count))])])
                if isinstance(reply, ReplyError):
                    raise reply
                cursor, keys = reply
                for key in keys:
                    yield key
                if cursor == b"0":
                    break

    async def close(self) -> None:
        for node in self.nodes.values():
            node.close()
        self.nodes.clear()
        self.order.clear()
        self.mapped = None


class Batch:
    """Commands for one round trip (every node at once); ``execute`` returns the replies in the order added."""

    def __init__(self, link: NodeLink, skip_down: bool = False) -> None:
        self.link = link
        self.skip_down = skip_down  # (``NodeLink.exchange``)
        self.commands: list[tuple[Any, Any]] = []  # (key, args), or (slot, RESP2 bytes): ``packed_calls``

    def __len__(self) -> int:
        return len(self.commands)

    def call(self, key: str, *args: Any) -> None:
        self.commands.append((key, args))

    async def execute(self) -> list[Any]:
        link = self.link
        replies: list[Any] = [None] * len(self.commands)
        table = link.slot_table()  # (first: it may number new nodes)
        groups = route_commands(self.commands, table, len(link.order))  # (every command as added, no ASKING)
        if groups[-1] is not None:  # (the commands whose slot no node serves)
            key = self.commands[groups[-1][0][0]][0]
            raise unserved(key if isinstance(key, int) else slot_of(key))
        order = link.order
        todo = await self._send([(order[n], group[0], len(group[0]), group[1])
                                 for n, group in enumerate(groups[:-1]) if group is not None], set(), replies)
        for _ in range(_REDIRECTS - 1):
            if not todo:
                return replies
            todo = await self._round(todo, replies)
        if not todo:
            return replies
        raise ReplyError(f"Redis kept redirecting {len(todo)} command(s) (MOVED/ASK) {_REDIRECTS} times")

    async def _round(self, todo: list[tuple[int, _Node, bytes, bool]], replies: list[Any]) -> list[Any]:
        """One send per node; returns the commands to send again (redirected, or NOSCRIPT)."""
        by_node: dict[int, tuple[_Node, list[int], list[bytes]]] = {}
        asking: set[int] = set()
        for i, node, packed, ask in todo:
            group = by_node.setdefault(id(node), (node, [], []))
            group[1].append(i)
            if ask:  # (a command ASK redirected: ASKING, then the command: two replies)
                asking.add(i)
                group[2].extend((_ASKING, packed))
            else:
                group[2].append(packed)
        return await self._send([(node, indexes, len(packed), b"".join(packed))
                                 for node, indexes, packed in by_node.values()], asking, replies)

    async def _send(self, groups: list[tuple[_Node, list[int], int, bytes]], asking: set[int],
                    replies: list[Any]) -> list[Any]:
        """Each node's group in one send, all at once; the replies in place; returns the commands to send again."""
        answers = await self.link.packed_exchange([(node, count, data) for node, _, count, data in groups],
                                                  self.skip_down)
        again: list[tuple[int, _Node, bytes, bool]] = []
        moved = False
        for (_, indexes, _, _), answer in zip(groups, answers):
            if asking:
                answer = _without_asking(indexes, answer, asking)
            for n in place_replies(indexes, answer, replies):
                i, reply = indexes[n], answer[n]
                retry = self._redirect(i, str(reply))
                if retry is None:
                    raise reply
                moved |= str(reply).startswith("MOVED")
                again.append(retry)
        if moved:
            await self.link.refresh()
        return again

    def _redirect(self, i: int, message: str) -> tuple[int, _Node, bytes, bool] | None:
        """(the command, the node to send it to, its bytes, whether ``ASKING`` goes first), or None: not a
        redirection.  A packed command (``packed_calls``) is sent again as it is; none of them is an ``EVALSHA``."""
        key, args = self.commands[i]
        packed = args if isinstance(args, bytes) else None
        kind, *rest = message.split()
        if kind in ("MOVED", "ASK") and len(rest) == 2:
            host, _, port = rest[1].rpartition(":")
            node = self.link.node_at(host or self.link.node_of(key).host, int(port))
            return i, node, packed if packed is not None else pack(args), kind == "ASK"
        if kind == "NOSCRIPT" and packed is None and args[0] == "EVALSHA" and args[1] in self.link.scripts:
            return i, self.link.node_of(key), pack(("EVAL", self.link.scripts[args[1]], *args[2:])), False
        return None


def _without_asking(indexes: list[int], answer: list[Any], asking: set[int]) -> list[Any]:
    """A node's replies but the ``+OK`` of each ``ASKING`` sent before an ASK-redirected command."""
    got = iter(answer)
    out = []
    for i in indexes:
        if i in asking:
            next(got)
        out.append(next(got))
    return out
