"""The index file format: ``BlockPermutedIndex.save`` / ``load`` (a compact versioned binary file).

No Scrapy import here: this module is part of the algorithm core.

A header (magic, version, k, B, rows, key kind) and the block widths, then the
fingerprints (little-endian uint64), the keys (int64, or uint32 lengths then
UTF-8 bytes), and a CRC-32 of all of it.  Written atomically (``files.atomic_write``);
read back only when every check passes, else ``IndexFormatError`` names the file and what is wrong.
"""

from __future__ import annotations

import struct
import zlib
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from ..files import atomic_write
from .index_layout import block_widths

__all__ = ["IndexFormatError", "write_index", "read_index"]

_FORMAT_MAGIC = b"SIMHIDX\x00"
_FORMAT_VERSION = 1
_HEADER = struct.Struct("<8sHBBQB")  # magic, version, k, B, rows, key kind
_KEYS_INT, _KEYS_STR = 0, 1


class IndexFormatError(ValueError):
    """An index file is truncated, corrupt, or was written with another layout."""


def write_index(
    path: str | PathLike[str], max_distance: int, blocks: int, fps: np.ndarray, keys: np.ndarray | list[Any]
) -> None:
    """Write ``fps`` (uint64) and their ``keys`` (an integer array, or a list of str) to ``path``."""
    n = len(fps)
    if isinstance(keys, np.ndarray):
        kind = _KEYS_INT
        key_bytes = keys[:n].astype("<i8").tobytes()
    else:
        if not all(type(k) is str for k in keys):
            raise ValueError("save() needs keys that are all int or all str")
        kind = _KEYS_STR
        encoded = [k.encode("utf-8", "surrogatepass") for k in keys]
        lengths = np.fromiter(map(len, encoded), dtype="<u4", count=n)
        key_bytes = lengths.tobytes() + b"".join(encoded)
    header = _HEADER.pack(_FORMAT_MAGIC, _FORMAT_VERSION, max_distance, blocks, n, kind)
    header += bytes(block_widths(blocks))
    payload = fps[:n].astype("<u8").tobytes() + key_bytes
    checksum = struct.pack("<I", zlib.crc32(payload, zlib.crc32(header)))
    with atomic_write(path) as handle:  # never leave a half-written index under the real name
        handle.write(header)
        handle.write(payload)
        handle.write(checksum)


def read_index(
    path: str | PathLike[str], max_distance: int | None = None, blocks: int | None = None
) -> tuple[int, int, np.ndarray, np.ndarray | list[str]]:
    """``(max_distance, blocks, fingerprints, keys)`` of an index file written by ``write_index``.

    If ``max_distance`` or ``blocks`` are given they must match the file's,
    otherwise ``IndexFormatError`` (a ``ValueError``) says what differs.
    """
    data = Path(path).read_bytes()
    if len(data) < _HEADER.size:
        raise IndexFormatError(f"{path}: truncated index file ({len(data)} bytes)")
    magic, version, k, b, n, kind = _HEADER.unpack_from(data)
    if magic != _FORMAT_MAGIC:
        raise IndexFormatError(f"{path}: not a simhash-scrapy index file")
    if version != _FORMAT_VERSION:
        raise IndexFormatError(f"{path}: index format version {version}, this version reads {_FORMAT_VERSION}")
    if max_distance is not None and max_distance != k:
        raise IndexFormatError(f"{path}: written with max_distance={k}, asked for max_distance={max_distance}")
    if blocks is not None and blocks != b:
        raise IndexFormatError(f"{path}: written with blocks={b}, asked for blocks={blocks}")
    pos = _HEADER.size
    widths = list(data[pos : pos + b])
    pos += b
    if widths != block_widths(b):
        raise IndexFormatError(f"{path}: block layout {widths} is not the layout this version uses")
    if zlib.crc32(data[_HEADER.size + b : -4], zlib.crc32(data[: _HEADER.size + b])) != int.from_bytes(
        data[-4:], "little"
    ) or len(data) < pos + 8 * n + 4:
        raise IndexFormatError(f"{path}: truncated or corrupt index file (checksum mismatch)")
    fps = np.frombuffer(data, dtype="<u8", count=n, offset=pos).astype(np.uint64)
    pos += 8 * n
    keys: list[str] | np.ndarray
    if kind == _KEYS_INT:
        keys = np.frombuffer(data, dtype="<i8", count=n, offset=pos).astype(np.int64)
    elif kind == _KEYS_STR:
        lengths = np.frombuffer(data, dtype="<u4", count=n, offset=pos)
        pos += 4 * n
        ends = np.cumsum(lengths, dtype=np.int64) + pos
        starts = ends - lengths
        keys = [data[s:e].decode("utf-8", "surrogatepass") for s, e in zip(starts.tolist(), ends.tolist())]
    else:
        raise IndexFormatError(f"{path}: unknown key kind {kind}")
    return k, b, fps, keys
