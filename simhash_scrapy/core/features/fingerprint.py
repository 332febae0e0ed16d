"""Charikar's simhash: weighted features -> one 64-bit fingerprint.

Each feature has a stable 64-bit hash.  For every bit position, features whose
hash has the bit set vote +weight, the others -weight; the fingerprint bit is 1
where the sum is positive.  Similar feature sets give fingerprints that differ
in few bits, so Hamming distance estimates how different two texts are.
"""

from __future__ import annotations

import numpy as np

from .. import _native
from .features import DEFAULT_FEATURES, FeatureConfig, feature_hashes

__all__ = [
    "MASK64",
    "simhash_from_features",
    "fingerprint",
    "hamming_distance",
    "similarity",
    "check_fingerprint",
]

MASK64 = (1 << 64) - 1


def check_fingerprint(value: object, name: str = "fingerprint") -> int:
    """Return ``value`` as an int if it is an unsigned 64-bit integer, else raise ValueError naming ``name``."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = int(value)
        if 0 <= value <= MASK64:
            return value
    raise ValueError(f"{name} must be an integer in 0..2**64-1, got {value!r}")


def simhash_from_features(features: np.ndarray, weights: np.ndarray) -> int:
    """The bit vote.  ``features`` are uint64 hashes, ``weights`` their weights."""
    if len(features) == 0:
        return 0
    if _native.speedups is not None:
        # The same vote in C; None when a bit is too near a tie to be sure of numpy's rounding.
        voted: int | None = _native.speedups.vote(
            np.ascontiguousarray(features, dtype=np.uint64), np.ascontiguousarray(weights, dtype=np.float64)
        )
        if voted is not None:
            return voted
    # Little-endian byte view + little bit order: column j is bit j of the hash,
    # on any machine.
    as_bytes = np.ascontiguousarray(features, dtype="<u8").view(np.uint8).reshape(-1, 8)
    bits = np.unpackbits(as_bytes, axis=1, bitorder="little")
    # sum over features of weight * (+1 if bit set else -1) == 2 * (w @ bits) - sum(w).
    # einsum, not @: a BLAS call for a 64-wide product costs more than it saves.
    votes = 2.0 * np.einsum("ij,i->j", bits, weights) - weights.sum()
    packed = np.packbits(votes > 0, bitorder="little")
    return int.from_bytes(packed.tobytes(), "little")


def fingerprint(text: str | bytes, features: FeatureConfig = DEFAULT_FEATURES) -> int:
    """64-bit simhash of ``text`` (unsigned int).  Text with no word at all gives 0."""
    hashes, weights = feature_hashes(text, features)
    return simhash_from_features(hashes, weights)


def hamming_distance(a: int, b: int) -> int:
    """Number of differing bits between two 64-bit fingerprints."""
    return (check_fingerprint(a, "a") ^ check_fingerprint(b, "b")).bit_count()


def similarity(a: int, b: int) -> float:
    """1 - d/64 for two 64-bit fingerprints."""
    return 1.0 - hamming_distance(a, b) / 64.0
