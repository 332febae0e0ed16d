"""Fault injection against the persistent store: bit flips, truncations, empty files, ``kill -9``.

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
from simhash_scrapy.core.report import build_clusters, render_report  # noqa: E402
from simhash_scrapy.core.store import StoreError, read_store  # noqa: E402

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
def page_records(count: int, seed: int) -> list[PageRecord]:
    """Pages like a crawl's (``benchmarks/backends.py``'s: 30% within 0..5 bits of an earlier page), with
    request-fingerprint identities, some without referer or depth, some text, some short pages."""
    from backends import pages  # noqa: PLC0415 - benchmarks/backends.py

    rng = random.Random(seed)
    key_rng = random.Random(seed + 1)  # its own stream: the other fields are as before
    http_rng = random.Random(seed + 2)  # content digests and HTTP validators (store format 4): their own stream
    return [
        replace(
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
        )
        for i, record in enumerate(pages(seed, count))
    ]


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


def regions(path: Path) -> list[tuple[int, int, str]]:
    """Labelled byte ranges of an SQLite store (``sqlite.org/fileformat2.html``)."""
    data = path.read_bytes()
    page_size = int.from_bytes(data[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    usable = page_size - data[20]
    out: list[tuple[int, int, str]] = [(0, 100, "file header")]
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
            out.append((base, base + page_size, "other page (free list, overflow)"))
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
            if payload > usable - 35:
                out.append((pos, min(pos + payload + 16, base + page_size), "other page (free list, overflow)"))
                continue
            out.append((pos, p, "cell header"))
            header_len, q = _varint(data, p)
            codes = []
            while q < p + header_len:
                code, q = _varint(data, q)
                codes.append(code)
            out.append((p, p + header_len, "record header"))
            value = p + header_len
            names = _COLUMNS if len(codes) == len(_COLUMNS) else ("meta key", "meta value", "extra")[: len(codes)]
            for name, code in zip(names, codes):
                size = _serial_size(code)
                if size:
                    label = GROUPS.get(name, "other values") if len(codes) == len(_COLUMNS) else "meta and extra tables"
                    out.append((value, value + size, label))
                value += size
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
def kill_trial(tmp: Path, pages: int, kill_after: int, flush_interval: float | None = None, delay: float = 0.0) -> dict[str, Any]:
    """Crawl a local site with SIMHASH_DIR, ``kill -9`` after ``kill_after`` pages reached the spider, reload."""
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import Site, article_html  # noqa: PLC0415 - the tests' real local site

    site_pages = {f"/p{i}": article_html(f"Page {i}", _words(i)) for i in range(pages)}
    site = Site(site_pages)
    state = tmp / "kill-state"
    if state.exists():
        shutil.rmtree(state)
    args = [
        sys.executable, "-m", "scrapy.cmdline", "crawl", "pages", "-a", f"base={site.base}",
        "-a", "paths=" + ",".join(site_pages), "-s", f"SIMHASH_DIR={state}", "-s", f"DOWNLOAD_DELAY={delay}",
    ]  # fmt: skip
    if flush_interval is not None:
        args += ["-s", f"SIMHASH_FLUSH_INTERVAL={flush_interval}"]
    env = dict(os.environ)
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tests" / "crawl_project"), str(ROOT), env.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(args, cwd=ROOT / "tests" / "crawl_project", env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
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
        site.close()
    result: dict[str, Any] = {"kill_after": kill_after, "reached": len(reached), "returncode": proc.returncode}
    interval = 1.0 if flush_interval is None else flush_interval
    result["reached_in_last_interval"] = sum(1 for t, _ in reached if killed_at - t <= interval + 0.25)
    try:
        contents = read_store(state / "pages.store")
        members, backend = PersistentBackend(SimhashConfig(store_dir=str(state))), None
        backend = members
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
        out = {"flips": flips, "truncations": cuts, "kills": kills}
        bad = [r for r in flips + cuts if r["category"] in BAD_CATEGORIES]
        bad_kills = [k for k in kills if not k["loaded"] or k["lost"] > k["reached_in_last_interval"]]
        print(f"\nbad outcomes: {len(bad)} of {len(flips) + len(cuts)} file faults; {len(bad_kills)} of {len(kills)} kills")
        for r in bad[:20]:
            print("  ", r)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
