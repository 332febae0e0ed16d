"""Append-only binary store of fingerprinted pages (no Scrapy import).

One file per job (``JOBDIR``) or per spider (``SIMHASH_DIR``), in the spirit
of Scrapy 2.19's ``requests.seen``: a page is one buffered ``write`` of one
length-prefixed record; loading reads the file once and decodes the
fixed-size part of every record with numpy.

File layout (all integers little-endian)::

    header
      8s   magic  b"SIMHSTOR"
      u16  format version (1)
      u16  header length in bytes (everything up to and including the CRC)
      u8   k (SIMHASH_MAX_DISTANCE)
      u8   B, number of blocks (SIMHASH_BLOCKS)
      B x u8   block widths in bits, most significant block first
      u8 + bytes   feature configuration signature (FeatureConfig.signature())
      u8 + bytes   text mode (visible text or main content)
      u32  CRC-32 of the header bytes before it
    records, one per fingerprinted page
      u32  length of the rest of the record
      u32  CRC-32 of the bytes after this field
      u64  fingerprint
      u32  canonical: record number of the canonical page (0xFFFFFFFF: none,
           the page is unique)
      u8   distance to the canonical page (0xFF: none)
      u8   flags: 1 indexed (a canonical page), 2 depth known,
           4 referer known, 8 text stored
      u16  length of the scope (UTF-8 bytes)
      i32  depth
      u32  crawl time, Unix seconds
      u32  length of the URL
      u32  length of the referer
      u32  length of the text
      URL, scope, referer, text (UTF-8)

Record numbers count from 0 in file order.  A record is written complete in
one call, so after a crash only the last record can be torn: loading stops
there with a warning, and opening the file for appending cuts the torn tail
off first, so new records never follow garbage.

Finding where each record starts is the one sequential step of a load.  So
that a resumed crawl does not walk a million records one by one, a clean
close also writes ``<name>.offsets`` (magic, count, CRC-32, then the u32
length field of every record).  It is only a hint: a load uses it after
checking, vectorised, that every cached length is the length field found at
the offset it implies, and walks only the records appended after it (all of
them if the file is missing, stale or corrupt).
"""

from __future__ import annotations

import logging
import os
import struct
import sys
import time
import zlib
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import BinaryIO

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .index import block_widths

__all__ = [
    "FORMAT_VERSION",
    "NO_CANONICAL",
    "PageStore",
    "StoreConfig",
    "StoreConfigError",
    "StoreContents",
    "StoreError",
    "read_store",
]

logger = logging.getLogger(__name__)

MAGIC = b"SIMHSTOR"
FORMAT_VERSION = 1
NO_CANONICAL = 0xFFFFFFFF
NO_DISTANCE = 0xFF

FLAG_INDEXED = 1
FLAG_DEPTH = 2
FLAG_REFERER = 4
FLAG_TEXT = 8

_HEAD = struct.Struct("<8sHHBB")  # magic, version, header length, k, B
_PREFIX = struct.Struct("<II")  # record length (after this u32), CRC-32
# Everything after the CRC: fixed part of a record.
_FIXED = struct.Struct("<QIBBHiIIII")
_FIXED_DTYPE = np.dtype(
    [
        ("fingerprint", "<u8"),
        ("canonical", "<u4"),
        ("distance", "u1"),
        ("flags", "u1"),
        ("scope_len", "<u2"),
        ("depth", "<i4"),
        ("time", "<u4"),
        ("url_len", "<u4"),
        ("referer_len", "<u4"),
        ("text_len", "<u4"),
    ]
)
assert _FIXED_DTYPE.itemsize == _FIXED.size == 36
_RECORD_DTYPE = np.dtype([("length", "<u4"), ("crc", "<u4"), *_FIXED_DTYPE.descr])
_RECORD_MIN = 4 + _FIXED.size  # smallest value of the length field
_MAX_FIELD = 0xFFFFFFFF
_OFFSETS_MAGIC = b"SIMHOFF1"
_OFFSETS_HEAD = struct.Struct("<8sQI")  # magic, record count, CRC-32 of the lengths

#: Default setting name of each configuration field (used in error messages).
DEFAULT_SETTING_NAMES: dict[str, str] = {
    "max_distance": "SIMHASH_MAX_DISTANCE",
    "blocks": "SIMHASH_BLOCKS",
    "features": "SIMHASH_WORD_NGRAM / SIMHASH_CHAR_NGRAM / SIMHASH_WEIGHTING / SIMHASH_CJK_NGRAM",
    "text_mode": "SIMHASH_TEXT_MODE",
}
#: Parts of ``FeatureConfig.signature()`` ("w1-c0-tf-j2") and the setting of each.
_FEATURE_PARTS = ("SIMHASH_WORD_NGRAM", "SIMHASH_CHAR_NGRAM", "SIMHASH_WEIGHTING", "SIMHASH_CJK_NGRAM")


def _feature_setting(was: str, now: str, default: str) -> str:
    """The setting behind the first differing part of two feature signatures."""
    a, b = was.split("-"), now.split("-")
    if len(a) == len(b) == len(_FEATURE_PARTS):
        for name, x, y in zip(_FEATURE_PARTS, a, b):
            if x != y:
                return name
    return default


class StoreError(ValueError):
    """A store file cannot be used (corrupt header, locked, unknown format)."""


class StoreConfigError(StoreError):
    """A store file was written with another configuration.

    ``setting`` names the setting that differs.
    """

    def __init__(self, message: str, setting: str) -> None:
        super().__init__(message)
        self.setting = setting


@dataclass(frozen=True)
class StoreConfig:
    """What a fingerprint in the file depends on; a file is only read back with the same values."""

    max_distance: int
    blocks: int
    features: str  # FeatureConfig.signature()
    text_mode: str  # e.g. "visible" or "main_content"

    def __post_init__(self) -> None:
        if not 0 <= self.max_distance < self.blocks <= 64:
            raise ValueError(f"need 0 <= max_distance < blocks <= 64, got {self.max_distance}, {self.blocks}")
        for name in ("features", "text_mode"):
            if len(getattr(self, name).encode("utf-8")) > 255:
                raise ValueError(f"{name} is longer than 255 bytes")

    def header(self) -> bytes:
        widths = bytes(block_widths(self.blocks))
        feats = self.features.encode("utf-8")
        mode = self.text_mode.encode("utf-8")
        length = _HEAD.size + len(widths) + 1 + len(feats) + 1 + len(mode) + 4
        body = (
            _HEAD.pack(MAGIC, FORMAT_VERSION, length, self.max_distance, self.blocks)
            + widths
            + bytes([len(feats)])
            + feats
            + bytes([len(mode)])
            + mode
        )
        return body + struct.pack("<I", zlib.crc32(body))


def _parse_header(data: bytes | memoryview, path: object) -> tuple[StoreConfig, int] | None:
    """``(config, header length)``, or ``None`` when the file is too short to hold a header."""
    if len(data) < _HEAD.size:
        if bytes(data[: len(MAGIC)]) != MAGIC[: len(data)]:
            raise StoreError(f"{path}: not a simhash-scrapy store file")
        return None
    magic, version, length, k, blocks = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise StoreError(f"{path}: not a simhash-scrapy store file")
    if version != FORMAT_VERSION:
        raise StoreError(
            f"{path}: store format version {version}; this version of simhash-scrapy reads version "
            f"{FORMAT_VERSION}. Start afresh with SIMHASH_RESET=True (or -a simhash_reset=1)."
        )
    if len(data) < length:
        return None
    (crc,) = struct.unpack_from("<I", data, length - 4)
    if zlib.crc32(data[: length - 4]) != crc:
        raise StoreError(f"{path}: corrupt store header (checksum mismatch)")
    pos = _HEAD.size
    widths = list(data[pos : pos + blocks])
    pos += blocks
    feats_len = data[pos]
    features = bytes(data[pos + 1 : pos + 1 + feats_len]).decode("utf-8")
    pos += 1 + feats_len
    mode_len = data[pos]
    text_mode = bytes(data[pos + 1 : pos + 1 + mode_len]).decode("utf-8")
    try:
        config = StoreConfig(k, blocks, features, text_mode)
    except ValueError as exc:
        raise StoreError(f"{path}: corrupt store header ({exc})") from None
    if widths != block_widths(blocks):
        raise StoreError(f"{path}: block layout {widths} is not the layout this version uses")
    return config, length


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


@dataclass
class StoreContents:
    """Every record of a store, column by column (index = record number).

    The fixed-size fields are numpy arrays; strings are decoded on access
    (``url(i)``, ``urls()``...) from the file's bytes, so loading a million
    records does not build a million Python strings.
    """

    config: StoreConfig | None
    data: bytes = b""
    fingerprints: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint64))
    canonical: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # -1: none
    distance: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # -1: none
    indexed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    depth: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # -1: unknown
    time: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: Scope of each record as a number into ``scope_names``.
    scope_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    scope_names: list[str] = field(default_factory=list)
    url_at: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    url_len: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    referer_at: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    referer_len: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # -1: none
    text_at: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    text_len: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # -1: none
    #: The length field of every record (what the offsets file caches).
    record_lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.uint32))
    #: Offset just after the last complete record (where appending continues).
    end: int = 0
    #: Bytes of a torn last record that were ignored.
    torn_bytes: int = 0

    def __len__(self) -> int:
        return len(self.fingerprints)

    def _string(self, at: np.ndarray, length: np.ndarray, row: int) -> str | None:
        size = int(length[row])
        if size < 0:
            return None
        start = int(at[row])
        return self.data[start : start + size].decode("utf-8", "surrogatepass")

    def url(self, row: int) -> str:
        return self._string(self.url_at, self.url_len, row) or ""

    def referer(self, row: int) -> str | None:
        return self._string(self.referer_at, self.referer_len, row)

    def text(self, row: int) -> str | None:
        return self._string(self.text_at, self.text_len, row)

    def scope(self, row: int) -> str:
        return self.scope_names[int(self.scope_ids[row])]

    def urls(self) -> list[str]:
        """Every URL, in record order."""
        return _decode_all(self.data, self.url_at, self.url_len)


def _record_starts(data: bytes, pos: int) -> tuple[list[int], int]:
    """Offsets of the complete records from ``pos`` on, and where the last one ends."""
    starts: list[int] = []
    append = starts.append
    unpack = struct.Struct("<I").unpack_from
    size = len(data)
    minimum = _RECORD_MIN
    while pos + 4 <= size:
        (length,) = unpack(data, pos)
        end = pos + 4 + length
        if length < minimum or end > size:
            break
        append(pos)
        pos = end
    return starts, pos


def _decode_all(data: bytes, starts: np.ndarray, lengths: np.ndarray) -> list[str]:
    return [
        data[s : s + n].decode("utf-8", "surrogatepass") if n >= 0 else None  # type: ignore[misc]
        for s, n in zip(starts.tolist(), lengths.tolist())
    ]


def _gather(buf: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """``width`` bytes from each start offset, as an (n, width) uint8 array (zero past the end).

    Rows are copied from a sliding-window view of the buffer (one fancy index
    along the first axis: a row copy per record, no per-byte index arrays).
    """
    n = len(starts)
    if not n or not width:
        return np.zeros((n, width), dtype=np.uint8)
    limit = len(buf) - width  # last start whose row fits
    if limit >= 0 and int(starts.max()) <= limit:
        return sliding_window_view(buf, width)[starts]
    out = np.zeros((n, width), dtype=np.uint8)
    fits = starts <= limit
    if limit >= 0 and fits.any():
        out[fits] = sliding_window_view(buf, width)[starts[fits]]
    for row in np.flatnonzero(~fits).tolist():
        start = int(starts[row])
        chunk = buf[start : start + width]
        out[row, : len(chunk)] = chunk
    return out


def _scopes(buf: np.ndarray, data: bytes, at: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Scope number of each record and the scope names, vectorised when scopes are short."""
    n = len(at)
    if not n:
        return np.zeros(0, dtype=np.int64), []
    widest = int(lengths.max())
    if widest <= 128:
        padded = _gather(buf, at, widest)
        padded[np.arange(widest) >= lengths[:, None]] = 0
        if (lengths == lengths[0]).all() and (padded == padded[0]).all():  # one scope (the spider): common
            return np.zeros(n, dtype=np.int64), _decode_all(data, at[:1], lengths[:1])
        # Append the length so scopes that differ only by trailing NUL bytes stay apart.
        keyed = np.concatenate([padded, lengths.astype("<u2")[:, None].view(np.uint8)], axis=1)
        rows = np.ascontiguousarray(keyed).view(np.dtype((np.void, keyed.shape[1]))).ravel()
        _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
        names = _decode_all(data, at[first], lengths[first])
        return inverse.astype(np.int64).ravel(), names
    ids = np.empty(n, dtype=np.int64)
    numbers: dict[str, int] = {}
    for row, name in enumerate(_decode_all(data, at, lengths)):
        ids[row] = numbers.setdefault(name, len(numbers))
    return ids, list(numbers)


def _cached_starts(data: bytes, pos: int, lengths: np.ndarray | None) -> tuple[np.ndarray, int] | None:
    """Record offsets from an offsets file, if they really are this file's records.

    The check is complete and vectorised: the first record starts right after
    the header, each next one right after the previous one, and the length
    field at every offset holds the cached length.  Anything else (a stale,
    foreign or corrupt offsets file) is ignored.
    """
    if lengths is None or not len(lengths) or int(lengths.min()) < _RECORD_MIN:
        return None
    sizes = lengths.astype(np.int64) + 4
    ends = pos + np.cumsum(sizes)
    if int(ends[-1]) > len(data):
        return None
    starts = ends - sizes
    found = _gather(np.frombuffer(data, dtype=np.uint8), starts, 4).view("<u4").ravel()
    if not np.array_equal(found, lengths):
        return None
    return starts, int(ends[-1])


def _parse_records(data: bytes, pos: int, path: object, cached: np.ndarray | None = None) -> StoreContents:
    known = _cached_starts(data, pos, cached)
    if known is not None:
        head, pos = known
        tail, end = _record_starts(data, pos)
        starts = np.concatenate([head, np.asarray(tail, dtype=np.int64)]) if tail else head
    else:
        tail, end = _record_starts(data, pos)
        starts = np.asarray(tail, dtype=np.int64)
    del tail
    contents = StoreContents(config=None, data=data, end=end, torn_bytes=len(data) - end)
    # CRC of the last record: the only one a crash can tear.  Earlier records were followed by
    # complete writes, and checking every CRC would cost as much as the rest of the load.
    if len(starts):
        s = int(starts[-1])
        length, crc = _PREFIX.unpack_from(data, s)
        if zlib.crc32(memoryview(data)[s + 8 : s + 4 + length]) != crc:
            starts = starts[:-1]
            contents.end = s
            contents.torn_bytes = len(data) - s
    n = len(starts)
    buf = np.frombuffer(data, dtype=np.uint8)
    # The fixed-size head of every record (length, CRC, fixed fields) as one structured array.
    rec = _gather(buf, starts, _RECORD_DTYPE.itemsize).view(_RECORD_DTYPE).reshape(n)
    url_len = rec["url_len"].astype(np.int64)
    scope_len = rec["scope_len"].astype(np.int64)
    ref_len = rec["referer_len"].astype(np.int64)
    text_len = rec["text_len"].astype(np.int64)
    # A record whose field lengths do not add up to its length is corrupt.
    bad = np.flatnonzero(4 + _FIXED.size + url_len + scope_len + ref_len + text_len != rec["length"])
    if len(bad):
        first = int(bad[0])
        raise StoreError(
            f"{path}: corrupt record #{first} at byte {int(starts[first])} (field lengths do not match the "
            f"record length); start afresh with SIMHASH_RESET = True"
        )
    contents.record_lengths = rec["length"].astype(np.uint32)
    flags = rec["flags"]
    canonical = rec["canonical"].astype(np.int64)
    canonical[canonical == NO_CANONICAL] = -1
    if ((canonical >= np.arange(n)) & (canonical >= 0)).any():
        first = int(np.flatnonzero(canonical >= np.arange(n))[0])
        raise StoreError(f"{path}: corrupt record #{first} (its canonical page is not an earlier record)")
    distance = rec["distance"].astype(np.int64)
    distance[distance == NO_DISTANCE] = -1
    depth = rec["depth"].astype(np.int64)
    depth[(flags & FLAG_DEPTH) == 0] = -1
    url_at = starts + (8 + _FIXED.size)
    scope_at = url_at + url_len
    ref_at = scope_at + scope_len
    text_at = ref_at + ref_len
    ref_len[(flags & FLAG_REFERER) == 0] = -1
    text_len[(flags & FLAG_TEXT) == 0] = -1
    contents.fingerprints = rec["fingerprint"].astype(np.uint64)
    contents.canonical = canonical
    contents.distance = distance
    contents.indexed = (flags & FLAG_INDEXED) != 0
    contents.depth = depth
    contents.time = rec["time"].astype(np.int64)
    contents.scope_ids, contents.scope_names = _scopes(buf, data, scope_at, scope_len)
    contents.url_at, contents.url_len = url_at, url_len
    contents.referer_at, contents.referer_len = ref_at, ref_len
    contents.text_at, contents.text_len = text_at, text_len
    return contents


def read_store(path: str | PathLike[str]) -> StoreContents:
    """Read a store file (any configuration) without opening it for writing.

    A torn last record is skipped with a warning.  Raises ``StoreError`` for a
    file that is not a store or has a corrupt header, ``FileNotFoundError`` if
    it does not exist.
    """
    data = Path(path).read_bytes()
    return _read_bytes(data, path, _read_offsets(Path(path)))


def offsets_path(path: str | PathLike[str]) -> Path:
    """The offsets file of a store: record lengths written at close, so the next load skips the walk."""
    path = Path(path)
    return path.with_name(path.name + ".offsets")


def _read_offsets(path: Path) -> np.ndarray | None:
    try:
        raw = offsets_path(path).read_bytes()
    except OSError:
        return None
    if len(raw) < _OFFSETS_HEAD.size:
        return None
    magic, count, crc = _OFFSETS_HEAD.unpack_from(raw)
    body = raw[_OFFSETS_HEAD.size :]
    if magic != _OFFSETS_MAGIC or len(body) != 4 * count or zlib.crc32(body) != crc:
        return None
    return np.frombuffer(body, dtype="<u4")


def _write_offsets(path: Path, lengths: np.ndarray) -> None:
    body = np.ascontiguousarray(lengths, dtype="<u4").tobytes()
    target = offsets_path(path)
    partial = target.with_name(target.name + ".partial")
    with open(partial, "wb") as handle:
        handle.write(_OFFSETS_HEAD.pack(_OFFSETS_MAGIC, len(lengths), zlib.crc32(body)))
        handle.write(body)
    os.replace(partial, target)


def _read_bytes(data: bytes, path: object, cached: np.ndarray | None = None) -> StoreContents:
    parsed = _parse_header(data, path)
    if parsed is None:
        if data:
            logger.warning("%s: the header was cut short by a crash (%d bytes); the store is empty", path, len(data))
        return StoreContents(config=None, end=0, torn_bytes=len(data))
    config, header_len = parsed
    contents = _parse_records(data, header_len, path, cached)
    contents.config = config
    if contents.torn_bytes:
        logger.warning(
            "%s: skipped a truncated last record (%d bytes after record #%d), most likely cut by a crash "
            "or a forced shutdown; %d complete records loaded",
            path,
            contents.torn_bytes,
            len(contents) - 1,
            len(contents),
        )
    return contents


class PageStore:
    """An append-only store file opened for one crawl.

    >>> store = PageStore(path, StoreConfig(3, 4, "w1-c0-tf-j2", "visible"))
    >>> contents = store.open()          # loads what earlier runs wrote
    >>> number = store.append("https://a/", 0x1234, "spider")
    >>> store.close()

    ``open`` refuses (``StoreConfigError``) a file written with another
    configuration, and takes an exclusive lock so two crawls never append to
    one file at once.  ``reset=True`` starts afresh; the old file is kept as
    ``<name>.previous``.
    """

    def __init__(
        self,
        path: str | PathLike[str],
        config: StoreConfig,
        setting_names: Mapping[str, str] | None = None,
        buffer_size: int = 1 << 16,
    ) -> None:
        self.path = Path(path)
        self.config = config
        self.setting_names = dict(setting_names or {})
        self.buffer_size = buffer_size
        self.count = 0  # records in the file, loaded + appended
        self._file: BinaryIO | None = None
        self._loaded_lengths = np.zeros(0, dtype=np.uint32)
        self._new_lengths = array("I")

    def open(self, reset: bool = False) -> StoreContents:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if reset and self.path.exists() and self.path.stat().st_size:
            previous = self.path.with_name(self.path.name + ".previous")
            os.replace(self.path, previous)
            logger.info("Started a fresh simhash store at %s (the old one is now %s)", self.path, previous)
        if reset:
            offsets_path(self.path).unlink(missing_ok=True)
        handle = open(self.path, "a+b", buffering=self.buffer_size)  # noqa: SIM115 - kept open for appending
        try:
            _lock(handle, self.path)
            handle.seek(0)
            data = handle.read()
            contents = _read_bytes(data, self.path, _read_offsets(self.path))
            if contents.config is None:
                # New (or header torn before anything else was written): write the header.
                handle.truncate(0)
                handle.write(self.config.header())
                contents = StoreContents(config=self.config, end=0)
            else:
                check_config(contents.config, self.config, self.path, self.setting_names)
                if contents.torn_bytes:
                    handle.flush()
                    handle.truncate(contents.end)  # appends must not follow a torn record
            handle.seek(0, os.SEEK_END)
            handle.flush()
        except BaseException:
            handle.close()
            raise
        self._file = handle
        self.count = len(contents)
        self._loaded_lengths = contents.record_lengths
        self._new_lengths = array("I")
        return contents

    def append(
        self,
        url: str,
        fingerprint: int,
        scope: str,
        canonical: int | None = None,
        distance: int | None = None,
        referer: str | None = None,
        depth: int | None = None,
        text: str | None = None,
        indexed: bool = False,
        when: float | None = None,
    ) -> int:
        """Append one page; returns its record number.  One buffered write."""
        if self._file is None:
            raise StoreError(f"{self.path}: store is not open")
        flags = FLAG_INDEXED if indexed else 0
        url_b = url.encode("utf-8", "surrogatepass")
        scope_b = scope.encode("utf-8", "surrogatepass")
        if len(scope_b) > 0xFFFF:
            raise ValueError("scope is longer than 65535 bytes")
        ref_b = b""
        if referer is not None:
            flags |= FLAG_REFERER
            ref_b = referer.encode("utf-8", "surrogatepass")
        text_b = b""
        if text is not None:
            flags |= FLAG_TEXT
            text_b = text.encode("utf-8", "surrogatepass")
        if depth is not None:
            flags |= FLAG_DEPTH
        if max(len(url_b), len(ref_b), len(text_b)) > _MAX_FIELD - 64:
            raise ValueError("a field of the page is larger than 4 GiB")
        body = (
            _FIXED.pack(
                fingerprint,
                NO_CANONICAL if canonical is None else canonical,
                NO_DISTANCE if distance is None else distance,
                flags,
                len(scope_b),
                0 if depth is None else max(-(1 << 31), min(depth, (1 << 31) - 1)),
                int(time.time() if when is None else when) & 0xFFFFFFFF,
                len(url_b),
                len(ref_b),
                len(text_b),
            )
            + url_b
            + scope_b
            + ref_b
            + text_b
        )
        self._file.write(_PREFIX.pack(len(body) + 4, zlib.crc32(body)) + body)
        self._new_lengths.append(len(body) + 4)
        number = self.count
        self.count += 1
        return number

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        """Flush, write the offsets file (so the next load needs no walk) and release the file."""
        if self._file is not None:
            try:
                self._file.flush()
                lengths = np.concatenate([self._loaded_lengths, np.frombuffer(self._new_lengths, dtype=np.uint32)])
                try:
                    _write_offsets(self.path, lengths)
                except OSError as exc:  # only a cache: loading without it walks the file
                    logger.warning("%s: cannot write the offsets file: %s", self.path, exc)
            finally:
                self._file.close()  # also releases the lock
                self._file = None

    @property
    def closed(self) -> bool:
        return self._file is None


def _lock(handle: BinaryIO, path: Path) -> None:
    if sys.platform == "win32":  # pragma: no cover - no flock on Windows
        return
    import fcntl

    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise StoreError(
            f"{path} is in use by another crawl (locked). A JOBDIR or SIMHASH_DIR store belongs to one "
            f"running crawl at a time."
        ) from None
