"""Persistence on one machine: JOBDIR pause/resume and SIMHASH_DIR across crawls.

Component tests drive ``PersistentBackend`` directly; the crawl tests run the
real CLI (``python -m scrapy.cmdline crawl``) in ``tests/crawl_project``
against a local site, stop one with SIGINT halfway and resume it.
"""

from __future__ import annotations

import itertools
import logging
import random
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from simhash_scrapy.backends import BackendError, PageRecord
from simhash_scrapy.backends.memory import MemoryBackend
from simhash_scrapy.backends.persistent import PersistentBackend, load_members, stored_links
from simhash_scrapy.config import SimhashConfig
from simhash_scrapy.core.store.store import read_store

from crawl_helpers import (  # noqa: F401  (the helpers, also for tests that import them from here)
    PROJECT,
    backend_for,
    crawl_command,
    crawl_env,
    distinct_words,
    flip,
    interrupt_after,
    make_site,
    page_sequence,
    parse_stats,
    reached,
    read_report,
    run,
    run_crawl_cli,
)

# ------------------------------------------------------------------ components
def test_jobdir_or_simhash_dir_selects_the_persistent_backend(tmp_path: Path) -> None:
    assert type(backend_for({})) is MemoryBackend
    assert type(backend_for({"JOBDIR": str(tmp_path / "job")})) is PersistentBackend
    assert type(backend_for({"SIMHASH_DIR": str(tmp_path / "dir")})) is PersistentBackend
    assert type(backend_for({"SIMHASH_DIR": "False"})) is MemoryBackend
    with pytest.raises(ValueError, match="SIMHASH_DIR"):
        backend_for({"SIMHASH_DIR": 12})
    with pytest.raises(ValueError, match="SIMHASH_RESET"):
        backend_for({"JOBDIR": str(tmp_path / "job"), "SIMHASH_RESET": "maybe"})


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_resumed_runs_decide_like_one_uninterrupted_run(tmp_path: Path, seed: int) -> None:
    config = SimhashConfig(max_distance=3)
    pages = page_sequence(seed, 1500, scopes=("a.example", "b.example", "c.example"))
    reference = MemoryBackend(config)
    expected = [reference.check_now(record, index) for record, index in pages]
    rng = random.Random(seed)
    cuts = [0, *sorted(rng.sample(range(1, len(pages)), 4)), len(pages)]
    settings = {"JOBDIR": str(tmp_path / "job")}
    for run_number, (start, end) in enumerate(itertools.pairwise(cuts)):
        backend = backend_for(settings, config)
        run(backend.open("spider"))
        assert backend.initial == start
        got = [run(backend.check(record, index)) for record, index in pages[start:end]]
        assert got == expected[start:end], f"run {run_number}"
        if end == len(pages):
            assert run(backend.members()) == run(reference.members())
            assert run(backend.index_size()) == run(reference.index_size())
        run(backend.close())
    contents = read_store(tmp_path / "job" / "simhash.store")
    assert len(contents) == len(pages)


def test_members_are_built_from_the_store(tmp_path: Path) -> None:
    settings = {"SIMHASH_DIR": str(tmp_path / "state")}
    pages = page_sequence(7, 200)
    first = backend_for(settings)
    run(first.open("myspider"))
    for record, index in pages:
        run(first.check(record, index))
    before = run(first.members())
    run(first.close())
    assert (tmp_path / "state" / "myspider.store").exists()
    second = backend_for(settings)
    run(second.open("myspider"))
    assert second.initial == 200
    assert run(second.members()) == before
    assert load_members(tmp_path / "state" / "myspider.store") == before
    assert second._members[5] == before[5] and second._members[-1] == before[-1]
    run(second.close())


def test_a_store_written_with_other_settings_is_refused(tmp_path: Path) -> None:
    base = {"max_distance": 3, "blocks": None, "weighting": "tf", "word_ngram": 1, "text_mode": "main"}
    settings = {"JOBDIR": str(tmp_path / "job")}
    backend = backend_for(settings, SimhashConfig(**base))
    run(backend.open("s"))
    run(backend.check(PageRecord("https://a/", 123, "s")))
    run(backend.close())
    for change, setting in [
        ({"max_distance": 4}, "SIMHASH_MAX_DISTANCE"),
        ({"blocks": 6}, "SIMHASH_BLOCKS"),
        ({"weighting": "binary"}, "SIMHASH_WEIGHTING"),
        ({"word_ngram": 2}, "SIMHASH_WORD_NGRAM"),
        ({"text_mode": "visible"}, "SIMHASH_TEXT_MODE"),
    ]:
        other = backend_for(settings, SimhashConfig(**{**base, **change}))
        with pytest.raises(BackendError, match=setting):
            run(other.open("s"))
    # SIMHASH_RESET starts afresh with the new settings.
    fresh = backend_for({**settings, "SIMHASH_RESET": True}, SimhashConfig(**{**base, "max_distance": 4}))
    run(fresh.open("s"))
    assert fresh.initial == 0
    run(fresh.close())


def test_a_crash_loses_only_the_last_flush_interval(tmp_path: Path) -> None:
    """Without a close (``kill -9``), the pages of the last, uncommitted interval are lost, nothing else."""
    settings = {"JOBDIR": str(tmp_path / "job"), "SIMHASH_FLUSH_INTERVAL": 3600}
    pages = page_sequence(9, 50)
    backend = backend_for(settings)
    run(backend.open("s"))
    for record, index in pages[:40]:
        run(backend.check(record, index))
    backend._flush()  # what the interval timer does
    for record, index in pages[40:]:
        run(backend.check(record, index))
    assert backend.store.pending == 10
    backend.store.abandon()  # the process dies: no close
    resumed = backend_for(settings)
    run(resumed.open("s"))
    assert resumed.initial == 40
    # The pages whose records were lost are checked again and decided as in one uninterrupted run.
    reference = MemoryBackend(SimhashConfig())
    expected = [reference.check_now(r, i) for r, i in pages]
    assert [run(resumed.check(r, i)) for r, i in pages[40:]] == expected[40:]
    run(resumed.close())
    assert len(read_store(tmp_path / "job" / "simhash.store")) == 50


def test_rechecked_pages_keep_one_record_and_extras_persist(tmp_path: Path) -> None:
    settings = {"SIMHASH_DIR": str(tmp_path / "state")}
    pages = page_sequence(11, 120)
    reference = MemoryBackend(SimhashConfig())
    for crawl in range(3):
        backend = backend_for(settings)
        run(backend.open("s"))
        assert backend.initial == (0 if crawl == 0 else 120)
        if crawl:
            assert run(backend.load_extra("rules")) == f"rules {crawl - 1}".encode()
        for record, index in pages:
            assert run(backend.check(record, index)) == reference.check_now(record, index)
        run(backend.save_extra("rules", f"rules {crawl}".encode()))
        assert run(backend.members()) == run(reference.members())
        run(backend.close())
    assert len(read_store(tmp_path / "state" / "s.store")) == 120
    assert load_members(tmp_path / "state" / "s.store") == run(reference.members())


@pytest.mark.slow  # 41 s measured (--durations, -n 2, loaded 2-core machine)
def test_simhash_dir_recognises_last_weeks_pages(serve: Any, tmp_path: Path) -> None:
    site = serve(make_site(6))
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__", ".scrapy"))
    # A relative SIMHASH_DIR lives in the project's .scrapy folder.
    common = ["-a", f"base={site.base}", "-s", "SIMHASH_DIR=simhash"]
    stats, log = run_crawl_cli([*common, "-a", "paths=" + ",".join(f"/a{i}" for i in range(6))], project)
    assert stats["simhash/unique"] == 6 and "simhash/initial" not in stats
    assert (project / ".scrapy" / "simhash" / "pages.store").exists()
    # "Next week": the edited copies are near-duplicates of last week's pages.
    report = tmp_path / "week2.jsonl"
    stats, log = run_crawl_cli(
        [*common, "-a", "paths=" + ",".join(f"/b{i}" for i in range(6)), "-s", f"SIMHASH_REPORT_URI={report}"],
        project,
    )
    assert stats["simhash/initial"] == 6
    assert stats["simhash/near_duplicates"] == 6 and stats["simhash/dropped"] == 6
    assert reached(log) == []
    clusters = read_report(report)
    assert sorted(c["canonical"] for c in clusters) == sorted(site.url(f"/a{i}") for i in range(6))
    assert all(c["size"] == 2 for c in clusters)
    # -a simhash_reset=1 starts afresh: nothing is a duplicate any more.
    stats, log = run_crawl_cli(
        [*common, "-a", "paths=" + ",".join(f"/b{i}" for i in range(6)), "-a", "simhash_reset=1"], project
    )
    assert "simhash/initial" not in stats and stats["simhash/unique"] == 6
    assert len(reached(log)) == 6
    assert (project / ".scrapy" / "simhash" / "pages.store.previous").exists()


@pytest.mark.slow  # 21 s measured (--durations, -n 2, loaded 2-core machine)
def test_jobdir_crawl_stopped_halfway_and_resumed(serve: Any, tmp_path: Path) -> None:
    count = 24
    site = serve(make_site(count))
    # First the originals, then their copies: the second half duplicates the first.
    paths = [f"/a{i}" for i in range(count)] + [f"/b{i}" for i in range(count)]
    jobdir = tmp_path / "job"
    report = tmp_path / "report.jsonl"
    args = [
        "-a", f"base={site.base}", "-a", "paths=" + ",".join(paths),
        "-s", f"JOBDIR={jobdir}", "-s", "DOWNLOAD_DELAY=0.25", "-s", f"SIMHASH_REPORT_URI={report}",
    ]
    first_log = interrupt_after(crawl_command(*args), PROJECT, 8)  # part of the originals are in
    assert "shutting down gracefully" in first_log
    first_stats = parse_stats(first_log)
    first_pages = first_stats["simhash/fingerprinted"]
    assert 8 <= first_pages < count, first_stats  # stopped within the originals
    assert first_stats["finish_reason"] == "shutdown"
    assert len(read_store(jobdir / "simhash.store")) == first_pages

    # The same command again resumes the job.
    stats, _ = run_crawl_cli(args[:-4] + ["-s", "DOWNLOAD_DELAY=0", args[-2], args[-1]])
    assert stats["finish_reason"] == "finished"
    assert stats["simhash/initial"] == first_pages
    assert first_pages + stats["simhash/fingerprinted"] == 2 * count
    # Every copy is found, including copies of pages fetched before the pause.
    assert stats["simhash/near_duplicates"] == count
    first_half_urls = set(reached(first_log))
    assert len(first_half_urls) == first_pages
    clusters = read_report(report)
    by_canonical = {c["canonical"]: c for c in clusters}
    # The final report covers the whole job: a cluster for every original, pre-pause ones too.
    assert set(by_canonical) == {site.url(f"/a{i}") for i in range(count)}
    for i in range(count):
        members = [m["url"] for m in by_canonical[site.url(f"/a{i}")]["members"]]
        assert members == [site.url(f"/a{i}"), site.url(f"/b{i}")]
    assert first_half_urls <= set(by_canonical)


# ---------------------------- the store under a full disk, a read-only file, repeated crashes
def _faults() -> Any:
    import store_faults  # noqa: PLC0415 - tests/store_faults.py: the trials benchmarks/faults.py runs at scale

    return store_faults


@pytest.mark.slow  # 53 s measured (--durations, -n 2, loaded 2-core machine)
@pytest.mark.parametrize("mount", [True, False], ids=["tmpfs", "rlimit_fsize"])
def test_a_full_disk_never_drops_a_page_and_says_why_once(tmp_path: Path, mount: bool) -> None:
    """Three real crawls on one SIMHASH_DIR store on a full file system (a 96 KB tmpfs when root can mount
    one, else RLIMIT_FSIZE in the crawl process), the third after the disk got room.

    Each: no traceback, no "cannot rollback" noise, no page dropped (every page reached the spider or was
    dropped as a near-duplicate), the first ERROR line names the file and the full disk, at most one more
    at close (with ``simhash/store_unsaved``), the store loads every time with exactly the committed pages,
    and once there is room every page is stored."""
    result = _faults().disk_full_trial(tmp_path, pages=150, mount=mount)
    assert result["category"] == "handled", result
    first, second, third = result["runs"]
    assert first["write_errors"] >= 1 and first["unsaved"] > 0 and 0 <= first["stored"] < 150
    assert f"{tmp_path / 'full-disk' / 'pages.store'}: cannot write the simhash store: " in first["first_error"]
    if result["disk"].startswith("tmpfs"):
        assert "database or disk is full (SQLITE_FULL; 0 KB free on its file system)" in first["first_error"]
    else:
        assert "a file-size limit (RLIMIT_FSIZE) of 98304 bytes" in first["first_error"]
    assert second["stored"] >= first["stored"]  # the next crawl loaded what was committed, never refused it
    assert third == {"stored": 150, "unsaved": 0, "write_errors": 0, "first_error": "", "problems": []}


@pytest.mark.slow  # 36 s measured (--durations, -n 2, loaded 2-core machine)
def test_a_read_only_store_stops_the_crawl_cleanly_and_is_not_touched(tmp_path: Path) -> None:
    """The store file cannot be written (the immutable attribute as root, else mode 0444), its folder can:
    the crawl stops at start with one error naming the file and the cause; no traceback, no page dropped,
    not one byte of the folder changed."""
    result = _faults().read_only_trial(tmp_path)
    assert result["category"] == "handled", result
    assert "pages.store: the simhash store cannot be written (" in result["first_error"]


@pytest.mark.slow  # 19 s measured (--durations, -n 2, loaded 2-core machine)
@pytest.mark.parametrize("kill_after", [2, 25])
def test_a_double_crash_loads_what_sqlite_reads(tmp_path: Path, kill_after: int) -> None:
    """A writer killed inside a large last transaction, then a real ``scrapy crawl`` on the same store
    killed with kill -9: the store loads with exactly the rows the sqlite3 library reads (quick_check ok),
    every page committed by either; the first crash's leftover WAL frames are not taken for damage."""
    result = _faults().double_crash_trial(tmp_path, seed=kill_after, kill_after=kill_after)
    assert result["first_returncode"] == -9 and result["second_returncode"] == -9, result
    assert result["wal_after_first"] > 100 * 4096  # the first crash left a large uncommitted transaction
    assert result["sqlite_quick_check"] == "ok"
    assert result["category"] == "read as SQLite reads it", result
    assert result["stored"] >= 200 + kill_after and result["lost"] == 0  # SIMHASH_FLUSH_INTERVAL = 0


@pytest.mark.slow  # 34 s measured (--durations, -n 2, loaded 2-core machine)
def test_the_report_command_never_changes_a_crashed_store(serve: Any, tmp_path: Path) -> None:
    """``scrapy simhash report`` on the store a ``kill -9`` left (main file and WAL): not one byte of the
    folder changes (no checkpoint, no -shm), and the report has every committed page."""
    import hashlib

    faults = _faults()
    site, paths = faults._site(40, first=5000)
    state = tmp_path / "state"
    try:
        reached_pages, code, _ = faults.kill_crawl(state, site, paths, 20, "SIMHASH_FLUSH_INTERVAL=0")
    finally:
        site.close()
    assert code == -9 and len(reached_pages) == 20
    assert (state / "pages.store-wal").stat().st_size > 0

    def hashes() -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(state.iterdir())}

    before = hashes()
    out = tmp_path / "report.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "scrapy.cmdline", "simhash", "report", str(state / "pages.store"), "-o", str(out)],
        cwd=tmp_path, env=crawl_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert hashes() == before
    assert "pages.store-shm" not in before or before["pages.store-shm"] == hashes()["pages.store-shm"]
    stored = read_store(state / "pages.store")
    assert {url for _, url in reached_pages} <= set(stored.urls())  # SIMHASH_FLUSH_INTERVAL = 0: all committed
    assert f"has {len(stored)} pages" in proc.stderr, proc.stderr
    assert hashes() == before


def test_a_store_that_fills_up_then_gets_room_loses_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """On a real tmpfs that fills up (mounted when root can): checks go on and decide as the memory
    backend does, one ERROR line while the disk is full (however often the commit fails), and once
    there is room the pending records are committed: every page is in the store."""
    folder = tmp_path / "disk"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (the crawl tests use RLIMIT_FSIZE instead)")
    try:
        settings = {"SIMHASH_DIR": str(folder), "SIMHASH_FLUSH_INTERVAL": 0}
        # Each page names a rel=canonical URL: those blobs are staged with the records and must survive too.
        pages = [(replace(r, text="w" * 1500, canonical_link=r.url + "/canon"), i) for r, i in page_sequence(12, 120)]
        backend = backend_for(settings)
        run(backend.open("s"))
        reference = MemoryBackend(SimhashConfig())
        with caplog.at_level(logging.DEBUG, logger="simhash_scrapy"):
            verdicts = [run(backend.check(r, i)) for r, i in pages[:100]]
            for _ in range(3):
                backend._retry_after = 0.0  # as if the back-off had passed
                backend._flush()
        assert verdicts == [reference.check_now(r, i) for r, i in pages[:100]]
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and "database or disk is full" in errors[0].getMessage()
        assert str(folder / "s.store") in errors[0].getMessage()
        assert backend.store.pending > 0
        subprocess.run(["mount", "-o", "remount,size=16m", str(folder)], check=True)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="simhash_scrapy"):
            backend._retry_after = 0.0
            run(backend.check(*pages[100]))
            assert backend.store.pending == 0
        assert "is written again" in caplog.text
        for r, i in pages[101:]:
            run(backend.check(r, i))
        run(backend.close())
        stored = read_store(folder / "s.store")
        assert len(stored) == 120
        links = stored_links(stored)
        assert sorted(links.values()) == sorted(r.url + "/canon" for r, _ in pages)
        assert all(links[row] == url + "/canon" for row, url in enumerate(stored.urls()))
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def test_rel_canonical_blobs_are_folded_into_one_when_a_crawl_opens_the_store(tmp_path: Path) -> None:
    """One ``rel_canonical/<n>`` blob per flush that changed a link; the next crawl folds them into one
    (the links as loaded), and later changes are laid over it as before."""
    settings = {"SIMHASH_DIR": str(tmp_path / "state"), "SIMHASH_FLUSH_INTERVAL": 0}
    pages = [(replace(r, canonical_link=f"{r.url}/canon"), i) for r, i in page_sequence(31, 12)]
    backend = backend_for(settings)
    run(backend.open("s"))
    for r, i in pages:
        run(backend.check(r, i))
    run(backend.close())
    path = tmp_path / "state" / "s.store"
    first = read_store(path)
    names = sorted(n for n in first.extra if n.startswith("rel_canonical/"))
    assert len(names) == 12
    links = stored_links(first)
    assert sorted(links.values()) == sorted(f"{r.url}/canon" for r, _ in pages)
    backend = backend_for(settings)
    run(backend.open("s"))
    run(backend.close())
    second = read_store(path)
    assert sorted(n for n in second.extra if n.startswith("rel_canonical/")) == ["rel_canonical/0"]
    assert stored_links(second) == links
    backend = backend_for(settings)  # a link that changes: one more blob over the folded one
    run(backend.open("s"))
    record, index = pages[3]
    run(backend.check(replace(record, canonical_link=None), index))
    run(backend.close())
    third = read_store(path)
    assert sorted(n for n in third.extra if n.startswith("rel_canonical/")) == ["rel_canonical/0", "rel_canonical/1"]
    del links[next(row for row, url in enumerate(third.urls()) if url == record.url)]
    assert stored_links(third) == links
