"""``backends.replay_file`` and the request blobs of ``simhash_scrapy.replay`` (issue 35), on real files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import scrapy

from simhash_scrapy.backends.replay_file import FORMAT_VERSION, ReplayFile, ReplayFileError, replay_path
from simhash_scrapy.replay import decode_requests, encode_requests


class Spider(scrapy.Spider):
    name = "replay"

    def parse_page(self, response: object) -> None:  # pragma: no cover - named only
        pass


def test_rows_are_kept_only_once_flushed_and_read_back(tmp_path: Path) -> None:
    path = replay_path(tmp_path / "links.store")
    assert path.name == "links.store.replay"
    replay = ReplayFile(path)
    replay.open()
    replay.put("links", "id1", b"one")
    assert replay.get("links", "id1") == b"one"  # staged rows are read first
    assert replay.count() == 0 and replay.pending == 1
    replay.flush()
    replay.put("links", "id2", b"two")
    # A crash now (kill -9: no close) loses the staged row only.
    crashed = ReplayFile(path)
    crashed.open()
    assert crashed.get("links", "id1") == b"one" and crashed.get("links", "id2") is None
    crashed.close()
    replay.put("links", "id1", b"uno")
    replay.close()
    again = ReplayFile(path)
    again.open()
    assert (again.get("links", "id1"), again.get("links", "id2"), again.get("other", "id1")) == (b"uno", b"two", None)
    again.close()


def test_a_damaged_row_is_named_and_the_file_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "s.store.replay"
    replay = ReplayFile(path)
    replay.open()
    replay.put("links", "abc", b"requests")
    replay.put("links", "def", b"others")
    replay.close()
    with sqlite3.connect(path) as db:  # one byte of one row changed behind the file's back
        db.execute("UPDATE replay SET data = ? WHERE identity = 'abc'", (b"requestz",))
    db.close()
    before = path.read_bytes()
    replay = ReplayFile(path)
    replay.open()
    with pytest.raises(ReplayFileError, match=r"s\.store\.replay: damaged row for page 'abc' in scope 'links'"):
        replay.get("links", "abc")
    assert replay.get("links", "def") == b"others"  # the other rows still read
    replay.close()
    assert path.read_bytes() == before  # never rewritten to hide it


def test_a_file_of_another_format_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "s.store.replay"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE pages (x)")
        db.execute(f"PRAGMA user_version = {FORMAT_VERSION + 1}")
    db.close()
    before = path.read_bytes()
    with pytest.raises(ReplayFileError, match="not a simhash replay file of format 1"):
        ReplayFile(path).open()
    assert path.read_bytes() == before
    path.write_bytes(b"garbage that is no database at all" * 100)
    with pytest.raises(ReplayFileError, match="not a simhash replay file"):
        ReplayFile(path).open()


def test_reset_keeps_the_old_file_as_previous(tmp_path: Path) -> None:
    path = tmp_path / "s.store.replay"
    replay = ReplayFile(path)
    replay.open()
    replay.put("links", "a", b"x")
    replay.close()
    fresh = ReplayFile(path)
    fresh.open(reset=True)
    assert fresh.get("links", "a") is None
    fresh.close()
    assert (tmp_path / "s.store.replay.previous").exists()


def test_requests_round_trip_as_scrapy_disk_queues_keep_them() -> None:
    spider = Spider()
    requests = [
        scrapy.Request("http://example.com/a", callback=spider.parse_page, meta={"depth": 2}, headers={"Referer": "x"}),
        scrapy.Request("http://example.com/b", priority=3, cb_kwargs={"n": 1}),
    ]
    blob = encode_requests(requests, spider)
    assert blob is not None
    back = decode_requests(blob, spider)
    assert [r.url for r in back] == ["http://example.com/a", "http://example.com/b"]
    assert back[0].callback == spider.parse_page and back[0].meta["depth"] == 2 and back[0].headers["Referer"] == b"x"
    assert back[1].priority == 3 and back[1].cb_kwargs == {"n": 1} and back[1].callback is None
    # A callback that is not a spider method cannot be kept (the page is then requested again next time).
    assert encode_requests([scrapy.Request("http://example.com/c", callback=lambda r: None)], spider) is None
    with pytest.raises(ValueError, match="cannot read the kept requests"):
        decode_requests(blob[:-3], spider)
    with pytest.raises(ValueError, match="unknown replay blob format"):
        decode_requests(b"\x07zzz", spider)
