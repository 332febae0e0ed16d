"""The rows of a store: checksums, encoding, and the checked load (no Scrapy import).

Part of ``core.store`` (the file format), kept apart so each module stays readable.
Every row of ``pages`` carries a 64-bit checksum over all its fields
(``row_checksums``: CRC-32 of its strings, mixed with its numbers by bijective
steps, so one changed field always changes it), computed for a batch of rows at
once with numpy, and verified for every row at load together with the column
types, the value ranges and the entry numbers (``load_rows``).
"""

from __future__ import annotations

import gc
import math
import sqlite3
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import methodcaller
from typing import TYPE_CHECKING, Any

import numpy as np

from .keytable import KEY, pack_keys, unpack_keys

if TYPE_CHECKING:
    from .store import StoreConfig

__all__ = ["OUTCOMES", "StoreContents", "StoreError", "StoreRecord", "row_checksums"]

#: The outcomes a row can record (``core.clustering.Outcome`` values).
OUTCOMES = ("unique", "near_duplicate", "unchanged", "changed")

_COLUMNS = (
    "entry, scope, identity, url, fingerprint, exact, outcome, canonical, distance, indexed, previous, "
    "referer, depth, text, first_seen, last_seen, edit_keys, checksum"
)
INSERT = f"INSERT OR REPLACE INTO pages ({_COLUMNS}) VALUES ({', '.join('?' * 18)})"
# The load: every field, NULLs as -1/0/'' plus a mask of which were NULL.  Column types are
# checked by numpy's type inference (a flipped bit in a record header can change a type).
LOAD = """
SELECT entry, scope, identity, url, fingerprint, exact, outcome,
       ifnull(canonical, -1), ifnull(distance, -1), ifnull(indexed, 0), ifnull(previous, 0),
       ifnull(referer, ''), ifnull(depth, -1), ifnull(text, ''), first_seen, last_seen, checksum,
       (canonical IS NULL) + 2 * (distance IS NULL) + 4 * (indexed IS NULL) + 8 * (previous IS NULL)
         + 16 * (referer IS NULL) + 32 * (text IS NULL) + 64 * (depth IS NULL) + 128 * (edit_keys IS NULL),
       ifnull(edit_keys, X'')
FROM pages ORDER BY entry
"""
_NULL_BITS = ("canonical", "distance", "indexed", "previous", "referer", "text", "depth", "edit_keys")

RESET_HINT = (
    "The file was not changed. Move it away to keep it, or start afresh with SIMHASH_RESET = True "
    "(or -a simhash_reset=1; the old file is kept as <name>.previous)."
)


class StoreError(ValueError):
    """A store cannot be used (corrupt, locked, not a store, unknown format); the message names the file."""


def fail(path: object, what: str) -> StoreError:
    """A ``StoreError`` naming the file, saying it was left as it is."""
    return StoreError(f"{path}: {what}. {RESET_HINT}")


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
    key_crcs: np.ndarray,
) -> np.ndarray:
    """The checksum of each row (signed 64-bit, as stored), vectorised over rows.

    Integer arguments are int64/uint64 arrays (NULLs as the values the load
    query gives them: -1 or 0), times float64, ``strings`` the ``_string_crcs``
    of (scope, identity, url, outcome, referer, text), ``key_crcs`` the CRC-32
    of each row's ``edit_keys`` blob.  Every step is bijective, so one changed
    field always changes the checksum.
    """
    h = np.full(len(entry), 0x5348_4D53, dtype=np.uint64)
    for column in (entry, fingerprint, exact, canonical, distance, indexed, previous, depth):
        h = _mix(h, np.asarray(column).astype(np.int64, copy=False).view(np.uint64))
    for column in (first_seen, last_seen):
        # + 0.0 turns -0.0 into 0.0: SQLite stores an integral REAL as an integer and reads back 0.0.
        h = _mix(h, (np.asarray(column, dtype=np.float64) + 0.0).view(np.uint64))
    h = _mix(h, np.asarray(nulls, dtype=np.int64).view(np.uint64))
    h = _mix(h, strings)
    h = _mix(h, np.asarray(key_crcs, dtype=np.uint64))
    return h.view(np.int64)


def _blob_crcs(blobs: Iterable[bytes]) -> np.ndarray:
    return np.fromiter(map(zlib.crc32, blobs), dtype=np.uint64)


def blob_checksum(name: str, data: bytes) -> int:
    return zlib.crc32(data, zlib.crc32(name.encode("utf-8", "surrogatepass") + b"\x1f"))


def signed(value: int) -> int:
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
    #: The one-edit keys in the index (canonical pages of a few dozen tokens), else empty.
    edit_keys: tuple[int, ...] = ()


def clean_text(text: str | None) -> str | None:
    """Text SQLite can store: lone surrogates (never in a URL or lxml's text) become U+FFFD."""
    if text is None:
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def encode_rows(records: list[StoreRecord]) -> list[tuple[Any, ...]]:
    """The ``pages`` rows of ``records``, checksums included."""
    for r in records:
        r.scope, r.identity, r.url = clean_text(r.scope) or "", clean_text(r.identity) or "", clean_text(r.url) or ""
        r.referer, r.text = clean_text(r.referer), clean_text(r.text)
        if r.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {r.outcome!r}")
    n = len(records)

    def col(name: str, none: int = 0) -> np.ndarray:
        return np.array([signed(v) if (v := getattr(r, name)) is not None else none for r in records], dtype=np.int64)

    nulls = np.zeros(n, dtype=np.int64)
    for bit, name in enumerate(_NULL_BITS):
        # edit_keys: () is stored as NULL
        missing = [not r.edit_keys if name == "edit_keys" else getattr(r, name) is None for r in records]
        nulls |= np.array(missing, dtype=np.int64) << bit
    blobs = [pack_keys(r.edit_keys) if r.edit_keys else None for r in records]
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
    for r in records:  # SQLite stores NaN as NULL and -0.0 as 0.0: the checksum must see what is read back
        r.first_seen = float(r.first_seen) + 0.0 if math.isfinite(r.first_seen) else 0.0
        r.last_seen = float(r.last_seen) + 0.0 if math.isfinite(r.last_seen) else 0.0
    first = np.array([r.first_seen for r in records], dtype=np.float64)
    last = np.array([r.last_seen for r in records], dtype=np.float64)
    sums = row_checksums(
        col("entry"), col("fingerprint"), col("exact"), col("canonical", -1), col("distance", -1),
        col("indexed"), col("previous"), col("depth", -1), first, last, nulls, strings,
        _blob_crcs(b or b"" for b in blobs),
    )  # fmt: skip
    return [
        (
            r.entry, r.scope, r.identity, r.url, signed(r.fingerprint), int(bool(r.exact)), r.outcome,
            r.canonical, r.distance, None if r.indexed is None else signed(r.indexed),
            None if r.previous is None else signed(r.previous), r.referer, r.depth, r.text,
            r.first_seen, r.last_seen, b, int(s),
        )  # fmt: skip
        for r, b, s in zip(records, blobs, sums.tolist())
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
    #: The one-edit keys each row has in the index (canonical pages of a few dozen tokens), else ().
    edit_keys: Sequence[tuple[int, ...]] = ()
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


def _locate_bad_row(db: sqlite3.Connection, path: object, why: str) -> StoreError:
    """The first row whose text SQLite cannot give as UTF-8, found one row at a time (only after a failure)."""
    db.text_factory = bytes
    expected = 0
    try:
        for row in db.execute(LOAD):
            entry = row[0] if isinstance(row[0], int) else expected
            for value in (row[1], row[2], row[3], row[6], row[11], row[13]):
                try:
                    value.decode("utf-8")
                except (UnicodeDecodeError, AttributeError):
                    return fail(path, f"corrupt record #{entry} (a text field is not valid UTF-8)")
            expected = entry + 1
    except sqlite3.DatabaseError as exc:
        return fail(path, f"corrupt SQLite file after record #{expected - 1} ({exc})")
    finally:
        db.text_factory = str
    return fail(path, f"corrupt store ({why})")


def _typed(column: tuple[Any, ...], kind: type, path: object, name: str) -> np.ndarray:
    """``column`` as an int64 or float64 array; any value of another type is a corrupt record."""
    array = np.array(column)
    if array.dtype != (np.int64 if kind is int else np.float64):
        row = next((i for i, v in enumerate(column) if type(v) is not kind), 0)
        raise fail(path, f"corrupt record #{row} ({name} is {type(column[row]).__name__}, not {kind.__name__})")
    return array


def load_rows(db: sqlite3.Connection, path: object, config: StoreConfig, count: int) -> StoreContents:
    """Every row, checked: types, UTF-8, ranges, entry numbers, count and checksums."""
    enabled = gc.isenabled()
    gc.disable()  # a million rows of tuples: the cyclic collector would only slow this down
    try:
        try:
            rows = db.execute(LOAD).fetchall()
        except sqlite3.OperationalError as exc:  # "Could not decode to UTF-8 column ..."
            raise _locate_bad_row(db, path, str(exc)) from None
        except sqlite3.DatabaseError as exc:
            raise fail(path, f"corrupt SQLite file ({exc})") from None
        n = len(rows)
        cols = list(zip(*rows)) if n else [()] * 19
        del rows
    finally:
        if enabled:
            gc.enable()
    if n != count:
        raise fail(path, f"the store holds {n} pages but its header says {count} (pages are missing or extra)")
    contents = StoreContents(config=config, path=str(path))
    if not n:
        return contents
    entry = _typed(cols[0], int, path, "entry")
    if not np.array_equal(entry, np.arange(n)):
        first = int(np.flatnonzero(entry != np.arange(n))[0])
        raise fail(path, f"corrupt record #{first} (entry numbers are not 0..{n - 1}: found {int(entry[first])})")
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
                    raise fail(path, f"corrupt record #{row} (a text field is {type(value).__name__})") from None
        raise
    blobs = cols[18]
    if not all(type(b) is bytes for b in blobs):
        row = next(i for i, b in enumerate(blobs) if type(b) is not bytes)
        raise fail(path, f"corrupt record #{row} (edit_keys is {type(blobs[row]).__name__}, not a blob)")
    sums = row_checksums(
        entry, fps, exact, canonical, distance, indexed, previous, depth, first_seen, last_seen, nulls, strings,
        _blob_crcs(blobs),
    )  # fmt: skip
    bad = sums != stored
    if bad.any():
        raise fail(path, f"corrupt record #{int(np.flatnonzero(bad)[0])} (checksum mismatch)")
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
    has_keys = (nulls & 128) == 0
    if has_keys.any():
        sizes = np.fromiter(map(len, blobs), dtype=np.int64, count=n)
        problems += [
            (has_keys & ((sizes == 0) | (sizes % KEY.itemsize != 0)), "edit_keys is not a list of 64-bit keys"),
            (has_keys & (((nulls & 4) != 0) | (exact != 0)), "edit_keys on a page that is not a canonical simhash page"),
        ]
    for mask, why in problems:
        if mask.any():
            raise fail(path, f"corrupt record #{int(np.flatnonzero(mask)[0])} ({why})")
    known = set(OUTCOMES)
    if not set(outcomes) <= known:
        first = next(i for i, o in enumerate(outcomes) if o not in known)
        raise fail(path, f"corrupt record #{first} (unknown outcome {outcomes[first]!r})")
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
    if has_keys.any():
        contents.edit_keys = [unpack_keys(b) for b in blobs]
    else:
        contents.edit_keys = ((),) * n
    return contents


def load_extra(db: sqlite3.Connection, path: object) -> dict[str, bytes]:
    extra: dict[str, bytes] = {}
    for name, data, checksum in db.execute("SELECT name, data, checksum FROM extra"):
        if not isinstance(name, str) or not isinstance(data, bytes) or checksum != blob_checksum(name, data):
            raise fail(path, f"corrupt extra record {name!r} (checksum mismatch)")
        extra[name] = data
    return extra
