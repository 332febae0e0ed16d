"""``check.lua`` on the lean link (``backends/redis/script_link.py``) against a real redis-server: the same
decisions as through redis-py, a password and a database number, a node that lost its scripts, a link
that lost its connection, and the connections that keep redis-py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis_server import RedisServer
from loop_helpers import in_thread
from test_redis_backend import make_backend, recrawl_sequence

from simhash_scrapy.backends.redis.script_link import ScriptLink
from simhash_scrapy.config import SimhashConfig

pytest_plugins = ["conftest_redis"]


async def _verdicts(server: RedisServer, link: bool, url: str | None = None, break_link: bool = False) -> list[object]:
    backend = make_backend(server, SimhashConfig(), SIMHASH_REDIS_PERSIST=False,
                           **({"SIMHASH_REDIS_URL": url} if url else {}))  # fmt: skip
    await backend.open("spider")
    try:
        assert backend._link is not None  # (a plain TCP URL)
        if not link:
            backend._link = None  # redis-py's client, as before the link
        pages = recrawl_sequence(11, 400, scopes=("a", "b"))
        out = []
        for n, (record, index) in enumerate(pages):
            if n == 150:
                server.command("SCRIPT", "FLUSH")  # the node forgot the script: NOSCRIPT, then EVAL
            if break_link and n == 250 and backend._link is not None:
                backend._link.node.transport.abort()  # a connection gone: the next call connects again
                await asyncio.sleep(0)
            out.append(await backend.check(record, index))
        assert backend.stats.values["simhash/backend_errors"] == 0
        assert not link or backend._link.node.connected  # (the checks went through the link)
        return out
    finally:
        await backend.close()


def test_the_link_decides_as_redis_py(redis_server: RedisServer) -> None:
    via_redis_py = in_thread(_verdicts(redis_server, link=False))
    assert in_thread(_verdicts(redis_server, link=True, break_link=True)) == via_redis_py
    assert sum(v.canonical_url is not None for v in via_redis_py) >= 50  # (near-duplicates were found)


def test_a_password_and_a_database_number(tmp_path: Path) -> None:
    server = RedisServer(tmp_path, password="s3cret").start()
    try:
        url = f"redis://:s3cret@127.0.0.1:{server.port}/5"
        link = ScriptLink.for_client(Redis.from_url(url))
        assert link is not None and link.db == 5 and link.auth == (b"AUTH", "s3cret")
        via_redis_py = in_thread(_verdicts(server, link=False, url=url))
        assert in_thread(_verdicts(server, link=True, url=url)) == via_redis_py
    finally:
        server.stop()


@pytest.mark.parametrize(("url", "lean"), [
    ("redis://127.0.0.1:6390/0", True),
    ("redis://user:pw@127.0.0.1:6390/2", True),
    ("rediss://127.0.0.1:6390/0", False),
    ("unix:///tmp/redis.sock", False),
])  # fmt: skip
def test_which_connections_take_the_link(url: str, lean: bool) -> None:
    link = ScriptLink.for_client(Redis.from_url(url))
    assert (link is not None) == lean
    if "user" in url:
        assert link is not None and link.auth == (b"AUTH", "user", "pw") and link.db == 2
