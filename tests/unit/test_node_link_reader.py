"""``node_link``'s reply reader: hiredis' when it can say "not whole yet" with a marker of its own, else the
Python one (units: a stand-in for an older hiredis; ``tests/integration/test_node_link.py`` reads real replies)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from loop_helpers import in_thread

from simhash_scrapy.backends.redis.node_link import (
    FEED_PIECE, MORE, ReplyError, RespReader, _Exchange, _Node, new_reader, reader_class,
)


class OldReader:
    """hiredis 2.0's ``Reader``: no ``notEnoughData`` (2.1 added it); ``gets`` returns ``False`` while a reply is
    not whole, which an integer reply 0 equals."""

    def __init__(self, protocolError: Any = None, replyError: Any = None, encoding: Any = None,  # noqa: N803
                 errors: Any = None) -> None:
        pass


def test_a_hiredis_without_not_enough_data_leaves_the_python_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    # ``hiredis>=2.0`` (the extra) allows it: its reader cannot be made with MORE, and every connection failed.
    monkeypatch.setitem(sys.modules, "hiredis", types.SimpleNamespace(Reader=OldReader))
    cls = reader_class()
    assert cls is RespReader
    reader = new_reader(cls, ReplyError)
    reader.feed(b":0\r\n$-1\r\n$3\r\nab")
    assert reader.gets() == 0 and reader.gets() is None and reader.gets() is MORE


def test_a_hiredis_that_has_it_is_used() -> None:
    hiredis = pytest.importorskip("hiredis")
    assert reader_class() is hiredis.Reader


class SizesSeen:
    """A reader that passes the bytes to ``inner`` and keeps the size of each feed."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.sizes = inner, []  # type: ignore[var-annotated]

    def feed(self, data: Any) -> None:
        self.sizes.append(len(data))
        self.inner.feed(data)

    def gets(self) -> Any:
        return self.inner.gets()


def _replies_of_one_read(cls: Any) -> tuple[list[Any], list[int], bool]:
    """A node's replies to 40 commands that came in one read (~400 KB: 30 bucket-sized bulk strings, an integer,
    a nil, an error, ...), the sizes its reader was fed, and whether the round trip was told the node is done."""
    bulks = [bytes([n]) * (10_000 + n) for n in range(30)]
    data = b"".join(b"$%d\r\n%b\r\n" % (len(b), b) for b in bulks) + b":7\r\n$-1\r\n-ERR no\r\n" + b"+OK\r\n" * 7

    async def run() -> tuple[list[Any], list[int], bool]:
        node = _Node("127.0.0.1", 1)
        node.reader = SizesSeen(new_reader(cls, ReplyError))
        waiter = _Exchange(1)
        node.expect(40, waiter)
        node.data_received(data)
        return node.replies, node.reader.sizes, waiter.future.done()

    replies, sizes, done = in_thread(run())
    assert replies[:30] == bulks and replies[30:32] == [7, None] and isinstance(replies[32], ReplyError)
    assert replies[33:] == [b"OK"] * 7
    return replies, sizes, done


@pytest.mark.parametrize("which", ["python", "hiredis"])
def test_a_big_read_is_fed_in_pieces_and_gives_every_reply_in_order(which: str) -> None:
    # A reader moves what it has not parsed yet to its buffer's front after each reply: fed a 256 KB read whole,
    # it moved megabytes a batch (benchmarks/redis_link_cost.py: ~0.67x the worker's CPU a round trip fed in pieces).
    cls = RespReader if which == "python" else pytest.importorskip("hiredis").Reader
    replies, sizes, done = _replies_of_one_read(cls)
    assert len(replies) == 40 and done
    assert max(sizes) <= FEED_PIECE and sum(sizes) == 300_788  # (every byte, in pieces)
