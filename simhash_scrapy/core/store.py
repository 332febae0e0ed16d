"""The persistent store: one SQLite file per job or spider (no Scrapy import).

A store is a plain SQLite 3 database (stdlib ``sqlite3``, WAL journal), so
its crash safety is SQLite's and any SQL tool can read a crawl's record::

    sqlite3 .scrapy/simhash/myspider.store \\
      "SELECT url, outcome, printf('%016x', fingerprint) FROM pages WHERE outcome = 'changed'"

Tables (format version 2, ``PRAGMA user_version``; ``PRAGMA application_id``
is ``0x53484D53``, "SHMS"):

``simhash_meta (key, value)``
    the settings the fingerprints depend on (``max_distance``, ``blocks``,
    ``block_widths``, ``features``, ``text_mode``), the number of pages
    (``pages``) and ``checksum`` (CRC-32 of the other rows).  A store written
    with other settings is refused with an error naming the setting.
``pages``
    **one row per (scope, identity)**, its latest version: ``entry`` (first-
    check order, 0..n-1), ``scope``, ``identity``, ``url``, ``fingerprint``
    (signed 64-bit: ``printf('%016x', fingerprint)`` shows the usual hex),
    ``exact`` (short page matched by digest), ``outcome`` of the latest check
    (unique / near_duplicate / unchanged / changed), ``canonical`` (entry of
    the canonical page of its cluster, NULL if none), ``distance``,
    ``indexed`` (the fingerprint in the index, canonical pages only),
    ``previous`` (fingerprint before the latest check), ``referer``,
    ``depth``, ``text`` (HTML reports only), ``first_seen``, ``last_seen``
    (Unix time) and ``checksum``.
``extra (name, data, checksum)``
    named blobs of the backend (``load_extra`` / ``save_extra``).

**Nothing unreadable is destroyed, nothing bad is accepted.**  SQLite has no
per-value checksum (a flipped bit inside a URL would be read back as
another URL), so every row carries a 64-bit checksum over all its fields,
verified for every row at load, with ``PRAGMA quick_check`` for the b-tree
structure, the column types, the value ranges and the page count.  Any
failure is a ``StoreError`` naming the file (and the record when one is to
blame); the file is left as it is.  A torn last transaction (``kill -9``,
power loss) is rolled back by SQLite itself: the store loads as of the last
commit.  Pages reach the OS in one transaction per flush interval (see
``PageStore.flush``), so a ``kill -9`` loses at most the pages checked since
the last commit.
"""

from __future__ import annotations

import gc
import logging
import os
import sqlite3
import struct
import sys
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import methodcaller
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from .index import block_widths

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

FORMAT_VERSION = 2
APPLICATION_ID = 0x53484D53  # "SHMS"
SQLITE_MAGIC = b"SQLite format 3\x00"
_OLD_MAGIC = b"SIMHSTOR"  # format 1 (a custom append-only file)
#: The outcomes a row can record (``core.clustering.Outcome`` values).
OUTCOMES = ("unique", "near_duplicate", "unchanged", "changed")

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
    checksum INTEGER NOT NULL
);
CREATE TABLE extra (name TEXT PRIMARY KEY, data BLOB NOT NULL, checksum INTEGER NOT NULL);
"""
_COLUMNS = (
    "entry, scope, identity, url, fingerprint, exact, outcome, canonical, distance, indexed, previous, "
    "referer, depth, text, first_seen, last_seen, checksum"
)
_INSERT = f"INSERT OR REPLACE INTO pages ({_COLUMNS}) VALUES ({', '.join('?' * 17)})"
# The load: every field, NULLs as -1/0/'' plus a mask of which were NULL.  Column types are
# checked by numpy's type inference (a flipped bit in a record header can change a type).
_LOAD = """
SELECT entry, scope, identity, url, fingerprint, exact, outcome,
       ifnull(canonical, -1), ifnull(distance, -1), ifnull(indexed, 0), ifnull(previous, 0),
       ifnull(referer, ''), ifnull(depth, -1), ifnull(text, ''), first_seen, last_seen, checksum,
       (canonical IS NULL) + 2 * (distance IS NULL) + 4 * (indexed IS NULL) + 8 * (previous IS NULL)
         + 16 * (referer IS NULL) + 32 * (text IS NULL) + 64 * (depth IS NULL)
FROM pages ORDER BY entry
"""
_NULL_BITS = ("canonical", "distance", "indexed", "previous", "referer", "text", "depth")

#: Default setting name of each configuration field (used in error messages).
DEFAULT_SETTING_NAMES: dict[str, str] = {
    "max_distance": "SIMHASH_MAX_DISTANCE",
    "blocks": "SIMHASH_BLOCKS",
    "features": "SIMHASH_WORD_NGRAM / SIMHASH_CHAR_NGRAM / SIMHASH_WEIGHTING / SIMHASH_CJK_NGRAM",
    "text_mode": "SIMHASH_TEXT_MODE",
}
#: Parts of ``FeatureConfig.signature()`` ("w1-c0-tf-j2") and the setting of each.
_FEATURE_PARTS = ("SIMHASH_WORD_NGRAM", "SIMHASH_CHAR_NGRAM", "SIMHASH_WEIGHTING", "SIMHASH_CJK_NGRAM")
_RESET_HINT = (
    "The file was not changed. Move it away to keep it, or start afresh with SIMHASH_RESET = True "
    "(or -a simhash_reset=1; the old file is kept as <name>.previous)."
)


def _feature_setting(was: str, now: str, default: str) -> str:
    """The setting behind the first differing part of two feature signatures."""
    a, b = was.split("-"), now.split("-")
    if len(a) == len(b) == len(_FEATURE_PARTS):
        for name, x, y in zip(_FEATURE_PARTS, a, b):
            if x != y:
                return name
    return default


class StoreError(ValueError):
    """A store cannot be used (corrupt, locked, not a store, unknown format); the message names the file."""


class StoreConfigError(StoreError):
    """A store was written with another configuration; ``setting`` names the setting that differs."""

    def __init__(self, message: str, setting: str) -> None:
        super().__init__(message)
        self.setting = setting


@dataclass(frozen=True)
class StoreConfig:
    """What a fingerprint in the store depends on; a store is only read back with the same values."""

    max_distance: int
    blocks: int
    features: str  # FeatureConfig.signature()
    text_mode: str  # e.g. "visible" or "main_content"

    def __post_init__(self) -> None:
        if not 0 <= self.max_distance < self.blocks <= 64:
            raise ValueError(f"need 0 <= max_distance < blocks <= 64, got {self.max_distance}, {self.blocks}")

    def meta(self) -> dict[str, str]:
        return {
            "format": str(FORMAT_VERSION),
            "max_distance": str(self.max_distance),
            "blocks": str(self.blocks),
            "block_widths": ",".join(map(str, block_widths(self.blocks))),
            "features": self.features,
            "text_mode": self.text_mode,
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
                setting = _feature_setting(was, now, setting)
            raise StoreConfigError(
                f"{path} was written with {attr} {was!r}, but this crawl uses {now!r} (setting {setting}). "
                f"Fingerprints made with different settings cannot be compared, so the file is not used. "
                f"Change {setting} back, or start afresh with SIMHASH_RESET = True (or -a simhash_reset=1), "
                f"or point JOBDIR / SIMHASH_DIR elsewhere.",
                setting,
            )


# ------------------------------------------------------------------ checksums
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(h: np.ndarray, x: np.ndarray) -> np.ndarray:
    """One step of the row checksum: bijective in ``h`` for a fixed ``x`` and in ``x`` for a fixed ``h``."""
    h = (h ^ x) * _M1
    h ^= h >> np.uint64(31)
    h = (h + _GOLDEN) * _M2
    return h ^ (h >> np.uint64(29))


def _string_crcs(columns: Iterable[Iterable[str]]) -> np.ndarray:
    """CRC-32 of each row's strings joined by U+001F (all in C: no Python frame per row)."""
    joined = map("\x1f".join, zip(*columns))
    encoded = map(methodcaller("encode", "utf-8", "surrogatepass"), joined)
    return np.fromiter(map(zlib.crc32, encoded), dtype=np.uint64)


def row_checksums(
    entry: np.ndarray,
    fingerprint: np.ndarray,
    exact: np.ndarray,
    canonical: np.ndarray,
    distance: np.ndarray,
    indexed: np.ndarray,
    previous: np.ndarray,
    depth: np.ndarray,
    first_seen: np.ndarray,
    last_seen: np.ndarray,
    nulls: np.ndarray,
    strings: np.ndarray,
) -> np.ndarray:
    """The checksum of each row (signed 64-bit, as stored), vectorised over rows.

    Integer arguments are int64/uint64 arrays (NULLs as the values the load
    query gives them: -1 or 0), times float64, ``strings`` the ``_string_crcs``
    of (scope, identity, url, outcome, referer, text).  Every step is
    bijective, so one changed field always changes the checksum.
    """
    h = np.full(len(entry), 0x5348_4D53, dtype=np.uint64)
    for column in (entry, fingerprint, exact, canonical, distance, indexed, previous, depth):
        h = _mix(h, np.asarray(column).astype(np.int64, copy=False).view(np.uint64))
    for column in (first_seen, last_seen):
        h = _mix(h, np.asarray(column, dtype=np.float64).view(np.uint64))
    h = _mix(h, np.asarray(nulls, dtype=np.int64).view(np.uint64))
    h = _mix(h, strings)
    return h.view(np.int64)


def _blob_checksum(name: str, data: bytes) -> int:
    return zlib.crc32(data, zlib.crc32(name.encode("utf-8", "surrogatepass") + b"\x1f"))


def _meta_checksum(meta: Mapping[str, str]) -> str:
    body = "\n".join(f"{k}={v}" for k, v in sorted(meta.items()) if k != "checksum")
    return f"{zlib.crc32(body.encode('utf-8', 'surrogatepass')):08x}"


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


# ------------------------------------------------------------------- records
@dataclass
class StoreRecord:
    """The latest version of one identity, as a row of ``pages``."""

    entry: int
    scope: str
    identity: str
    url: str
    fingerprint: int  # unsigned 64-bit
    exact: bool = False
    outcome: str = "unique"
    canonical: int | None = None  # entry of the canonical page (another identity)
    distance: int | None = None
    indexed: int | None = None  # the fingerprint in the index (canonical pages), else None
    previous: int | None = None  # the fingerprint before the latest check
    referer: str | None = None
    depth: int | None = None
    text: str | None = None
    first_seen: float = 0.0
    last_seen: float = 0.0


def _clean(text: str | None) -> str | None:
    """Text SQLite can store: lone surrogates (never in a URL or lxml's text) become U+FFFD."""
    if text is None:
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _rows(records: list[StoreRecord]) -> list[tuple[Any, ...]]:
    """The ``pages`` rows of ``records``, checksums included."""
    for r in records:
        r.scope, r.identity, r.url = _clean(r.scope) or "", _clean(r.identity) or "", _clean(r.url) or ""
        r.referer, r.text = _clean(r.referer), _clean(r.text)
        if r.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {r.outcome!r}")
    n = len(records)

    def col(name: str, none: int = 0) -> np.ndarray:
        return np.array([_signed(v) if (v := getattr(r, name)) is not None else none for r in records], dtype=np.int64)

    nulls = np.zeros(n, dtype=np.int64)
    for bit, name in enumerate(_NULL_BITS):
        nulls |= np.array([getattr(r, name) is None for r in records], dtype=np.int64) << bit
    strings = _string_crcs(
        (
            [r.scope for r in records],
            [r.identity for r in records],
            [r.url for r in records],
            [r.outcome for r in records],
            [r.referer or "" for r in records],
            [r.text or "" for r in records],
        )
    )
    first = np.array([float(r.first_seen) for r in records], dtype=np.float64)
    last = np.array([float(r.last_seen) for r in records], dtype=np.float64)
    sums = row_checksums(
        col("entry"), col("fingerprint"), col("exact"), col("canonical", -1), col("distance", -1),
        col("indexed"), col("previous"), col("depth", -1), first, last, nulls, strings,
    )  # fmt: skip
    return [
        (
            r.entry, r.scope, r.identity, r.url, _signed(r.fingerprint), int(bool(r.exact)), r.outcome,
            r.canonical, r.distance, None if r.indexed is None else _signed(r.indexed),
            None if r.previous is None else _signed(r.previous), r.referer, r.depth, r.text,
            float(r.first_seen), float(r.last_seen), int(s),
        )  # fmt: skip
        for r, s in zip(records, sums.tolist())
    ]


@dataclass
class StoreContents:
    """Every row of a store, column by column (position = entry number), checked."""

    config: StoreConfig | None
    path: str = ""
    scopes: Sequence[str] = ()
    identities: Sequence[str] = ()
    url_list: Sequence[str] = ()
    outcomes: Sequence[str] = ()
    referers: Sequence[str | None] = ()
    texts: Sequence[str | None] = ()
    fingerprints: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    exact: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    canonical: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # -1: none
    distance: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # -1: none
    indexed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))  # valid where is_indexed
    is_indexed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    previous: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))  # valid where has_previous
    has_previous: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    depth: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # -1: unknown
    first_seen: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    last_seen: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    extra: dict[str, bytes] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.url_list)

    def url(self, row: int) -> str:
        return self.url_list[row]

    def urls(self) -> list[str]:
        """Every URL, in entry order."""
        return list(self.url_list)

    def scope(self, row: int) -> str:
        return self.scopes[row]

    def referer(self, row: int) -> str | None:
        return self.referers[row]

    def text(self, row: int) -> str | None:
        return self.texts[row]


# ---------------------------------------------------------------------- files
def is_store_file(path: str | PathLike[str]) -> bool:
    """Whether ``path`` is a simhash-scrapy store (SQLite with our application id, or the old format)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(72)
    except OSError:
        return False
    if head.startswith(_OLD_MAGIC):
        return True
    return head.startswith(SQLITE_MAGIC) and len(head) >= 72 and int.from_bytes(head[68:72], "big") == APPLICATION_ID


def _side_files(path: Path) -> list[Path]:
    return [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal")]


# ------------------------------------------------------------------- the WAL
# SQLite replays a WAL up to its first frame with a bad checksum and ignores the rest: right for
# a torn last write, silent loss of committed pages when a bit flips in an earlier frame.  So the
# WAL is checked first (format: https://www.sqlite.org/fileformat2.html#walformat): frames of
# this WAL generation (its salts) found after a bad one mean committed data would be dropped.
_WAL_HEADER = struct.Struct(">IIIIIIII")
_WAL_FRAME = struct.Struct(">IIIIII")
_WAL_MAGIC = (0x377F0682, 0x377F0683)
_A = np.array([[1, 1], [1, 2]], dtype=np.uint64)  # (s0, s1) -> after one pair of words
_B = np.array([[1, 0], [1, 1]], dtype=np.uint64)
_MASK32 = np.uint64(0xFFFFFFFF)


def _matpow_table(count: int) -> tuple[np.ndarray, np.ndarray]:
    """``A^j B`` for j = 0..count-1 and ``A^count`` (mod 2^32): a frame of ``count`` word pairs."""
    table = np.empty((count, 2, 2), dtype=np.uint64)
    power = np.eye(2, dtype=np.uint64)
    for j in range(count):
        table[j] = (power @ _B) & _MASK32
        power = (_A @ power) & _MASK32
    return table, power


def _wal_checksums(words: np.ndarray, start: tuple[int, int], table: np.ndarray, power: np.ndarray) -> list[tuple[int, int]]:
    """SQLite's cumulative WAL checksum after each frame; ``words`` is (frames, pairs, 2) uint32.

    The checksum is linear (s0 += x0 + s1; s1 += x1 + s0, mod 2^32), so each frame's part is one
    vectorised sum and only the chaining from frame to frame is a Python loop.
    """
    parts = np.einsum("kij,fkj->fi", table[::-1], words.astype(np.uint64)) & _MASK32
    out = []
    s = np.array(start, dtype=np.uint64)
    for part in parts:
        s = ((power @ s) + part) & _MASK32
        out.append((int(s[0]), int(s[1])))
    return out


def check_wal(path: str | PathLike[str]) -> None:
    """Raise ``StoreError`` if the store's WAL is damaged before its end (a torn end is fine)."""
    wal = Path(str(path) + "-wal")
    try:
        data = wal.read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"{wal}: cannot read the store's WAL: {exc.strerror or exc}") from None
    if len(data) < _WAL_HEADER.size:
        return  # nothing was committed through it
    magic, _version, page_size, _seq, salt1, salt2, c1, c2 = _WAL_HEADER.unpack_from(data)
    frame_size = _WAL_FRAME.size + page_size
    frames = (len(data) - _WAL_HEADER.size) // frame_size if page_size else 0
    order = ">u4" if magic == 0x377F0683 else "<u4"
    header_ok = magic in _WAL_MAGIC and 512 <= page_size <= 65536 and page_size & (page_size - 1) == 0
    if header_ok:
        head = np.frombuffer(data, dtype=order, count=6).reshape(1, 3, 2)
        table, power = _matpow_table(3)
        header_ok = _wal_checksums(head, (0, 0), table, power)[-1] == (c1, c2)
    if not header_ok:
        if len(data) > _WAL_HEADER.size:
            raise StoreError(
                f"{wal}: the store's WAL header is corrupt; SQLite would silently ignore the changes it holds. "
                f"{_RESET_HINT}"
            )
        return
    if not frames:
        return
    body = np.frombuffer(data, dtype=np.uint8, count=frames * frame_size, offset=_WAL_HEADER.size).reshape(frames, frame_size)
    heads = body[:, : _WAL_FRAME.size].copy().view(">u4").reshape(frames, 6)
    same_salt = (heads[:, 2] == salt1) & (heads[:, 3] == salt2)
    words = np.concatenate([body[:, :8], body[:, _WAL_FRAME.size :]], axis=1).copy().view(order).reshape(frames, -1, 2)
    table, power = _matpow_table(words.shape[1])
    sums = _wal_checksums(words, (c1, c2), table, power)
    # SQLite's rule: a frame is valid if its salts match and its checksum is the running one.
    bad = next((i for i in range(frames) if not same_salt[i] or sums[i] != (int(heads[i, 4]), int(heads[i, 5]))), frames)
    later = int(np.count_nonzero(same_salt[bad + 1 :]))
    if later:
        raise StoreError(
            f"{wal}: frame {bad} of the store's WAL is corrupt, and {later} later frames of this WAL would be "
            f"silently dropped with it. {_RESET_HINT}"
        )
    # A last transaction without its commit frame (or with a damaged one): SQLite drops it; say so.
    commits = np.flatnonzero(heads[:bad, 1] != 0)
    kept = int(commits[-1]) + 1 if len(commits) else 0
    torn = int(np.count_nonzero(same_salt[kept:])) if bad == frames else int(np.count_nonzero(same_salt[kept : bad + 1]))
    partial = (len(data) - _WAL_HEADER.size) % frame_size
    if torn or (partial and kept == frames):
        logger.warning(
            "%s: dropped the store's last transaction, which a crash or a forced shutdown left incomplete "
            "(%d frames of the WAL after its last complete commit); the pages checked in that last flush "
            "interval are not in the store",
            wal,
            torn,
        )


def _connect(path: Path) -> sqlite3.Connection:
    try:
        with open(path, "rb") as handle:
            head = handle.read(16)
    except FileNotFoundError:
        head = b""
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the simhash store: {exc.strerror or exc}") from None
    if head.startswith(_OLD_MAGIC):
        raise StoreError(
            f"{path}: store format version 1 (an older simhash-scrapy); this version reads format "
            f"{FORMAT_VERSION} (SQLite). Start afresh with SIMHASH_RESET = True (or -a simhash_reset=1); "
            f"the old file is kept as <name>.previous."
        )
    if head and not SQLITE_MAGIC.startswith(head[:16]):
        raise StoreError(f"{path}: not a simhash-scrapy store (not an SQLite file). {_RESET_HINT}")
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
    except (sqlite3.DatabaseError, UnicodeError) as exc:
        db.close()
        raise StoreError(f"{path}: not a readable simhash-scrapy store ({exc}). {_RESET_HINT}") from None
    return db


def _fail(path: object, what: str) -> StoreError:
    return StoreError(f"{path}: {what}. {_RESET_HINT}")


def _read_meta(db: sqlite3.Connection, path: object) -> tuple[StoreConfig, int] | None:
    """The store's settings and page count; ``None`` for a database without simhash tables."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        return None
    (app,) = db.execute("PRAGMA application_id").fetchone()
    (version,) = db.execute("PRAGMA user_version").fetchone()
    if app != APPLICATION_ID or not {"simhash_meta", "pages", "extra"} <= tables:
        if app == APPLICATION_ID:
            raise _fail(path, f"corrupt simhash store (tables missing: {sorted({'simhash_meta', 'pages', 'extra'} - tables)})")
        raise StoreError(f"{path}: not a simhash-scrapy store (an SQLite database of another program)")
    if version != FORMAT_VERSION:
        raise StoreError(
            f"{path}: store format version {version}; this version of simhash-scrapy reads version "
            f"{FORMAT_VERSION}. Start afresh with SIMHASH_RESET = True (or -a simhash_reset=1)."
        )
    rows = db.execute("SELECT key, value FROM simhash_meta").fetchall()
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in rows):
        raise _fail(path, "corrupt store header (simhash_meta holds a value of the wrong type)")
    meta = dict(rows)
    if meta.get("checksum") != _meta_checksum(meta):
        raise _fail(path, "corrupt store header (simhash_meta checksum mismatch)")
    try:
        config = StoreConfig(int(meta["max_distance"]), int(meta["blocks"]), meta["features"], meta["text_mode"])
        pages = int(meta["pages"])
        widths = [int(w) for w in meta["block_widths"].split(",")]
    except (KeyError, ValueError) as exc:
        raise _fail(path, f"corrupt store header ({exc})") from None
    if widths != block_widths(config.blocks):
        raise StoreError(f"{path}: block layout {widths} is not the layout this version uses")
    return config, pages


def _quick_check(db: sqlite3.Connection, path: object) -> None:
    problems = [row[0] for row in db.execute("PRAGMA quick_check(5)")]
    if problems != ["ok"]:
        raise _fail(path, "corrupt SQLite file (PRAGMA quick_check: " + "; ".join(map(str, problems)) + ")")


def _locate_bad_row(db: sqlite3.Connection, path: object, why: str) -> StoreError:
    """The first row whose text SQLite cannot give as UTF-8, found one row at a time (only after a failure)."""
    db.text_factory = bytes
    expected = 0
    try:
        for row in db.execute(_LOAD):
            entry = row[0] if isinstance(row[0], int) else expected
            for value in (row[1], row[2], row[3], row[6], row[11], row[13]):
                try:
                    value.decode("utf-8")
                except (UnicodeDecodeError, AttributeError):
                    return _fail(path, f"corrupt record #{entry} (a text field is not valid UTF-8)")
            expected = entry + 1
    except sqlite3.DatabaseError as exc:
        return _fail(path, f"corrupt SQLite file after record #{expected - 1} ({exc})")
    finally:
        db.text_factory = str
    return _fail(path, f"corrupt store ({why})")


def _typed(column: tuple[Any, ...], kind: type, path: object, name: str) -> np.ndarray:
    """``column`` as an int64 or float64 array; any value of another type is a corrupt record."""
    array = np.array(column)
    if array.dtype != (np.int64 if kind is int else np.float64):
        row = next((i for i, v in enumerate(column) if type(v) is not kind), 0)
        raise _fail(path, f"corrupt record #{row} ({name} is {type(column[row]).__name__}, not {kind.__name__})")
    return array


def _load(db: sqlite3.Connection, path: object, config: StoreConfig, count: int) -> StoreContents:
    """Every row, checked: types, UTF-8, ranges, entry numbers, count and checksums."""
    enabled = gc.isenabled()
    gc.disable()  # a million rows of tuples: the cyclic collector would only slow this down
    try:
        try:
            rows = db.execute(_LOAD).fetchall()
        except sqlite3.OperationalError as exc:  # "Could not decode to UTF-8 column ..."
            raise _locate_bad_row(db, path, str(exc)) from None
        except sqlite3.DatabaseError as exc:
            raise _fail(path, f"corrupt SQLite file ({exc})") from None
        n = len(rows)
        cols = list(zip(*rows)) if n else [()] * 18
        del rows
    finally:
        if enabled:
            gc.enable()
    if n != count:
        raise _fail(path, f"the store holds {n} pages but its header says {count} (pages are missing or extra)")
    contents = StoreContents(config=config, path=str(path))
    if not n:
        return contents
    entry = _typed(cols[0], int, path, "entry")
    if not np.array_equal(entry, np.arange(n)):
        first = int(np.flatnonzero(entry != np.arange(n))[0])
        raise _fail(path, f"corrupt record #{first} (entry numbers are not 0..{n - 1}: found {int(entry[first])})")
    names = ("fingerprint", "exact", "canonical", "distance", "indexed", "previous", "depth")
    fps, exact, canonical, distance, indexed, previous, depth = (
        _typed(cols[i], int, path, name) for i, name in zip((4, 5, 7, 8, 9, 10, 12), names)
    )
    first_seen = _typed(cols[14], float, path, "first_seen")
    last_seen = _typed(cols[15], float, path, "last_seen")
    stored = _typed(cols[16], int, path, "checksum")
    nulls = _typed(cols[17], int, path, "NULL mask")
    scopes, identities, urls, outcomes, referers, texts = cols[1], cols[2], cols[3], cols[6], cols[11], cols[13]
    try:
        strings = _string_crcs((scopes, identities, urls, outcomes, referers, texts))
    except TypeError:  # a text field read back as a number or a blob
        for column in (scopes, identities, urls, outcomes, referers, texts):
            for row, value in enumerate(column):
                if type(value) is not str:
                    raise _fail(path, f"corrupt record #{row} (a text field is {type(value).__name__})") from None
        raise
    sums = row_checksums(
        entry, fps, exact, canonical, distance, indexed, previous, depth, first_seen, last_seen, nulls, strings
    )
    bad = sums != stored
    if bad.any():
        raise _fail(path, f"corrupt record #{int(np.flatnonzero(bad)[0])} (checksum mismatch)")
    # Ranges (a row with a valid checksum was written so; these guard what the checksum cannot see).
    rows_ = np.arange(n)
    has_canonical = (nulls & 1) == 0
    problems = [
        ((exact != 0) & (exact != 1), "exact is not 0 or 1"),
        (has_canonical & ((canonical < 0) | (canonical >= n) | (canonical == rows_)), "its canonical page is not another record"),
        (has_canonical != ((nulls & 2) == 0), "canonical and distance disagree"),
        (has_canonical & ((distance < 0) | (distance > 64)), "distance out of range"),
        (~np.isfinite(first_seen) | ~np.isfinite(last_seen), "time is not a number"),
        (((nulls & 64) == 0) & (depth < 0), "negative depth"),
    ]
    for mask, why in problems:
        if mask.any():
            raise _fail(path, f"corrupt record #{int(np.flatnonzero(mask)[0])} ({why})")
    known = set(OUTCOMES)
    if not set(outcomes) <= known:
        first = next(i for i, o in enumerate(outcomes) if o not in known)
        raise _fail(path, f"corrupt record #{first} (unknown outcome {outcomes[first]!r})")
    contents.scopes, contents.identities, contents.url_list, contents.outcomes = scopes, identities, urls, outcomes
    ref_null, text_null = (nulls & 16) != 0, (nulls & 32) != 0
    contents.referers = [None if z else r for r, z in zip(referers, ref_null.tolist())] if ref_null.any() else referers
    contents.texts = [None if z else t for t, z in zip(texts, text_null.tolist())] if not text_null.all() else (None,) * n
    contents.fingerprints = fps.view(np.uint64)
    contents.exact = exact.astype(bool)
    contents.canonical = np.where(has_canonical, canonical, -1)
    contents.distance = np.where(has_canonical, distance, -1)
    contents.is_indexed = (nulls & 4) == 0
    contents.indexed = indexed.view(np.uint64)
    contents.has_previous = (nulls & 8) == 0
    contents.previous = previous.view(np.uint64)
    contents.depth = np.where((nulls & 64) == 0, depth, -1)
    contents.first_seen, contents.last_seen = first_seen, last_seen
    return contents


def _load_extra(db: sqlite3.Connection, path: object) -> dict[str, bytes]:
    extra: dict[str, bytes] = {}
    for name, data, checksum in db.execute("SELECT name, data, checksum FROM extra"):
        if not isinstance(name, str) or not isinstance(data, bytes) or checksum != _blob_checksum(name, data):
            raise _fail(path, f"corrupt extra record {name!r} (checksum mismatch)")
        extra[name] = data
    return extra


def _read(db: sqlite3.Connection, path: Path) -> StoreContents:
    """Header, pages and extras of an open store, all checked (``config=None``: no simhash tables yet)."""
    try:
        _quick_check(db, path)  # first: a damaged schema can hide the tables (its pages are then "never used")
        found = _read_meta(db, path)
        if found is None:
            return StoreContents(config=None, path=str(path))
        contents = _load(db, path, *found)
        contents.extra = _load_extra(db, path)
    except (sqlite3.DatabaseError, UnicodeError) as exc:  # a damaged schema can hold invalid UTF-8
        raise _fail(path, f"corrupt SQLite file ({type(exc).__name__}: {exc})") from None
    return contents


def read_store(path: str | PathLike[str]) -> StoreContents:
    """Read and check a store (any configuration); raises ``StoreError`` naming the file if it is unusable.

    A store being written by a running crawl can be read (it shows the last
    commit).  Raises ``FileNotFoundError`` if the file does not exist.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(str(path))
    check_wal(path)
    db = _connect(path)
    try:
        contents = _read(db, path)
    finally:
        db.close()
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

    def open(self, reset: bool = False) -> StoreContents:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_handle = _lock(self.path)
        try:
            if reset:
                self._move_away()
            existed = self.path.exists() or any(p.exists() for p in _side_files(self.path))
            size = sum(p.stat().st_size for p in [self.path, *_side_files(self.path)] if p.exists())
            check_wal(self.path)
            db = _connect(self.path)
            try:
                contents = _read(db, self.path)
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
                    if not len(contents):
                        self.empty_file = True
                        logger.warning("%s holds no pages yet (a store with its header only)", self.path)
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

    def _create(self, db: sqlite3.Connection) -> None:
        meta = {**self.config.meta(), "pages": "0"}
        meta["checksum"] = _meta_checksum(meta)
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
            for statement in filter(str.strip, _SCHEMA.split(";")):
                db.execute(statement)
            db.executemany("INSERT INTO simhash_meta (key, value) VALUES (?, ?)", sorted(meta.items()))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

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

    def flush(self) -> None:
        """Commit every record put since the last commit in one transaction."""
        db = self._require()
        if not self._pending:
            return
        records = list(self._pending.values())
        rows = _rows(records)
        meta = dict(db.execute("SELECT key, value FROM simhash_meta").fetchall())
        meta["pages"] = str(self.count)
        meta["checksum"] = _meta_checksum(meta)
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany(_INSERT, rows)
            db.executemany(
                "UPDATE simhash_meta SET value = ? WHERE key = ?", [(meta["pages"], "pages"), (meta["checksum"], "checksum")]
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._pending = {}

    def save_extra(self, name: str, data: bytes) -> None:
        """Keep a named blob (committed at once)."""
        db = self._require()
        name = _clean(name) or ""
        data = bytes(data)
        db.execute(
            "INSERT OR REPLACE INTO extra (name, data, checksum) VALUES (?, ?, ?)",
            (name, data, _blob_checksum(name, data)),
        )

    def close(self) -> None:
        """Commit what is pending, fold the WAL into the file and release the store."""
        if self._db is None:
            return
        try:
            self.flush()
            try:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:  # only tidiness: the WAL is read back at the next open
                logger.warning("%s: cannot checkpoint the WAL: %s", self.path, exc)
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
            f"running crawl at a time."
        ) from None
    return handle


def _unlock(handle: Any) -> None:
    if handle is not None:
        handle.close()

