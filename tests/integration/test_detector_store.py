"""What clustering steps 5-7 learned is saved with the store and restored from it (``core.store.detector_state``):
a crawl stopped (or killed) halfway and resumed decides as one in-process crawl; damage is named; a format-5
store is upgraded in place."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from crawl_helpers import run  # drives the in-process backends' coroutines
from detector_helpers import sample_pages

from simhash_scrapy.backends.base import PageRecord
from simhash_scrapy.backends.memory import MemoryBackend
from simhash_scrapy.backends.persistent import PersistentBackend
from simhash_scrapy.config import SimhashConfig
from simhash_scrapy.core.store import detector_state
from simhash_scrapy.core.analysis import analyse_html
from simhash_scrapy.core.store.store import FORMAT_VERSION, StoreError, read_store
from simhash_scrapy.core.store.store_rows import blob_checksum


def records(config: SimhashConfig) -> list[PageRecord]:
    """The pages steps 5-7 match and the real sample pages, in one crawl order, as the crawl records them."""
    pages = sample_pages("steps") + sample_pages("sample") + sample_pages("sample_wide")
    out = []
    for url, body in pages:
        a = analyse_html(body, None, config.analysis)
        if a.fingerprint is not None:
            out.append(PageRecord(url, a.fingerprint, "spider", identity=url, exact=a.exact, edit_keys=a.edit_keys,
                                  digest=a.digest, source=a.source, second=a.second, sketch=a.sketch))  # fmt: skip
    return out


def pairs(backend: MemoryBackend, batch: list[PageRecord]) -> set[tuple[str, str | None, str | None]]:
    found = set()
    for record in batch:
        verdict = backend.check_now(record)
        if verdict.is_duplicate:
            found.add((record.url, verdict.canonical_url, verdict.via))
    return found


@pytest.mark.parametrize("stop", ["close", "kill"])
def test_a_crawl_stopped_halfway_and_resumed_decides_as_one_crawl(tmp_path: Path, stop: str) -> None:
    config = SimhashConfig(store_dir=str(tmp_path / "store"), flush_interval=0.0)
    pages = records(config)
    whole = pairs(MemoryBackend(config), pages)
    assert {"template", "second", "containment"} <= {via for _, _, via in whole}
    for half in (4, len(pages) // 2, len(pages) - 3):  # stopped after the template, the edits, the sample sets
        folder = tmp_path / f"{stop}-{half}"
        first = PersistentBackend(SimhashConfig(store_dir=str(folder / "store"), flush_interval=0.0))
        run(first.open("spider"))
        found = pairs(first, pages[:half])
        before = detector_state.state_of(first.detector)
        if stop == "close":
            run(first.close())
            resumed_folder = folder
        else:  # what a kill -9 leaves: the files as they are while the writer is open (every flush committed)
            resumed_folder = tmp_path / f"copy-{half}"
            shutil.copytree(folder, resumed_folder, ignore=shutil.ignore_patterns("*.lock"))
        resumed = PersistentBackend(SimhashConfig(store_dir=str(resumed_folder / "store"), flush_interval=0.0))
        run(resumed.open("spider"))
        assert detector_state.state_of(resumed.detector) == before, half
        # which step matched a restored page is kept: step 7's read "containment" (the report's rule)
        restored = {m.url: m.via for m in run(resumed.members()) if m.canonical_url is not None}
        assert {url for url, via in restored.items() if via == "containment"} == {
            url for url, _, via in found if via == "containment"
        }, half
        found |= pairs(resumed, pages[half:])
        run(resumed.close())
        if stop == "kill":
            run(first.close())
        assert found == whole, half


def test_the_next_crawl_keeps_learning_and_the_snapshot_replaces_the_journals(tmp_path: Path) -> None:
    config = SimhashConfig(store_dir=str(tmp_path), flush_interval=0.0)
    pages = records(config)
    first = PersistentBackend(config)
    run(first.open("spider"))
    pairs(first, pages[:10])
    store = first.store
    assert store is not None
    store.flush()
    with sqlite3.connect(tmp_path / "spider.store") as db:
        names = [n for (n,) in db.execute("SELECT name FROM extra")]
    assert any(n.startswith(detector_state.JOURNAL) for n in names) and detector_state.SNAPSHOT not in names
    run(first.close())
    with sqlite3.connect(tmp_path / "spider.store") as db:
        names = [n for (n,) in db.execute("SELECT name FROM extra")]
        (version,) = db.execute("PRAGMA user_version").fetchone()
    assert version == FORMAT_VERSION == 6
    assert [n for n in names if detector_state.is_detector_blob(n)] == [detector_state.SNAPSHOT]


def _rewrite_blob(path: Path, name: str, change: Any, checksum: bool) -> None:
    with sqlite3.connect(path) as db:
        (data,) = db.execute("SELECT data FROM extra WHERE name = ?", (name,)).fetchone()
        data = change(data)
        total = blob_checksum(name, data) if checksum else db.execute(
            "SELECT checksum FROM extra WHERE name = ?", (name,)).fetchone()[0]  # fmt: skip
        db.execute("UPDATE extra SET data = ?, checksum = ? WHERE name = ?", (data, total, name))
    sqlite3.connect(path).execute("PRAGMA wal_checkpoint(TRUNCATE)").connection.close()


@pytest.mark.parametrize(("what", "message"), [
    ("flip", "checksum mismatch"),  # one bit: the blob's checksum says it
    ("truncate", "error: Error -5"),  # cut short, checksum made to match: the zlib stream says it
    ("garbage", "error: Error -3"),
])  # fmt: skip
def test_damage_to_what_steps_5_to_7_learned_is_named_and_the_file_left_as_it_is(
    tmp_path: Path, what: str, message: str
) -> None:
    config = SimhashConfig(store_dir=str(tmp_path), flush_interval=0.0)
    first = PersistentBackend(config)
    run(first.open("spider"))
    pairs(first, records(config)[:12])
    run(first.close())
    path = tmp_path / "spider.store"
    change = {
        "flip": lambda d: d[:100] + bytes([d[100] ^ 8]) + d[101:],
        "truncate": lambda d: d[: len(d) // 2],
        "garbage": lambda d: b"not an archive" + d[14:],
    }[what]
    _rewrite_blob(path, detector_state.SNAPSHOT, change, checksum=what != "flip")
    before = path.read_bytes()
    with pytest.raises(Exception, match=rf"{path}: corrupt extra record 'detector/snapshot' \(.*({message})"):
        run(PersistentBackend(config).open("spider"))
    assert path.read_bytes() == before


def test_a_format_5_store_is_upgraded_in_place(tmp_path: Path) -> None:
    """A store as format 5 wrote it (the same tables, no detector blobs, version 5): read as it is by
    ``read_store``, upgraded to 6 by the next crawl, whose steps 5-7 start from nothing and are kept."""
    from simhash_scrapy.core.store.store import _meta_checksum

    config = SimhashConfig(store_dir=str(tmp_path), flush_interval=0.0)
    pages = records(config)
    first = PersistentBackend(config)
    run(first.open("spider"))
    pairs(first, pages[:10])
    run(first.close())
    path = tmp_path / "spider.store"
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM extra WHERE name LIKE 'detector/%'")
        meta = dict(db.execute("SELECT key, value FROM simhash_meta").fetchall())
        meta["format"] = "5"
        meta["checksum"] = _meta_checksum(meta)
        db.executemany("UPDATE simhash_meta SET value = ? WHERE key = ?", [(meta[k], k) for k in ("format", "checksum")])
        db.execute("PRAGMA user_version = 5")
    sqlite3.connect(path).execute("PRAGMA wal_checkpoint(TRUNCATE)").connection.close()
    old = read_store(path)
    assert old.version == 5 and len(old) == 10
    second = PersistentBackend(config)
    run(second.open("spider"))
    assert second.initial == 10 and not second.detector.rule._contained  # nothing learned was kept by format 5
    pairs(second, pages[10:20])
    state = detector_state.state_of(second.detector)
    run(second.close())
    assert read_store(path).version == 6
    third = PersistentBackend(config)
    run(third.open("spider"))
    assert detector_state.state_of(third.detector) == state
    run(third.close())
    with pytest.raises(StoreError):  # (a version this code does not know is still refused)
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA user_version = 9")
        read_store(path)


def test_replaying_what_was_learned_gives_the_learner_and_the_counts_exactly() -> None:
    import random

    import numpy as np

    from simhash_scrapy.core.cluster.containment import SentenceCounts
    from simhash_scrapy.core.cluster.sitetemplate import HostTemplates, line_hashes, line_hashes_many

    rng = random.Random(5)
    texts = [
        "\n".join(f"line {rng.randrange(30)} of the box" for _ in range(6)) + f"\narticle {i} words of its own"
        for i in range(300)
    ]
    live, replayed = HostTemplates(max_lines=150, max_articles=8), HostTemplates(max_lines=150, max_articles=8)
    inputs = [(f"h{i % 3}", rng.getrandbits(64), text) for i, text in enumerate(texts)]
    for host, fp, text in inputs:
        live.check(host, fp, text)
    assert line_hashes_many([t for _, _, t in inputs]) == [line_hashes(t) for _, _, t in inputs]
    for (host, fp, _), digests in zip(inputs, line_hashes_many([t for _, _, t in inputs])):
        replayed.learn(host, fp, digests)
    # Full: the bound and the hosts it made the learner forget (least recently useful first) are replayed too.
    assert len(live) == len(replayed) and 100 < len(live) <= 150
    assert {h: (v.articles, v.lines) for h, v in live._hosts.items()} == {
        h: (v.articles, v.lines) for h, v in replayed._hosts.items()
    }
    one, many = SentenceCounts(8), SentenceCounts(8)
    hashes = [rng.getrandbits(64) for _ in range(400)] * 3 + [7] * 300  # collisions and saturation
    for at in range(0, len(hashes), 25):
        one.add(hashes[at : at + 25])
    many.add_many(np.array(hashes, dtype=np.uint64))
    assert (one._low, one._high) == (many._low, many._high) and max(one._low) == 255


def test_a_partial_print_view_after_a_resume_joins_its_restored_page(tmp_path: Path) -> None:
    """Step 7's other views (``core.cluster.views``): a restored canonical page is listed under its address."""
    config = SimhashConfig(store_dir=str(tmp_path / "store"), flush_interval=0.0)
    story = " ".join(f"Sentence number {i} of the long story told before the recipe, with words {i * 7}." for i in range(45))
    card = " ".join(f"Step {i}: stir the pot {i} times and then wait for {i + 3} minutes before tasting it." for i in range(20))
    page, view = (analyse_html(f"<html><body><main><p>{text}</p></main></body></html>".encode(), None, config.analysis)
                  for text in (f"{story} {card}", card))  # fmt: skip
    assert page.sketch is not None and view.sketch is not None and view.sketch.sentences < page.sketch.sentences / 2
    url = "https://recipes.test/soup/"
    first = PersistentBackend(config)
    run(first.open("spider"))
    first.check_now(PageRecord(url, page.fingerprint, "spider", identity=url, source=page.source, sketch=page.sketch))
    before = detector_state.state_of(first.detector)
    run(first.close())
    resumed = PersistentBackend(config)
    run(resumed.open("spider"))
    assert detector_state.state_of(resumed.detector) == before and before["views"]
    verdict = resumed.check_now(PageRecord(url + "?print=1", view.fingerprint, "spider", identity=url + "?print=1",
                                           source=view.source, sketch=view.sketch))  # fmt: skip
    run(resumed.close())
    assert verdict.is_duplicate and verdict.canonical_url == url and verdict.via == "containment"
