"""``ScriptLink`` (``backends/redis/script_link.py``) against a scripted local TCP server, for the states a real
redis-server does not show on demand: a timed-out call whose command is still in the write buffer, and a node
that answers ``LOADING``."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError

from loop_helpers import in_thread

from simhash_scrapy.backends.redis.script_link import ScriptLink


async def _server(handle: Any) -> tuple[asyncio.AbstractServer, int]:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # (inherited by the accepted sockets)
    sock.bind(("127.0.0.1", 0))
    server = await asyncio.start_server(handle, sock=sock)
    return server, sock.getsockname()[1]


async def _late_close() -> tuple[Any, list[int], bytes]:
    first: list[int] = [0]  # the bytes the first connection received
    second: list[bytes] = []
    connections = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        try:
            if connections == 1:  # busy (a long script elsewhere): reads nothing for a while, then all it was sent
                await asyncio.sleep(0.6)
                while chunk := await reader.read(1 << 20):
                    first[0] += len(chunk)
                return
            second.append(await reader.read(1 << 16))
            await asyncio.sleep(1.0)
            writer.write(b":1\r\n")
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    server, port = await _server(handle)
    link = ScriptLink("127.0.0.1", port, timeout=0.3)
    try:
        try:
            await link.evalsha("0" * 40, "return 1", ["k"], [b"x" * (32 << 20)])
        except asyncio.TimeoutError:  # (TimeoutError from 3.11; asyncio's own on 3.10)
            pass
        else:
            raise AssertionError("the first call should time out")
        link.timeout = 5.0
        reply = await link.evalsha("0" * 40, "return 1", ["k"], [b"y"])
        await asyncio.sleep(0.1)
        return reply, first, second[0]
    finally:
        link.close()
        server.close()
        await server.wait_closed()


def test_a_timed_out_call_does_not_break_the_next_connection() -> None:
    """The timed-out connection is dropped at once: its unsent command is discarded (never run after the caller
    counted the call failed) and its late close does not fail the next call on a new connection."""
    reply, first, second = in_thread(_late_close())
    assert reply == 1
    assert second.startswith(b"*5\r\n$7\r\nEVALSHA") and second.endswith(b"$1\r\ny\r\n")
    assert first[0] < 32 << 20  # (the first command never arrived whole)


async def _loading() -> Any:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 16)
        writer.write(b"-LOADING Redis is loading the dataset in memory\r\n")
        await writer.drain()
        writer.close()

    server, port = await _server(handle)
    link = ScriptLink("127.0.0.1", port, timeout=5.0)
    try:
        return await link.evalsha("0" * 40, "return 1", ["k"], [b"x"])
    finally:
        link.close()
        server.close()
        await server.wait_closed()


def test_a_loading_node_is_a_connection_error_as_with_redis_py() -> None:
    """redis-py raises ``BusyLoadingError`` (a ``ConnectionError``: the backend waits for Redis) for ``LOADING``;
    the link raises the same, not a plain ``ResponseError`` (a failed page, Redis not marked down)."""
    try:
        in_thread(_loading())
    except RedisConnectionError as exc:
        assert "loading" in str(exc)
    else:
        raise AssertionError("LOADING should raise")
