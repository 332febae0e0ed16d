"""The store's chunks: records packed column by column in blobs, read and checked in bulk (no Scrapy import).

Part of ``core.store.store`` (format 5).  A chunk holds the records of entries
``chunk * CHUNK_RECORDS`` onwards (``count`` of them, every chunk but the last
one full) as one blob of plain little-endian arrays and text sections, so that
opening a store reads a few hundred blobs instead of a million rows.  Each
chunk carries a 64-bit checksum (CRC-32 and Adler-32 of its bytes, seeded with
its number and count): one flipped bit anywhere in it, a chunk moved to
another number or cut short, is a ``StoreError`` naming the chunk.

The blob (little-endian)::

    b"SHC5", u32 count, i64 first entry,
    then sections, each u32 length + bytes, in this order:
    key_hash (u64: ``clustering.identity_hash`` of scope and identity, or URL when none), fingerprint,
    indexed, previous, digest (u64), canonical, depth (i64), first_seen, last_seen (f64), distance (i8),
    exact, outcome (u8, an index into ``OUTCOMES``), nulls (u8: the NULL mask of a format-4 row), present
    (u8: which of digest / etag / last_modified it has), scope names (u32 count + text), scope codes (u32),
    identity, url, referer, text, etag, last_modified (text: mode 0 NUL-joined UTF-8, or mode 1 u32 byte
    lengths + UTF-8 when a value holds a NUL; modes 2 and 3 the same deflated with zlib), edit-key sizes
    (u32 bytes), edit keys (``KEY``, packed).

Opening a store decodes the numbers (``np.frombuffer``) and the scope codes; the texts stay
bytes until first read (``TextColumn``), and the rule finds a restored page by its ``key_hash``.

``Columns`` is the common shape of records in memory: what rows of ``pages``
read back as (``store_rows.read_rows``), what a chunk decodes to, and what
``store_rows.contents_from`` checks and turns into ``StoreContents``.
"""

from __future__ import annotations

import struct
import zlib
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import fields
from typing import Any

import numpy as np

from .store_rows import NUMERIC_COLUMNS, OUTCOMES, TEXT_COLUMNS, Columns, fail, key_hashes

__all__ = ["CHUNK_RECORDS", "TextColumn", "chunk_checksum", "decode_chunk", "encode_chunk", "merge"]

#: Records per chunk (entries ``chunk * CHUNK_RECORDS`` onwards).
CHUNK_RECORDS = 4096
_MAGIC = b"SHC5"
_HEAD = struct.Struct("<4sIq")
_LEN = struct.Struct("<I")

_NUMERIC = NUMERIC_COLUMNS
_TEXT = TEXT_COLUMNS


def merge(base: Columns, rows: Columns, start: int, length: int, path: object) -> Columns:
    """``base`` (entries ``start`` onwards, in order) with ``rows`` laid over it: entries ``start..start+length-1``.

    Every entry must be in one or the other (``StoreError`` naming the first missing one).
    """
    if not len(rows) and len(base) == length:
        return base
    at = rows.entry - start
    if len(at) and (int(at.min()) < 0 or int(at.max()) >= length):
        bad = int(rows.entry[(at < 0) | (at >= length)][0])
        raise fail(path, f"corrupt record #{bad} (beyond the {start + length} pages the store holds)")
    covered = np.zeros(length, dtype=bool)
    covered[: len(base)] = True
    covered[at] = True
    if not covered.all():
        missing = start + int(np.flatnonzero(~covered)[0])
        raise fail(path, f"the store holds {int(covered.sum())} of the pages {start}..{start + length - 1} "
                         f"its header counts: record #{missing} is missing")  # fmt: skip
    values: dict[str, Any] = {}
    for f in fields(Columns):
        old, new = getattr(base, f.name), getattr(rows, f.name)
        if isinstance(old, TextColumn):
            values[f.name] = old.overlaid(at.tolist(), new, length)
        elif isinstance(old, np.ndarray):
            array = np.zeros(length, dtype=old.dtype)
            array[: len(old)] = old
            array[at] = new
            values[f.name] = array
        else:
            items = list(old) + [None] * (length - len(old)) if len(old) < length else list(old)
            for i, value in zip(at.tolist(), new):
                items[i] = value
            values[f.name] = items
    values["entry"] = np.arange(start, start + length, dtype=np.int64)
    return Columns(**values)


class TextColumn(Sequence[str]):
    """One text column of many chunks, decoded a chunk at a time when first read; values laid over them.

    Opening a store needs the identities only: the URLs, referers, texts and validators of a million
    pages stay bytes (checked by their chunk's checksum) until a report or a conditional request reads them.
    ``nones``: where the value is ``None`` (a NULL of the record).
    """

    __slots__ = ("_parts", "_starts", "_decoded", "_over", "_len", "_nones")

    def __init__(self, parts: list[tuple[memoryview, int]], over: dict[int, str] | None = None,
                 length: int | None = None, nones: np.ndarray | None = None,
                 decoded: dict[int, list[str]] | None = None) -> None:  # fmt: skip
        self._parts = parts
        starts = [0]
        for _, n in parts:
            starts.append(starts[-1] + n)
        self._starts = starts
        self._decoded: dict[int, list[str]] = {} if decoded is None else decoded
        self._over = over or {}
        self._len = starts[-1] if length is None else length
        self._nones = nones

    @classmethod
    def join(cls, columns: list[TextColumn]) -> TextColumn:
        assert not any(c._over or c._nones is not None for c in columns)
        return cls([part for c in columns for part in c._parts])

    def overlaid(self, at: list[int], values: Sequence[str], length: int) -> TextColumn:
        """These texts with ``values`` at positions ``at``, ``length`` of them in all."""
        return TextColumn(self._parts, {**self._over, **dict(zip(at, values))}, length, self._nones, self._decoded)

    def with_nones(self, nones: np.ndarray) -> TextColumn:
        return TextColumn(self._parts, self._over, self._len, nones, self._decoded)

    def _part(self, index: int) -> list[str]:
        values = self._decoded.get(index)
        if values is None:
            section, n = self._parts[index]
            values = self._decoded[index] = _read_text(section, n)
        return values

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, row: int) -> str:  # type: ignore[override]
        if row < 0:
            row += self._len
        if not 0 <= row < self._len:
            raise IndexError(row)
        if self._nones is not None and self._nones[row]:
            return None  # type: ignore[return-value]
        value = self._over.get(row)
        if value is not None:
            return value
        index = bisect_right(self._starts, row) - 1
        return self._part(index)[row - self._starts[index]]

    def __iter__(self) -> Iterator[str]:
        if self._over or self._nones is not None or self._len != self._starts[-1]:
            yield from map(self.__getitem__, range(self._len))
            return
        for index in range(len(self._parts)):
            yield from self._part(index)


def chunk_checksum(chunk: int, count: int, data: bytes) -> int:
    """The chunk's 64-bit checksum (signed, as stored): CRC-32 and Adler-32 of its bytes, seeded with where it is."""
    seed = struct.pack("<qI", chunk, count)
    crc = zlib.crc32(data, zlib.crc32(seed))
    adler = zlib.adler32(data, zlib.adler32(seed))
    value = (crc << 32) | adler
    return value - (1 << 64) if value >= 1 << 63 else value


def _text_section(values: Sequence[str], compress: bool = False) -> bytes:
    """Texts as a section: mode 0 (NUL-joined) or 1 (byte lengths, then the texts), +2 when deflated (zlib)."""
    joined = "\x00".join(values)
    if joined.count("\x00") == max(len(values) - 1, 0):
        mode, body = 0, joined.encode("utf-8", "surrogatepass")
    else:
        encoded = [v.encode("utf-8", "surrogatepass") for v in values]
        mode, body = 1, np.array([len(e) for e in encoded], dtype="<u4").tobytes() + b"".join(encoded)
    if compress and len(body) > 64:
        return bytes([mode + 2]) + zlib.compress(body, 1)
    return bytes([mode]) + body


def _read_text(data: memoryview, n: int) -> list[str]:
    if not n:
        return []
    mode, body = data[0], bytes(data[1:])
    if mode in (2, 3):
        mode, body = mode - 2, zlib.decompress(body)
    if mode == 0:
        values = body.decode("utf-8", "surrogatepass").split("\x00")
    elif mode == 1:
        ends = np.cumsum(np.frombuffer(body, dtype="<u4", count=n), dtype=np.int64).tolist()
        start = 4 * n
        values = [body[start + a : start + b].decode("utf-8", "surrogatepass") for a, b in zip([0, *ends], ends)]
        if ends[-1] + start != len(body):
            raise ValueError("text lengths do not add up")
    else:
        raise ValueError(f"unknown text mode {mode}")
    if len(values) != n:
        raise ValueError(f"{len(values)} texts for {n} records")
    return values


def encode_chunk(columns: Columns) -> bytes:
    """One chunk's blob (its records' entries must follow each other)."""
    n = len(columns)
    first = int(columns.entry[0]) if n else 0
    columns.key_hash = key_hashes(columns.scope, columns.identity, columns.url)  # always of what is written
    for name, low, high in (("distance", -1, 64), ("exact", 0, 1), ("nulls", 0, 255), ("present", 0, 7),
                            ("outcome", 0, len(OUTCOMES) - 1)):  # fmt: skip
        values = np.asarray(getattr(columns, name))
        if n and (int(values.min()) < low or int(values.max()) > high):
            raise ValueError(f"{name} out of range")
    sections = [np.ascontiguousarray(getattr(columns, name), dtype=kind).tobytes() for name, kind in _NUMERIC]
    names = sorted(set(columns.scope))
    codes = {name: code for code, name in enumerate(names)}
    sections.append(_LEN.pack(len(names)) + _text_section(names))
    sections.append(np.array([codes[s] for s in columns.scope], dtype="<u4").tobytes())
    sections += [_text_section(getattr(columns, name), compress=True) for name in _TEXT]
    sections.append(np.array([len(k) for k in columns.edit_keys], dtype="<u4").tobytes())
    sections.append(b"".join(columns.edit_keys))
    out = [_HEAD.pack(_MAGIC, n, first)]
    for section in sections:
        out += [_LEN.pack(len(section)), section]
    return b"".join(out)


def decode_chunk(data: bytes, chunk: int, count: int, path: object) -> Columns:
    """A chunk's records; ``StoreError`` naming the chunk if its blob is not one ``encode_chunk`` wrote."""
    try:
        return _decode(memoryview(data), chunk, count)
    except (ValueError, struct.error, UnicodeDecodeError, IndexError) as exc:
        raise fail(path, f"corrupt chunk {chunk} ({exc})") from None


def _decode(data: memoryview, chunk: int, count: int) -> Columns:
    magic, n, first = _HEAD.unpack_from(data)
    if magic != _MAGIC or n != count or first != chunk * CHUNK_RECORDS:
        raise ValueError("its header does not match its place")
    pos, sections = _HEAD.size, []
    while pos < len(data):
        (size,) = _LEN.unpack_from(data, pos)
        pos += _LEN.size
        if pos + size > len(data):
            raise ValueError("a section runs past its end")
        sections.append(data[pos : pos + size])
        pos += size
    if len(sections) != len(_NUMERIC) + 2 + len(_TEXT) + 2:
        raise ValueError(f"{len(sections)} sections")
    values: dict[str, Any] = {"entry": np.arange(first, first + n, dtype=np.int64)}
    for (name, kind), section in zip(_NUMERIC, sections):
        values[name] = np.frombuffer(section, dtype=kind, count=n).astype(np.dtype(kind).newbyteorder("="), copy=False)
        if len(section) != n * np.dtype(kind).itemsize:
            raise ValueError(f"{name} has {len(section)} bytes")
    rest = sections[len(_NUMERIC) :]
    (kinds,) = _LEN.unpack_from(rest[0])
    names = _read_text(rest[0][_LEN.size :], kinds)
    codes = np.frombuffer(rest[1], dtype="<u4", count=n)
    if len(rest[1]) != 4 * n or (n and int(codes.max()) >= len(names)):
        raise ValueError("scope codes out of range")
    values["scope"] = np.array(names, dtype=object)[codes].tolist() if n else []
    for name, section in zip(_TEXT, rest[2:]):
        # Decoded when first read (``TextColumn``): the index needs the ``key_hash`` column only.
        values[name] = TextColumn([(section, n)])
        if n and (not len(section) or section[0] not in (0, 1, 2, 3)):
            raise ValueError(f"unknown text mode {section[0] if len(section) else None}")
    sizes = np.frombuffer(rest[-2], dtype="<u4", count=n)
    keys = bytes(rest[-1])
    if len(rest[-2]) != 4 * n or int(sizes.sum()) != len(keys):
        raise ValueError("edit-key sizes do not add up")
    if not keys:
        values["edit_keys"] = [b""] * n
    else:
        ends = np.cumsum(sizes, dtype=np.int64).tolist()
        values["edit_keys"] = [keys[a:b] for a, b in zip([0, *ends], ends)]
    if n and int(values["outcome"].max()) >= len(OUTCOMES):
        raise ValueError("an outcome code out of range")
    return Columns(**values)


def check_chunk_list(numbers: list[Any], counts: list[Any], pages: int, path: object) -> None:
    """Chunks numbered 0..k-1, every one full but the last, none beyond the header's page count."""
    for i, (number, count) in enumerate(zip(numbers, counts)):
        if number != i or type(count) is not int:
            raise fail(path, f"corrupt store (chunk {i} is missing: found chunk {number!r})")
        if not 0 < count <= CHUNK_RECORDS or (i < len(numbers) - 1 and count != CHUNK_RECORDS):
            raise fail(path, f"corrupt chunk {i} (it holds {count} records)")
    covered = (len(numbers) - 1) * CHUNK_RECORDS + counts[-1] if numbers else 0
    if covered > pages:
        raise fail(path, f"the store holds at least {covered} pages but its header says {pages} (pages are extra)")


__all__ += ["check_chunk_list"]
