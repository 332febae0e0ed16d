"""Lean round trips to a Redis Cluster for the global index: one connection per primary, the slot map read once.

redis-py's cluster pipeline cost ~450 of the ~600 µs of worker CPU a check
measured at 1 million pages (routing, packing and parsing ~13 commands a
check, in Python).  A ``Batch`` here packs its commands itself (RESP2: hiredis'
``pack_command`` when installed), groups them by the primary that owns their
key's hash slot (CRC16 of the hash tag: redis-py's ``key_slot``, kept per key;
the slot map is redis-py's, read when the client connects), writes each
node's group in one send, all nodes at once, then waits for the nodes' replies
(one future a round trip): each connection is an asyncio protocol whose
``data_received`` feeds the bytes as they come to hiredis' C reader when the
``hiredis`` package is installed (``RespReader``, a small Python reader,
otherwise: the same replies); no stream buffer in between, which copied every
bucket read twice more (a 14 KB ``GET``, a table bucket at 10 million pages,
cost the worker 17.0 µs of CPU with streams, 11.5 without, in one run of
``benchmarks/redis_link_cost.py --tree CHECKOUT``).

Redirections, answered as redis-py's cluster client answers them: a
``MOVED`` reply (a slot moved: resharding, failover) refreshes the slot map
and sends that command again to the node named, where it was refused (not
run); ``ASK`` sends ``ASKING`` and the command to the node named; a
``NOSCRIPT`` reply (a node that never loaded a script) sends ``EVAL`` with
the script's body.  Any other error reply raises ``ReplyError``; a broken
connection raises and is dropped (the next batch connects again).
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from redis.crc import key_slot

if sys.version_info >= (3, 11):
    from asyncio import timeout as time_limit
else:  # pragma: no cover - Python 3.10 (redis-py depends on async-timeout there)
    from async_timeout import timeout as time_limit  # type: ignore[import-not-found,no-redef,unused-ignore]

__all__ = ["NodeLink", "Batch", "ReplyError", "RespReader", "pack"]

_REDIRECTS = 5
_ROUTES = 1 << 18


class ReplyError(Exception):
    """An error reply from a node (``-ERR ...``)."""


def _python_pack(args: tuple[Any, ...]) -> bytes:
    """One command in RESP2: ``*N`` then each argument as a bulk string."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode("utf-8", "surrogatepass")
        elif isinstance(arg, int):
            arg = b"%d" % arg
        out.append(b"$%d\r\n%b\r\n" % (len(arg), arg))
    return b"".join(out)


class RespReader:
    """hiredis.Reader's interface (``feed``, ``gets``: a reply or ``False``) in Python, for RESP2 replies."""

    def __init__(self, replyError: type[Exception] = ReplyError) -> None:  # noqa: N803 (hiredis' name)
        self.buffer = bytearray()
        self.error = replyError

    def feed(self, data: bytes) -> None:
        self.buffer += data

    def gets(self) -> Any:
        reply, end = self._parse(0)
        if end < 0:
            return False
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
    """hiredis' ``pack_command`` (C, the same bytes) when installed, else the Python one."""
    try:
        from hiredis import pack_command  # type: ignore[import-not-found,unused-ignore]  # (optional)
    except ImportError:
        return _python_pack
    return pack_command


#: One command in RESP2 (hiredis' packer when installed).
pack = _packer()


def reader_class() -> Any:
    """hiredis' C reader when installed, else ``RespReader``."""
    try:
        import hiredis  # type: ignore[import-not-found,unused-ignore]  # (optional)
    except ImportError:
        return RespReader
    return hiredis.Reader


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


class _Node(asyncio.Protocol):
    """One connection to one primary: an asyncio protocol whose ``data_received`` feeds the reply reader with the
    bytes as they come (no stream buffer: two copies fewer of every bucket read)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
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
        parser, replies = self.reader, self.replies
        parser.feed(data)
        while len(replies) < self.wanted:
            reply = parser.gets()
            if reply is False:
                return
            replies.append(reply)
        if self.waiter is not None:
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
        #: key -> the node its slot is on (the slot map's answer, kept: routing is per command); cleared by
        #: ``refresh`` and when it holds ``_ROUTES`` keys
        self.routes: dict[str, _Node] = {}
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

    def node_of(self, key: str) -> _Node:
        node = self.routes.get(key)
        if node is None:
            slot = key_slot(key.encode("utf-8", "surrogatepass"))
            served = self.client.nodes_manager.slots_cache.get(slot)
            if not served:  # (a cluster with slots unassigned, or a map read mid-change: an outage, not a KeyError)
                raise ConnectionError(f"no node serves hash slot {slot} (the cluster's slot map names none)")
            primary = served[0]
            node = self.node_at(primary.host, primary.port)
            if len(self.routes) >= _ROUTES:
                self.routes.clear()
            self.routes[key] = node
        return node

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
            node = self.nodes[name] = _Node(host, port)
        return node

    async def _connect(self, node: _Node) -> None:
        context = ssl_module.create_default_context() if self.tls else None
        node.reader = self.reader(replyError=ReplyError)
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
        self.routes.clear()
        await self.client.nodes_manager.initialize()

    async def exchange(self, groups: list[tuple[_Node, list[bytes]]], skip_down: bool = False) -> list[list[Any]]:
        """One round trip to each node of ``groups`` at once: every node's commands sent, then one wait until every
        node's protocol has read all its replies.  ``skip_down``: a node ``is_down`` once its lock is had (it failed
        the call queued before) raises ``ConnectionError`` at once, nothing sent."""
        nodes = sorted({id(node): node for node, _ in groups}.values(), key=lambda node: (node.host, node.port))
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
        try:
            async with time_limit(self.timeout):
                for node, _ in groups:
                    if not node.connected:
                        await self._connect_or_down(node)
                waiter = _Exchange(len(groups))
                for node, commands in groups:
                    node.expect(len(commands), waiter)
                    assert node.transport is not None
                    node.transport.write(b"".join(commands))
                await waiter.future
                return [node.replies for node, _ in groups]
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


class Batch:
    """Commands for one round trip (every node at once); ``execute`` returns the replies in the order added."""

    def __init__(self, link: NodeLink, skip_down: bool = False) -> None:
        self.link = link
        self.skip_down = skip_down  # (``NodeLink.exchange``)
        self.commands: list[tuple[str, tuple[Any, ...]]] = []  # (key, args)

    def __len__(self) -> int:
        return len(self.commands)

    def call(self, key: str, *args: Any) -> None:
        self.commands.append((key, args))

    async def execute(self) -> list[Any]:
        replies: list[Any] = [None] * len(self.commands)
        node_of = self.link.node_of
        by_node: dict[int, tuple[_Node, list[int], list[bytes]]] = {}
        for i, (key, args) in enumerate(self.commands):  # (the first send: every command as added, no ASKING)
            node = node_of(key)
            group = by_node.get(id(node))
            if group is None:
                group = by_node[id(node)] = (node, [], [])
            group[1].append(i)
            group[2].append(pack(args))
        todo = await self._send(list(by_node.values()), set(), replies)
        for _ in range(_REDIRECTS - 1):
            if not todo:
                return replies
            todo = await self._round(todo, replies)
        if not todo:
            return replies
        raise ReplyError(f"Redis kept redirecting {len(todo)} command(s) (MOVED/ASK) {_REDIRECTS} times")

    async def _round(self, todo: list[tuple[int, _Node, tuple[Any, ...]]], replies: list[Any]) -> list[Any]:
        """One send per node; returns the commands to send again (redirected, or NOSCRIPT)."""
        by_node: dict[int, tuple[_Node, list[int], list[bytes]]] = {}
        asking: set[int] = set()
        for i, node, args in todo:
            group = by_node.setdefault(id(node), (node, [], []))
            group[1].append(i)
            if args[:1] == (b"ASKING",):  # (a command ASK redirected: ASKING, then the command: two replies)
                asking.add(i)
                group[2].extend((pack(args[:1]), pack(args[1:])))
            else:
                group[2].append(pack(args))
        return await self._send(list(by_node.values()), asking, replies)

    async def _send(self, groups: list[tuple[_Node, list[int], list[bytes]]], asking: set[int],
                    replies: list[Any]) -> list[Any]:
        """Each node's group in one send, all at once; the replies in place; returns the commands to send again."""
        answers = await self.link.exchange([(node, packed) for node, _, packed in groups], self.skip_down)
        again: list[tuple[int, _Node, tuple[Any, ...]]] = []
        moved = False
        for (_, indexes, _), answer in zip(groups, answers):
            if asking:
                answer = _without_asking(indexes, answer, asking)
            for i, reply in zip(indexes, answer):
                if isinstance(reply, ReplyError):
                    retry = self._redirect(i, str(reply))
                    if retry is None:
                        raise reply
                    moved |= str(reply).startswith("MOVED")
                    again.append(retry)
                replies[i] = reply
        if moved:
            await self.link.refresh()
        return again

    def _redirect(self, i: int, message: str) -> tuple[int, _Node, tuple[Any, ...]] | None:
        key, args = self.commands[i]
        kind, *rest = message.split()
        if kind in ("MOVED", "ASK") and len(rest) == 2:
            host, _, port = rest[1].rpartition(":")
            node = self.link.node_at(host or self.link.node_of(key).host, int(port))
            return i, node, ((b"ASKING", *args) if kind == "ASK" else args)
        if kind == "NOSCRIPT" and args[0] == "EVALSHA" and args[1] in self.link.scripts:
            return i, self.link.node_of(key), ("EVAL", self.link.scripts[args[1]], *args[2:])
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
