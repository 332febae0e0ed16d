"""The rows of a store: checksums, encoding, and the checked load (no Scrapy import).

Part of ``core.store.store`` (the file format), kept apart so each module stays readable.
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
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from itertools import chain
from operator import methodcaller
from typing import Any

import numpy as np

from ..cluster.clustering import RECORDED_OUTCOMES, identity_hash
from ..index.keytable import KEY, pack_keys, unpack_keys

__all__ = ["OUTCOMES", "StoreConfig", "StoreContents", "StoreError", "StoreRecord", "row_checksums"]

#: The outcomes a row can record (the values of ``core.cluster.clustering.RECORDED_OUTCOMES``).
OUTCOMES = tuple(outcome.value for outcome in RECORDED_OUTCOMES)

_COLUMNS = (
    "entry, scope, identity, url, fingerprint, exact, outcome, canonical, distance, indexed, previous, "
    "referer, depth, text, first_seen, last_seen, edit_keys, checksum, digest, etag, last_modified"
)
INSERT = f"INSERT OR REPLACE INTO pages ({_COLUMNS}) VALUES ({', '.join('?' * 21)})"
#: The columns format 4 added to format 3 (a format-3 store is upgraded by adding them, NULL).
FORMAT_4_COLUMNS = (("digest", "INTEGER"), ("etag", "TEXT"), ("last_modified", "TEXT"))
# The load: every field, NULLs as -1/0/'' plus a mask of which were NULL.  Column types are
# checked by numpy's type inference (a flipped bit in a record header can change a type).
LOAD = """
SELECT entry, scope, identity, url, fingerprint, exact, outcome,
       ifnull(canonical, -1), ifnull(distance, -1), ifnull(indexed, 0), ifnull(previous, 0),
       ifnull(referer, ''), ifnull(depth, -1), ifnull(text, ''), first_seen, last_seen, checksum,
       (canonical IS NULL) + 2 * (distance IS NULL) + 4 * (indexed IS NULL) + 8 * (previous IS NULL)
         + 16 * (referer IS NULL) + 32 * (text IS NULL) + 64 * (depth IS NULL) + 128 * (edit_keys IS NULL),
       ifnull(edit_keys, X''),
       ifnull(digest, 0), ifnull(etag, ''), ifnull(last_modified, ''),
       (digest IS NOT NULL) + 2 * (etag IS NOT NULL) + 4 * (last_modified IS NOT NULL)
FROM pages ORDER BY entry
"""
#: The load of a format-3 store (before its upgrade): the format-4 columns as absent.
LOAD_3 = LOAD.replace(
    "ifnull(digest, 0), ifnull(etag, ''), ifnull(last_modified, ''),\n"
    "       (digest IS NOT NULL) + 2 * (etag IS NOT NULL) + 4 * (last_modified IS NOT NULL)",
    "0, '', '', 0",
)
assert LOAD_3 != LOAD
_NULL_BITS = ("canonical", "distance", "indexed", "previous", "referer", "text", "depth", "edit_keys")
#: The format-4 fields; their mask counts the ones present, so a row without any (every row of a
#: format-3 store) has the checksum format 3 gave it.
_PRESENT_BITS = ("digest", "etag", "last_modified")

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
    mixed: np.ndarray = h ^ (h >> np.uint64(29))
    return mixed


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
    present: np.ndarray | None = None,
    digest: np.ndarray | None = None,
    validator_crcs: np.ndarray | None = None,
) -> np.ndarray:
    """The checksum of each row (signed 64-bit, as stored), vectorised over rows.

    Integer arguments are int64/uint64 arrays (NULLs as the values the load
    query gives them: -1 or 0), times float64, ``strings`` the ``_string_crcs``
    of (scope, identity, url, outcome, referer, text), ``key_crcs`` the CRC-32
    of each row's ``edit_keys`` blob; ``present`` (format 4) the mask of the
    fields ``digest``, ``etag``, ``last_modified`` a row has, ``digest`` its
    digest (0 if none) and ``validator_crcs`` the ``_string_crcs`` of (etag,
    last_modified); a row with none of them gets the checksum of format 3.
    Every step is bijective, so one changed field always changes the checksum.
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
    if present is not None and np.any(present):
        # Format 4: the digest and the validators, mixed in only where a row has any of them.
        more = _mix(_mix(_mix(h, np.asarray(present, dtype=np.int64).view(np.uint64)),
                         np.asarray(digest, dtype=np.int64).view(np.uint64)), np.asarray(validator_crcs, dtype=np.uint64))
        h = np.where(np.asarray(present) != 0, more, h)
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
    digest: int | None = None  # the content digest (unsigned 64-bit), else None
    etag: str | None = None  # the HTTP validators of the latest version, else None
    last_modified: str | None = None


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
        r.etag, r.last_modified = clean_text(r.etag), clean_text(r.last_modified)
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
    present = np.zeros(n, dtype=np.int64)
    for bit, name in enumerate(_PRESENT_BITS):
        present |= np.array([getattr(r, name) is not None for r in records], dtype=np.int64) << bit
    validators = _string_crcs(([r.etag or "" for r in records], [r.last_modified or "" for r in records]))
    sums = row_checksums(
        col("entry"), col("fingerprint"), col("exact"), col("canonical", -1), col("distance", -1),
        col("indexed"), col("previous"), col("depth", -1), first, last, nulls, strings,
        _blob_crcs(b or b"" for b in blobs), present, col("digest"), validators,
    )  # fmt: skip
    return [
        (
            r.entry, r.scope, r.identity, r.url, signed(r.fingerprint), int(bool(r.exact)), r.outcome,
            r.canonical, r.distance, None if r.indexed is None else signed(r.indexed),
            None if r.previous is None else signed(r.previous), r.referer, r.depth, r.text,
            r.first_seen, r.last_seen, b, int(s), None if r.digest is None else signed(r.digest), r.etag,
            r.last_modified,
        )
        for r, b, s in zip(records, blobs, sums.tolist())
    ]


@dataclass(frozen=True)
class StoreConfig:
    """What a fingerprint in the store depends on; a store is only read back with the same values
    (``store.config_meta`` writes them, ``store.check_config`` compares them)."""

    max_distance: int
    blocks: int
    features: str  # FeatureConfig.signature()
    text_mode: str  # e.g. "visible" or "main_content"

    def __post_init__(self) -> None:
        if not (0 <= self.max_distance <= 63 and 1 <= self.blocks <= 64):
            raise ValueError(f"need 0 <= max_distance <= 63 and 1 <= blocks <= 64, got {self.max_distance}, {self.blocks}")


@dataclass
class StoreContents:
    """Every row of a store, column by column (position = entry number), checked."""

    config: StoreConfig | None
    path: str = ""
    #: The store's format version as read (3, 4 and 5: upgraded to 6 when a crawl opens it).
    version: int = 6
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
    #: The same keys packed (``keytable.KEY``), b"" for none.
    packed_keys: Sequence[bytes] = ()
    #: ``clustering.identity_hash`` of each record's scope and key (identity, or else URL).
    key_hashes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    #: Content digests (``None``: unknown, e.g. rows of a format-3 store) and HTTP validators.
    digests: Sequence[int | None] = ()
    etags: Sequence[str | None] = ()
    last_modified: Sequence[str | None] = ()
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


#: The numeric columns of ``Columns`` and their types in a chunk (little-endian; ``core.store.store_chunks``).
NUMERIC_COLUMNS = (
    ("key_hash", "<u8"), ("fingerprint", "<u8"), ("indexed", "<u8"), ("previous", "<u8"), ("digest", "<u8"),
    ("canonical", "<i8"), ("depth", "<i8"), ("first_seen", "<f8"), ("last_seen", "<f8"),
    ("distance", "i1"), ("exact", "u1"), ("outcome", "u1"), ("nulls", "u1"), ("present", "u1"),
)  # fmt: skip
#: Its text columns besides the scope.
TEXT_COLUMNS = ("identity", "url", "referer", "text", "etag", "last_modified")
_CODES = {name: code for code, name in enumerate(OUTCOMES)}


@dataclass
class Columns:
    """Records column by column, NULLs as the row load gives them (-1, 0 or ''), with their masks.

    ``nulls``: bits of ``store_rows._NULL_BITS``; ``present``: bits of ``store_rows._PRESENT_BITS``;
    ``outcome``: codes (positions in ``OUTCOMES``); ``edit_keys``: packed (``KEY``), b"" for none.
    """

    entry: np.ndarray
    key_hash: np.ndarray  # ``clustering.identity_hash`` of (scope, identity or else url)
    fingerprint: np.ndarray
    indexed: np.ndarray
    previous: np.ndarray
    digest: np.ndarray
    canonical: np.ndarray
    depth: np.ndarray
    first_seen: np.ndarray
    last_seen: np.ndarray
    distance: np.ndarray
    exact: np.ndarray
    outcome: np.ndarray
    nulls: np.ndarray
    present: np.ndarray
    scope: list[str]
    identity: list[str]
    url: list[str]
    referer: list[str]
    text: list[str]
    etag: list[str]
    last_modified: list[str]
    edit_keys: list[bytes]

    def __len__(self) -> int:
        return len(self.entry)

    @classmethod
    def empty(cls) -> Columns:
        return concat([])

    def take(self, rows: np.ndarray) -> Columns:
        """The records at positions ``rows``."""
        picked = rows.tolist()
        values: dict[str, Any] = {}
        for f in fields(self):
            column = getattr(self, f.name)
            values[f.name] = column[rows] if isinstance(column, np.ndarray) else [column[i] for i in picked]
        return Columns(**values)


def concat(parts: list[Columns]) -> Columns:
    values: dict[str, Any] = {}
    for f in fields(Columns):
        if f.name in ("scope", "edit_keys", *TEXT_COLUMNS):
            column = [getattr(p, f.name) for p in parts]
            if column and all(type(c).__name__ == "TextColumn" for c in column):
                values[f.name] = type(column[0]).join(column)
            else:
                values[f.name] = list(chain.from_iterable(column))
        else:
            dtype = np.int64 if f.name == "entry" else np.dtype(dict(NUMERIC_COLUMNS)[f.name]).newbyteorder("=")
            values[f.name] = (
                np.concatenate([getattr(p, f.name) for p in parts]).astype(dtype, copy=False)
                if parts else np.zeros(0, dtype=dtype)
            )  # fmt: skip
    return Columns(**values)


def outcome_codes(outcomes: list[str], path: object) -> np.ndarray:
    """Outcome names (rows of ``pages``) as codes; an unknown name is a corrupt record."""
    try:
        return np.fromiter(map(_CODES.__getitem__, outcomes), dtype=np.uint8, count=len(outcomes))
    except KeyError:
        first = next(i for i, o in enumerate(outcomes) if o not in _CODES)
        raise fail(path, f"corrupt record #{first} (unknown outcome {outcomes[first]!r})") from None


def outcome_names(codes: np.ndarray) -> list[str]:
    names: list[str] = np.array(OUTCOMES, dtype=object)[codes].tolist()
    return names


def _locate_bad_row(db: sqlite3.Connection, path: object, why: str, version: int = 4) -> StoreError:
    """The first row whose text SQLite cannot give as UTF-8, found one row at a time (only after a failure)."""
    db.text_factory = bytes
    expected = 0
    try:
        for row in db.execute(LOAD if version != 3 else LOAD_3):
            entry = row[0] if isinstance(row[0], int) else expected
            for value in (row[1], row[2], row[3], row[6], row[11], row[13], row[20], row[21]):
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


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic collector off meanwhile: a load makes millions of objects and no cycle."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _fetch_columns(db: sqlite3.Connection, query: str, path: object, version: int) -> list[tuple[Any, ...]]:
    """``read_rows``: the rows of ``query`` column by column ([] when there are none); ``StoreError`` naming
    the row SQLite cannot decode, or the file when SQLite finds it corrupt."""
    enabled = gc.isenabled()
    gc.disable()  # a million rows of tuples: the cyclic collector would only slow this down
    try:
        try:
            rows = db.execute(query).fetchall()
        except sqlite3.OperationalError as exc:  # "Could not decode to UTF-8 column ..."
            raise _locate_bad_row(db, path, str(exc), version) from None
        except sqlite3.DatabaseError as exc:
            raise fail(path, f"corrupt SQLite file ({exc})") from None
        cols = list(zip(*rows))
        del rows
        return cols
    finally:
        if enabled:
            gc.enable()


def read_rows(db: sqlite3.Connection, path: object, version: int = 4, where: str = "") -> Columns:
    """The rows of ``pages`` (``where``: an SQL condition on ``entry``), checked: types, UTF-8, checksums.

    ``version``: the format (3: the format-4 columns as absent).  In format 5 the rows are the
    records written since the last fold into chunks (``core.store.store_chunks``), any entries.
    """
    query = LOAD_3 if version == 3 else LOAD
    if where:
        query = query.replace("FROM pages ORDER BY entry", f"FROM pages WHERE {where} ORDER BY entry")
    cols = _fetch_columns(db, query, path, version)
    if not cols:
        return Columns.empty()
    entry = _typed(cols[0], int, path, "entry")
    if (len(entry) > 1 and not bool(np.all(entry[1:] > entry[:-1]))) or int(entry[0]) < 0:
        first = int(np.flatnonzero(np.diff(entry) <= 0)[0]) + 1 if int(entry[0]) >= 0 else 0
        raise fail(path, f"corrupt record #{first} (entry numbers out of order: found {int(entry[first])})")
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
                    raise fail(path, f"corrupt record #{int(entry[row])} (a text field is {type(value).__name__})") from None
        raise
    blobs = cols[18]
    if not all(type(b) is bytes for b in blobs):
        row = next(i for i, b in enumerate(blobs) if type(b) is not bytes)
        raise fail(path, f"corrupt record #{int(entry[row])} (edit_keys is {type(blobs[row]).__name__}, not a blob)")
    digests = _typed(cols[19], int, path, "digest")
    present = _typed(cols[22], int, path, "format-4 mask")
    etags, modified = cols[20], cols[21]
    try:
        validators = _string_crcs((etags, modified))
    except TypeError:
        row = next(i for i, (a, b) in enumerate(zip(etags, modified)) if type(a) is not str or type(b) is not str)
        raise fail(path, f"corrupt record #{int(entry[row])} (a validator is not text)") from None
    sums = row_checksums(
        entry, fps, exact, canonical, distance, indexed, previous, depth, first_seen, last_seen, nulls, strings,
        _blob_crcs(blobs), present, digests, validators,
    )  # fmt: skip
    bad = sums != stored
    if bad.any():
        raise fail(path, f"corrupt record #{int(entry[np.flatnonzero(bad)[0]])} (checksum mismatch)")
    for values_of, name, low, high in ((distance, "distance", -1, 64), (exact, "exact", 0, 1), (nulls, "NULL mask", 0, 255),
                                       (present, "format-4 mask", 0, 7)):  # fmt: skip
        out = (values_of < low) | (values_of > high)
        if out.any():
            raise fail(path, f"corrupt record #{int(entry[np.flatnonzero(out)[0]])} ({name} out of range)")
    return Columns(
        entry=entry, key_hash=key_hashes(scopes, identities, urls), fingerprint=fps.view(np.uint64), indexed=indexed.view(np.uint64),
        previous=previous.view(np.uint64), digest=digests.view(np.uint64), canonical=canonical, depth=depth,
        first_seen=first_seen, last_seen=last_seen, distance=distance.astype(np.int8), exact=exact.astype(np.uint8),
        outcome=outcome_codes(list(outcomes), path), nulls=nulls.astype(np.uint8), present=present.astype(np.uint8),
        scope=list(scopes), identity=list(identities), url=list(urls), referer=list(referers), text=list(texts),
        etag=list(etags), last_modified=list(modified), edit_keys=list(blobs),
    )  # fmt: skip


def key_hashes(scopes: Sequence[str], identities: Sequence[str], urls: Sequence[str]) -> np.ndarray:
    """``clustering.identity_hash`` of each record's scope and key (its identity, or else its URL)."""
    return np.fromiter(
        (identity_hash(s, i or u) for s, i, u in zip(scopes, identities, urls)), dtype=np.uint64, count=len(scopes)
    )


def contents_from(c: Columns, config: StoreConfig, path: object, version: int) -> StoreContents:
    """Every record of a store (entries 0..n-1, in order) checked for what no checksum sees, as ``StoreContents``."""
    n = len(c)
    contents = StoreContents(config=config, path=str(path), version=version)
    if not n:
        return contents
    nulls = c.nulls.astype(np.int64)
    exact, canonical, distance, depth = c.exact, c.canonical, c.distance.astype(np.int64), c.depth
    first_seen, last_seen = c.first_seen, c.last_seen
    # Ranges (a record with a valid checksum was written so; these guard what the checksum cannot see).
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
        sizes = np.fromiter(map(len, c.edit_keys), dtype=np.int64, count=n)
        problems += [
            (has_keys & ((sizes == 0) | (sizes % KEY.itemsize != 0)), "edit_keys is not a list of 64-bit keys"),
            (has_keys & (((nulls & 4) != 0) | (exact != 0)), "edit_keys on a page that is not a canonical simhash page"),
            (~has_keys & (sizes != 0), "edit_keys on a page without them"),
        ]
    for mask, why in problems:
        if mask.any():
            raise fail(path, f"corrupt record #{int(np.flatnonzero(mask)[0])} ({why})")
    contents.scopes, contents.identities, contents.url_list = c.scope, c.identity, c.url
    contents.outcomes = outcome_names(c.outcome)
    ref_null, text_null = (nulls & 16) != 0, (nulls & 32) != 0
    contents.referers = _with_nones(c.referer, ref_null)
    contents.texts = _with_nones(c.text, text_null) if not text_null.all() else (None,) * n
    contents.fingerprints = c.fingerprint
    contents.key_hashes = c.key_hash
    contents.exact = exact.astype(bool)
    contents.canonical = np.where(has_canonical, canonical, -1)
    contents.distance = np.where(has_canonical, distance, -1)
    contents.is_indexed = (nulls & 4) == 0
    contents.indexed = c.indexed
    contents.has_previous = (nulls & 8) == 0
    contents.previous = c.previous
    contents.depth = np.where((nulls & 64) == 0, depth, -1)
    contents.first_seen, contents.last_seen = first_seen, last_seen
    contents.packed_keys = c.edit_keys
    if has_keys.any():
        contents.edit_keys = [unpack_keys(b) for b in c.edit_keys]
    else:
        contents.edit_keys = ((),) * n
    present = c.present
    if (present & 1).all():
        contents.digests = c.digest.tolist()
    elif not (present & 1).any():
        contents.digests = [None] * n
    else:
        digests = np.array(c.digest.tolist(), dtype=object)
        digests[(present & 1) == 0] = None
        contents.digests = digests.tolist()
    contents.etags = _with_nones(c.etag, (present & 2) == 0) if (present & 2).any() else [None] * n
    contents.last_modified = _with_nones(c.last_modified, (present & 4) == 0) if (present & 4).any() else [None] * n
    return contents


def _with_nones(column: Sequence[str], nones: np.ndarray) -> Sequence[str | None]:
    """``column`` with ``None`` where ``nones`` (a chunk's ``TextColumn`` stays undecoded)."""
    if not nones.any():
        return column
    with_nones = getattr(column, "with_nones", None)
    if with_nones is not None:
        return with_nones(nones)  # type: ignore[no-any-return]
    return [None if z else v for v, z in zip(column, nones.tolist())]


def load_extra(db: sqlite3.Connection, path: object) -> dict[str, bytes]:
    extra: dict[str, bytes] = {}
    for name, data, checksum in db.execute("SELECT name, data, checksum FROM extra"):
        if not isinstance(name, str) or not isinstance(data, bytes) or checksum != blob_checksum(name, data):
            raise fail(path, f"corrupt extra record {name!r} (checksum mismatch)")
        extra[name] = data
    return extra
