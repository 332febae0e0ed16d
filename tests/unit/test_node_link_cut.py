"""``NodeLink.packed_exchange`` when one node's connection is cut while another node connects (units: stand-in
transports; ``tests/integration/test_node_link.py`` and ``test_redis_global.py`` cut real nodes)."""

from __future__ import annotations

import types
from typing import Any

import pytest

from loop_helpers import in_thread

from simhash_scrapy.backends.redis.node_link import NodeLink


class Transport:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        self.sent.append(data)

    def abort(self) -> None:
        pass


def test_a_connection_cut_while_another_node_connects_fails_the_round_trip_sending_nothing() -> None:
    # Node a is connected; node b is not, and while the link connects it, a's connection is cut (its protocol's
    # connection_lost: no transport).  The round trip fails as a cut connection does (ConnectionError naming the
    # node: the backend lets the batch through unchecked), not with an AssertionError, and sends nothing to b.
    link = NodeLink(types.SimpleNamespace(connection_kwargs={}), timeout=5.0)
    a, b = link.node_at("127.0.0.1", 1), link.node_at("127.0.0.1", 2)
    a.transport = Transport()  # type: ignore[assignment]
    b_transport = Transport()

    async def connect(node: Any) -> None:
        node.transport = b_transport
        a.transport = None  # (cut meanwhile)

    link._connect_or_down = connect  # type: ignore[method-assign]

    async def round_trip() -> None:
        await link.packed_exchange([(a, 1, b"*1\r\n$4\r\nPING\r\n"), (b, 1, b"*1\r\n$4\r\nPING\r\n")])

    with pytest.raises(ConnectionError, match=r"127\.0\.0\.1:1 closed the connection"):
        in_thread(round_trip())
    assert b_transport.sent == []
    assert not a.lock.locked() and not b.lock.locked()
