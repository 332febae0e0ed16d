"""Fault injection against the store (issue 11): what a crawl finds after bit flips, truncations, kills.

The longer sweep with its table is ``benchmarks/faults.py`` (300 flips over
a 2,000-record store, ...); these are the same trials, smaller.  Every trial
opens a damaged copy of a real store as a crawl does (``PersistentBackend``),
compares its records with the undamaged copy's and closes it as a crawl does
(cluster reports).  Allowed outcomes: a ``StoreError`` naming the file, no
change at all, the last transaction dropped with a warning naming the file
(a cut WAL), an empty file reported.  Never a silent change, a silent drop
or a crash.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

import store_faults as faults  # noqa: E402 - tests/store_faults.py: the trials benchmarks/faults.py runs at scale

from simhash_scrapy import _compat  # noqa: E402
from simhash_scrapy.core.store.store import StoreError, check_wal, read_store  # noqa: E402

ALLOWED = {"detected", "harmless", "torn last write dropped", "reported empty"}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("faults")
    clean, crashed = tmp / "clean", tmp / "crashed"
    faults.make_store(clean, 300, seed=4, batch=25, crashed_copy=crashed)
    expected, backend = faults.load_members(faults._copy(clean, tmp / "read"))
    faults.drive(backend.close())
    full, torn = faults.crashed_states(crashed, tmp)
    return {"tmp": tmp, "clean": clean, "crashed": crashed, "expected": expected, "full": full, "torn": torn}


def test_the_stores_are_what_the_trials_assume(stores: dict[str, Any]) -> None:
    assert len(stores["expected"]) == 300  # one record per identity: re-checked pages are not added twice
    assert (stores["crashed"] / "faults.store-wal").stat().st_size > 0
    assert stores["torn"] != stores["full"]
    labels = {label for _, _, label in faults.regions(stores["clean"] / "faults.store")}
    assert {
        "file header", "record header", "cell header", "URLs", "fingerprints", "checksums", "one-edit keys", "free space",
        "digests, validators",
    } <= labels  # fmt: skip


def test_single_bit_flips_in_every_region(stores: dict[str, Any]) -> None:
    rng = random.Random(11)
    store = "faults.store"
    results = []
    for offset, label in faults.pick_offsets(faults.regions(stores["clean"] / store), 40, rng, minimum=3):
        trial = faults.flip(store, offset, rng.randrange(8))
        results.append((label, *faults.trial(stores["clean"], stores["tmp"] / "work", trial, stores["expected"])))
    wal = store + "-wal"
    for offset, label in faults.pick_offsets(faults.wal_regions(stores["crashed"] / wal), 12, rng, minimum=3):
        trial = faults.flip(wal, offset, rng.randrange(8))
        results.append((label, *faults.trial(stores["crashed"], stores["tmp"] / "work", trial, stores["full"], stores["torn"])))
    bad = [r for r in results if r[1] not in ALLOWED]
    assert not bad, bad
    by_region = {label for label, category, _ in results if category == "detected"}
    # A flipped bit in any value of a record is detected (per-chunk and per-row checksums), naming the file.
    assert {"URLs", "fingerprints", "identities, scopes", "checksums", "record header", "digests, validators"} <= by_region
    assert all(str(stores["tmp"] / "work" / store) in detail for _, category, detail in results if category == "detected")


def test_flipped_value_names_the_record(stores: dict[str, Any], tmp_path: Path) -> None:
    spans = [s for s in faults.regions(stores["clean"] / "faults.store") if s[2] == "URLs"]
    work = faults._copy(stores["clean"], tmp_path / "w")
    faults.flip("faults.store", spans[len(spans) // 2][0] + 3, 1)(work)
    before = (work / "faults.store").read_bytes()
    with pytest.raises(StoreError, match=r"faults\.store: corrupt chunk \d+ \(checksum mismatch\)") as info:
        read_store(work / "faults.store")
    assert "SIMHASH_RESET" in str(info.value)
    with pytest.raises(Exception, match="corrupt chunk"):
        faults.load_members(work)
    assert (work / "faults.store").read_bytes() == before  # never cut, never rewritten


CUT_SHARDS = 3  # the cuts, dealt to three tests so that xdist spreads them (one took 30 s on a quiet 2-core machine)


@pytest.mark.slow  # hundreds of store copies, or real crawls
@pytest.mark.parametrize("shard", range(CUT_SHARDS))
def test_cuts_inside_the_last_transaction_lose_only_it(stores: dict[str, Any], shard: int) -> None:
    crashed = stores["crashed"]
    start, end = faults.last_transaction(crashed)
    frame = 24 + int.from_bytes((crashed / "faults.store-wal").read_bytes()[8:12], "big")
    every = sorted({*range(start + 1, end, 211), *(f + b for f in range(start, end, frame) for b in (1, 8, 23, 24, 25))} - {end})
    sizes = every[shard::CUT_SHARDS]
    assert sizes
    outcomes = {
        size: faults.trial(crashed, stores["tmp"] / "work", faults.truncate("faults.store-wal", size), stores["full"], stores["torn"])[0]
        for size in sizes
        if start < size < end
    }
    assert set(outcomes.values()) == {"torn last write dropped"}, outcomes


def test_wal_damaged_before_its_end_is_refused_not_replayed_short(stores: dict[str, Any], tmp_path: Path) -> None:
    work = faults._copy(stores["crashed"], tmp_path / "w")
    faults.flip("faults.store-wal", 32 + 24 + 100, 0)(work)  # page data of the first frame
    with pytest.raises(StoreError, match=r"faults\.store-wal: frame 0 .* would be silently dropped"):
        check_wal(work / "faults.store")
    with pytest.raises(StoreError, match="frame 0"):
        read_store(work / "faults.store")


def test_empty_and_header_only_stores_are_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from scrapy.utils.test import get_crawler

    from simhash_scrapy.backends.persistent import PersistentBackend
    from simhash_scrapy.config import SimhashConfig

    for content in (b"", None):
        folder = tmp_path / ("zero" if content == b"" else "header")
        folder.mkdir()
        if content is None:
            backend = PersistentBackend(faults.config_for(folder))
            faults.drive(backend.open("faults"))
            faults.drive(backend.close())
        else:
            (folder / "faults.store").write_bytes(content)
        crawler = get_crawler()
        if _compat.SCRAPY_VERSION < Version("2.14"):
            crawler.stats.open_spider(None)  # a required argument before 2.14, deprecated since
        else:
            crawler.stats.open_spider()
        backend = PersistentBackend(SimhashConfig(store_dir=str(folder)), crawler)
        with caplog.at_level(logging.WARNING):
            faults.drive(backend.open("faults"))
        faults.drive(backend.close())
        assert str(folder / "faults.store") in caplog.text and "no pages" in caplog.text
        assert crawler.stats.get_value("simhash/store_empty") == 1
        caplog.clear()


@pytest.mark.slow  # hundreds of store copies, or real crawls
def test_kill_9_of_a_real_crawl(tmp_path: Path) -> None:
    """``kill -9`` at a random moment: the store loads; with SIMHASH_FLUSH_INTERVAL = 0 nothing is lost."""
    rng = random.Random()
    kill_after = rng.randint(5, 50)
    result = faults.kill_trial(tmp_path, 60, kill_after, flush_interval=0)
    assert result["returncode"] == -9, result
    assert result["loaded"], result
    assert result["reached"] == kill_after
    assert result["lost"] == 0, (kill_after, result)
    # With the default interval (1 s): it loads cleanly every time; what is lost is the last interval's pages.
    result = faults.kill_trial(tmp_path, 60, rng.randint(5, 50))
    assert result["loaded"], result
    assert result["lost"] <= result["reached"]
