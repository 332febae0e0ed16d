"""A lean round trip for ``check.lua`` on a single Redis node: one connection of its own, no redis-py on the check path.

redis-py's asyncio client cost a worker about 35 µs of CPU a check at 1 million
pages with steps 5-7 (``benchmarks/redis_scale.py --steps --spy``: its command
packing, connection pool, retry wrapper and reply parser in Python, a script
call of ~16 pages at a time).  A ``ScriptLink`` packs ``EVALSHA`` itself
(``node_link.pack``), writes it on its own connection (an asyncio protocol,
``node_link._Node``) and feeds the reply's bytes to the reply reader as they
come (hiredis' C reader when installed): the same replies, the same errors
(``redis.exceptions.ResponseError``: ``SIMHASH_RESET``, ``SIMHASH_LAYOUT``;
``NOSCRIPT`` sends ``EVAL`` with the script's body, as redis-py's ``Script``
does; ``LOADING`` raises redis-py's ``BusyLoadingError``, a ``ConnectionError``).
A broken or timed-out connection raises ``ConnectionError`` /
``TimeoutError`` (the backend's outage handling takes both) and is dropped: the
next call connects again.  The script is never sent twice for one call (a
retried check would find its own page).

Used for plain TCP connections (``redis://``), with a password, a user and a
database number; a TLS, unix-socket or credential-provider connection keeps
redis-py's client (``ScriptLink.for_client`` returns ``None``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.exceptions import BusyLoadingError, ResponseError

from .node_link import _Exchange, _Node, new_reader, pack, reader_class, time_limit

__all__ = ["ScriptLink"]


class ScriptLink:
    """Script calls to the node of a plain ``redis.asyncio.Redis`` client, on a connection of their own."""

    def __init__(self, host: str, port: int, auth: tuple[Any, ...] = (), db: int = 0, timeout: float = 10.0,
                 reader: Any = None) -> None:  # fmt: skip
        self.node = _Node(host, port)
        self.auth = auth
        self.db = db
        self.timeout = timeout
        self.reader = reader or reader_class()

    @classmethod
    def for_client(cls, client: Any) -> ScriptLink | None:
        """A link to ``client``'s node, or ``None`` when the client's connections are not plain TCP (TLS, a unix
        socket, a cluster) or take their credentials from a provider: those keep redis-py."""
        pool = getattr(client, "connection_pool", None)
        if pool is None or pool.connection_class.__name__ != "Connection":
            return None
        kwargs = pool.connection_kwargs
        if kwargs.get("credential_provider") is not None or "host" not in kwargs or kwargs.get("protocol") not in (None, 2, "2"):
            return None
        password, user = kwargs.get("password"), kwargs.get("username")
        auth: tuple[Any, ...] = ()
        if password:
            auth = (b"AUTH", user, password) if user else (b"AUTH", password)
        return cls(kwargs["host"], int(kwargs.get("port") or 6379), auth, int(kwargs.get("db") or 0),
                   float(kwargs.get("socket_timeout") or 10.0))  # fmt: skip

    async def _round(self, command: bytes) -> Any:
        node = self.node
        waiter = _Exchange(1)
        node.expect(1, waiter)
        assert node.transport is not None
        node.transport.write(command)
        await waiter.future
        return node.replies[0]

    async def _connect(self) -> None:
        node = self.node
        node.reader = new_reader(self.reader, ResponseError)
        await asyncio.get_running_loop().create_connection(lambda: node, node.host, node.port)
        for command in ([self.auth] if self.auth else []) + ([(b"SELECT", self.db)] if self.db else []):
            reply = await self._round(pack(command))
            if isinstance(reply, ResponseError):
                raise ConnectionError(f"Redis refused {command[0].decode()} on the script connection: {reply}")

    async def evalsha(self, sha: str, body: str, keys: list[Any], args: list[Any]) -> Any:
        """The reply of ``EVALSHA sha`` (``EVAL body`` when the node has not the script); an error reply raises
        ``ResponseError``."""
        node = self.node
        async with node.lock:
            try:
                async with time_limit(self.timeout):
                    if not node.connected:
                        await self._connect()
                    reply = await self._round(pack(("EVALSHA", sha, len(keys), *keys, *args)))
                    if isinstance(reply, ResponseError) and str(reply).startswith("NOSCRIPT"):
                        reply = await self._round(pack(("EVAL", body, len(keys), *keys, *args)))
            except BaseException:
                node.close()  # a reply half read leaves the connection out of step: connect again next time
                raise
        if isinstance(reply, ResponseError):
            if str(reply).startswith("LOADING "):  # as redis-py: a node loading its data is down for now
                raise BusyLoadingError(str(reply)[len("LOADING ") :])
            raise reply
        return reply

    def close(self) -> None:
        self.node.close()
