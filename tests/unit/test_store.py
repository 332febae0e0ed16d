"""The SQLite page store: round trips, one row per identity, refused configurations, locking, crashes.

Bit flips and truncations at every region of a store are in ``test_faults.py``.
"""

from __future__ import annotations

import logging
import random
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_scrapy.core.store.store import (
    FORMAT_VERSION,
    OUTCOMES,
    PageStore,
    StoreConfig,
    StoreConfigError,
    StoreError,
    StoreRecord,
    is_store_file,
    read_store,
)

CONFIG = StoreConfig(max_distance=3, blocks=4, features="w1-c0-tf-j2", text_mode="main")


def record(i: int, rng: random.Random) -> StoreRecord:
    canonical = rng.randrange(i) if i and rng.random() < 0.4 else None
    fp = rng.getrandbits(64)
    return StoreRecord(
        entry=i,
        scope=rng.choice(["spider", "example.com", "ünï.example"]),
        identity=rng.choice(["", f"{rng.getrandbits(160):040x}"]),
        url=f"https://example.com/{i}?q=é{rng.random()}",
        fingerprint=fp,
        exact=rng.random() < 0.1,
        outcome="near_duplicate" if canonical is not None else rng.choice(["unique", "unchanged", "changed"]),
        canonical=canonical,
        distance=None if canonical is None else rng.randint(0, 3),
        indexed=None if canonical is not None or rng.random() < 0.2 else rng.choice([fp, fp ^ 1]),
        previous=rng.choice([None, rng.getrandbits(64)]),
        referer=rng.choice([None, "", "https://example.com/"]),
        depth=rng.choice([None, 0, 1, 7]),
        text=rng.choice([None, "", "some text\nwith lines ✓"]),
        first_seen=1.7e9 + i,
        last_seen=1.7e9 + i + rng.random(),
    )


def write(path: Path, records: list[StoreRecord], config: StoreConfig = CONFIG, batch: int = 16) -> None:
    store = PageStore(path, config)
    store.open()
    for n, r in enumerate(records, start=1):
        store.put(r)
        if n % batch == 0:
            store.flush()
    store.close()


def rows_of(contents) -> list[StoreRecord]:
    """The contents back as records (what was written, if nothing was lost or changed)."""
    out = []
    for i in range(len(contents)):
        canonical = int(contents.canonical[i])
        depth = int(contents.depth[i])
        out.append(
            StoreRecord(
                entry=i,
                scope=contents.scope(i),
                identity=contents.identities[i],
                url=contents.url(i),
                fingerprint=int(contents.fingerprints[i]),
                exact=bool(contents.exact[i]),
                outcome=contents.outcomes[i],
                canonical=None if canonical < 0 else canonical,
                distance=None if canonical < 0 else int(contents.distance[i]),
                indexed=int(contents.indexed[i]) if contents.is_indexed[i] else None,
                previous=int(contents.previous[i]) if contents.has_previous[i] else None,
                referer=contents.referer(i),
                depth=None if depth < 0 else depth,
                text=contents.text(i),
                first_seen=float(contents.first_seen[i]),
                last_seen=float(contents.last_seen[i]),
            )
        )
    return out


def test_round_trip_and_more_records_across_runs(tmp_path: Path) -> None:
    rng = random.Random(1)
    records = [record(i, rng) for i in range(300)]
    path = tmp_path / "s.store"
    write(path, records[:120])
    assert is_store_file(path)
    store = PageStore(path, CONFIG)
    contents = store.open()
    assert rows_of(contents) == records[:120]
    assert store.count == 120
    for r in records[120:]:
        store.put(r)
    store.close()
    contents = read_store(path)
    assert contents.config == CONFIG
    assert rows_of(contents) == records
    assert not list(tmp_path.glob("s.store-wal"))  # a clean close folds the WAL into the file


def test_one_row_per_identity(tmp_path: Path) -> None:
    """Putting an entry again replaces its record: N re-crawls keep one record per page (folded into one chunk
    at each close: no row of ``pages`` is left behind)."""
    rng = random.Random(2)
    records = [record(i, rng) for i in range(50)]
    path = tmp_path / "s.store"
    write(path, records)
    for crawl in range(3):
        store = PageStore(path, CONFIG)
        assert len(store.open()) == 50
        for r in records:
            r.last_seen += 86400
            r.previous, r.fingerprint = r.fingerprint, r.fingerprint ^ (1 << crawl)
            r.outcome = "unchanged"
            store.put(r)
        store.close()
    assert rows_of(read_store(path)) == records
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM pages").fetchone() == (0,)
        assert db.execute("SELECT count(*), sum(count) FROM chunks").fetchone() == (1, 50)
        assert sqlite_urls(db) == [r.url for r in records]


def format_4_store(path: Path, records: list[StoreRecord], config: StoreConfig = CONFIG) -> None:
    """A store as format 4 wrote it: every record a row of ``pages``, no ``chunks`` table, user_version 4."""
    from simhash_scrapy.core.store.store import FOLD_ROWS, _meta_checksum

    assert len(records) < FOLD_ROWS
    store = PageStore(path, config)
    store.open()
    for r in records:
        store.put(r)
    store.flush()  # rows only: no fold below FOLD_ROWS
    store.abandon()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("DROP TABLE chunks")
    meta = dict(db.execute("SELECT key, value FROM simhash_meta").fetchall())
    del meta["chunk_records"]
    meta["format"] = "4"
    meta["checksum"] = _meta_checksum(meta)
    db.execute("DELETE FROM simhash_meta")
    db.executemany("INSERT INTO simhash_meta (key, value) VALUES (?, ?)", sorted(meta.items()))
    db.execute("PRAGMA user_version = 4")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def sqlite_urls(db: sqlite3.Connection) -> list[str]:
    """The URLs the sqlite3 library reads from a store: its chunks (decoded), then the rows laid over them."""
    from simhash_scrapy.core.store.store_chunks import CHUNK_RECORDS, decode_chunk

    urls: dict[int, str] = {}
    for chunk, count, data in db.execute("SELECT chunk, count, data FROM chunks ORDER BY chunk"):
        urls.update(enumerate(decode_chunk(data, chunk, count, "store").url, start=chunk * CHUNK_RECORDS))
    urls.update(db.execute("SELECT entry, url FROM pages"))
    return [urls[entry] for entry in sorted(urls)]


def test_entries_must_follow_each_other(tmp_path: Path) -> None:
    store = PageStore(tmp_path / "s.store", CONFIG)
    store.open()
    with pytest.raises(ValueError, match="does not follow"):
        store.put(StoreRecord(1, "s", "", "https://a/", 1))
    store.close()


def test_extra_blobs_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "s.store"
    store = PageStore(path, CONFIG)
    assert store.open().extra == {}
    store.save_extra("url_rules", b"\x00\x01rules")
    store.save_extra("url_rules", b"v2")
    store.save_extra("ünï", b"")
    store.close()
    assert read_store(path).extra == {"url_rules": b"v2", "ünï": b""}


def test_a_new_store_and_an_empty_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "s.store"
    store = PageStore(path, CONFIG)
    assert len(store.open()) == 0 and not store.empty_file  # a new store: nothing to report
    store.close()
    assert len(read_store(path)) == 0 and read_store(path).config == CONFIG
    # A store with its header and no pages, and a 0-byte file: opened, and reported.
    for content in (None, b""):
        if content is not None:
            path.write_bytes(content)
        with caplog.at_level(logging.WARNING, logger="simhash_scrapy.core.store.store"):
            store = PageStore(path, CONFIG)
            assert len(store.open()) == 0
        assert store.empty_file
        assert str(path) in caplog.text and ("no pages" in caplog.text)
        caplog.clear()
        store.close()
    path.write_bytes(b"")
    with pytest.raises(StoreError, match="empty simhash store"):
        read_store(path)


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
    write(path, [record(0, random.Random(0))])
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


def test_not_a_store_other_version_old_format(tmp_path: Path) -> None:
    path = tmp_path / "x.store"
    path.write_bytes(b"hello world, not a store at all")
    assert not is_store_file(path)
    with pytest.raises(StoreError, match="not a simhash-scrapy store"):
        read_store(path)
    with pytest.raises(StoreError, match="not a simhash-scrapy store"):
        PageStore(path, CONFIG).open()
    assert path.read_bytes() == b"hello world, not a store at all"
    other_app = tmp_path / "other.db"
    with sqlite3.connect(other_app) as db:
        db.execute("CREATE TABLE t (x)")
    db.close()
    with pytest.raises(StoreError, match="another program"):
        read_store(other_app)
    # Format 1 (the custom append-only file of earlier versions): a clear message.
    old = tmp_path / "old.store"
    old.write_bytes(b"SIMHSTOR\x01\x00" + bytes(40))
    assert is_store_file(old)
    with pytest.raises(StoreError, match=r"format version 1.*SIMHASH_RESET"):
        PageStore(old, CONFIG).open()
    write(path := tmp_path / "v.store", [])
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(StoreError, match="version 99"):
        PageStore(path, CONFIG).open()


def test_one_crawl_at_a_time_but_readers_may_look(tmp_path: Path) -> None:
    path = tmp_path / "s.store"
    first = PageStore(path, CONFIG)
    first.open()
    with pytest.raises(StoreError, match="in use by another crawl") as info:
        PageStore(path, CONFIG).open()
    # ... and what to do instead: another folder, or Redis for crawls that share what they have seen
    assert "another SIMHASH_DIR" in str(info.value) and "SIMHASH_BACKEND = 'redis'" in str(info.value)
    first.put(StoreRecord(0, "s", "", "https://a/", 1, indexed=1))
    first.flush()
    assert read_store(path).urls() == ["https://a/"]  # e.g. `scrapy simhash report` during a crawl
    first.close()
    second = PageStore(path, CONFIG)
    second.open()
    second.close()


def test_reset_starts_afresh_and_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "s.store"
    write(path, [record(i, random.Random(4)) for i in range(5)])
    store = PageStore(path, StoreConfig(5, 6, "w1-c0-tf-j2", "main"))
    assert len(store.open(reset=True)) == 0  # a reset also accepts a new configuration
    store.close()
    assert len(read_store(path)) == 0
    assert len(read_store(path.with_name("s.store.previous"))) == 5


def crash_copy(path: Path, to: Path) -> Path:
    """The files a ``kill -9`` would leave now: the store and its WAL, copied while it is open."""
    to.mkdir(parents=True, exist_ok=True)
    for name in (path.name, path.name + "-wal"):
        if (path.parent / name).exists():
            shutil.copyfile(path.parent / name, to / name)
    return to / path.name


def test_a_crash_loses_only_what_was_not_committed(tmp_path: Path) -> None:
    rng = random.Random(5)
    records = [record(i, rng) for i in range(40)]
    path = tmp_path / "s.store"
    store = PageStore(path, CONFIG)
    store.open()
    for r in records[:30]:
        store.put(r)
    store.flush()
    for r in records[30:]:
        store.put(r)
    assert store.pending == 10
    copy = crash_copy(path, tmp_path / "crash")
    assert (tmp_path / "crash" / "s.store-wal").stat().st_size > 0
    store.abandon()
    assert rows_of(read_store(copy)) == records[:30]
    # The crashed store opens for writing and goes on from there.
    again = PageStore(copy, CONFIG)
    assert len(again.open()) == 30
    for r in records[30:]:
        again.put(r)
    again.close()
    assert rows_of(read_store(copy)) == records


def test_many_records(tmp_path: Path) -> None:
    path = tmp_path / "s.store"
    rng = np.random.default_rng(5)
    fps = rng.integers(0, 2**64, 20_000, dtype=np.uint64, endpoint=False)
    store = PageStore(path, CONFIG)
    store.open()
    for i, fp in enumerate(fps.tolist()):
        store.put(StoreRecord(i, f"d{i % 7}.com", "", f"https://e.com/{i}", fp, indexed=fp if i % 3 == 0 else None, depth=i % 5))
    store.close()
    contents = read_store(path)
    assert np.array_equal(contents.fingerprints, fps)
    assert np.array_equal(contents.is_indexed, np.arange(20_000) % 3 == 0)
    assert np.array_equal(contents.depth, np.arange(20_000) % 5)
    assert [contents.scope(i) for i in range(14)] == [f"d{i % 7}.com" for i in range(14)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.text(max_size=40), st.text(max_size=20), st.integers(0, 2**64 - 1), st.text(max_size=300),
            st.one_of(st.none(), st.text(max_size=20)), st.one_of(st.none(), st.integers(0, 10**6)),
            st.one_of(st.none(), st.text(max_size=50)), st.sampled_from(OUTCOMES),
            st.floats(allow_nan=False, allow_infinity=False),
        ),
        max_size=30,
    )
)
def test_any_values_round_trip(tmp_path_factory: pytest.TempPathFactory, rows: list) -> None:
    path = tmp_path_factory.mktemp("h") / "s.store"
    records = [
        StoreRecord(i, scope, identity, url, fp, referer=referer, depth=depth, text=text, outcome=outcome, last_seen=seen)
        for i, (url, identity, fp, scope, referer, depth, text, outcome, seen) in enumerate(rows)
    ]
    write(path, records, batch=7)
    back = rows_of(read_store(path))

    def clean(s: str | None) -> str | None:  # lone surrogates cannot be stored in SQLite text
        return None if s is None else s.encode("utf-8", "replace").decode("utf-8")

    for r in records:
        r.url, r.identity, r.scope = clean(r.url), clean(r.identity), clean(r.scope)
        r.referer, r.text = clean(r.referer), clean(r.text)
    assert back == records


# ------------------------------------------- reading never writes; the WAL as SQLite reads it
def hashes(folder: Path) -> dict[str, str]:
    """Every file of a folder and the SHA-256 of its bytes (a new or changed file shows)."""
    import hashlib

    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def test_reading_a_store_never_changes_a_byte(tmp_path: Path) -> None:
    """``read_store`` of a store with a WAL (a crash, or a crawl still writing) reads it without SQLite
    touching the files: the main file, the WAL and the folder are as they were (no -shm created)."""
    rng = random.Random(9)
    records = [record(i, rng) for i in range(60)]
    path = tmp_path / "s.store"
    store = PageStore(path, CONFIG)
    store.open()
    for n, r in enumerate(records, start=1):
        store.put(r)
        if n % 20 == 0:
            store.flush()
    copy = crash_copy(path, tmp_path / "crash")
    assert rows_of(read_store(path)) == records  # a running crawl's store, read while it is open
    store.close()
    before = hashes(copy.parent)
    assert set(before) == {"s.store", "s.store-wal"}
    assert rows_of(read_store(copy)) == records
    assert hashes(copy.parent) == before
    # The same store read through SQLite itself (a copy) agrees.
    probe = crash_copy(copy, tmp_path / "sqlite")
    db = sqlite3.connect(probe)
    assert [row[0] for row in db.execute("SELECT url FROM pages ORDER BY entry")] == [r.url for r in records]
    db.close()


def wal_frames(path: Path) -> tuple[bytes, int, list[int]]:
    """The WAL's bytes, its frame size, and the index of each commit frame."""
    data = (path.parent / (path.name + "-wal")).read_bytes()
    frame = 24 + int.from_bytes(data[8:12], "big")
    frames = (len(data) - 32) // frame
    return data, frame, [i for i in range(frames) if int.from_bytes(data[32 + i * frame + 4 : 32 + i * frame + 8], "big")]


@pytest.mark.parametrize("where", ["page data", "database size field", "stored checksum"])
def test_a_flip_in_the_final_commit_frame_is_damage_not_a_crash(
    tmp_path: Path, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(3)
    path = tmp_path / "s.store"
    store = PageStore(path, CONFIG)
    store.open()
    for n, r in enumerate((record(i, rng) for i in range(40)), start=1):
        store.put(r)
        if n % 10 == 0:
            store.flush()
    copy = crash_copy(path, tmp_path / "crash")
    store.close()
    data, frame, commits = wal_frames(copy)
    last = 32 + commits[-1] * frame
    offset = {"page data": last + 24 + 1000, "database size field": last + 7, "stored checksum": last + 19}[where]
    damaged = bytearray(data)
    damaged[offset] ^= 0x04
    wal = copy.parent / "s.store-wal"
    wal.write_bytes(bytes(damaged))
    before = hashes(copy.parent)
    with caplog.at_level(logging.WARNING), pytest.raises(StoreError, match=rf"s\.store-wal: frame {commits[-1]} .*corrupt"):
        read_store(copy)
    with pytest.raises(StoreError, match="would be silently dropped"):
        PageStore(copy, CONFIG).open()
    assert "crash" not in caplog.text  # not blamed on a crash
    after = hashes(copy.parent)
    assert after.pop("s.store.lock") and after == before  # named, never cut or changed (a crawl adds its lock file)


def test_leftover_frames_after_the_last_commit_are_not_damage(tmp_path: Path) -> None:
    """Frames left behind a shorter later transaction (a crash inside a large transaction, then more
    commits) are not part of the database, as for SQLite: the store loads with every commit."""
    rng = random.Random(4)
    records = [record(i, rng) for i in range(80)]
    path = tmp_path / "s.store"
    store = PageStore(path, CONFIG)
    store.open()
    for r in records[:20]:
        store.put(r)
    store.flush()
    copy = crash_copy(path, tmp_path / "crash")  # what the first crash leaves: WAL up to the first commit
    store.abandon()
    big = PageStore(copy, CONFIG)
    big.open()
    for r in records[20:]:
        big.put(StoreRecord(**{**r.__dict__, "text": "t" * 2000}))
    assert big._db is not None
    big._db.execute("PRAGMA cache_size = 2")  # spill the large transaction's pages into the WAL
    big._db.execute("BEGIN IMMEDIATE")
    from simhash_scrapy.core.store.store_rows import INSERT, encode_rows

    big._db.executemany(INSERT, encode_rows(list(big._pending.values())))
    crashed = crash_copy(copy, tmp_path / "crash2")  # killed inside that transaction
    big.abandon()
    data, frame, commits = wal_frames(crashed)
    assert (len(data) - 32) // frame > commits[-1] + 10  # many uncommitted frames behind the last commit
    # The second crawl: a short transaction commits over the start of those frames, then it is killed.
    second = PageStore(crashed, CONFIG)
    assert len(second.open()) == 20
    second.put(records[20])
    second.flush()
    final = crash_copy(crashed, tmp_path / "crash3")
    second.abandon()
    data, frame, commits = wal_frames(final)
    assert (len(data) - 32) // frame > commits[-1] + 10  # stale frames of this WAL after the last commit
    db = sqlite3.connect(crash_copy(final, tmp_path / "sqlite"))
    assert db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    urls = sqlite_urls(db)
    db.close()
    assert rows_of(read_store(final)) == records[:21]
    assert [r.url for r in records[:21]] == urls
    third = PageStore(final, CONFIG)
    assert len(third.open()) == 21
    third.close()


def test_a_failed_commit_names_the_cause_and_keeps_the_records(tmp_path: Path) -> None:
    """A full disk (a real tmpfs, mounted when root can): the error names the file and SQLite's cause,
    never a rollback error hiding it; the records stay pending and are committed once there is room."""
    import subprocess

    folder = tmp_path / "disk"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (the crawl tests use RLIMIT_FSIZE instead)")
    try:
        rng = random.Random(6)
        records = [StoreRecord(**{**record(i, rng).__dict__, "text": "w" * 2000}) for i in range(60)]
        store = PageStore(folder / "s.store", CONFIG)
        store.open()
        for r in records:
            store.put(r)
        with pytest.raises(StoreError) as info:
            store.flush()
        message = str(info.value)
        assert str(folder / "s.store") in message and "database or disk is full" in message
        assert "rollback" not in message
        assert store.pending == 60
        with pytest.raises(StoreError, match="disk is full"):
            store.save_extra("url_rules", b"x")
        subprocess.run(["mount", "-o", "remount,size=8m", str(folder)], check=True)
        store.flush()
        assert store.pending == 0
        store.close()
        contents = read_store(folder / "s.store")
        assert rows_of(contents) == [StoreRecord(**{**r.__dict__}) for r in records]
        assert contents.extra == {"url_rules": b"x"}
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def test_a_leftover_commit_frame_behind_a_shorter_transaction_is_read_as_sqlite_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A long transaction whose commit frame reached the WAL although the write failed after it (SQLite
    then overwrites it with the next, shorter transaction): its tail, commit frame included, is left
    behind.  SQLite reads up to the shorter transaction; so does the store, with a warning."""
    rng = random.Random(8)
    records = [record(i, rng) for i in range(60)]
    path = tmp_path / "s.store"
    store = PageStore(path, CONFIG)
    store.open()
    for r in records[:10]:
        store.put(r)
    store.flush()
    base = crash_copy(path, tmp_path / "base")
    store.abandon()
    long_run = crash_copy(base, tmp_path / "long")
    writer = PageStore(long_run, CONFIG)
    writer.open()
    for r in records[10:]:
        writer.put(StoreRecord(**{**r.__dict__, "text": "l" * 3000}))
    writer.flush()  # the long transaction, committed in this copy
    long_wal = (long_run.parent / "s.store-wal").read_bytes()
    writer.abandon()
    short_run = crash_copy(base, tmp_path / "short")
    writer = PageStore(short_run, CONFIG)
    writer.open()
    writer.put(records[10])
    writer.flush()  # the shorter one that took its place
    short_wal = (short_run.parent / "s.store-wal").read_bytes()
    writer.abandon()
    assert len(long_wal) > len(short_wal) and long_wal[:32] == short_wal[:32]  # one WAL generation
    (short_run.parent / "s.store-wal").write_bytes(short_wal + long_wal[len(short_wal) :])
    db = sqlite3.connect(crash_copy(short_run, tmp_path / "sqlite"))
    urls = sqlite_urls(db)
    db.close()
    assert urls == [r.url for r in records[:11]]
    with caplog.at_level(logging.WARNING):
        assert rows_of(read_store(short_run)) == records[:11]
    assert "do not follow the last commit SQLite reads" in caplog.text


def test_reading_without_deserialize_uses_an_immutable_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before Python 3.11 (no ``Connection.deserialize``) the image is opened from a temporary file with
    ``immutable=1``, removed after; the store is still not touched."""
    import tempfile

    import simhash_scrapy.core.store.store as store_module

    class NoDeserialize(sqlite3.Connection):
        def __getattribute__(self, name: str):
            if name == "deserialize":
                raise AttributeError(name)
            return super().__getattribute__(name)

    connect = sqlite3.connect

    def without_deserialize(*args, **kwargs):
        if args and args[0] == ":memory:":
            kwargs["factory"] = NoDeserialize
        return connect(*args, **kwargs)

    rng = random.Random(12)
    records = [record(i, rng) for i in range(30)]
    path = tmp_path / "s.store"
    store = PageStore(path, CONFIG)
    store.open()
    for r in records:
        store.put(r)
    store.flush()
    copy = crash_copy(path, tmp_path / "crash")
    store.close()
    before = hashes(copy.parent)
    temporary = Path(tempfile.gettempdir())
    leftovers = set(temporary.glob("simhash-store-*"))
    monkeypatch.setattr(store_module.sqlite3, "connect", without_deserialize)
    assert rows_of(read_store(copy)) == records
    assert hashes(copy.parent) == before
    assert set(temporary.glob("simhash-store-*")) == leftovers


# ----------------------------------------------------------------- format 5: chunks
def test_a_format_4_store_is_read_then_upgraded_and_folded(tmp_path: Path) -> None:
    """A format-4 store (every record a row): a reader changes nothing; a crawl upgrades it in place to
    the current format (6) and folds its rows into chunks, every record as it was."""
    rng = random.Random(21)
    records = [record(i, rng) for i in range(70)]
    path = tmp_path / "s.store"
    format_4_store(path, records)
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    contents = read_store(path)
    assert contents.version == 4 and rows_of(contents) == records
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == files  # not a byte, not a file more
    store = PageStore(path, CONFIG)
    assert rows_of(store.open()) == records
    store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (FORMAT_VERSION,) == (6,)
        assert db.execute("SELECT count(*) FROM pages").fetchone() == (0,)
        assert db.execute("SELECT chunk, count FROM chunks").fetchall() == [(0, 70)]
    db.close()
    again = read_store(path)
    assert again.version == FORMAT_VERSION and rows_of(again) == records


def test_rows_are_folded_into_chunks_and_a_crash_keeps_every_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows wait in ``pages`` until FOLD_ROWS of them (then one transaction folds them into the chunks they
    touch, across a chunk boundary); re-checked records are laid over their chunk; a crash between folds
    loses nothing committed, and the next crawl folds what it finds."""
    import simhash_scrapy.core.store.store as store_module
    import simhash_scrapy.core.store.store_chunks as chunks_module

    monkeypatch.setattr(store_module, "FOLD_ROWS", 12)
    monkeypatch.setattr(store_module, "CHUNK_RECORDS", 16)
    monkeypatch.setattr(chunks_module, "CHUNK_RECORDS", 16)
    rng = random.Random(22)
    records = [record(i, rng) for i in range(40)]
    path = tmp_path / "s.store"
    store = PageStore(path, CONFIG)
    store.open()
    for n, r in enumerate(records, start=1):
        store.put(r)
        if n % 5 == 0:
            store.flush()
        if n % 7 == 0:  # a record of an earlier chunk, checked again
            old = records[n // 3]
            old.last_seen += 1.0
            old.outcome = "unchanged"
            store.put(old)
    store.flush()
    crashed = crash_copy(path, tmp_path / "crash")
    store.abandon()
    with sqlite3.connect(crash_copy(crashed, tmp_path / "look")) as db:
        folded = db.execute("SELECT chunk, count FROM chunks ORDER BY chunk").fetchall()
        rows = db.execute("SELECT count(*) FROM pages").fetchone()[0]
    db.close()
    assert folded[0] == (0, 16) and len(folded) >= 2 and 0 < rows < 12  # folded over a boundary, rows waiting
    assert rows_of(read_store(crashed)) == records
    again = PageStore(crashed, CONFIG)
    assert rows_of(again.open()) == records  # ... and folded now
    again.abandon()
    with sqlite3.connect(crashed) as db:
        assert db.execute("SELECT count(*) FROM pages").fetchone() == (0,)
        assert db.execute("SELECT chunk, count FROM chunks ORDER BY chunk").fetchall() == [(0, 16), (1, 16), (2, 8)]
        assert sqlite_urls(db) == [r.url for r in records]
    db.close()


def _edit_chunks(path: Path, sql: str, *args: object) -> bytes:
    # The store is in WAL mode: the edit is checkpointed into the file before its bytes are taken, or a
    # later checkpoint (any connection's) would move it there and the file would look changed.
    with sqlite3.connect(path) as db:
        db.execute(sql, args)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return path.read_bytes()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("flip", r"corrupt chunk 0 \(checksum mismatch\)"),
        ("cut", r"corrupt chunk 0 \(checksum mismatch\)"),
        ("renumber", r"chunk 0 is missing"),
        ("drop", r"record #0 is missing"),
        ("recount", r"corrupt chunk 0 \(checksum mismatch\)"),
        ("header", r"record #30 is missing"),
    ],
)
def test_a_damaged_chunk_is_named_and_the_file_left_as_it_is(tmp_path: Path, damage: str, message: str) -> None:
    from simhash_scrapy.core.store.store import _meta_checksum

    rng = random.Random(23)
    records = [record(i, rng) for i in range(30)]
    path = tmp_path / "s.store"
    write(path, records)
    db = sqlite3.connect(path)
    (data,) = db.execute("SELECT data FROM chunks").fetchone()
    db.close()  # (closed now, not whenever it is collected: it would hold the WAL's frames out of the file)
    if damage == "flip":
        before = _edit_chunks(path, "UPDATE chunks SET data = ?", data[:100] + bytes([data[100] ^ 8]) + data[101:])
    elif damage == "cut":
        before = _edit_chunks(path, "UPDATE chunks SET data = ?", data[:-1])
    elif damage == "renumber":
        before = _edit_chunks(path, "UPDATE chunks SET chunk = 1")
    elif damage == "drop":
        before = _edit_chunks(path, "DELETE FROM chunks")
    elif damage == "recount":
        before = _edit_chunks(path, "UPDATE chunks SET count = 29")
    else:  # the header counts one page more than the chunks hold
        with sqlite3.connect(path) as db:
            meta = dict(db.execute("SELECT key, value FROM simhash_meta").fetchall())
            meta["pages"] = "31"
            db.execute("UPDATE simhash_meta SET value = '31' WHERE key = 'pages'")
            db.execute("UPDATE simhash_meta SET value = ? WHERE key = 'checksum'", (_meta_checksum(meta),))
        db.close()
        before = path.read_bytes()
    with pytest.raises(StoreError, match=message) as info:
        read_store(path)
    assert str(path) in str(info.value)
    with pytest.raises(StoreError, match=message):
        PageStore(path, CONFIG).open()
    assert path.read_bytes() == before


def test_rows_spread_thin_over_old_chunks_wait_for_the_close(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flush folds the chunks many rows wait for and the new pages' chunks; a row or two in an old chunk
    (a re-crawl spread over the whole store) waits for ``close`` instead of rewriting that chunk."""
    import simhash_scrapy.core.store.store as store_module
    import simhash_scrapy.core.store.store_chunks as chunks_module

    monkeypatch.setattr(store_module, "FOLD_ROWS", 12)
    monkeypatch.setattr(store_module, "CHUNK_RECORDS", 16)
    monkeypatch.setattr(chunks_module, "CHUNK_RECORDS", 16)
    rng = random.Random(24)
    records = [record(i, rng) for i in range(76)]
    path = tmp_path / "s.store"
    write(path, records[:64])
    store = PageStore(path, CONFIG)
    store.open()
    for chunk in range(4):  # one row in each old chunk
        records[chunk * 16 + 5].last_seen += 1.0
        store.put(records[chunk * 16 + 5])
    for r in records[64:]:  # twelve new pages
        store.put(r)
    store.flush()
    with sqlite3.connect(path) as db:
        assert sorted(e for (e,) in db.execute("SELECT entry FROM pages")) == [5, 21, 37]
        assert db.execute("SELECT chunk, count FROM chunks ORDER BY chunk").fetchall() == [(0, 16), (1, 16), (2, 16), (3, 16), (4, 12)]
    db.close()
    assert rows_of(read_store(path)) == records
    store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM pages").fetchone() == (0,)
    db.close()
    assert rows_of(read_store(path)) == records


def test_a_full_disk_at_close_keeps_the_rows_when_only_the_fold_does_not_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``close`` folds the waiting rows into chunks; when that does not fit (SQLite's "database or disk is
    full", here from ``max_page_count``: a file that may not grow) but the rows alone do, the rows are
    committed (folded by a later crawl): no page the crawl checked is lost at close."""
    import dataclasses

    import simhash_scrapy.core.store.store as store_module
    import simhash_scrapy.core.store.store_chunks as chunks_module

    monkeypatch.setattr(store_module, "CHUNK_RECORDS", 16)
    monkeypatch.setattr(chunks_module, "CHUNK_RECORDS", 16)
    rng = random.Random(25)
    records = [dataclasses.replace(record(i, rng), text=f"{rng.getrandbits(8000):x}") for i in range(76)]
    clean = tmp_path / "clean" / "s.store"
    clean.parent.mkdir()
    write(clean, records[:64])
    with sqlite3.connect(clean) as db:
        db.execute("VACUUM")  # no free pages: whatever is written makes the file grow
    db.close()

    def opened(name: str, fold_rows: int) -> tuple[PageStore, int]:
        folder = tmp_path / name
        folder.mkdir()
        shutil.copyfile(clean, folder / "s.store")
        monkeypatch.setattr(store_module, "FOLD_ROWS", fold_rows)
        store = PageStore(folder / "s.store", CONFIG)
        store.open()
        for r in records[64:]:
            store.put(r)
        assert store._db is not None
        return store, store._db.execute("PRAGMA page_count").fetchone()[0]

    # The room the twelve new records need as rows alone (FOLD_ROWS above them: a flush writes rows only).
    room = 0
    while True:
        store, pages = opened(f"rows{room}", 13)
        assert store._db is not None
        store._db.execute(f"PRAGMA max_page_count = {pages + room}")
        try:
            store.flush()
            break
        except StoreError:
            room += 1
        finally:
            store.abandon()
    store, pages = opened("close", 12)  # close folds them: more room than the rows alone
    assert store._db is not None
    store._db.execute(f"PRAGMA max_page_count = {pages + room}")
    store.close()
    assert rows_of(read_store(tmp_path / "close" / "s.store")) == records
