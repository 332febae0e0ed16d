"""Containment of one page's sentences in another's: the verification of clustering step 7.

Two copies of one article can be far apart in simhash when one of them
carries text the other lacks: a syndicated copy keeps its host's own
captions or list intro beside the article, a print view lacks its
original's menus, option lists, headline and date rows.  Their *sentences*
still say it: nearly every sentence of the smaller page is one of the
larger's.  This is Broder's containment (A. Broder, "On the resemblance and
containment of documents", 1997), estimated from small sketches:

* A page's **sentences** are the pieces of its text (the main text the
  fingerprint is made from) between line breaks and sentence ends, of at least
  ``MIN_WORDS`` words (a character of a script written without spaces counts
  as a word), reduced to their words, lower-cased: menu items, bylines and
  dates are shorter and never count.  (Sentence ends are ``. ! ?`` before a
  space and the full-width ones.)  Each is hashed to 64 bits (the
  tokeniser's ``stable_hash64``: the same in every process), in C when the
  helpers are built (the same hashes).
* Its **sketch** is the ``SKETCH`` smallest of those distinct hashes (all of
  them when it has fewer) and their number.  The ``ANCHORS`` smallest are its
  **anchors**: the clustering rule finds candidates by looking a new page's
  whole sketch up among the canonical pages' anchors.
* **Verification** (``verify``): the ``SKETCH`` smallest hashes of the two
  sketches together are a uniform sample of the union of the two sentence
  sets, and for each of them membership in either set is known exactly (a
  hash among the union's smallest that is in a set is among that set's
  smallest).  The share of the sample's hashes of the *smaller* page that
  the larger one has too estimates how much of the smaller page is in the
  larger (its containment).  A pair is a duplicate when that share is at
  least ``MIN_CONTAINMENT`` (1.0: all of them; two pages of one site that
  are mostly a long common section share most of their sentences, copies
  share all), at least ``MIN_SHARED`` sampled hashes are
  shared, and the smaller page has more than ``MIN_RATIO`` times the larger's
  sentences (more than ``CROSS_HOST_MIN_RATIO`` across hosts): a listing page that holds a whole article among others contains
  it, but is not a copy of it, and a page that holds another plus as much again (two articles, an article
  and its excerpt) is not a copy of it either, on one host or across hosts (issue 37).
* **Common sentences** (``SentenceCounts``): the rule counts the sentences of
  every page that reaches step 7; a sentence both pages have that ``COMMON``
  such pages had is left out of the sample (a host's teaser box, a site-wide
  "about these documents" section say nothing about the article), while one
  only one of them has still counts against the pair.

Bounded memory: a canonical page's sketch and anchors take about 500 bytes
(``containment.py --cost``), at most ``MAX_PAGES`` canonical pages a scope
(then later canonical pages are not sketched: fewer pairs found, never a
wrong one); the counts are two fixed tables of 2 MB.  Nothing is saved: pages
restored from a store have no sketch.

Every threshold was chosen on the tuning halves of the real-web and
documentation sets (``benchmarks/quality/containment.py``).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from typing import NamedTuple

import numpy as np

from .. import _native
from ..features.features import FOOTNOTE_MARKER, span_hashes

__all__ = [
    "Sketch", "SentenceCounts", "ContainmentIndex", "sentence_hashes", "sentence_texts", "sketch_of", "verify",
    "verified_containment", "estimate", "pack_hashes", "unpack_hashes",
    "MIN_WORDS", "SKETCH", "ANCHORS", "MIN_CONTAINMENT", "MIN_RATIO", "CROSS_HOST_MIN_RATIO", "MIN_SHARED", "MIN_SENTENCES", "COMMON",
    "MAX_PAGES", "MAX_OWNERS",
]  # fmt: skip

#: A sentence counts when it has at least this many words.
MIN_WORDS = 8
#: A sketch keeps this many of a page's smallest sentence hashes.
SKETCH = 32
#: The smallest hashes of a canonical page's sketch that candidates are found by.
ANCHORS = 4
#: A page is a copy when at least this share of its sampled sentences is in the other page (all of them: a
#: page that shares most of its sentences with another, such as a long section common to a site's
#: pages, is not a copy) ...
MIN_CONTAINMENT = 1.0
#: ... it has more than this many times the other page's sentences (or the other way round): exactly
#: half is the other page plus as much again, not a copy ...
MIN_RATIO = 0.5
#: Across hosts, stronger evidence: the smaller page has at least this share of the larger's sentences
#: (the larger holds it plus at most half as much again): another host's pages that each hold two of a
#: site's articles, or half of one, never make that site's articles duplicates.
CROSS_HOST_MIN_RATIO = 2 / 3
#: ... and the two share at least this many sampled sentences.
MIN_SHARED = 4
#: Pages with fewer sentences get no sketch.  Three: between views of one address three shared sentences
#: are enough (``views.MIN_SHARED``), and a page of three never reaches ``MIN_SHARED`` elsewhere (a print view
#: of three sentences, a short home page and its tracking copy: issue 33, round 6).
MIN_SENTENCES = 3
#: A sentence counted in this many pages checked by step 7 is common (a host's widget, a site-wide
#: section): it is left out of the verification.
COMMON = 3
#: The most canonical pages' sketches a rule keeps per scope (about 500 bytes each).
MAX_PAGES = 100_000
#: The most pages an anchor remembers.
MAX_OWNERS = 8

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_WORD = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")
# A word: a run of ASCII letters, digits and underscores, or of other bytes than ASCII (UTF-8 letters of
# other scripts, with whatever punctuation they hold: both copies of a sentence have the same).
_ASCII_WORD = re.compile(rb"[0-9A-Za-z_\x80-\xff]+")
# Where a sentence ends (besides a line break): . ! ? before a space, and the full-width stop, exclamation and question marks (UTF-8).
# Replaced by line breaks with bytes.replace: a regex scan costs several times more.
_WIDE_ENDS = ("\u3002".encode(), "\uff01".encode(), "\uff1f".encode())
# A link marker a print view puts after each link of its text (``see the recipe [12] below``): the marker
# the fingerprint leaves out too (``features.strip_not_content``).
_MARKER = re.compile(FOOTNOTE_MARKER)


class Sketch(NamedTuple):
    """A page's sentence sketch: its smallest distinct sentence hashes (ascending) and how many it has."""

    hashes: tuple[int, ...]
    sentences: int


def sentence_hashes(text: str | bytes, min_words: int = MIN_WORDS) -> list[int]:
    """The distinct 64-bit hashes of the sentences of ``text`` with at least ``min_words`` words, ascending.

    A sentence is its words (runs of ASCII letters, digits and ``_``, or of bytes of other characters;
    ASCII letters lower-cased) joined by one space.  In a piece with too few of them that is not ASCII,
    a character of a script written without spaces counts as a word (the sentence is then its ``\\w``
    runs and those characters, so joined).  Each is hashed with ``features.stable_hash64`` (the
    tokeniser's hash).  UTF-8 bytes and ``str`` give the same hashes; the C helper
    (``_speedups.sentence_hashes``) gives the same as the pure-Python path.  Link markers (``[12]``: a
    print view's numbered links, ``_unmarked``) are left out, so a sentence with them is the sentence
    without.
    """
    data = _unmarked(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text))
    if _native.speedups is not None:
        hashes: list[int] = _native.speedups.sentence_hashes(data, min_words)
        return hashes
    return _sentence_hashes_python(data, min_words)


def _sentence_hashes_python(data: bytes, min_words: int) -> list[int]:
    """``sentence_hashes`` of UTF-8 ``data`` in pure Python (the C helper's twin)."""
    return sorted(set(_stable_hashes(_sentence_keys(data, min_words))))


def sentence_texts(text: str | bytes, min_words: int = MIN_WORDS) -> dict[int, str]:
    """Each sentence of ``text`` (as ``sentence_hashes`` counts it) by its hash: the evidence ``compare`` shows."""
    data = _unmarked(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text))
    keys = _sentence_keys(data, min_words)
    return {h: key.decode("utf-8", "replace") for h, key in zip(_stable_hashes(keys), keys)}


def _unmarked(data: bytes) -> bytes:
    """``data`` without its link markers (``_MARKER``: ``[1]`` to ``[9999]``, each a space): a CMS print view
    numbers every link of the text and lists the addresses below it, and its sentences are its page's."""
    return _MARKER.sub(b" ", data) if b"[" in data else data


def _sentence_keys(data: bytes, min_words: int) -> list[bytes]:
    """The sentences of UTF-8 ``data`` with at least ``min_words`` words, each its words joined by a space."""
    if min_words < 0:
        raise ValueError("sentence_hashes: min_words must not be negative")
    data = data.lower().replace(b". ", b"\n").replace(b"! ", b"\n").replace(b"? ", b"\n")
    if not data.isascii():
        for end in _WIDE_ENDS:
            data = data.replace(end, b"\n")
    keys = []
    short = 3 * min_words  # bytes: a CJK character is three of them in UTF-8
    spaces = min_words - 1
    for piece in data.split(b"\n"):
        # most pieces are menu items and captions: one count in C tells they are too short
        words = _ASCII_WORD.findall(piece) if piece.count(b" ") >= spaces else ()
        if len(words) < min_words:
            if len(piece) < short or piece.isascii():
                continue
            words = [w.encode("utf-8", "surrogatepass") for w in _WORD.findall(piece.decode("utf-8", "replace"))]
            if len(words) < min_words:
                continue
        keys.append(b" ".join(words))
    return keys


def _stable_hashes(keys: list[bytes]) -> list[int]:
    """``features.stable_hash64`` of every key, in one vectorised pass (``features.span_hashes``)."""
    if not keys:
        return []
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    ends = np.cumsum(lengths)
    hashes: list[int] = span_hashes(b"".join(keys), ends - lengths, ends).tolist()
    return hashes


def sketch_of(
    text: str | bytes, size: int = SKETCH, min_words: int = MIN_WORDS, min_sentences: int = MIN_SENTENCES
) -> Sketch | None:
    """The sketch of ``text`` (the ``size`` smallest sentence hashes), ``None`` under ``min_sentences`` sentences."""
    hashes = sentence_hashes(text, min_words)
    if len(hashes) < min_sentences:
        return None
    return Sketch(tuple(hashes[:size]), len(hashes))


def estimate(
    a: Sketch, b: Sketch, size: int = SKETCH, common: Callable[[int], bool] | None = None
) -> tuple[float, int]:
    """``(containment, shared)``: the estimated share of the smaller page's sentences in the larger's, and how
    many hashes of the sample (the ``size`` smallest of both sketches, without the shared ones ``common``
    says are common sentences) the two share."""
    in_a, in_b = set(a.hashes), set(b.hashes)
    in_small, in_large = (in_a, in_b) if a.sentences <= b.sentences else (in_b, in_a)
    sample = sorted(in_a | in_b)[:size]
    if common is not None:  # a common sentence both have says nothing; one only one has still differs
        sample = [h for h in sample if not (h in in_small and h in in_large and common(h))]
    mine = [h for h in sample if h in in_small]
    shared = sum(1 for h in mine if h in in_large)
    return (shared / len(mine) if mine else 0.0), shared


def verify(
    a: Sketch,
    b: Sketch,
    min_containment: float = MIN_CONTAINMENT,
    min_ratio: float = MIN_RATIO,
    min_shared: int = MIN_SHARED,
    size: int = SKETCH,
    common: Callable[[int], bool] | None = None,
) -> bool:
    """Whether two pages are copies by their sentences: contained, of comparable size, enough shared."""
    return verified_containment(a, b, min_containment, min_ratio, min_shared, size, common) is not None


def verified_containment(
    a: Sketch,
    b: Sketch,
    min_containment: float = MIN_CONTAINMENT,
    min_ratio: float = MIN_RATIO,
    min_shared: int = MIN_SHARED,
    size: int = SKETCH,
    common: Callable[[int], bool] | None = None,
) -> float | None:
    """``verify``'s rule, with its estimate: the containment of two pages that are copies, else ``None``."""
    if min(a.sentences, b.sentences) <= min_ratio * max(a.sentences, b.sentences):
        return None  # the larger holds the smaller plus at least (1 / min_ratio - 1) times as much again
    contained, shared = estimate(a, b, size, common)
    return contained if shared >= min_shared and contained >= min_containment else None


class SentenceCounts:
    """How many pages each sentence hash was counted in, approximately, in fixed memory.

    Two tables of ``2**bits`` saturating 8-bit counters, each indexed by its own
    bits of the hash; a hash's count is the smaller of its two counters (a
    count-min sketch).  A collision can only raise a count: past tens of
    millions of counted sentences more of them look common, and step 7
    finds fewer pairs, never more.
    """

    def __init__(self, bits: int = 21) -> None:
        self._mask = (1 << bits) - 1
        self._bits = bits
        self._low = bytearray(1 << bits)
        self._high = bytearray(1 << bits)
        #: Every hash counted, in order, when not ``None`` (the store saves them: ``core.store.detector_state``).
        self.log: list[int] | None = None

    def nbytes(self) -> int:
        return len(self._low) + len(self._high)

    def add(self, hashes: Iterable[int]) -> None:
        """Count one page holding ``hashes`` (distinct)."""
        low, high, mask, bits = self._low, self._high, self._mask, self._bits
        if self.log is not None:
            hashes = tuple(hashes)
            self.log.extend(hashes)
        for h in hashes:
            a, b = h & mask, (h >> bits) & mask
            if low[a] < 255:
                low[a] += 1
            if high[b] < 255:
                high[b] += 1

    def count(self, h: int) -> int:
        return min(self._low[h & self._mask], self._high[(h >> self._bits) & self._mask])

    def add_many(self, hashes: np.ndarray) -> None:
        """Count every hash of ``hashes`` (uint64) once, as ``add`` would one by one (saturating at 255)."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        if not len(hashes):
            return
        count = getattr(_native.speedups, "count_hashes", None)  # (None: an older build of the helpers)
        if count is not None:
            count(self._low, self._high, np.ascontiguousarray(hashes), self._bits)
            return
        mask = np.uint64(self._mask)
        for table, keys in ((self._low, hashes & mask), (self._high, (hashes >> np.uint64(self._bits)) & mask)):
            slots, times = np.unique(keys.astype(np.int64), return_counts=True)
            counters = np.frombuffer(table, dtype=np.uint8)  # a writable view of the table
            counters[slots] = np.minimum(counters[slots].astype(np.int64) + times, 255)


class ContainmentIndex:
    """The canonical pages' sketches of one scope, found by their anchors (clustering step 7).

    Bounded: at most ``max_pages`` sketches (then new canonical pages are not
    added; the ones kept still match); an anchor remembers at most
    ``MAX_OWNERS`` pages (a sentence that many pages start with is common).
    """

    def __init__(self, max_pages: int = MAX_PAGES) -> None:
        self.max_pages = max_pages
        self._sketches: dict[int, tuple[bytes, int]] = {}  # entry -> (packed hashes, sentence count)
        self._anchors: dict[int, int | list[int]] = {}  # anchor hash -> entry, or entries (ascending)

    def __len__(self) -> int:
        return len(self._sketches)

    def add(self, entry: int, sketch: Sketch, packed: bytes | None = None) -> bool:
        """Keep ``entry``'s sketch (``False`` when full); ``packed``: its hashes as ``pack_hashes`` packs them, when
        the caller has them so (the Redis extras records: ``backends.redis.mirror``)."""
        if len(self._sketches) >= self.max_pages or entry in self._sketches:
            return False
        self._sketches[entry] = (pack_hashes(sketch.hashes) if packed is None else packed, sketch.sentences)
        anchors = self._anchors
        for h in sketch.hashes[:ANCHORS]:
            owners = anchors.get(h)
            if owners is None:
                anchors[h] = entry
            elif isinstance(owners, int):
                anchors[h] = [owners, entry]
            elif len(owners) < MAX_OWNERS:
                owners.append(entry)
        return True

    def remove(self, entry: int) -> None:
        kept = self._sketches.pop(entry, None)
        if kept is None:
            return
        anchors = self._anchors
        for h in unpack_hashes(kept[0])[:ANCHORS]:
            owners = anchors.get(h)
            if owners == entry:
                del anchors[h]
            elif isinstance(owners, list) and entry in owners:
                owners.remove(entry)
                if len(owners) == 1:
                    anchors[h] = owners[0]

    def sketch(self, entry: int) -> Sketch | None:
        kept = self._sketches.get(entry)
        return None if kept is None else Sketch(unpack_hashes(kept[0]), kept[1])

    def candidates(self, sketch: Sketch) -> list[int]:
        """The canonical entries one of whose anchors is in ``sketch``, ascending."""
        anchors = self._anchors
        shared = anchors.keys() & sketch.hashes  # (one C loop: most pages share no anchor)
        if not shared:
            return []
        found: set[int] = set()
        for h in shared:
            owners = anchors[h]
            if isinstance(owners, int):
                found.add(owners)
            else:
                found.update(owners)
        return sorted(found)

    def shared_anchors(self, sketches: Iterable[Sketch | None]) -> set[int]:
        """The anchors among the hashes of ``sketches`` (a page none of whose hashes is one has no candidate)."""
        return self._anchors.keys() & chain.from_iterable(sketch.hashes for sketch in sketches if sketch is not None)

    def match(
        self, sketch: Sketch, counts: SentenceCounts | None = None, other_host: Callable[[int], bool] | None = None
    ) -> tuple[int, float] | None:
        """``(entry, containment)`` of the verified candidate with the highest containment (ties: the entry
        recorded first), else ``None``.  ``counts``: sentences counted in ``COMMON`` pages or more are
        left out of the verification.  ``other_host(entry)``: the candidate is of another host, and is
        verified with ``CROSS_HOST_MIN_RATIO``."""
        best: tuple[int, float] | None = None
        common = None if counts is None else (lambda h: counts.count(h) >= COMMON)
        for entry in self.candidates(sketch):
            other = self.sketch(entry)
            assert other is not None
            ratio = CROSS_HOST_MIN_RATIO if other_host is not None and other_host(entry) else MIN_RATIO
            contained = verified_containment(sketch, other, min_ratio=ratio, common=common)
            if contained is None:
                continue
            if best is None or contained > best[1]:
                best = (entry, contained)
        return best


#: ``pack_hashes``'s packings by the number of hashes, made once (a Redis worker packs every page's sketch).
_PACKINGS = [struct.Struct(f">{n}Q") for n in range(256)]


def pack_hashes(hashes: Sequence[int]) -> bytes:
    """A sketch's hashes as kept: 8 bytes each, big-endian (as the Redis extras records hold them, so a record's
    bytes go to ``ContainmentIndex.add`` as they are)."""
    count = len(hashes)
    packing = _PACKINGS[count] if count < len(_PACKINGS) else struct.Struct(f">{count}Q")
    return packing.pack(*hashes)


def unpack_hashes(data: bytes) -> tuple[int, ...]:
    """``pack_hashes``'s hashes back."""
    return struct.unpack(f">{len(data) // 8}Q", data)
