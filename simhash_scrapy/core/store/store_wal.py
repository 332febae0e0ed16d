"""The store's WAL, read as SQLite reads it, checked before SQLite replays it (no Scrapy import).

Part of ``core.store.store``.  SQLite's rule (https://www.sqlite.org/fileformat2.html#walformat): a
frame belongs to the database if its salts are the WAL header's and its checksum is the running
one (cumulative over the header and every earlier frame), and only up to the last valid commit
frame (a non-zero "database size" field).  Frames after that are not part of the database: a
transaction a crash or a full disk cut short, or stale frames a later transaction partly
overwrote (a crash, then a second crash: the first crash's frames stay behind the second crawl's).

SQLite stops at the first invalid frame without a word.  That is right for such leftovers and
silent loss of committed pages when a bit flips in a frame, so ``scan_wal`` looks further: a
valid commit frame *after* the break (it chains to its predecessor and carries this WAL's salts,
or salts one bit away) proves committed transactions would be dropped, and a broken frame one bit
away from its checksum is damage, not a crash.  Both are refused (``StoreError`` naming the
file); leftovers are ignored as SQLite ignores them (a warning when a transaction was cut short).
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

import numpy as np

from .store_rows import RESET_HINT, StoreError

__all__ = ["WalScan", "check_wal", "scan_wal"]

logger = logging.getLogger("simhash_scrapy.core.store.store")

_WAL_HEADER = struct.Struct(">IIIIIIII")
_WAL_FRAME = struct.Struct(">IIIIII")
_WAL_MAGIC = (0x377F0682, 0x377F0683)
_A = np.array([[1, 1], [1, 2]], dtype=np.uint64)  # (s0, s1) -> after one pair of words
_B = np.array([[1, 0], [1, 1]], dtype=np.uint64)
_MASK32 = np.uint64(0xFFFFFFFF)


@dataclass
class WalScan:
    """What SQLite would read from a WAL: the committed frames, and what it would ignore."""

    page_size: int = 0
    #: page number -> byte offset in the WAL of its latest committed version
    pages: dict[int, int] = field(default_factory=dict)
    #: database size in pages after the last commit (0: nothing committed through this WAL)
    db_pages: int = 0
    committed: int = 0  # frames SQLite replays
    uncommitted: int = 0  # valid frames after the last commit (a transaction cut short)
    stale: int = 0  # frames of this WAL after the first invalid one (leftovers of earlier attempts)


def _matpow_table(count: int) -> tuple[np.ndarray, np.ndarray]:
    """``A^j B`` for j = 0..count-1 and ``A^count`` (mod 2^32): a frame of ``count`` word pairs."""
    table = np.empty((count, 2, 2), dtype=np.uint64)
    power = np.eye(2, dtype=np.uint64)
    for j in range(count):
        table[j] = (power @ _B) & _MASK32
        power = (_A @ power) & _MASK32
    return table, power


def _parts(words: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Each frame's own share of the checksum (frames, 2); ``words`` is (frames, pairs, 2) uint32.

    SQLite's checksum is linear (s0 += x0 + s1; s1 += x1 + s0, mod 2^32): after a frame it is
    ``A^pairs @ before + part``, so every frame can be checked against its predecessor at once.
    """
    parts: np.ndarray = np.einsum("kij,fkj->fi", table[::-1], words.astype(np.uint64)) & _MASK32
    return parts


def _one_bit_away(words: np.ndarray, before: np.ndarray, stored: np.ndarray, table: np.ndarray, power: np.ndarray) -> tuple[bool, bool]:
    """Whether flipping one bit of a frame's checksummed words, or of its stored checksum, makes it valid;
    and whether that bit is in the frame's "database size" field (the frame was a commit frame)."""
    computed = ((power @ before) + _parts(words[None], table)[0]) & _MASK32
    diff = computed ^ stored
    if int(np.count_nonzero(diff)) == 1:
        one = int(diff.max())
        if one & (one - 1) == 0:
            return True, False  # a bit of the stored checksum
    delta = (stored - computed) & _MASK32  # what the true words would add, mod 2^32
    w = words.astype(np.uint64)  # (pairs, 2)
    bits = np.uint64(1) << np.arange(32, dtype=np.uint64)  # (32,)
    is_set = (w[:, :, None] & bits) != 0  # (pairs, 2, 32)
    change = np.where(is_set, (np.uint64(1 << 32) - bits) & _MASK32, bits)  # +2^b, or -2^b mod 2^32
    columns = np.transpose(table[::-1], (0, 2, 1))  # [pair, word, out]: what one unit of that word adds
    effect = (change[:, :, :, None] * columns[:, :, None, :]) & _MASK32  # (pairs, 2, 32, 2)
    hits = (effect[..., 0] == delta[0]) & (effect[..., 1] == delta[1])
    return bool(hits.any()), bool(hits[0, 1].any())


@dataclass
class _Header:
    """A WAL header whose checksum holds."""

    page_size: int
    order: str  # the checksum words' byte order (numpy dtype)
    salt: int  # salt-1 and salt-2 as one 64-bit number
    checksum: tuple[int, int]


@dataclass
class _Frames:
    """The complete frames of a WAL, checked all at once (row i: frame i)."""

    count: int
    frame_size: int
    heads: np.ndarray  # (frames, 6) the frame headers' big-endian words
    words: np.ndarray  # (frames, pairs, 2) the checksummed words
    table: np.ndarray
    power: np.ndarray
    stored: np.ndarray  # each frame's stored checksum
    before: np.ndarray  # its predecessor's checksum
    chains: np.ndarray  # the checksum follows from the predecessor's
    same_salt: np.ndarray
    salt_flip: np.ndarray  # the salts are one bit away from the header's
    commit: np.ndarray  # a commit frame (its "database size" is set)
    bad: int  # the first frame SQLite stops at (count: none)


def _read_header(data: bytes, wal: object) -> _Header | None:
    """The WAL's header, or None when SQLite would ignore the file; ``StoreError`` if a corrupt header
    would hide frames (SQLite would silently ignore the changes they hold)."""
    magic, _version, page_size, _seq, salt1, salt2, c1, c2 = _WAL_HEADER.unpack_from(data)
    order = ">u4" if magic == 0x377F0683 else "<u4"
    header_ok = magic in _WAL_MAGIC and 512 <= page_size <= 65536 and page_size & (page_size - 1) == 0
    if header_ok:
        table, _power = _matpow_table(3)
        head = np.frombuffer(data, dtype=order, count=6).reshape(1, 3, 2)
        header_ok = tuple(int(x) for x in _parts(head, table)[0]) == (c1, c2)
    if not header_ok:
        if len(data) > _WAL_HEADER.size:
            raise StoreError(
                f"{wal}: the store's WAL header is corrupt; SQLite would silently ignore the changes it holds. "
                f"{RESET_HINT}"
            )
        return None
    return _Header(page_size, order, (salt1 << 32) | salt2, (c1, c2))


def _read_frames(data: bytes, header: _Header, frames: int) -> _Frames:
    """Every complete frame's checksum chain and salts, vectorised; ``frames`` > 0."""
    frame_size = _WAL_FRAME.size + header.page_size
    body = np.frombuffer(data, dtype=np.uint8, count=frames * frame_size, offset=_WAL_HEADER.size)
    body = body.reshape(frames, frame_size)
    heads = body[:, : _WAL_FRAME.size].copy().view(">u4").reshape(frames, 6)
    words = np.concatenate([body[:, :8], body[:, _WAL_FRAME.size :]], axis=1).copy().view(header.order)
    words = words.reshape(frames, -1, 2)
    table, power = _matpow_table(words.shape[1])
    stored = heads[:, 4:6].astype(np.uint64)
    before = np.vstack([np.array([header.checksum], dtype=np.uint64), stored[:-1]])  # each frame's predecessor
    chains = np.all((((before @ power.T) + _parts(words, table)) & _MASK32) == stored, axis=1)
    salts = (heads[:, 2].astype(np.uint64) << np.uint64(32)) | heads[:, 3].astype(np.uint64)
    same_salt = salts == np.uint64(header.salt)
    salt_flip = np.array([bin(int(s) ^ header.salt).count("1") == 1 for s in salts])
    commit = heads[:, 1] != 0
    valid = same_salt & chains
    bad = int(np.argmin(valid)) if not valid.all() else frames
    return _Frames(frames, frame_size, heads, words, table, power, stored, before, chains, same_salt, salt_flip,
                   commit, bad)


def _check_break(f: _Frames, wal: object, quiet: bool) -> int:
    """At a broken frame (``f.bad`` < ``f.count``): ``StoreError`` if committed transactions would be
    dropped with it, a warning if commits follow it that SQLite does not read; the frames after it with
    this WAL's salts (leftovers SQLite ignores)."""
    bad = f.bad
    # Commit frames after the break that chain to their predecessor, with this WAL's salts or salts
    # one bit away.  Leftovers of an earlier attempt hold at most one (a write whose commit frame
    # reached the file but failed after it), so two prove committed transactions would be dropped.
    proof = np.flatnonzero(f.commit & f.chains & (f.same_salt | f.salt_flip))
    proof = proof[proof >= bad]
    damaged, was_commit = (True, False) if f.salt_flip[bad] and f.chains[bad] else (False, False)
    if f.same_salt[bad] and not damaged:
        damaged, was_commit = _one_bit_away(f.words[bad], f.before[bad], f.stored[bad], f.table, f.power)
    if len(proof) > 1 or (damaged and (was_commit or bool((f.commit & (f.same_salt | f.salt_flip))[bad:].any()))):
        raise StoreError(
            f"{wal}: frame {bad} of the store's WAL is corrupt, and the "
            + (f"transactions committed after it (up to frame {int(proof[-1])})" if len(proof) else "committed transaction it belongs to")
            + f" would be silently dropped with it. {RESET_HINT}"
        )
    if len(proof) and not quiet:
        logger.warning(
            "%s: WAL frames %d..%d (a commit at frame %d) do not follow the last commit SQLite reads: "
            "left by a write that failed (a full disk), or damage. The store is read as SQLite reads it, "
            "without them",
            wal, bad, int(proof[-1]), int(proof[-1]),
        )  # fmt: skip
    return int(np.count_nonzero(f.same_salt[bad:]))


def _warn_uncommitted(scan: WalScan, partial_frame: bool, wal: object, reader: bool) -> None:
    """The warning when frames follow the last commit (a crawl writing now, or a cut-short transaction)."""
    if scan.uncommitted or partial_frame:
        written = [f"{scan.uncommitted} complete WAL frames"] if scan.uncommitted else []
        if partial_frame:
            written.append("a partly written frame")
        if reader:
            logger.warning(
                "%s: the WAL holds %s after the last commit, not committed (a crawl writing the store now, or a "
                "transaction a crash, a forced shutdown or a full disk cut short); the store is read as of its "
                "last commit",
                wal, " and ".join(written),
            )  # fmt: skip
        else:
            logger.warning(
                "%s: the store's last transaction was never committed (%s after the last commit): a crash, a "
                "forced shutdown or a full disk cut it short. SQLite ignores it, so the pages of that last flush "
                "are not in the store",
                wal, " and ".join(written),
            )  # fmt: skip
    elif scan.stale:
        logger.debug("%s: %d WAL frames after the last commit are leftovers SQLite ignores", wal, scan.stale)


def scan_wal(data: bytes, wal: object, reader: bool = False, quiet: bool = False) -> WalScan:
    """Read a WAL's bytes as SQLite would; raise ``StoreError`` (naming ``wal``) if committed data would be lost.

    ``reader``: the store is only read (a crawl may be writing it now), which the warning about
    frames after the last commit then allows for; ``quiet``: no warning (a mere look at the file).
    """
    scan = WalScan()
    if len(data) < _WAL_HEADER.size:
        return scan  # nothing was committed through it
    header = _read_header(data, wal)
    if header is None:
        return scan
    scan.page_size = header.page_size
    frame_size = _WAL_FRAME.size + header.page_size
    frames = (len(data) - _WAL_HEADER.size) // frame_size
    partial = (len(data) - _WAL_HEADER.size) % frame_size
    if not frames:
        if not quiet:
            _warn_uncommitted(scan, bool(partial), wal, reader)
        return scan
    f = _read_frames(data, header, frames)
    bad = f.bad
    commits = np.flatnonzero(f.commit[:bad])
    kept = int(commits[-1]) + 1 if len(commits) else 0
    if bad < frames:
        scan.stale = _check_break(f, wal, quiet)
    scan.committed = kept
    scan.uncommitted = bad - kept
    if kept:
        scan.db_pages = int(f.heads[kept - 1, 1])
        for i, number in enumerate(f.heads[:kept, 0].tolist()):
            scan.pages[number] = _WAL_HEADER.size + i * frame_size + _WAL_FRAME.size
    if not quiet:
        _warn_uncommitted(scan, bool(partial) and bad == frames, wal, reader)
    return scan


def check_wal(path: str | PathLike[str]) -> WalScan:
    """Check the store's WAL (``<path>-wal``) as ``scan_wal`` does; an absent WAL is an empty scan."""
    wal = Path(str(path) + "-wal")
    try:
        data = wal.read_bytes()
    except FileNotFoundError:
        return WalScan()
    except OSError as exc:
        raise StoreError(f"{wal}: cannot read the store's WAL: {exc.strerror or exc}") from None
    return scan_wal(data, wal)
