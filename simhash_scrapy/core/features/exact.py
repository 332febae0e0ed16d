"""The exact rule for short pages: equal normalised text, compared by a 64-bit digest.

A page with too few tokens for a stable simhash (fewer than ``MIN_TOKENS``,
at least one) is not skipped: soft-404 shells, "no results" pages and stub
pages repeat across thousands of URLs, and a crawler wants them recognised.
Such pages are compared exactly instead: two short pages are duplicates when
their token sequences, normalised as the fingerprint sees them (lower case,
punctuation and whitespace ignored), are identical.  The digest is BLAKE2b
(8 bytes) of the little-endian token hashes, so it is the same on every
machine and on both the C and the pure-Python paths.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..defaults import CJK_NGRAM
from .features import token_hashes

__all__ = ["exact_digest", "exact_digest_of_tokens"]


def exact_digest(text: str | bytes, cjk_ngram: int = CJK_NGRAM) -> int:
    """The unsigned 64-bit digest of ``text``'s normalised token sequence."""
    return exact_digest_of_tokens(token_hashes(text, cjk_ngram))


def exact_digest_of_tokens(hashes: np.ndarray) -> int:
    """``exact_digest`` from the text's ``features.token_hashes`` (a caller that has them hashes no token twice)."""
    hashes = hashes.astype("<u8", copy=False)
    return int.from_bytes(hashlib.blake2b(hashes.tobytes(), digest_size=8).digest(), "big")
