"""The one-edit rule for pages just above the simhash threshold: deletion-neighbourhood keys.

A page of a few dozen tokens has an unstable simhash: one word more or less
moves it by more than k (with the "log" weighting, a word seen once more
moves 8-11 bits of a 31-word page).  Reference stubs that differ in one word
("Operands: v" vs "Operands: v, a") are near-duplicates all the same.  So a
page of ``MIN_TOKENS`` (at least 30) up to ``ONE_EDIT_BELOW`` tokens gets, beside its
simhash, the keys of its **deletion neighbourhood**: the digest of its token
sequence and of each sequence with one token left out.  Two such pages whose
keys meet are the same sequence after leaving out at most one token of each:
one token substituted, inserted or deleted (or one moved by a place).

Below ``ONE_EDIT_MIN_TOKENS`` (30, the default ``MIN_TOKENS``) the rule would
join different pages (soft-404 shells of two sites that differ in the site's
name, "Size: 3 dwords" vs "Size: 4 dwords"): a word is too large a part of
them, so they get no keys, whatever ``MIN_TOKENS``; short pages keep the exact
rule (``core.features.exact``).  Above ``ONE_EDIT_BELOW`` the simhash is stable
enough alone, and a page would need too many keys.

The digests are BLAKE2b (8 bytes) of the little-endian token hashes, as
``exact_digest``: the key of the whole sequence is the page's exact digest.
Keys are returned sorted and distinct, so they are the same on every path.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..defaults import CJK_NGRAM
from .features import token_hashes

__all__ = ["edit_keys", "edit_keys_of_tokens", "MAX_KEYS"]

#: The most keys a page can have (``ONE_EDIT_BELOW`` is capped so that n + 1 <= MAX_KEYS).
MAX_KEYS = 256


def edit_keys_of_tokens(hashes: np.ndarray) -> tuple[int, ...]:
    """The sorted distinct keys of a token-hash sequence's deletion neighbourhood (itself included)."""
    data = memoryview(np.ascontiguousarray(hashes, dtype="<u8").tobytes())
    keys = {int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")}
    for at in range(0, len(data), 8):
        digest = hashlib.blake2b(data[:at], digest_size=8)
        digest.update(data[at + 8 :])
        keys.add(int.from_bytes(digest.digest(), "big"))
    return tuple(sorted(keys))


def edit_keys(text: str | bytes, cjk_ngram: int = CJK_NGRAM) -> tuple[int, ...]:
    """``edit_keys_of_tokens`` of ``text``'s tokens, normalised as the fingerprint sees them."""
    return edit_keys_of_tokens(token_hashes(text, cjk_ngram))
