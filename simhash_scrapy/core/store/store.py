"""The persistent store: one SQLite file per job or spider (no Scrapy import).

A store is a plain SQLite 3 database (stdlib ``sqlite3``, WAL journal), so
its crash safety is SQLite's.  Since format 5 most records sit in chunk blobs
(read in bulk: a 1,000,000-page store opens in about a second of CPU), so an SQL
tool sees the rows written since the last fold only; ``read_store`` (or
``scrapy simhash report``) reads every record.

Tables (format version 6, ``PRAGMA user_version``; a format-5 store is upgraded in place
when a crawl opens it (the version only); a format-4 one too: the ``chunks`` table is added and
its rows folded into chunks; a format-3 store goes through format 4 (its three new columns added, NULL); ``PRAGMA application_id``
is ``0x53484D53``, "SHMS"):

``simhash_meta (key, value)``
    the settings the fingerprints depend on (``max_distance``, ``blocks``,
    ``block_widths``, ``features``, ``text_mode``), the number of pages
    (``pages``), ``chunk_records`` (4096: records per chunk) and ``checksum``
    (CRC-32 of the other rows).  A store written with other settings is refused
    with an error naming the setting.
``chunks (chunk, count, data, checksum)``
    the records of entries ``chunk * 4096`` onwards (``count`` of them, every
    chunk full but the last), column by column in one blob (``core.store.store_chunks``:
    little-endian arrays, the texts NUL-joined and deflated), with a 64-bit
    checksum (CRC-32 and Adler-32, seeded with the chunk's number and count).
``pages``
    the records written since the last fold, **one row per (scope, identity)**,
    its latest version, laid over the chunk's record of that entry: ``entry`` (first-
    check order, 0..n-1), ``scope``, ``identity``, ``url``, ``fingerprint``
    (signed 64-bit: ``printf('%016x', fingerprint)`` shows the usual hex),
    ``exact`` (short page matched by digest), ``outcome`` of the latest check
    (unique / near_duplicate / unchanged / changed), ``canonical`` (entry of
    the canonical page of its cluster, NULL if none), ``distance``,
    ``indexed`` (the fingerprint in the index, canonical pages only),
    ``previous`` (fingerprint before the latest check), ``referer``,
    ``depth``, ``text`` (HTML reports only), ``first_seen``, ``last_seen``
    (Unix time), ``edit_keys`` (the one-edit keys of a canonical page of a few
    dozen tokens, ``core.features.edits``: big-endian 64-bit keys, else NULL),
    ``checksum``, then (format 4) ``digest`` (the content digest, which tells
    ``unchanged`` from ``edited``), ``etag`` and ``last_modified`` (the HTTP
    validators of the latest version, for conditional re-crawls), each NULL when
    unknown.
``extra (name, data, checksum)``
    named blobs of the backend (``load_extra`` / ``save_extra``); from format 6 also
    ``detector/snapshot`` and ``detector/journal/<n>``: what clustering steps 5-7 learned
    (``core.store.detector_state``).

**Folding.**  A flush writes its records as rows of ``pages`` (one transaction);
once ``FOLD_ROWS`` rows wait, and at ``close``, the same transaction folds them:
each chunk they touch is read (checked), laid under its rows and written anew,
and the rows are deleted.  A crawl that opens a store with rows left (a crash, an
upgrade) folds them at once from what it read.  ``close`` compacts the file
(``VACUUM``) when over a quarter of it is free pages (after an upgrade).

**Nothing unreadable is destroyed, nothing bad is accepted.**  SQLite has no
per-value checksum (a flipped bit inside a URL would be read back as
another URL), so every chunk carries a 64-bit checksum over its bytes and every
row one over all its fields, verified for every chunk and row at load, with
``PRAGMA quick_check`` for the b-tree structure, the chunk numbers and counts
(0..k-1, full but the last, every entry in a chunk or a row), the column types,
the value ranges and the page count.  Any failure is a ``StoreError`` naming the
file (and the chunk or record to blame); the file is left as it is.  A torn last transaction (``kill -9``,
power loss) is rolled back by SQLite itself: the store loads as of the last
commit.  Pages reach the OS in one transaction per flush interval (see
``PageStore.flush``), so a ``kill -9`` loses at most the pages checked since
the last commit.  SQLite would also silently stop replaying a WAL at a damaged
frame, dropping committed pages after it; ``store_wal.scan_wal`` reads the WAL
first by SQLite's own rule (salts, cumulative checksums, commit frames) and
refuses a store whose committed frames would be lost, while frames no commit
covers (a transaction a crash or a full disk cut short, or its leftovers behind
a later, shorter one) are ignored as SQLite ignores them (a warning when a last
transaction was cut short).

**Reading never writes.**  ``read_store`` (reports, commands) reads the main
file and the WAL as bytes, lays the WAL's committed pages over the main file
and opens that image in memory: no checkpoint, no ``-shm``, not one byte of
the folder changes.  **Writing fails loudly, once.**  A commit that fails (a
full disk, a read-only file) raises ``StoreError`` naming the file, SQLite's
cause and the room left, with the records still pending for the next
``flush``; a store file that cannot be written is refused at ``open``.

Modules: this one (the file: schema, header, opening, locking, writing,
folding, read-only reading), ``store_rows`` (checksums, row encoding, the checked
load, the range checks), ``store_chunks`` (the chunk blobs) and ``store_wal``
(the WAL as SQLite reads it).
It is ~500 lines because opening a store is one sequence of checks (lock,
WAL, SQLite, quick_check, header, settings, rows) that reads best in one place.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
import tempfile
import zlib
from collections import Counter
from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from ..index.index import block_widths
from ..settings.settings import FEATURE_SETTINGS
from ..settings.settings import setting_names as _setting_names
from .store_chunks import CHUNK_RECORDS, check_chunk_list, chunk_checksum, decode_chunk, encode_chunk, merge
from .store_rows import (
    FORMAT_4_COLUMNS,
    INSERT,
    OUTCOMES,
    RESET_HINT,
    Columns,
    StoreConfig,
    StoreContents,
    StoreError,
    StoreRecord,
    blob_checksum,
    clean_text,
    concat,
    contents_from,
    encode_rows,
    fail,
    load_extra,
    paused_gc,
    read_rows,
)
from .store_wal import WalScan, check_wal, scan_wal

__all__ = [
    "APPLICATION_ID",
    "FORMAT_VERSION",
    "OUTCOMES",
    "PageStore",
    "StoreConfig",
    "StoreConfigError",
    "StoreContents",
    "StoreError",
    "StoreRecord",
    "check_wal",
    "is_store_file",
    "read_store",
]

logger = logging.getLogger(__name__)

FORMAT_VERSION = 6
#: Older formats this version reads, and upgrades in place when a crawl opens them: 3 -> 4 adds
#: ``FORMAT_4_COLUMNS``, 4 -> 5 adds the ``chunks`` table (then the rows are folded into chunks), 5 -> 6
#: lets ``extra`` hold what clustering steps 5-7 learned (``core.store.detector_state``; a version-5 reader
#: would ignore it and leave it stale, so the version says it).
UPGRADABLE_VERSIONS = (3, 4, 5)
#: The first format with the ``chunks`` table.
CHUNKS_VERSION = 5
#: Rows of ``pages`` (records written since the last fold) that make a flush fold them into chunks.
FOLD_ROWS = 32_768
APPLICATION_ID = 0x53484D53  # "SHMS"
SQLITE_MAGIC = b"SQLite format 3\x00"
_OLD_MAGIC = b"SIMHSTOR"  # format 1 (a custom append-only file)
_SCHEMA = """
CREATE TABLE simhash_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE pages (
    entry INTEGER PRIMARY KEY,
    scope TEXT NOT NULL,
    identity TEXT NOT NULL,
    url TEXT NOT NULL,
    fingerprint INTEGER NOT NULL,
    exact INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    canonical INTEGER,
    distance INTEGER,
    indexed INTEGER,
    previous INTEGER,
    referer TEXT,
    depth INTEGER,
    text TEXT,
    first_seen REAL NOT NULL,
    last_seen REAL NOT NULL,
    edit_keys BLOB,
    checksum INTEGER NOT NULL,
    digest INTEGER,
    etag TEXT,
    last_modified TEXT
);
CREATE TABLE extra (name TEXT PRIMARY KEY, data BLOB NOT NULL, checksum INTEGER NOT NULL);
CREATE TABLE chunks (chunk INTEGER PRIMARY KEY, count INTEGER NOT NULL, data BLOB NOT NULL, checksum INTEGER NOT NULL);
"""
_CHUNKS_TABLE = _SCHEMA.strip().split(";")[-2].strip()
#: The setting name of each header field (in error messages), from the settings table.
DEFAULT_SETTING_NAMES: dict[str, str] = {
    name: _setting_names(name) for name in ("max_distance", "blocks", "features", "text_mode")
}


def feature_setting(was: str, now: str, default: str = DEFAULT_SETTING_NAMES["features"]) -> str:
    """The setting behind the first differing part of two feature signatures (``default`` when unknown)."""
    a, b = was.split("-"), now.split("-")
    if len(a) == len(b) == len(FEATURE_SETTINGS):
        for name, x, y in zip(FEATURE_SETTINGS, a, b):
            if x != y:
                return name
    return default


class StoreConfigError(StoreError):
    """A store was written with another configuration; ``setting`` names the setting that differs."""

    def __init__(self, message: str, setting: str) -> None:
        super().__init__(message)
        self.setting = setting


def config_meta(config: StoreConfig) -> dict[str, str]:
    """The meta rows a store written with ``config`` starts with (the format, the layout and the settings)."""
    return {
        "format": str(FORMAT_VERSION),
        "chunk_records": str(CHUNK_RECORDS),
        "max_distance": str(config.max_distance),
        "blocks": str(config.blocks),
        "block_widths": ",".join(map(str, block_widths(config.blocks))),
        "features": config.features,
        "text_mode": config.text_mode,
    }


def check_config(
    found: StoreConfig,
    wanted: StoreConfig,
    path: object,
    setting_names: Mapping[str, str] | None = None,
) -> None:
    """Raise ``StoreConfigError`` naming the first setting whose value differs."""
    names = {**DEFAULT_SETTING_NAMES, **(setting_names or {})}
    for attr in ("max_distance", "blocks", "features", "text_mode"):
        was, now = getattr(found, attr), getattr(wanted, attr)
        if was != now:
            setting = names[attr]
            if attr == "features" and "features" not in (setting_names or {}):
                setting = feature_setting(was, now, setting)
            raise StoreConfigError(
                f"{path} was written with {attr} {was!r}, but this crawl uses {now!r} (setting {setting}). "
                f"Fingerprints made with different settings cannot be compared, so the file is not used. "
                f"Change {setting} back, or start afresh with SIMHASH_RESET = True (or -a simhash_reset=1), "
                f"or point JOBDIR / SIMHASH_DIR elsewhere.",
                setting,
            )


def _meta_checksum(meta: Mapping[str, str]) -> str:
    body = "\n".join(f"{k}={v}" for k, v in sorted(meta.items()) if k != "checksum")
    return f"{zlib.crc32(body.encode('utf-8', 'surrogatepass')):08x}"


# ---------------------------------------------------------------------- files
def is_store_file(path: str | PathLike[str]) -> bool:
    """Whether ``path`` is a simhash-scrapy store (SQLite with our application id, or the old format).

    A store a crash left before its first checkpoint has its header only in the WAL: that is read too.
    """
    try:
        with open(path, "rb") as handle:
            head = handle.read(72)
    except OSError:
        return False
    if head.startswith(_OLD_MAGIC):
        return True
    if head.startswith(SQLITE_MAGIC) and len(head) >= 72 and int.from_bytes(head[68:72], "big") == APPLICATION_ID:
        return True
    if head and not SQLITE_MAGIC.startswith(head[:16]):
        return False
    path = Path(path)
    try:
        wal = _wal_bytes(path)
        scan = scan_wal(wal, path.with_name(path.name + "-wal"), quiet=True)
    except StoreError:
        return bool(head)  # an SQLite file whose WAL is damaged: reading it says so
    offset = scan.pages.get(1)
    if offset is None:
        return False
    first = wal[offset : offset + 72]
    return first.startswith(SQLITE_MAGIC) and int.from_bytes(first[68:72], "big") == APPLICATION_ID


def _side_files(path: Path) -> list[Path]:
    return [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal")]


def _check_head(path: Path, head: bytes) -> None:
    """Refuse a file that is not an SQLite store by its first 16 bytes (``head``)."""
    if head.startswith(_OLD_MAGIC):
        raise StoreError(
            f"{path}: store format version 1 (an older simhash-scrapy); this version reads format "
            f"{FORMAT_VERSION} (SQLite). Start afresh with SIMHASH_RESET = True (or -a simhash_reset=1); "
            f"the old file is kept as <name>.previous."
        )
    if head and not SQLITE_MAGIC.startswith(head[:16]):
        raise StoreError(f"{path}: not a simhash-scrapy store (not an SQLite file). {RESET_HINT}")


def cause(exc: BaseException) -> str:
    """One line saying why a file operation failed: SQLite's message and code, or the OS error."""
    if isinstance(exc, sqlite3.Error):
        name = getattr(exc, "sqlite_errorname", None)
        return f"{exc} ({name})" if name else str(exc)
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return f"{type(exc).__name__}: {exc}"


def _room(path: Path, exc: BaseException) -> str:
    """For a failed write: the room left for the file (SQLite does not say why a write failed)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if not (name.startswith(("SQLITE_FULL", "SQLITE_IOERR")) or isinstance(exc, OSError)):
        return ""
    found = []
    try:
        st = os.statvfs(path.parent)
        found.append(f"{st.f_bavail * st.f_frsize // 1024} KB free on its file system")
    except (OSError, AttributeError):  # pragma: no cover - no statvfs (Windows)
        pass
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if soft != resource.RLIM_INFINITY:
            found.append(f"a file-size limit (RLIMIT_FSIZE) of {soft} bytes")
    except (ImportError, OSError, ValueError):  # pragma: no cover - no resource module (Windows)
        pass
    return ", ".join(found)


def _connect(path: Path) -> sqlite3.Connection:
    try:
        with open(path, "rb") as handle:
            head = handle.read(16)
    except FileNotFoundError:
        head = b""
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the simhash store: {exc.strerror or exc}") from None
    _check_head(path, head)
    try:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot open the simhash store: {cause(exc)}") from None
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.OperationalError as exc:  # cannot write: a read-only file or folder, a full disk
        db.close()
        raise StoreError(f"{path}: cannot open the simhash store for writing: {cause(exc)}") from None
    except (sqlite3.DatabaseError, UnicodeError) as exc:
        db.close()
        raise StoreError(f"{path}: not a readable simhash-scrapy store ({exc}). {RESET_HINT}") from None
    return db


def _wal_bytes(path: Path) -> bytes:
    wal = path.with_name(path.name + "-wal")
    try:
        return wal.read_bytes()
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise StoreError(f"{wal}: cannot read the store's WAL: {exc.strerror or exc}") from None


def _snapshot(path: Path) -> tuple[bytes, bytes]:
    """The main file and its WAL, read without SQLite and without changing either.

    A crawl may be writing the store meanwhile: the WAL is read before and after the main file,
    and the read is taken when its header (salts) did not change between (no checkpoint restarted
    or emptied it); the WAL read after it then covers every page a checkpoint copied meanwhile.
    """
    for _attempt in range(20):
        before = _wal_bytes(path)
        try:
            main = path.read_bytes()
        except OSError as exc:
            raise StoreError(f"{path}: cannot read the simhash store: {exc.strerror or exc}") from None
        after = _wal_bytes(path)
        if before[:32] == after[:32] and len(after) >= len(before):
            return main, after
    raise StoreError(f"{path}: the store kept changing while it was read (a crawl is writing it); try again")


def database_image(main: bytes, wal: bytes, scan: WalScan) -> bytearray:
    """The database as SQLite reads it: the main file with the WAL's committed pages laid over it."""
    if scan.db_pages:
        size = scan.db_pages * scan.page_size
        image = bytearray(main[:size])
        image.extend(bytes(size - len(image)))
        for number, offset in scan.pages.items():
            image[(number - 1) * scan.page_size : number * scan.page_size] = wal[offset : offset + scan.page_size]
    else:
        image = bytearray(main)
    if len(image) >= 20 and image[18:20] == b"\x02\x02":
        image[18:20] = b"\x01\x01"  # a WAL database, read as a plain file (no -shm, no -wal)
    return image


def _open_image(image: bytearray) -> tuple[sqlite3.Connection, str | None]:
    """An SQLite connection on an in-memory database image (a temporary file before Python 3.11)."""
    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    if not image:
        return db, None  # an empty file: an empty database
    if hasattr(db, "deserialize"):
        db.deserialize(image)
        return db, None
    db.close()  # Python 3.10
    handle, name = tempfile.mkstemp(prefix="simhash-store-", suffix=".sqlite")
    with os.fdopen(handle, "wb") as out:
        out.write(image)
    uri = Path(name).as_uri() + "?immutable=1"
    return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False), name


def _upgrade(db: sqlite3.Connection, path: object, version: int) -> None:
    """Format 3, 4 or 5 -> 6 in one transaction: the format-4 columns (NULL: every row keeps its checksum), the
    ``chunks`` table (empty: every record stays a row of ``pages`` until it is folded), then the version
    (format 6 adds no table: its steps 5-7 blobs live in ``extra``)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        if version == 3:
            for name, kind in FORMAT_4_COLUMNS:
                db.execute(f"ALTER TABLE pages ADD COLUMN {name} {kind}")
        if version < CHUNKS_VERSION:
            db.execute(_CHUNKS_TABLE)
        meta = dict(db.execute("SELECT key, value FROM simhash_meta").fetchall())
        meta["format"] = str(FORMAT_VERSION)
        meta["chunk_records"] = str(CHUNK_RECORDS)
        meta["checksum"] = _meta_checksum(meta)
        db.executemany("INSERT OR REPLACE INTO simhash_meta (key, value) VALUES (?, ?)",
                       [(key, meta[key]) for key in ("format", "chunk_records", "checksum")])
        db.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        _rollback(db)
        raise
    logger.info("%s: upgraded the simhash store from format %d to %d", path, version, FORMAT_VERSION)


def _read_meta(db: sqlite3.Connection, path: object) -> tuple[StoreConfig, int, int] | None:
    """The store's settings, page count and format version; ``None`` for a database without simhash tables."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        return None
    (app,) = db.execute("PRAGMA application_id").fetchone()
    (version,) = db.execute("PRAGMA user_version").fetchone()
    needed = {"simhash_meta", "pages", "extra", *(["chunks"] if version >= CHUNKS_VERSION else [])}
    if app != APPLICATION_ID or not needed <= tables:
        if app == APPLICATION_ID:
            raise fail(path, f"corrupt simhash store (tables missing: {sorted(needed - tables)})")
        raise StoreError(f"{path}: not a simhash-scrapy store (an SQLite database of another program)")
    if version not in (FORMAT_VERSION, *UPGRADABLE_VERSIONS):
        raise StoreError(
            f"{path}: store format version {version}; this version of simhash-scrapy reads version "
            f"{FORMAT_VERSION}. Start afresh with SIMHASH_RESET = True (or -a simhash_reset=1)."
        )
    rows = db.execute("SELECT key, value FROM simhash_meta").fetchall()
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in rows):
        raise fail(path, "corrupt store header (simhash_meta holds a value of the wrong type)")
    meta = dict(rows)
    if meta.get("checksum") != _meta_checksum(meta):
        raise fail(path, "corrupt store header (simhash_meta checksum mismatch)")
    try:
        config = StoreConfig(int(meta["max_distance"]), int(meta["blocks"]), meta["features"], meta["text_mode"])
        pages = int(meta["pages"])
        widths = [int(w) for w in meta["block_widths"].split(",")]
    except (KeyError, ValueError) as exc:
        raise fail(path, f"corrupt store header ({exc})") from None
    if widths != block_widths(config.blocks):
        raise StoreError(f"{path}: block layout {widths} is not the layout this version uses")
    if version >= CHUNKS_VERSION and meta.get("chunk_records") != str(CHUNK_RECORDS):
        raise fail(path, f"corrupt store header (chunk_records {meta.get('chunk_records')!r}, not {CHUNK_RECORDS})")
    return config, pages, version


def _quick_check(db: sqlite3.Connection, path: object) -> None:
    problems = [row[0] for row in db.execute("PRAGMA quick_check(5)")]
    if problems != ["ok"]:
        raise fail(path, "corrupt SQLite file (PRAGMA quick_check: " + "; ".join(map(str, problems)) + ")")


def _read_chunks(db: sqlite3.Connection, path: object, pages: int) -> Columns:
    """Every chunk, checked (numbers, counts, checksums, contents), as one ``Columns`` from entry 0."""
    listing = db.execute("SELECT chunk, count, data, checksum FROM chunks ORDER BY chunk").fetchall()
    check_chunk_list([row[0] for row in listing], [row[1] for row in listing], pages, path)
    parts = []
    for number, count, data, checksum in listing:
        if type(data) is not bytes or type(checksum) is not int or chunk_checksum(number, count, data) != checksum:
            raise fail(path, f"corrupt chunk {number} (checksum mismatch)")
        parts.append(decode_chunk(data, number, count, path))
    return concat(parts)


def _read_columns(db: sqlite3.Connection, path: Path) -> tuple[StoreContents, Columns | None, np.ndarray]:
    """Header, records and extras of an open store, all checked; with the records as ``Columns`` and the
    number of rows not yet folded into chunks (``config=None``: no simhash tables yet)."""
    with paused_gc():
        try:
            _quick_check(db, path)  # first: a damaged schema can hide the tables (its pages are then "never used")
            found = _read_meta(db, path)
            if found is None:
                return StoreContents(config=None, path=str(path)), None, np.zeros(0, dtype=np.int64)
            config, pages, version = found
            chunks = _read_chunks(db, path, pages) if version >= CHUNKS_VERSION else concat([])
            rows = read_rows(db, path, version)
            records = merge(chunks, rows, 0, pages, path)
            contents = contents_from(records, config, path, version)
            contents.extra = load_extra(db, path)
        except (sqlite3.DatabaseError, UnicodeError) as exc:  # a damaged schema can hold invalid UTF-8
            raise fail(path, f"corrupt SQLite file ({type(exc).__name__}: {exc})") from None
    return contents, records, rows.entry


def _read(db: sqlite3.Connection, path: Path) -> StoreContents:
    """Header, pages and extras of an open store, all checked (``config=None``: no simhash tables yet)."""
    return _read_columns(db, path)[0]


def _write_chunks(db: sqlite3.Connection, records: Columns, chunks: list[int], total: int) -> None:
    """Chunks ``chunks`` made anew from ``records`` (entries 0..total-1, or the entries of those chunks)."""
    first = int(records.entry[0]) if len(records) else 0
    for chunk in chunks:
        start = chunk * CHUNK_RECORDS
        end = min(start + CHUNK_RECORDS, total)
        part = records.take(np.arange(start - first, end - first))
        data = encode_chunk(part)
        db.execute("INSERT OR REPLACE INTO chunks (chunk, count, data, checksum) VALUES (?, ?, ?, ?)",
                   (chunk, end - start, data, chunk_checksum(chunk, end - start, data)))  # fmt: skip


def _fold(db: sqlite3.Connection, path: Path, total: int, chunks: list[int] | None = None) -> None:
    """Fold the rows of ``pages`` into their chunks (inside the caller's transaction), every row or those of
    ``chunks``; rows and chunks are read checked."""
    if chunks is None:
        rows = read_rows(db, path, FORMAT_VERSION)
        parts = [(chunk, rows) for chunk in sorted(set((rows.entry // CHUNK_RECORDS).tolist()))]
    else:
        where = "entry >= {0} AND entry < {1}"
        parts = [(c, read_rows(db, path, FORMAT_VERSION, where.format(c * CHUNK_RECORDS, (c + 1) * CHUNK_RECORDS)))
                 for c in chunks]  # fmt: skip
    for chunk, rows in parts:
        start = chunk * CHUNK_RECORDS
        end = min(start + CHUNK_RECORDS, total)
        found = db.execute("SELECT count, data, checksum FROM chunks WHERE chunk = ?", (chunk,)).fetchone()
        if found is None:
            base = concat([])
        else:
            count, data, checksum = found
            if type(data) is not bytes or chunk_checksum(chunk, count, data) != checksum:
                raise fail(path, f"corrupt chunk {chunk} (checksum mismatch)")
            base = decode_chunk(data, chunk, count, path)
        mine = np.flatnonzero((rows.entry >= start) & (rows.entry < end))
        _write_chunks(db, merge(base, rows.take(mine), start, end - start, path), [chunk], total)
        if chunks is not None:
            db.execute("DELETE FROM pages WHERE entry >= ? AND entry < ?", (start, start + CHUNK_RECORDS))
    if chunks is None:
        db.execute("DELETE FROM pages")


def read_store(path: str | PathLike[str]) -> StoreContents:
    """Read and check a store (any configuration); raises ``StoreError`` naming the file if it is unusable.

    Read-only: not one byte of the store, its WAL or its folder changes (no SQLite connection
    touches the files: the main file and the WAL are read as bytes, the WAL's committed frames
    laid over the main file as SQLite would, and the result opened in memory).  A store being
    written by a running crawl can be read (it shows the last commit).  Raises
    ``FileNotFoundError`` if the file does not exist.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(str(path))
    main, wal = _snapshot(path)
    _check_head(path, main[:16])
    scan = scan_wal(wal, path.with_name(path.name + "-wal"), reader=True)
    db, temporary = _open_image(database_image(main, wal, scan))
    try:
        contents = _read(db, path)
    finally:
        db.close()
        if temporary is not None:  # Python 3.10
            os.unlink(temporary)
    if contents.config is None:
        raise StoreError(f"{path}: an empty simhash store ({path.stat().st_size} bytes, no header)")
    return contents


class PageStore:
    """A store opened by one crawl: load at ``open``, ``put`` each checked identity, commit in batches.

    >>> store = PageStore(path, StoreConfig(3, 4, "w1-c0-tf-j2", "visible"))
    >>> contents = store.open()          # what earlier runs wrote, checked
    >>> store.put(StoreRecord(0, "spider", "id", "https://a/", 0x1234))
    >>> store.flush()                    # one transaction for every record put since the last one
    >>> store.close()

    ``open`` refuses (``StoreConfigError``) a store written with another
    configuration, refuses (``StoreError``) a corrupt one without changing
    it, and takes an exclusive lock so two crawls never write one store at
    once.  ``reset=True`` starts afresh; the old file is kept as
    ``<name>.previous``.  After ``open``, ``empty_file`` says whether the
    file existed but held nothing (0 bytes or no pages).
    """

    def __init__(
        self,
        path: str | PathLike[str],
        config: StoreConfig,
        setting_names: Mapping[str, str] | None = None,
    ) -> None:
        self.path = Path(path)
        self.config = config
        self.setting_names = dict(setting_names or {})
        self.count = 0  # rows in the store, loaded + new
        self.empty_file = False
        self._db: sqlite3.Connection | None = None
        self._lock_handle: Any = None
        self._pending: dict[int, StoreRecord] = {}
        self._pending_extra: dict[str, bytes | None] = {}
        self._unfolded: set[int] = set()  # entries written as rows since the last fold
        self._tail = -1  # the last chunk in the file

    def open(self, reset: bool = False) -> StoreContents:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_handle = _lock(self.path)
        try:
            if reset:
                self._move_away()
            existed = self.path.exists() or any(p.exists() for p in _side_files(self.path))
            size = sum(p.stat().st_size for p in [self.path, *_side_files(self.path)] if p.exists())
            self._probe_write()
            check_wal(self.path)
            db = _connect(self.path)
            leftover: set[int] = set()
            try:
                contents, records, unfolded = _read_columns(db, self.path)
                if contents.config is None:
                    self.empty_file = existed and not reset
                    if self.empty_file:
                        logger.warning(
                            "%s was an empty simhash store (%d bytes, no pages): starting a new store there",
                            self.path, size,
                        )  # fmt: skip
                    self._create(db)
                    contents = StoreContents(config=self.config, path=str(self.path))
                else:
                    check_config(contents.config, self.config, self.path, self.setting_names)
                    if contents.version in UPGRADABLE_VERSIONS:  # read and checked whole: now upgraded
                        _upgrade(db, self.path, contents.version)
                    if len(unfolded):  # rows a crash (or the upgrade) left: folded now, from what was read
                        assert records is not None
                        chunks = sorted(set((unfolded // CHUNK_RECORDS).tolist()))

                        def fold(db: sqlite3.Connection) -> None:
                            _write_chunks(db, records, chunks, len(records))
                            db.execute("DELETE FROM pages")

                        try:
                            self._transaction(db, fold)
                        except StoreError as exc:  # a full disk: the rows stay rows, folded by a later flush
                            leftover = set(unfolded.tolist())
                            logger.warning("%s; its %d rows are folded into chunks later", exc, len(leftover))
                    del records
                    if not len(contents):
                        self.empty_file = True
                        logger.warning("%s holds no pages yet (a store with its header only)", self.path)
                tail = db.execute("SELECT ifnull(max(chunk), -1) FROM chunks").fetchone()[0]  # the last chunk
            except BaseException:
                db.close()
                raise
        except BaseException:
            _unlock(self._lock_handle)
            self._lock_handle = None
            raise
        self._db = db
        self.count = len(contents)
        self._pending = {}
        self._pending_extra = {}
        self._unfolded = leftover
        self._tail = tail
        return contents

    def _move_away(self) -> None:
        if self.path.exists() and self.path.stat().st_size:
            previous = self.path.with_name(self.path.name + ".previous")
            for side in _side_files(previous):
                side.unlink(missing_ok=True)
            os.replace(self.path, previous)
            for side, moved in zip(_side_files(self.path), _side_files(previous)):
                if side.exists():
                    os.replace(side, moved)
            logger.info("Started a fresh simhash store at %s (the old one is now %s)", self.path, previous)
        else:
            for side in _side_files(self.path):
                side.unlink(missing_ok=True)
            self.path.unlink(missing_ok=True)

    def _probe_write(self) -> None:
        """Refuse, at open, a store this crawl could not write (a read-only or immutable file)."""
        for file in (self.path, *_side_files(self.path)[:2]):
            try:
                os.close(os.open(file, os.O_RDWR))
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StoreError(
                    f"{file}: the simhash store cannot be written ({cause(exc)}); a crawl records every page it "
                    f"checks there. Make it writable, or point JOBDIR / SIMHASH_DIR elsewhere."
                ) from None

    def _transaction(self, db: sqlite3.Connection, write: Any) -> None:
        """Run ``write(db)`` in one transaction; on failure roll back and raise ``StoreError`` naming the cause."""
        try:
            db.execute("BEGIN IMMEDIATE")
            write(db)
            db.execute("COMMIT")
        except BaseException as exc:
            _rollback(db)  # SQLite may have rolled back already (a full disk): never hide the cause
            if isinstance(exc, (sqlite3.Error, OSError)):
                said, room = cause(exc), _room(self.path, exc)
                said = f"{said[:-1]}; {room})" if room and said.endswith(")") else f"{said} ({room})" if room else said
                raise StoreError(f"{self.path}: cannot write the simhash store: {said}") from exc
            raise

    def _create(self, db: sqlite3.Connection) -> None:
        meta = {**config_meta(self.config), "pages": "0"}
        meta["checksum"] = _meta_checksum(meta)

        def write(db: sqlite3.Connection) -> None:
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
            for statement in filter(str.strip, _SCHEMA.split(";")):
                db.execute(statement)
            db.executemany("INSERT INTO simhash_meta (key, value) VALUES (?, ?)", sorted(meta.items()))

        self._transaction(db, write)

    def _require(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError(f"{self.path}: store is not open")
        return self._db

    def put(self, record: StoreRecord) -> None:
        """Queue the latest version of one identity (written by the next ``flush``)."""
        self._require()
        if record.entry > self.count or record.entry < 0:
            raise ValueError(f"entry {record.entry} does not follow the {self.count} entries of the store")
        if record.entry == self.count:
            self.count += 1
        self._pending[record.entry] = record

    @property
    def pending(self) -> int:
        """Records put since the last commit (what a ``kill -9`` now would lose)."""
        return len(self._pending)

    def flush(self, fold: bool | None = False) -> None:
        """Commit every record put (and extra saved) since the last commit in one transaction.

        The records are written as rows of ``pages``; once ``FOLD_ROWS`` of them wait (or with
        ``fold``), the same transaction folds them into their chunks; ``fold=None``: rows only, never
        a fold (what still fits on a full disk).  On failure (a full disk, a read-only file) raises
        ``StoreError`` naming the file and the cause; nothing is lost from memory: the records stay
        pending for the next ``flush``.
        """
        db = self._require()
        unfolded = self._unfolded | self._pending.keys()
        if fold is None:
            chunks: list[int] | None = []
        else:
            chunks = None if fold or len(unfolded) >= 4 * FOLD_ROWS else self._foldable(unfolded)
        fold = bool(unfolded) and (chunks is None or bool(chunks))
        if not self._pending and not self._pending_extra and not fold:
            return
        records = list(self._pending.values())
        rows = encode_rows(records)
        extras = [(name, data, blob_checksum(name, data)) for name, data in self._pending_extra.items() if data is not None]
        dropped = [(name,) for name, data in self._pending_extra.items() if data is None]
        try:
            meta = dict(db.execute("SELECT key, value FROM simhash_meta").fetchall())
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot read the simhash store: {cause(exc)}") from exc
        meta["pages"] = str(self.count)
        meta["checksum"] = _meta_checksum(meta)

        def write(db: sqlite3.Connection) -> None:
            if rows:
                db.executemany(INSERT, rows)
                db.executemany(
                    "UPDATE simhash_meta SET value = ? WHERE key = ?",
                    [(meta["pages"], "pages"), (meta["checksum"], "checksum")],
                )
            if extras:
                db.executemany("INSERT OR REPLACE INTO extra (name, data, checksum) VALUES (?, ?, ?)", extras)
            if dropped:
                db.executemany("DELETE FROM extra WHERE name = ?", dropped)
            if fold:
                _fold(db, self.path, self.count, chunks)

        self._transaction(db, write)
        if not fold:
            self._unfolded = unfolded
        elif chunks is None:
            self._unfolded = set()
        else:
            done = set(chunks)
            self._unfolded = {e for e in unfolded if e // CHUNK_RECORDS not in done}
        if fold:
            self._tail = max(self._tail, (self.count - 1) // CHUNK_RECORDS if chunks is None else max(chunks))
        self._pending = {}
        self._pending_extra = {}

    def _foldable(self, unfolded: set[int]) -> list[int]:
        """The chunks a flush folds once ``FOLD_ROWS`` rows wait: those with an eighth of a chunk of rows
        waiting (a chunk is rewritten for many rows, never for a few), and every chunk from the last one on
        (new pages: chunks stay full but the last).  Rows spread thin over old chunks wait for ``close``
        (or for ``4 * FOLD_ROWS`` rows)."""
        if len(unfolded) < FOLD_ROWS:
            return []
        counts = Counter(entry // CHUNK_RECORDS for entry in unfolded)
        return sorted(c for c, k in counts.items() if k >= CHUNK_RECORDS // 8 or c >= self._tail)

    def keep_extra(self, name: str, data: bytes) -> None:
        """Queue a named blob (written by the next ``flush``, with the pending records)."""
        self._require()
        self._pending_extra[clean_text(name) or ""] = bytes(data)

    def drop_extra(self, name: str) -> None:
        """Queue the removal of a named blob (by the next ``flush``)."""
        self._require()
        self._pending_extra[clean_text(name) or ""] = None

    def save_extra(self, name: str, data: bytes) -> None:
        """Keep a named blob, committed at once (with the pending records; kept pending if that fails)."""
        self.keep_extra(name, data)
        self.flush()

    def close(self) -> None:
        """Commit what is pending, fold the WAL into the file and release the store.

        The store is released even when the last commit fails; the ``StoreError`` is raised after.
        """
        if self._db is None:
            return
        try:
            try:
                self.flush(fold=True)
            except StoreError as exc:  # a full disk: the rows alone may still fit (folded by a later crawl)
                logger.warning("%s (folding the rows into chunks at close)", exc)
                self.flush(fold=None)
            try:
                # Rows folded into chunks leave free pages (SQLite reuses them); an upgraded store, most of the file.
                free, total = (self._db.execute(f"PRAGMA {name}").fetchone()[0] for name in ("freelist_count", "page_count"))
                if free > max(256, total // 4):
                    self._db.execute("VACUUM")
            except sqlite3.Error as exc:  # only tidiness: the file is as good without
                logger.warning("%s: cannot compact the store: %s", self.path, cause(exc))
            try:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:  # only tidiness: the WAL is read back at the next open
                logger.warning("%s: cannot checkpoint the WAL: %s", self.path, cause(exc))
        finally:
            self._db.close()
            self._db = None
            _unlock(self._lock_handle)
            self._lock_handle = None

    def abandon(self) -> None:
        """Release the store without committing what is pending (for tests of a crash)."""
        if self._db is not None:
            self._db.close()
            self._db = None
            _unlock(self._lock_handle)
            self._lock_handle = None

    @property
    def closed(self) -> bool:
        return self._db is None


def _rollback(db: sqlite3.Connection) -> None:
    if db.in_transaction:
        try:
            db.execute("ROLLBACK")
        except sqlite3.Error:  # the transaction is gone either way; the first error says why
            pass


def _lock(path: Path) -> Any:
    """An exclusive lock on ``<store>.lock`` (SQLite's own locks let readers in; this keeps writers out)."""
    if sys.platform == "win32":  # pragma: no cover - no flock on Windows
        return None
    import fcntl

    handle = open(path.with_name(path.name + ".lock"), "a+b")  # noqa: SIM115 - held while the store is open
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise StoreError(
            f"{path} is in use by another crawl (locked). A JOBDIR or SIMHASH_DIR store belongs to one "
            f"running crawl at a time: wait for that crawl to finish, give this crawl a folder of its own "
            f"(another SIMHASH_DIR, e.g. -s SIMHASH_DIR=simhash-2, or another JOBDIR), or, for several crawls "
            f"sharing what they have seen, use Redis (SIMHASH_BACKEND = 'redis')."
        ) from None
    return handle


def _unlock(handle: Any) -> None:
    if handle is not None:
        handle.close()
