"""Fault injection against the persistent store: bit flips, truncations, empty files, ``kill -9``.

The trials, shared by the tests (``tests/integration/test_faults.py``, ``tests/e2e/test_persistence.py``)
and the benchmark ``benchmarks/faults.py``, which runs ``main()`` with its tables:

    python benchmarks/faults.py                    # 300 flips over a 2,000-record store, truncations, 5 kills
    python benchmarks/faults.py --flips 1000 --kills 10 --json benchmarks/results/faults.json

What it does, in one run (everything on real files; the kills on a real
``scrapy crawl`` of a local site on 127.0.0.1):

1. Writes a real store through ``PersistentBackend`` (2,000 checked pages,
   committed in batches, some with referer, depth, text, short pages), and a
   "crashed" copy of one: the store and its WAL copied while the writer was
   still open (what a ``kill -9`` leaves).
2. Single-bit flips: each in a fresh copy, at offsets drawn per region of the
   SQLite file (file header, page headers and cell pointers, cell and record
   headers, each column's values, free space, interior/index/schema pages)
   and of the WAL (header, frame headers, page data) and the shared-memory
   file.  Each copy is then opened as a crawl does (``PersistentBackend.open``),
   its records compared with the clean copy's, and closed as a crawl does
   (cluster report in JSON Lines and HTML).
3. Truncations at every byte of the last transaction in the WAL (a torn last
   write), at a sample of bytes of the main file, and empty (0-byte) files.
4. ``kill -9`` of a real crawl at random moments; the store must load cleanly
   and hold every page the spider reached except those of the last flush
   interval.
5. Double crash: a writer killed inside a large last transaction (its frames
   left in the WAL), then a real crawl on the same store ``kill -9``-ed: the
   store must load, with exactly what the ``sqlite3`` library reads from it
   (``read as SQLite reads it``), every committed page.
6. Full disk: three real crawls on one ``SIMHASH_DIR`` store on a 96 KB
   tmpfs (mounted when root; else ``RLIMIT_FSIZE`` in the crawl process),
   the third after the disk got room; read-only store file (the immutable
   attribute as root, else mode 0444).  ``handled``: no traceback, no page
   dropped, one ERROR line naming the file and the cause (and one at close),
   the store loads every time, the counts agree; the read-only store stops
   the crawl at start without changing a byte.

Each trial is one of: ``detected`` (a ``StoreError`` whose message names the
file), ``detected, file not named``, ``harmless`` (loaded, every record
equal), ``torn last write dropped`` (exactly the last transaction lost: a
truncation only), ``reported empty`` (log line + stat ``simhash/store_empty``),
``silent change``, ``silent drop``, ``crash at load`` (another exception),
``crash at close``.  Targets: no silent change, no silent drop, no crash.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE.parent))

from simhash_scrapy.backends.base import BackendError, PageRecord  # noqa: E402
from simhash_scrapy.backends.persistent import PersistentBackend  # noqa: E402
from simhash_scrapy.config import SimhashConfig  # noqa: E402
from simhash_scrapy.core.report.report import build_clusters, render_report  # noqa: E402
from simhash_scrapy.core.store.store import StoreError, read_store  # noqa: E402
from simhash_scrapy.core.cluster.containment import Sketch  # noqa: E402

SPIDER = "faults"
OK_CATEGORIES = ("detected", "harmless", "torn last write dropped", "reported empty")
BAD_CATEGORIES = ("detected, file not named", "silent change", "silent drop", "crash at load", "crash at close")


def drive(coro: Any) -> Any:
    """Run a coroutine of the persistent backend, which never waits (works inside a running event loop too)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("the backend waited for something")


# ---------------------------------------------------------------- the store
def pages(seed: int, count: int, start: int = 0, earlier: list[int] | None = None) -> list[PageRecord]:
    """Pages like a crawl's: 30% within 0..5 bits of an earlier page (``benchmarks/backends.py`` uses them too)."""
    rng = random.Random(seed)
    fps = earlier if earlier is not None else []
    out = []
    for i in range(start, start + count):
        if fps and rng.random() < 0.3:
            fp = rng.choice(fps)
            for bit in rng.sample(range(64), rng.randint(0, 5)):
                fp ^= 1 << bit
        else:
            fp = rng.getrandbits(64)
        fps.append(fp)
        out.append(PageRecord(
            url=f"https://www.example.com/section-{i % 50}/article-{i}.html",
            fingerprint=fp,
            scope="spider",
            referer=f"https://www.example.com/section-{i % 50}/",
            depth=2,
        ))
    return out


def page_records(count: int, seed: int) -> list[PageRecord]:
    """Pages like a crawl's (``benchmarks/backends.py``'s: 30% within 0..5 bits of an earlier page), with
    request-fingerprint identities, some without referer or depth, some text, some short pages."""
    rng = random.Random(seed)
    key_rng = random.Random(seed + 1)  # its own stream: the other fields are as before
    http_rng = random.Random(seed + 2)  # content digests and HTTP validators (store format 4): their own stream
    steps_rng = random.Random(seed + 3)  # what steps 5-7 learn (store format 6): their own stream
    return [
        _with_steps_5_to_7(steps_rng, i, replace(
            record,
            scope=SPIDER,
            identity=f"{rng.getrandbits(160):040x}",
            referer=rng.choice([None, record.referer]),
            depth=rng.choice([None, 1, 2, 3]),
            text=f"The text of article {i}, ünïcode ✓." if rng.random() < 0.1 else None,
            exact=rng.random() < 0.05,
            seen=1.76e9 + i,
            edit_keys=_some_edit_keys(key_rng),
            digest=http_rng.getrandbits(64) if http_rng.random() < 0.9 else None,
            etag=f'"{http_rng.getrandbits(40):x}"' if http_rng.random() < 0.5 else None,
            last_modified="Tue, 03 Nov 2026 08:00:00 GMT" if http_rng.random() < 0.7 else None,
        ))
        for i, record in enumerate(pages(seed, count))
    ]


def _with_steps_5_to_7(rng: random.Random, i: int, record: PageRecord) -> PageRecord:
    """Text lines for the template learner (a host's box, the article's own lines), a second simhash and a
    sentence sketch for most simhash pages, as a crawl gives them: the store then holds detector blobs."""
    if record.exact:
        return record
    box = "\n".join(f"Most read today {n}: story {rng.randrange(8)} of section {i % 5}" for n in range(4))
    source = f"{box}\nArticle {i} begins here with its own words\nArticle {i} ends with more of its words"
    hashes = sorted({rng.getrandbits(64) for _ in range(rng.randrange(4, 33))})
    return replace(
        record,
        source=source if rng.random() < 0.6 else None,
        second=rng.getrandbits(64) if rng.random() < 0.7 else None,
        sketch=Sketch(tuple(hashes), len(hashes) + rng.randrange(3)) if rng.random() < 0.5 else None,
    )


def _some_edit_keys(rng: random.Random) -> tuple[int, ...]:
    """One-edit keys for a fifth of the pages (as pages of 30-63 tokens have; kept for canonical ones)."""
    if rng.random() >= 0.2:
        return ()
    return tuple(sorted({rng.getrandbits(64) for _ in range(rng.randrange(31, 65))}))


def config_for(folder: Path) -> SimhashConfig:
    return SimhashConfig(store_dir=str(folder), flush_interval=3600.0)


def make_store(folder: Path, count: int = 2000, seed: int = 1, batch: int = 50, crashed_copy: Path | None = None) -> Path:
    """A real store of ``count`` checked pages (a re-check every 10th page); optionally a crashed copy too.

    ``crashed_copy``: a folder that receives the store and its WAL as they are before the close (the
    last batch committed, nothing checkpointed), i.e. what ``kill -9`` leaves.
    """
    folder.mkdir(parents=True, exist_ok=True)
    backend = PersistentBackend(config_for(folder))
    drive(backend.open(SPIDER))
    records = page_records(count, seed)
    for i, record in enumerate(records, start=1):
        backend.check_now(record)
        if i % 10 == 0:  # the same page again: one record per identity, updated in place
            again = records[i // 2]
            backend.check_now(replace(again, fingerprint=again.fingerprint ^ (1 << (i % 64)), seen=again.seen + 86400))
        if i % batch == 0:
            backend._flush()
        if i == count // 2:
            drive(backend.save_extra("url_rules", b'{"rules": []}'))
    backend._flush()
    if crashed_copy is not None:
        crashed_copy.mkdir(parents=True, exist_ok=True)
        for name in (f"{SPIDER}.store", f"{SPIDER}.store-wal", f"{SPIDER}.store-shm"):
            if (folder / name).exists():
                shutil.copyfile(folder / name, crashed_copy / name)
    drive(backend.close())
    return folder / f"{SPIDER}.store"


def load_members(folder: Path) -> tuple[list[Any], PersistentBackend]:
    """Every record as loaded, with the one-edit keys its page has in the index: ``(member, keys)``."""
    backend = PersistentBackend(config_for(folder))
    drive(backend.open(SPIDER))
    members = drive(backend.members())
    clusters = backend._clusters
    return [(member, clusters.keys_of(entry)) for entry, member in enumerate(members)], backend


# ------------------------------------------------------------------ regions
_COLUMNS = (
    "entry", "scope", "identity", "url", "fingerprint", "exact", "outcome", "canonical", "distance",
    "indexed", "previous", "referer", "depth", "text", "first_seen", "last_seen", "edit_keys", "checksum",
    "digest", "etag", "last_modified",
)  # fmt: skip
#: Region labels grouped for the table.
GROUPS = {
    "fingerprint": "fingerprints", "indexed": "fingerprints", "previous": "fingerprints",
    "url": "URLs", "referer": "URLs", "identity": "identities, scopes", "scope": "identities, scopes",
    "checksum": "checksums", "edit_keys": "one-edit keys",
    "digest": "digests, validators", "etag": "digests, validators", "last_modified": "digests, validators",
}  # fmt: skip


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = 0
    for i in range(9):
        byte = data[pos + i]
        if i == 8:
            return (value << 8) | byte, pos + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, pos + i + 1
    raise AssertionError


def _serial_size(code: int) -> int:
    return {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8, 7: 8, 8: 0, 9: 0}.get(code, (code - 12 - (code & 1)) // 2 if code >= 12 else 0)


#: Labels of a chunk's sections (``core.store.store_chunks``, format 5), in their order in the blob.
CHUNK_SECTIONS = (
    "identities, scopes", "fingerprints", "fingerprints", "fingerprints", "digests, validators",  # key_hash, fp, ...
    "other values", "other values", "other values", "other values",  # canonical, depth, first_seen, last_seen
    "other values", "other values", "other values", "other values", "other values",  # distance .. present
    "identities, scopes", "identities, scopes",  # scope names, scope codes
    "identities, scopes", "URLs", "URLs", "other values", "digests, validators", "digests, validators",
    "one-edit keys", "one-edit keys",
)  # fmt: skip


def _chunk_labels(blob: bytes) -> list[tuple[int, int, str]]:
    """Labelled byte ranges inside a chunk's blob (offsets in the blob)."""
    out = [(0, 16, "record header")]
    pos = 16
    for label in CHUNK_SECTIONS:
        if pos + 4 > len(blob):
            break
        size = int.from_bytes(blob[pos : pos + 4], "little")
        out.append((pos, pos + 4, "record header"))
        out.append((pos + 4, pos + 4 + size, label))
        pos += 4 + size
    return out


def regions(path: Path) -> list[tuple[int, int, str]]:
    """Labelled byte ranges of an SQLite store (``sqlite.org/fileformat2.html``), chunk blobs by section."""
    data = path.read_bytes()
    page_size = int.from_bytes(data[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    usable = page_size - data[20]
    out: list[tuple[int, int, str]] = [(0, 100, "file header")]
    other: list[int] = []
    overflow: set[int] = set()

    def payload_segments(local_at: int, size: int) -> list[tuple[int, int]]:
        """File ranges holding a cell's payload in order: its local part, then its overflow chain."""
        most, least = usable - 35, ((usable - 12) * 32 // 255) - 23
        if size <= most:
            return [(local_at, size)]
        k = least + (size - least) % (usable - 4)
        local = k if k <= most else least
        segments, left = [(local_at, local)], size - local
        number = int.from_bytes(data[local_at + local : local_at + local + 4], "big")
        out.append((local_at + local, local_at + local + 4, "page header, cell pointers"))
        while left > 0 and 0 < number <= len(data) // page_size:
            overflow.add(number)
            base = (number - 1) * page_size
            out.append((base, base + 4, "page header, cell pointers"))
            take = min(left, usable - 4)
            segments.append((base + 4, take))
            left -= take
            number = int.from_bytes(data[base : base + 4], "big")
        return segments

    def to_file(segments: list[tuple[int, int]], start: int, end: int, label: str) -> None:
        at = 0
        for offset, length in segments:
            lo, hi = max(start, at), min(end, at + length)
            if lo < hi:
                out.append((offset + lo - at, offset + hi - at, label))
            at += length

    for number in range(len(data) // page_size):
        base = number * page_size
        head = 100 if number == 0 else 0
        kind = data[base + head]
        if number == 0:
            out.append((base + head, base + page_size, "schema page"))
            continue
        if kind in (0x02, 0x05, 0x0A):
            out.append((base, base + page_size, "interior or index page"))
            continue
        if kind != 0x0D:
            other.append(number)
            continue
        cells = int.from_bytes(data[base + 3 : base + 5], "big")
        content = int.from_bytes(data[base + 5 : base + 7], "big") or 65536
        out.append((base, base + 8 + 2 * cells, "page header, cell pointers"))
        out.append((base + 8 + 2 * cells, base + content, "free space"))
        starts = sorted(int.from_bytes(data[base + 8 + 2 * c : base + 10 + 2 * c], "big") for c in range(cells))
        for start in starts:
            pos = base + start
            payload, p = _varint(data, pos)
            _rowid, p = _varint(data, p)
            out.append((pos, p, "cell header"))
            segments = payload_segments(p, payload)
            body = b"".join(data[o : o + n] for o, n in segments)
            header_len, q = _varint(body, 0)
            codes = []
            while q < header_len:
                code, q = _varint(body, q)
                codes.append(code)
            to_file(segments, 0, header_len, "record header")
            value = header_len
            if len(codes) == len(_COLUMNS):
                names: tuple[str, ...] = _COLUMNS
            elif len(codes) == 4:  # a chunk: (chunk = rowid, count, data, checksum)
                names = ("chunk", "count", "chunk data", "checksum")
            else:
                names = ("meta key", "meta value", "extra")[: len(codes)]
            for name, code in zip(names, codes):
                size = _serial_size(code)
                if not size:
                    continue
                if name == "chunk data":
                    for lo, hi, label in _chunk_labels(body[value : value + size]):
                        to_file(segments, value + lo, value + hi, label)
                elif len(codes) in (4, len(_COLUMNS)):
                    to_file(segments, value, value + size, GROUPS.get(name, "other values"))
                else:
                    to_file(segments, value, value + size, "meta and extra tables")
                value += size
    for number in other:
        if number + 1 not in overflow:
            out.append((number * page_size, (number + 1) * page_size, "other page (free list, overflow)"))
    return [r for r in out if r[1] > r[0]]


def wal_regions(wal: Path) -> list[tuple[int, int, str]]:
    data = wal.read_bytes()
    page_size = int.from_bytes(data[8:12], "big")
    out = [(0, 32, "WAL header")]
    frame = 24 + page_size
    for i in range((len(data) - 32) // frame):
        base = 32 + i * frame
        out.append((base, base + 24, "WAL frame headers"))
        out.append((base + 24, base + frame, "WAL page data"))
    return out


# ------------------------------------------------------------------- trials
class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def classify(folder: Path, expected: list[Any], torn: list[Any] | None = None) -> tuple[str, str]:
    """Open the store in ``folder`` as a crawl does, compare its records, close as a crawl does.

    ``torn``: the records without the last transaction (a store with a WAL): losing exactly that
    transaction is allowed when a warning names the file.
    """
    path = folder / f"{SPIDER}.store"
    warnings = _Warnings()
    log = logging.getLogger("simhash_scrapy")
    log.addHandler(warnings)
    try:
        members, backend = load_members(folder)
    except (BackendError, StoreError) as exc:
        return ("detected" if str(path) in str(exc) else "detected, file not named"), str(exc)[:200]
    except Exception as exc:  # noqa: BLE001 - what the sweep is looking for
        return "crash at load", f"{type(exc).__name__}: {exc}"[:200]
    finally:
        log.removeHandler(warnings)
    warned = any(str(path) in m for m in warnings.messages)
    empty = backend.store is not None and backend.store.empty_file
    try:
        clusters = build_clusters([member for member, _ in members], include_text=True)
        for fmt in ("jsonl", "html"):
            render_report(clusters, fmt, {"pages": len(members)})
        drive(backend.close())
    except Exception as exc:  # noqa: BLE001
        return "crash at close", f"{type(exc).__name__}: {exc}"[:200]
    if empty and not members and warned:
        return "reported empty", ""
    if members == expected:
        return "harmless", ""
    if torn is not None and members == torn and warned:
        return "torn last write dropped", ""
    by_key = {m.key: (m, keys) for m, keys in expected}
    if all(by_key.get(m.key) == (m, keys) for m, keys in members):
        return "silent drop", f"{len(expected) - len(members)} records missing"
    return "silent change", next(f"{m.url}" for m, keys in members if by_key.get(m.key) != (m, keys))


def trial(clean: Path, work: Path, mutate: Any, expected: list[Any], torn: list[Any] | None = None) -> tuple[str, str]:
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(clean, work)
    mutate(work)
    return classify(work, expected, torn)


def flip(name: str, offset: int, bit: int) -> Any:
    def apply(folder: Path) -> None:
        path = folder / name
        data = bytearray(path.read_bytes())
        data[offset] ^= 1 << bit
        path.write_bytes(bytes(data))

    return apply


def truncate(name: str, size: int) -> Any:
    def apply(folder: Path) -> None:
        with open(folder / name, "r+b") as handle:
            handle.truncate(size)

    return apply


def pick_offsets(spans: list[tuple[int, int, str]], count: int, rng: random.Random, minimum: int = 8) -> list[tuple[int, str]]:
    """``count`` offsets over the labelled spans: at least ``minimum`` per label, the rest by size."""
    by_label: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for start, end, label in spans:
        by_label[label].append((start, end))
    sizes = {label: sum(e - s for s, e in parts) for label, parts in by_label.items()}
    total = sum(sizes.values())
    share = {label: max(minimum, round(count * size / total)) for label, size in sizes.items()}
    while sum(share.values()) > count and max(share.values()) > minimum:
        share[max(share, key=share.get)] -= 1  # type: ignore[arg-type]
    out = []
    for label, n in share.items():
        parts = by_label[label]
        for _ in range(n):
            x = rng.randrange(sizes[label])
            for s, e in parts:
                if x < e - s:
                    out.append((s + x, label))
                    break
                x -= e - s
    return out


def flip_sweep(tmp: Path, flips: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    clean = tmp / "clean"
    crashed = tmp / "crashed"
    make_store(clean, 2000, seed, crashed_copy=crashed)
    expected, backend = load_members(clean)
    drive(backend.close())
    crashed_expected, crashed_torn = crashed_states(crashed, tmp)
    results = []
    store = f"{SPIDER}.store"
    main_flips = flips * 4 // 5
    for offset, label in pick_offsets(regions(clean / store), main_flips, rng):
        category, detail = trial(clean, tmp / "work", flip(store, offset, rng.randrange(8)), expected)
        results.append({"kind": "flip", "file": "store", "region": label, "offset": offset, "category": category, "detail": detail})
    for offset, label in pick_offsets(wal_regions(crashed / f"{store}-wal"), flips - main_flips, rng, minimum=5):
        category, detail = trial(crashed, tmp / "work", flip(f"{store}-wal", offset, rng.randrange(8)), crashed_expected, crashed_torn)
        results.append({"kind": "flip", "file": "WAL", "region": label, "offset": offset, "category": category, "detail": detail})
    shm = crashed / f"{store}-shm"
    if shm.exists():
        for offset in rng.sample(range(shm.stat().st_size), 10):
            category, detail = trial(crashed, tmp / "work", flip(f"{store}-shm", offset, rng.randrange(8)), crashed_expected, crashed_torn)
            results.append({"kind": "flip", "file": "shm", "region": "shared memory (-shm)", "offset": offset, "category": category, "detail": detail})
    return results


def _copy(src: Path, dst: Path) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    return dst


def last_transaction(folder: Path) -> tuple[int, int]:
    """Byte range of the last transaction's frames in the WAL (after the previous commit frame)."""
    data = (folder / f"{SPIDER}.store-wal").read_bytes()
    page_size = int.from_bytes(data[8:12], "big")
    frame = 24 + page_size
    frames = (len(data) - 32) // frame
    commits = [i for i in range(frames) if int.from_bytes(data[32 + i * frame + 4 : 32 + i * frame + 8], "big")]
    start = 32 + (commits[-2] + 1) * frame if len(commits) > 1 else 32
    return start, 32 + frames * frame


def crashed_states(crashed: Path, tmp: Path) -> tuple[list[Any], list[Any]]:
    """The records of a crashed copy, and the same without its last transaction (the WAL cut before it)."""
    full, backend = load_members(_copy(crashed, tmp / "read-full"))
    drive(backend.close())
    before = _copy(crashed, tmp / "read-before")
    truncate(f"{SPIDER}.store-wal", last_transaction(crashed)[0])(before)
    torn, backend = load_members(before)
    drive(backend.close())
    assert torn != full, "the last transaction must change something"
    return full, torn


def truncation_sweep(tmp: Path, seed: int, stride: int = 1, main_cuts: int = 20) -> list[dict[str, Any]]:
    """Cut the WAL inside its last transaction (every ``stride``-th byte, and every byte of each frame
    header and of the last 64 bytes), the main file at a sample of sizes; empty files."""
    rng = random.Random(seed)
    clean, crashed = tmp / "t-clean", tmp / "t-crashed"
    make_store(clean, 400, seed, batch=40, crashed_copy=crashed)
    full, torn = crashed_states(crashed, tmp)
    start, end = last_transaction(crashed)
    results = []
    wal = f"{SPIDER}.store-wal"
    assert start < end
    # Every cut inside the last transaction: its first byte written up to its last byte missing.
    sizes = sorted({*range(start + 1, end, stride), *range(end - 64, end), *(
        f + b for f in range(start, end, 24 + int.from_bytes((crashed / wal).read_bytes()[8:12], "big")) for b in range(1, 25)
    )})
    for size in sizes:
        category, detail = trial(crashed, tmp / "work", truncate(wal, size), full, torn)
        results.append({"kind": "truncate", "file": "WAL", "region": "last transaction", "offset": size, "category": category, "detail": detail})
    expected, backend = load_members(_copy(clean, tmp / "t-clean-read"))
    drive(backend.close())
    store = f"{SPIDER}.store"
    size = (clean / store).stat().st_size
    for cut in sorted(rng.sample(range(1, size), min(main_cuts, size - 1))):
        category, detail = trial(clean, tmp / "work", truncate(store, cut), expected)
        results.append({"kind": "truncate", "file": "store", "region": "main file", "offset": cut, "category": category, "detail": detail})
    for name in (store, wal):
        category, detail = trial(crashed, tmp / "work", truncate(name, 0), full)
        results.append({"kind": "empty", "file": name, "region": "0-byte file", "offset": 0, "category": category, "detail": detail})
    empty = tmp / "empty"
    empty.mkdir(exist_ok=True)
    (empty / store).write_bytes(b"")
    results.append({"kind": "empty", "file": store, "region": "0-byte store alone", "offset": 0, "category": classify(empty, [])[0], "detail": ""})
    return results


# -------------------------------------------------------------------- kill -9
def _crawl_process(state: Path, site: Any, paths: list[str], *settings: str, **popen: Any) -> subprocess.Popen[str]:
    """A real ``scrapy crawl pages`` of ``paths`` on ``site`` with ``SIMHASH_DIR=state`` (tests/crawl_project)."""
    args = [
        sys.executable, "-m", "scrapy.cmdline", "crawl", "pages", "-a", f"base={site.base}",
        "-a", "paths=" + ",".join(paths), "-s", f"SIMHASH_DIR={state}",
    ]  # fmt: skip
    for setting in settings:
        args += ["-s", setting]
    env = dict(os.environ)
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tests" / "crawl_project"), str(ROOT), env.get("PYTHONPATH", "")]))
    project = ROOT / "tests" / "crawl_project"
    return subprocess.Popen(args, cwd=project, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, **popen)


def _site(pages: int, first: int = 0) -> tuple[Any, list[str]]:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import Site, article_html  # noqa: PLC0415 - the tests' real local site

    site_pages = {f"/p{i}": article_html(f"Page {i}", _words(i)) for i in range(first, first + pages)}
    return Site(site_pages), list(site_pages)


def kill_crawl(state: Path, site: Any, paths: list[str], kill_after: int, *settings: str) -> tuple[list[tuple[float, str]], int, float]:
    """Run a crawl, ``kill -9`` it once ``kill_after`` pages reached the spider: (reached, returncode, killed at)."""
    proc = _crawl_process(state, site, paths, *settings)
    reached: list[tuple[float, str]] = []
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            if "Reached the spider: " in line:
                reached.append((time.monotonic(), line.rsplit(" ", 1)[-1].strip()))
                if len(reached) >= kill_after:
                    os.kill(proc.pid, signal.SIGKILL)
                    break
        killed_at = time.monotonic()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
        proc.stderr.close()
    return reached, proc.returncode, killed_at


def kill_trial(tmp: Path, pages: int, kill_after: int, flush_interval: float | None = None, delay: float = 0.0) -> dict[str, Any]:
    """Crawl a local site with SIMHASH_DIR, ``kill -9`` after ``kill_after`` pages reached the spider, reload."""
    site, paths = _site(pages)
    state = tmp / "kill-state"
    if state.exists():
        shutil.rmtree(state)
    settings = [f"DOWNLOAD_DELAY={delay}"]
    if flush_interval is not None:
        settings.append(f"SIMHASH_FLUSH_INTERVAL={flush_interval}")
    try:
        reached, returncode, killed_at = kill_crawl(state, site, paths, kill_after, *settings)
    finally:
        site.close()
    result: dict[str, Any] = {"kill_after": kill_after, "reached": len(reached), "returncode": returncode}
    interval = 1.0 if flush_interval is None else flush_interval
    result["reached_in_last_interval"] = sum(1 for t, _ in reached if killed_at - t <= interval + 0.25)
    try:
        contents = read_store(state / "pages.store")
        backend = PersistentBackend(SimhashConfig(store_dir=str(state)))
        drive(backend.open("pages"))
        drive(backend.members())
        drive(backend.close())
    except Exception as exc:  # noqa: BLE001
        result.update(loaded=False, error=f"{type(exc).__name__}: {exc}"[:300])
        return result
    stored = set(contents.urls())
    lost = [url for _, url in reached if url not in stored]
    result.update(loaded=True, stored=len(stored), lost=len(lost), lost_urls=lost[:5])
    return result


# ------------------------------------------------ double crash, full disk, read-only
def torn_writer(state: str, committed: int, torn: int, seed: int) -> None:
    """(In a subprocess.) Commit ``committed`` records to ``<state>/pages.store``, then start one more flush
    of ``torn`` records and ``kill -9`` this process in the middle of it, after SQLite wrote some of its
    frames to the WAL (a small page cache spills them before the commit)."""
    backend = PersistentBackend(SimhashConfig(store_dir=state, flush_interval=3600.0))
    drive(backend.open("pages"))
    records = [replace(r, scope="pages", url=f"https://crash-one.example/{i}") for i, r in enumerate(page_records(committed + torn, seed))]
    for record in records[:committed]:
        backend.check_now(record)
    backend._flush()
    for record in records[committed:]:
        backend.check_now(replace(record, text="x" * 3000))  # room for many WAL frames
    assert backend.store is not None and backend.store._db is not None
    db = backend.store._db
    db.execute("PRAGMA cache_size = 4")
    wal = Path(state) / "pages.store-wal"
    size = wal.stat().st_size

    def kill_once_spilled() -> int:
        if wal.stat().st_size > size + 100 * 4096:
            os.kill(os.getpid(), signal.SIGKILL)
        return 0

    db.set_progress_handler(kill_once_spilled, 2000)
    backend._flush()
    raise SystemExit("the flush ended before the kill")


def _sqlite_urls(folder: Path) -> tuple[str, set[str]]:
    """What the sqlite3 library reads from a copy of the store: (quick_check, URLs)."""
    import sqlite3  # noqa: PLC0415

    copy = folder.parent / (folder.name + "-sqlite-copy")
    _copy(folder, copy)
    db = sqlite3.connect(copy / "pages.store")
    try:
        check = db.execute("PRAGMA quick_check").fetchone()[0]
        urls = {row[0] for row in db.execute("SELECT url FROM pages")}
        # Format 5: the records folded into chunks (the blobs as SQLite gives them, unpacked).
        from simhash_scrapy.core.store.store_chunks import decode_chunk  # noqa: PLC0415

        for chunk, count, data in db.execute("SELECT chunk, count, data FROM chunks"):
            urls.update(decode_chunk(data, chunk, count, copy).url)
    finally:
        db.close()
        shutil.rmtree(copy)
    return check, urls


def double_crash_trial(tmp: Path, seed: int, kill_after: int) -> dict[str, Any]:
    """A crash inside the last transaction (a writer killed mid-flush), then a real crawl ``kill -9``-ed on
    the same store: the third open must read what SQLite reads, every committed page."""
    state = tmp / "double-crash"
    if state.exists():
        shutil.rmtree(state)
    state.mkdir(parents=True)
    code = f"import sys; sys.path.insert(0, {str(HERE.parent)!r}); import store_faults; store_faults.torn_writer({str(state)!r}, 200, 600, {seed})"
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    result: dict[str, Any] = {"kill_after": kill_after, "first_returncode": first.returncode}
    wal = state / "pages.store-wal"
    result["wal_after_first"] = wal.stat().st_size if wal.exists() else 0
    site, paths = _site(60, first=1000)
    try:
        reached, returncode, _ = kill_crawl(state, site, paths, kill_after, "SIMHASH_FLUSH_INTERVAL=0")
    finally:
        site.close()
    result.update(second_returncode=returncode, reached=len(reached))
    check, sqlite_urls = _sqlite_urls(state)
    result["sqlite_quick_check"] = check
    try:
        warnings = _Warnings()
        log = logging.getLogger("simhash_scrapy")
        log.addHandler(warnings)
        try:
            urls = set(read_store(state / "pages.store").urls())
            backend = PersistentBackend(SimhashConfig(store_dir=str(state)))
            drive(backend.open("pages"))
            loaded = {m.url for m in drive(backend.members())}
            drive(backend.close())
        finally:
            log.removeHandler(warnings)
    except Exception as exc:  # noqa: BLE001
        result.update(category="refused" if check == "ok" else "detected", detail=f"{type(exc).__name__}: {exc}"[:300])
        return result
    first_committed = {f"https://crash-one.example/{i}" for i in range(200)}
    lost = [url for _, url in reached if url not in urls]
    result.update(stored=len(urls), lost=len(lost), warnings=warnings.messages[:3])
    if urls != sqlite_urls or loaded != urls:
        result.update(category="differs from SQLite", detail=f"{len(urls ^ sqlite_urls)} URLs differ")
    elif not first_committed <= urls or lost:
        result.update(category="lost committed pages", detail=f"{len(lost)} reached pages missing")
    else:
        result.update(category="read as SQLite reads it", detail="")
    return result
_STAT_LINE = re.compile(r"^\s*'(simhash/[^']+|finish_reason|item_scraped_count)': (\d+|'[^']*'),?$", re.MULTILINE)


def _stats(log: str) -> dict[str, Any]:
    start = log.rfind("Dumping Scrapy stats")
    return {k: int(v) if v.isdigit() else v.strip("'") for k, v in _STAT_LINE.findall(log[start:])} if start >= 0 else {}


def run_crawl(state: Path, site: Any, paths: list[str], *settings: str, **popen: Any) -> tuple[int, str]:
    proc = _crawl_process(state, site, paths, *settings, **popen)
    _, log = proc.communicate(timeout=300)
    return proc.returncode, log


class SmallDisk:
    """A folder on a full file system: a ``size`` tmpfs mounted there (root), else a file-size limit
    (``RLIMIT_FSIZE``, SIGXFSZ ignored: writes past it fail with EFBIG) set in each crawl subprocess."""

    def __init__(self, folder: Path, size: int, mount: bool = True) -> None:
        self.folder = folder
        self.size = size
        folder.mkdir(parents=True, exist_ok=True)
        mounted = mount and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True
        ).returncode == 0  # fmt: skip
        self.mounted = bool(mounted)
        self.limit: int | None = None if self.mounted else size

    @property
    def kind(self) -> str:
        return f"tmpfs of {self.size // 1024} KB" if self.mounted else f"RLIMIT_FSIZE of {self.size // 1024} KB"

    def popen(self) -> dict[str, Any]:
        limit = self.limit
        if limit is None:
            return {}

        def limited() -> None:
            import resource  # noqa: PLC0415

            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        return {"preexec_fn": limited}

    def grow(self) -> None:
        if self.mounted:
            subprocess.run(["mount", "-o", "remount,size=64m", str(self.folder)], check=True)
        self.limit = None

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", str(self.folder)], check=False)
            self.mounted = False


def _store_log_problems(log: str, path: Path, stats: dict[str, Any], requested: int) -> list[str]:
    """What a crawl whose store failed must never do: crash, drop a page, hide the cause, repeat noise."""
    problems = []
    if "Traceback" in log:
        problems.append("traceback")
    if "cannot rollback" in log:
        problems.append("rollback noise")
    if stats.get("simhash/skipped/backend_error"):
        problems.append(f"{stats['simhash/skipped/backend_error']} pages dropped (skipped/backend_error)")
    errors = [line for line in log.splitlines() if "ERROR" in line and "simhash" in line]
    if len(errors) > 2:
        problems.append(f"{len(errors)} ERROR lines")
    if errors and str(path) not in errors[0]:
        problems.append("the first error does not name the file")
    reached = log.count("Reached the spider: ")
    if reached + stats.get("simhash/dropped", 0) != requested and stats.get("finish_reason") == "finished":
        problems.append(f"{requested - reached - stats.get('simhash/dropped', 0)} pages neither reached the spider nor were dropped as duplicates")
    return problems


def disk_full_trial(tmp: Path, pages: int = 300, size: int = 96 * 1024, mount: bool = True) -> dict[str, Any]:
    """Three real crawls on one ``SIMHASH_DIR`` store: two on a full file system, one after it was given room
    (``mount=False``: a file-size limit even where a tmpfs could be mounted)."""
    disk = SmallDisk(tmp / "full-disk", size, mount)
    store = disk.folder / "pages.store"
    site, paths = _site(pages, first=2000)
    result: dict[str, Any] = {"disk": disk.kind, "runs": []}
    problems: list[str] = []
    try:
        for run in range(3):
            if run == 2:
                disk.grow()
            code, log = run_crawl(disk.folder, site, paths, "SIMHASH_FLUSH_INTERVAL=0.1", **disk.popen())
            stats = _stats(log)
            errors = [line.split("ERROR: ", 1)[-1] for line in log.splitlines() if "ERROR" in line and "simhash" in line]
            run_problems = [] if code == 0 else [f"exit code {code}"]
            run_problems += _store_log_problems(log, store, stats, pages)
            said = errors[0].split(str(store), 1)[-1] if errors else ""
            failed = stats.get("simhash/store_write_errors", 0) or stats.get("simhash/store_unsaved", 0)
            # (A crawl that wrote nothing new, e.g. the same pages unchanged, may not reach the limit.)
            if run < 2 and (failed or errors) and not ("disk is full" in said or "RLIMIT_FSIZE" in said):
                run_problems.append("the cause (a full disk) is not named")
            try:
                stored = len(read_store(store))
            except Exception as exc:  # noqa: BLE001
                run_problems.append(f"store refused: {exc}"[:200])
                stored = -1
            unsaved = stats.get("simhash/store_unsaved", 0)
            if stored >= 0 and stored != pages - unsaved and run == 0:
                run_problems.append(f"{stored} stored, but {pages} checked and {unsaved} said unsaved")
            if run == 2 and stored != pages:
                run_problems.append(f"{stored} of {pages} pages stored once the disk had room")
            result["runs"].append({"stored": stored, "unsaved": unsaved, "write_errors": stats.get("simhash/store_write_errors", 0),
                                   "first_error": errors[0][:400] if errors else "", "problems": run_problems})  # fmt: skip
            problems += [f"crawl {run + 1}: {p}" for p in run_problems]
    finally:
        site.close()
        disk.close()
    result.update(category="handled" if not problems else "mishandled", detail="; ".join(problems)[:300])
    return result


def _set_read_only(path: Path, on: bool) -> str:
    """Make a file read-only for this process: the immutable attribute as root (permissions do not stop
    root), else mode 0444.  Returns how."""
    if os.geteuid() != 0:
        path.chmod(0o444 if on else 0o644)
        return "mode 0444"
    import fcntl  # noqa: PLC0415
    import struct  # noqa: PLC0415

    get_flags, set_flags, immutable = 0x80086601, 0x40086602, 0x10  # FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_IMMUTABLE_FL
    fd = os.open(path, os.O_RDONLY)
    try:
        flags = struct.unpack("l", fcntl.ioctl(fd, get_flags, struct.pack("l", 0)))[0]
        fcntl.ioctl(fd, set_flags, struct.pack("l", flags | immutable if on else flags & ~immutable))
    finally:
        os.close(fd)
    return "immutable attribute (root)"


def _hashes(folder: Path) -> dict[str, str]:
    import hashlib  # noqa: PLC0415

    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def read_only_trial(tmp: Path, pages: int = 40) -> dict[str, Any]:
    """A store file that cannot be written, in a writable folder: the crawl stops cleanly at start, naming
    the file and the cause; no page dropped, no traceback, not one byte changed."""
    state = tmp / "read-only"
    if state.exists():
        shutil.rmtree(state)
    site, paths = _site(pages, first=3000)
    store = state / "pages.store"
    problems: list[str] = []
    try:
        code, log = run_crawl(state, site, paths)
        if code != 0 or len(read_store(store)) != pages:
            problems.append("the first crawl did not store its pages")
        how = _set_read_only(store, True)
        before = _hashes(state)
        try:
            code, log = run_crawl(state, site, paths)
        finally:
            _set_read_only(store, False)
        after = _hashes(state)
    finally:
        site.close()
    stats = _stats(log)
    problems += [] if code == 0 else [f"exit code {code}"]
    problems += _store_log_problems(log, store, stats, pages)
    errors = [line.split("ERROR: ", 1)[-1] for line in log.splitlines() if "ERROR" in line and "simhash" in line]
    if not errors or "cannot be written" not in errors[0]:
        problems.append("no error saying the store cannot be written")
    if stats.get("finish_reason") != "simhash_error":
        problems.append(f"finish_reason {stats.get('finish_reason')!r}: the crawl went on without its store")
    if before != after:
        problems.append(f"files changed: {sorted(set(before.items()) ^ set(after.items()))}"[:200])
    return {"how": how, "first_error": errors[0][:200] if errors else "", "category": "handled" if not problems else "mishandled",
            "detail": "; ".join(problems)[:300]}  # fmt: skip


def _words(seed: int) -> list[str]:
    rng = random.Random(seed)
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "be", "do", "fu", "gi", "ha", "jo", "pe", "qu"]
    return ["".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(300)]


# --------------------------------------------------------------------- report
def table(results: list[dict[str, Any]], by: str = "region") -> str:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for r in results:
        counts[f"{r['file']}: {r[by]}" if by == "region" else r[by]][r["category"]] += 1
    columns = [c for c in (*OK_CATEGORIES, *BAD_CATEGORIES) if any(c in row for row in counts.values())]
    lines = ["| where | trials | " + " | ".join(columns) + " |", "|---|---:|" + "---:|" * len(columns)]
    for name, row in counts.items():
        lines.append(f"| {name} | {sum(row.values())} | " + " | ".join(str(row.get(c, 0)) for c in columns) + " |")
    total = Counter(r["category"] for r in results)
    lines.append(f"| **all** | {len(results)} | " + " | ".join(str(total.get(c, 0)) for c in columns) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flips", type=int, default=300)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stride", type=int, default=16, help="cut the last WAL transaction at every N-th byte (1: all)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="simhash-faults-"))
    out: dict[str, Any] = {}
    try:
        started = time.perf_counter()
        flips = flip_sweep(tmp, args.flips, args.seed)
        print(f"## {len(flips)} single-bit flips over a real 2,000-record store ({time.perf_counter() - started:.0f} s)\n")
        print(table(flips))
        started = time.perf_counter()
        cuts = truncation_sweep(tmp, args.seed, args.stride)
        print(f"\n## {len(cuts)} truncations and empty files ({time.perf_counter() - started:.0f} s)\n")
        print(table(cuts))
        rng = random.Random(args.seed)
        kills = []
        print("\n## kill -9 of a real crawl (300-page local site, SIMHASH_DIR, default SIMHASH_FLUSH_INTERVAL = 1 s)\n")
        print("| trial | killed after | store loads | pages reached | stored | lost | reached in the last interval |")
        print("|---:|---:|---|---:|---:|---:|---:|")
        for n in range(args.kills):
            k = kill_trial(tmp, 300, rng.randint(10, 280), delay=0.01)
            kills.append(k)
            print(f"| {n + 1} | {k['kill_after']} | {'yes' if k['loaded'] else 'NO: ' + k.get('error', '')} | "
                  f"{k['reached']} | {k.get('stored', '-')} | {k.get('lost', '-')} | {k['reached_in_last_interval']} |")
        print(f"\n## Double crash: a writer killed inside its last transaction, then a real crawl kill -9-ed on the "
              f"same store ({args.kills} trials)\n")
        print("| trial | second crawl killed after | WAL after the first crash | sqlite3 quick_check | stored | lost | outcome |")
        print("|---:|---:|---:|---|---:|---:|---|")
        doubles = []
        for n in range(args.kills):
            d = double_crash_trial(tmp, args.seed + n, rng.randint(1, 50))
            doubles.append(d)
            print(f"| {n + 1} | {d['kill_after']} | {d['wal_after_first']:,} B | {d['sqlite_quick_check']} | "
                  f"{d.get('stored', '-')} | {d.get('lost', '-')} | {d['category']} {d['detail']} |")
        print("\n## Full disk and read-only store (real crawls)\n")
        full = disk_full_trial(tmp)
        print(f"Full disk ({full['disk']}, 300-page site, SIMHASH_FLUSH_INTERVAL = 0.1 s; crawl 3 after the disk got room):\n")
        print("| crawl | stored after it | simhash/store_unsaved | simhash/store_write_errors | first ERROR line | problems |")
        print("|---:|---:|---:|---:|---|---|")
        for n, r in enumerate(full["runs"], 1):
            print(f"| {n} | {r['stored']} | {r['unsaved']} | {r['write_errors']} | {r['first_error'][:110]}... | "
                  f"{'; '.join(r['problems']) or 'none'} |")
        ro = read_only_trial(tmp)
        print(f"\nRead-only store file ({ro['how']}): {ro['category']}{': ' + ro['detail'] if ro['detail'] else ''}; "
              f"first ERROR line: {ro['first_error'][:160]}...")
        out = {"flips": flips, "truncations": cuts, "kills": kills, "double_crash": doubles, "disk_full": full, "read_only": ro}
        bad = [r for r in flips + cuts if r["category"] in BAD_CATEGORIES]
        bad_kills = [k for k in kills if not k["loaded"] or k["lost"] > k["reached_in_last_interval"]]
        bad_doubles = [d for d in doubles if d["category"] != "read as SQLite reads it"]
        bad_store = [r for r in (full, ro) if r["category"] != "handled"]
        print(f"\nbad outcomes: {len(bad)} of {len(flips) + len(cuts)} file faults; {len(bad_kills)} of {len(kills)} kills; "
              f"{len(bad_doubles)} of {len(doubles)} double crashes; {len(bad_store)} of 2 full-disk / read-only trials")
        for r in bad[:20]:
            print("  ", r)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
