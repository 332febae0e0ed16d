"""The store's WAL, checked before SQLite replays it (no Scrapy import).

Part of ``core.store``.
"""

from __future__ import annotations

import logging
import struct
from os import PathLike
from pathlib import Path

import numpy as np

from .store_rows import RESET_HINT, StoreError

__all__ = ["check_wal"]

logger = logging.getLogger("simhash_scrapy.core.store")

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
                f"{RESET_HINT}"
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
            f"silently dropped with it. {RESET_HINT}"
        )
    # A last transaction without its commit frame (or with a damaged one): SQLite drops it; say so.
    commits = np.flatnonzero(heads[:bad, 1] != 0)
    kept = int(commits[-1]) + 1 if len(commits) else 0
    torn = int(np.count_nonzero(same_salt[kept:])) if bad == frames else int(np.count_nonzero(same_salt[kept : bad + 1]))
    partial = (len(data) - _WAL_HEADER.size) % frame_size
    if torn or (partial and kept == frames):
        logger.warning(
            "%s: dropped the store's last transaction, which a crash or a forced shutdown left incomplete "
            "(%d WAL frames after its last complete commit); the pages checked in that last flush "
            "interval are not in the store",
            wal,
            torn,
        )
