"""``node_link``'s reply reader: hiredis' when it can say "not whole yet" with a marker of its own, else the
Python one (units: a stand-in for an older hiredis; ``tests/integration/test_node_link.py`` reads real replies)."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from simhash_scrapy.backends.redis.node_link import MORE, ReplyError, RespReader, new_reader, reader_class


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
