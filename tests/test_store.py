"""The append-only page store: round trips, torn tails, refused configurations, locking."""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_scrapy.core.store import (
    PageStore,
    StoreConfig,
    StoreConfigError,
    StoreError,
    read_store,
)

CONFIG = StoreConfig(max_distance=3, blocks=4, features="w1-c0-tf-j2", text_mode="main")


def page(i: int, rng: random.Random) -> dict:
    return {
        "url": f"https://example.com/{i}?q=é{rng.random()}",
        "fingerprint": rng.getrandbits(64),
        "scope": rng.choice(["spider", "example.com", "ünï.example"]),
        "canonical": rng.randrange(i) if i and rng.random() < 0.4 else None,
        "referer": rng.choice([None, "https://example.com/", f"https://example.com/{i // 2}"]),
        "depth": rng.choice([None, 0, 1, 7]),
        "text": rng.choice([None, "", "some text\nwith lines ✓"]),
        "indexed": rng.random() < 0.5,
    }


def write(path: Path, pages: list[dict], config: StoreConfig = CONFIG) -> None:
    store = PageStore(path, config)
    store.open()
    for p in pages:
        store.append(
            p["url"], p["fingerprint"], p["scope"],
            canonical=p["canonical"],
            distance=None if p["canonical"] is None else 2,
            referer=p["referer"], depth=p["depth"], text=p["text"], indexed=p["indexed"],
        )
    store.close()


def assert_matches(contents, pages: list[dict]) -> None:
    assert len(contents) == len(pages)
    for i, p in enumerate(pages):
        assert contents.url(i) == p["url"]
        assert int(contents.fingerprints[i]) == p["fingerprint"]
        assert contents.scope(i) == p["scope"]
        assert contents.referer(i) == p["referer"]
        assert contents.text(i) == p["text"]
        assert int(contents.depth[i]) == (-1 if p["depth"] is None else p["depth"])
        assert int(contents.canonical[i]) == (-1 if p["canonical"] is None else p["canonical"])
        assert int(contents.distance[i]) == (-1 if p["canonical"] is None else 2)
        assert bool(contents.indexed[i]) == p["indexed"]
    assert contents.urls() == [p["url"] for p in pages]


def test_round_trip_and_append_across_runs(tmp_path: Path) -> None:
    rng = random.Random(1)
    pages = [page(i, rng) for i in range(300)]
    path = tmp_path / "s.store"
    write(path, pages[:120])
    store = PageStore(path, CONFIG)
    contents = store.open()
    assert_matches(contents, pages[:120])
    assert store.count == 120
    for i, p in enumerate(pages[120:], start=120):
        number = store.append(
            p["url"], p["fingerprint"], p["scope"], canonical=p["canonical"],
            distance=None if p["canonical"] is None else 2,
            referer=p["referer"], depth=p["depth"], text=p["text"], indexed=p["indexed"],
        )
        assert number == i
    store.close()
    contents = read_store(path)
    assert contents.config == CONFIG
    assert_matches(contents, pages)
    assert contents.torn_bytes == 0


def test_empty_store(tmp_path: Path) -> None:
    path = tmp_path / "s.store"
    store = PageStore(path, CONFIG)
    contents = store.open()
    store.close()
    assert len(contents) == 0
    again = read_store(path)
    assert len(again) == 0 and again.config == CONFIG and again.urls() == []


@pytest.mark.parametrize("cut", [1, 4, 7, 8, 20, 43, 44, 60, -1])
def test_record_cut_mid_way_loads_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture, cut: int) -> None:
    rng = random.Random(2)
    pages = [page(i, rng) for i in range(50)]
    path = tmp_path / "s.store"
    write(path, pages)
    full = path.stat().st_size
    write(tmp_path / "one-less.store", pages[:-1])
    last_start = (tmp_path / "one-less.store").stat().st_size
    last_size = full - last_start
    keep = last_start + (cut if cut > 0 else last_size + cut)
    assert last_start < keep < full
    with open(path, "r+b") as handle:
        handle.truncate(keep)
    with caplog.at_level(logging.WARNING, logger="simhash_scrapy.core.store"):
        contents = read_store(path)
    assert_matches(contents, pages[:-1])
    assert contents.torn_bytes == keep - last_start
    assert "truncated last record" in caplog.text
    # Opening for appending cuts the torn tail first: the next record is readable.
    caplog.clear()
    store = PageStore(path, CONFIG)
    with caplog.at_level(logging.WARNING, logger="simhash_scrapy.core.store"):
        assert len(store.open()) == 49
    assert "truncated last record" in caplog.text
    p = pages[-1]
    assert store.append(p["url"], p["fingerprint"], p["scope"], canonical=p["canonical"],
                        distance=None if p["canonical"] is None else 2, referer=p["referer"],
                        depth=p["depth"], text=p["text"], indexed=p["indexed"]) == 49
    store.close()
    assert_matches(read_store(path), pages)


def test_torn_record_with_intact_length_is_caught_by_its_crc(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rng = random.Random(3)
    pages = [page(i, rng) for i in range(10)]
    path = tmp_path / "s.store"
    write(path, pages)
    data = bytearray(path.read_bytes())
    data[-3:] = b"\x00\x00\x00"  # e.g. a file system that zero-fills an unwritten tail
    if bytes(data) == path.read_bytes():
        data[-3:] = b"\x01\x02\x03"
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        contents = read_store(path)
    assert_matches(contents, pages[:-1])
    assert "truncated last record" in caplog.text


def test_header_cut_short_is_an_empty_store(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "s.store"
    path.write_bytes(CONFIG.header()[:11])
    with caplog.at_level(logging.WARNING):
        assert len(read_store(path)) == 0
    assert "header was cut short" in caplog.text
    store = PageStore(path, CONFIG)
    store.open()
    store.append("https://a/", 5, "s")
    store.close()
    assert read_store(path).urls() == ["https://a/"]


@pytest.mark.parametrize(
    ("other", "setting"),
    [
        (StoreConfig(4, 5, "w1-c0-tf-j2", "main"), "SIMHASH_MAX_DISTANCE"),
        (StoreConfig(3, 6, "w1-c0-tf-j2", "main"), "SIMHASH_BLOCKS"),
        (StoreConfig(3, 4, "w2-c0-tf-j2", "main"), "SIMHASH_WORD_NGRAM"),
        (StoreConfig(3, 4, "w1-c3-tf-j2", "main"), "SIMHASH_CHAR_NGRAM"),
        (StoreConfig(3, 4, "w1-c0-binary-j2", "main"), "SIMHASH_WEIGHTING"),
        (StoreConfig(3, 4, "w1-c0-tf-j3", "main"), "SIMHASH_CJK_NGRAM"),
        (StoreConfig(3, 4, "w1-c0-tf-j2", "visible"), "SIMHASH_TEXT_MODE"),
    ],
)
def test_another_configuration_is_refused_naming_the_setting(tmp_path: Path, other: StoreConfig, setting: str) -> None:
    path = tmp_path / "s.store"
    write(path, [page(0, random.Random(0))])
    before = path.read_bytes()
    with pytest.raises(StoreConfigError, match=setting) as info:
        PageStore(path, other).open()
    assert info.value.setting == setting
    assert "SIMHASH_RESET" in str(info.value)
    assert path.read_bytes() == before  # never touched, never mixed
    # The lock was released: the right configuration still opens it.
    store = PageStore(path, CONFIG)
    assert len(store.open()) == 1
    store.close()


def test_not_a_store_and_other_version(tmp_path: Path) -> None:
    path = tmp_path / "x.store"
    path.write_bytes(b"hello world, not a store at all")
    with pytest.raises(StoreError, match="not a simhash-scrapy store"):
        read_store(path)
    header = bytearray(CONFIG.header())
    header[8] = 99  # version
    path.write_bytes(bytes(header))
    with pytest.raises(StoreError, match="version 99"):
        PageStore(path, CONFIG).open()


def test_one_crawl_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "s.store"
    first = PageStore(path, CONFIG)
    first.open()
    with pytest.raises(StoreError, match="in use by another crawl"):
        PageStore(path, CONFIG).open()
    first.close()
    second = PageStore(path, CONFIG)
    second.open()
    second.close()


def test_reset_starts_afresh_and_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "s.store"
    write(path, [page(i, random.Random(4)) for i in range(5)])
    store = PageStore(path, StoreConfig(5, 6, "w1-c0-tf-j2", "main"))
    assert len(store.open(reset=True)) == 0  # a reset also accepts a new configuration
    store.close()
    assert len(read_store(path)) == 0
    assert len(read_store(path.with_name("s.store.previous"))) == 5


def test_flush_makes_records_visible_to_readers(tmp_path: Path) -> None:
    path = tmp_path / "s.store"
    store = PageStore(path, CONFIG)
    store.open()
    store.append("https://a/", 1, "s", indexed=True)
    store.flush()
    assert read_store(path).urls() == ["https://a/"]
    store.close()


def test_many_records_vectorised_fields(tmp_path: Path) -> None:
    path = tmp_path / "s.store"
    rng = np.random.default_rng(5)
    fps = rng.integers(0, 2**64, 20_000, dtype=np.uint64, endpoint=False)
    store = PageStore(path, CONFIG)
    store.open()
    for i, fp in enumerate(fps.tolist()):
        store.append(f"https://e.com/{i}", fp, f"d{i % 7}.com", indexed=i % 3 == 0, depth=i % 5)
    store.close()
    contents = read_store(path)
    assert np.array_equal(contents.fingerprints, fps)
    assert np.array_equal(contents.indexed, np.arange(20_000) % 3 == 0)
    assert np.array_equal(contents.depth, np.arange(20_000) % 5)
    assert sorted(contents.scope_names) == [f"d{i}.com" for i in range(7)]
    assert [contents.scope(i) for i in range(14)] == [f"d{i % 7}.com" for i in range(14)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.text(max_size=40), st.integers(0, 2**64 - 1), st.text(max_size=300),
            st.one_of(st.none(), st.text(max_size=20)), st.one_of(st.none(), st.integers(0, 10**6)),
            st.one_of(st.none(), st.text(max_size=50)),
        ),
        max_size=30,
    )
)
def test_any_strings_round_trip(tmp_path_factory: pytest.TempPathFactory, rows: list) -> None:
    path = tmp_path_factory.mktemp("h") / "s.store"
    store = PageStore(path, CONFIG)
    store.open()
    for url, fp, scope, referer, depth, text in rows:
        store.append(url, fp, scope, referer=referer, depth=depth, text=text)
    store.close()
    contents = read_store(path)
    assert len(contents) == len(rows)
    for i, (url, fp, scope, referer, depth, text) in enumerate(rows):
        assert (contents.url(i), int(contents.fingerprints[i]), contents.scope(i)) == (url, fp, scope)
        assert (contents.referer(i), contents.text(i)) == (referer, text)
        assert int(contents.depth[i]) == (-1 if depth is None else depth)
    os.remove(path)


def test_offsets_file_is_only_a_checked_hint(tmp_path: Path) -> None:
    from simhash_scrapy.core.store import offsets_path

    rng = random.Random(6)
    pages = [page(i, rng) for i in range(80)]
    path = tmp_path / "s.store"
    write(path, pages[:50])
    assert offsets_path(path).exists()  # written at close
    assert_matches(read_store(path), pages[:50])
    # Records appended after the last clean close (a crash: no close, no new offsets) are walked.
    store = PageStore(path, CONFIG)
    store.open()
    for p in pages[50:]:
        store.append(p["url"], p["fingerprint"], p["scope"], canonical=p["canonical"],
                     distance=None if p["canonical"] is None else 2, referer=p["referer"],
                     depth=p["depth"], text=p["text"], indexed=p["indexed"])
    store.flush()
    assert_matches(read_store(path), pages)
    store.close()
    # A stale offsets file (from another store), a corrupt one, or garbage: ignored.
    other = tmp_path / "other.store"
    write(other, pages[:30])
    for bad in (offsets_path(other).read_bytes(), offsets_path(path).read_bytes()[:-3] + b"xyz", b"junk"):
        offsets_path(path).write_bytes(bad)
        assert_matches(read_store(path), pages)
    # Offsets that claim more records than the file holds (the file was cut): ignored too.
    write(tmp_path / "full.store", pages)
    offsets_path(path).write_bytes(offsets_path(tmp_path / "full.store").read_bytes())
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size - 10)
    assert_matches(read_store(path), pages[:-1])
