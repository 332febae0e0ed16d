"""A second, independent simhash of a page: the verification of near misses.

A copy of a page with 1-3% of its words edited is often 5-7 bits away from
it: beyond k (4), though the two are the same text.  A simhash's distance for
such a pair is noisy, and the noise of two simhashes made from independent
bits is independent.  So each page gets a **second simhash**: the same
features and weights, each feature hash passed through a fixed 64-bit mix
(``splitmix64``'s finaliser with its own constant), so that its bits are
independent of the first simhash's.

The clustering rule (``core.cluster.clustering`` step 6) uses it as a verification
step for candidates in a wider radius: a page with no canonical page within
k of its (first) simhash joins a canonical page whose second simhash is
within k of its own **and** whose first simhash is within
``VERIFY_FACTOR * k`` (8 at k = 4).  Both conditions were chosen on the
tuning halves of the real-web and documentation sets (``benchmarks/quality``).
The page's fingerprint is unchanged: the second simhash is one more query.
Pages of fewer than ``MIN_TOKENS`` tokens get none: a word moves their
simhash by more than k, and the one-edit rule (``core.features.edits``) decides them.
"""

from __future__ import annotations

import numpy as np

from .. import defaults
from .fingerprint import simhash_from_features

__all__ = ["second_simhash", "VERIFY_FACTOR", "MIN_TOKENS"]

#: Pages with at least this many tokens get a second simhash (the default ``ONE_EDIT_BELOW``).
MIN_TOKENS = defaults.ONE_EDIT_BELOW

#: A page's first simhash must be within this many times k of the candidate's.
VERIFY_FACTOR = 2

_SEED = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(hashes: np.ndarray) -> np.ndarray:
    """``splitmix64``'s finaliser of ``hashes ^ seed``: a bijection of uint64 whose bits are independent."""
    with np.errstate(over="ignore"):
        z = np.asarray(hashes, dtype=np.uint64) ^ _SEED
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        mixed: np.ndarray = z ^ (z >> np.uint64(31))
        return mixed


def second_simhash(features: np.ndarray, weights: np.ndarray) -> int:
    """The second simhash of a page from its feature hashes and weights (those of its first)."""
    return simhash_from_features(_mix(features), weights)
