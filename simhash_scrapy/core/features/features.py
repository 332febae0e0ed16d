"""Tokenisation and feature hashing: text -> (feature hashes, weights).

No Scrapy import here: this module is part of the algorithm core.

Tokenisation is defined so that it can run fast on bytes:

1. The text is encoded as UTF-8 and split at every ASCII character that is
   not a letter or a digit (``bytes.translate`` + ``bytes.split`` run in C).
   ASCII letters are lower-cased on the way.
2. A piece that still holds non-ASCII characters is decoded, NFKC-normalised,
   case-folded and split again at Unicode non-word characters.  Runs of
   characters from scripts written without spaces (Han, Hiragana, Katakana,
   Thai, Lao, Khmer, Myanmar) become overlapping character n-grams
   (``cjk_ngram``, bigrams by default), so such text still fingerprints well.

Text that is not content does not vote (``strip_not_content``, before step 1):
link-footnote markers (``[12]``) with the URL printed after them (``[12]
http://...``: the entries of a print view's link list), and machine-made
labels with what they label: "Source URL: <url>", "Printed on <date>",
"Retrieved from <url or date>", "Accessed on <date>", a "Links:" heading.  Printer-friendly copies list every link of the article as
a numbered footnote of full URLs; without this rule fifty distinct marker
numbers and the URL fragments (``http``, host and path words) outweigh the
article's words.  URLs in the article's own text stay: on the evaluation set
removing them too lost more (reference links are what tells release notes
and review lists apart) than it gained.

Every token gets a stable 64-bit hash (a polynomial hash of its UTF-8 bytes
modulo 2**64 through the SplitMix64 finaliser), the same in every process and
on every machine, computed for all tokens at once with numpy.  Word n-grams combine the token
hashes with a SplitMix64 mixer, vectorised with numpy.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _native, defaults

#: The compiled tokeniser hash when available (see ``_speedups.c``); both give the same hashes.

__all__ = [
    "FeatureConfig",
    "DEFAULT_FEATURES",
    "tokenize",
    "feature_hashes",
    "stable_hash64",
    "span_hashes",
    "strip_not_content",
    "FOOTNOTE_MARKER",
    "WEIGHTINGS",
]

#: The accepted ``weighting`` values (``SIMHASH_WEIGHTING``).
WEIGHTINGS = ("log", "sublinear", "tf", "binary")


@dataclass(frozen=True)
class FeatureConfig:
    """Which features a fingerprint is built from and how they are weighted.

    ``word_ngram``: length of word shingles (1 = single words).
    ``char_ngram``: if > 0, character n-grams of the normalised text are used
    *instead of* word shingles.
    ``weighting``: ``"log"`` (1 + 6 ln tf, ``defaults.LOG_WEIGHT_SLOPE``),
    ``"sublinear"`` (1 + ln tf), ``"tf"`` (term frequency) or ``"binary"``
    (every distinct feature weighs 1).  ``"log"`` lets a word the page repeats
    outvote words it uses once: an edit mostly inserts or removes words used
    once, so edited copies stay closer, while ``"tf"`` lets the most common
    words ("the", "of") make unrelated pages look alike.
    ``cjk_ngram``: n for character n-grams of scripts written without spaces.
    """

    word_ngram: int = defaults.WORD_NGRAM
    char_ngram: int = defaults.CHAR_NGRAM
    weighting: str = defaults.WEIGHTING
    cjk_ngram: int = defaults.CJK_NGRAM

    def __post_init__(self) -> None:
        for name in ("word_ngram", "cjk_ngram"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not isinstance(self.char_ngram, int) or isinstance(self.char_ngram, bool) or self.char_ngram < 0:
            raise ValueError(f"char_ngram must be an integer >= 0, got {self.char_ngram!r}")
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got {self.weighting!r}")

    def signature(self) -> str:
        """A short stable string that identifies this configuration (stored in index files).

        The ``"log"`` weighting carries its slope (``log6``): fingerprints made with another
        slope cannot be compared, so a store written with one is never read with another.
        """
        weighting = f"log{defaults.LOG_WEIGHT_SLOPE:g}" if self.weighting == "log" else self.weighting
        return f"w{self.word_ngram}-c{self.char_ngram}-{weighting}-j{self.cjk_ngram}"


DEFAULT_FEATURES = FeatureConfig()

# bytes.translate table: ASCII letters -> lower case, ASCII digits kept,
# every other ASCII byte -> space, non-ASCII bytes (UTF-8 sequences) kept.
_ASCII_TABLE = bytes(
    (c + 32 if 65 <= c <= 90 else c) if (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c >= 128) else 32
    for c in range(256)
)

# Scripts written without spaces between words.
_NOSPACE_RANGES = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0003134f"  # CJK extensions B..G
)
_UNICODE_TOKEN = re.compile(f"([{_NOSPACE_RANGES}]+)|[^\\W_{_NOSPACE_RANGES}]+")

_CACHE_LIMIT = 200_000
# Texts are hashed in chunks of about this many bytes (bounded temporary arrays).
_CHUNK = 1 << 20

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
# Token hash: polynomial hash of the token's UTF-8 bytes modulo 2**64
# (sum of byte_j * P**j), plus the length, through the SplitMix64 finaliser.
# Prefix sums make it fully vectorised: hash(s..e) = (H[e] - H[s]) * P**-s.
_P = 0x100000001B3
_P_INV = pow(_P, -1, 1 << 64)


def _power_table(base: int, size: int) -> np.ndarray:
    """[1, base, base**2, ...] modulo 2**64, as uint64."""
    factors = np.full(size, base, dtype=np.uint64)
    factors[0] = 1
    return np.cumprod(factors, dtype=np.uint64)


_POWERS = _power_table(_P, _CHUNK + 64)
_INV_POWERS = _power_table(_P_INV, _CHUNK + 64)
_MASK = (1 << 64) - 1


def _mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser, element-wise on a uint64 array (wrapping arithmetic)."""
    z = z ^ (z >> np.uint64(30))
    z = z * _M1
    z = z ^ (z >> np.uint64(27))
    z = z * _M2
    mixed: np.ndarray = z ^ (z >> np.uint64(31))
    return mixed


def _mix64_int(z: int) -> int:
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & _MASK
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def stable_hash64(token: bytes) -> int:
    """Stable unsigned 64-bit hash of one token's bytes (the same on every machine)."""
    acc = 0
    power = 1
    for byte in token:
        acc = (acc + byte * power) & _MASK
        power = (power * _P) & _MASK
    return _mix64_int((acc + len(token)) & _MASK)


def _split_unicode_piece(piece: str, cjk_ngram: int) -> list[str]:
    """Tokens of one piece that holds non-ASCII characters."""
    tokens: list[str] = []
    folded = unicodedata.normalize("NFKC", piece).casefold()
    for match in _UNICODE_TOKEN.finditer(folded):
        run = match.group(1)
        if run is None:
            tokens.append(match.group(0))
        elif len(run) <= cjk_ngram:
            tokens.append(run)
        else:
            tokens.extend(run[i : i + cjk_ngram] for i in range(len(run) - cjk_ngram + 1))
    return tokens


def _only_separates(char: str, cjk_ngram: int) -> bool:
    """Whether ``char`` can never be or join part of a token: the Unicode rules split at it, alone or between letters."""
    return (
        unicodedata.category(char)[0] in "PSZ"
        and not unicodedata.combining(char)
        and re.search(r"\w", unicodedata.normalize("NFKC", char).casefold()) is None
        and _split_unicode_piece(f"a{char}b", cjk_ngram) == ["a", "b"]
        and _split_unicode_piece(char, cjk_ngram) == []
    )


# Punctuation and symbols that sit inside pieces of ordinary text (a heading's pilcrow, curly
# quotes, dashes, ellipses, no-break spaces, arrows, box drawing in code listings...).  The C
# tokeniser splits pieces at them itself instead of handing the piece to the Unicode path: the
# same tokens (each one checked against that path here, at import), at C speed.
_SEPARATOR_CANDIDATES = (
    [*range(0xA0, 0xC0), 0xD7, 0xF7]  # Latin-1 punctuation and symbols; those that NFKC makes word characters drop out
    + [*range(0x2000, 0x200B), *range(0x2010, 0x2028), *range(0x2030, 0x205F)]  # general punctuation
    + [*range(0x2190, 0x219A), 0x21D2, 0x21D4, 0x2212, 0x221E, 0x2260, 0x2264, 0x2265]  # arrows, math
    + [0x2500, 0x2502, 0x250C, 0x2510, 0x2514, 0x2518, 0x251C, 0x2524, 0x252C, 0x2534, 0x253C]  # box drawing
    + [0x25A0, 0x25CF, 0x25B6, 0x25BC, 0x2605, 0x2713, 0x2714, 0x2717, 0x2718]  # bullets, stars, check marks
    + [0x3000, 0x3001, 0x3002, *range(0x3008, 0x3012), 0xFF01, 0xFF08, 0xFF09, 0xFF0C, 0xFF1A, 0xFF1B, 0xFF1F]
)
#: The non-ASCII code points the C tokeniser splits at (``_speedups.set_separators``).
SEPARATOR_CODE_POINTS = tuple(
    sorted(cp for cp in _SEPARATOR_CANDIDATES if _only_separates(chr(cp), defaults.CJK_NGRAM))
)


class _PieceHashCache(dict[bytes, np.ndarray]):
    """non-ASCII piece (bytes) -> uint64 array of its tokens' hashes; computed on first use."""

    def __init__(self, cjk_ngram: int) -> None:
        super().__init__()
        self.cjk_ngram = cjk_ngram

    def __missing__(self, piece: bytes) -> np.ndarray:
        if len(self) >= _CACHE_LIMIT:
            self.clear()
        tokens = _split_unicode_piece(piece.decode("utf-8", "replace"), self.cjk_ngram)
        value = np.array([stable_hash64(tok.encode("utf-8")) for tok in tokens], dtype=np.uint64)
        self[piece] = value
        return value


_caches: dict[int, _PieceHashCache] = {}


def _cache_for(cjk_ngram: int) -> _PieceHashCache:
    cache = _caches.get(cjk_ngram)
    if cache is None:
        cache = _caches[cjk_ngram] = _PieceHashCache(cjk_ngram)
    return cache


def _to_bytes(text: str | bytes) -> bytes:
    if isinstance(text, bytes):
        return text
    if isinstance(text, str):
        # Lone surrogates (possible in str built from bad data) become U+FFFD, never an error.
        return text.encode("utf-8", "replace")
    raise TypeError(f"text must be str or bytes, got {type(text).__name__}")


# Each rule is a separate regex that starts with a literal, so the regex engine can skip ahead to
# candidates, and runs only when the text holds its literal at all (bytes.find runs in C).
_URL_END = rb"[^\s<>\"'\])]+"
_URL = rb"(?:[A-Za-z]{2,6}://|www\.)" + _URL_END
# Every rule is whitespace-agnostic (a newline counts as a space): the fingerprint path keeps the
# page's source newlines, the display path (``extract_text``) makes them spaces, and both must
# give the same tokens.  Each rule runs only when the text holds its literal (with the C helpers,
# what its regex must start with: one scan, ``_speedups.not_content_rules``), and each regex starts
# with that literal, so the regex engine skips ahead to candidates.
#
#: A link-footnote marker, "[12]" (at most four ASCII digits): left out of the fingerprint (with the URL printed
#: after one, if any) and of the sentences (``core.cluster.containment``).
FOOTNOTE_MARKER = rb"\[[0-9]{1,4}\]"
_FOOTNOTE = re.compile(FOOTNOTE_MARKER + rb"(?:\s*" + _URL + rb")?")
# "Source URL: http://...", "Canonical URL: ...", "URL: ..." (the word before "URL" stays).
_URL_LINE = re.compile(rb"URL\s?:\s*" + _URL)
# "Printed on 2025-05-03 14:22", "Accessed on 12 May 2024": the label and what follows up to
# the first token with a year (at most four tokens on), and a time after it.  The regex starts
# at the label's literal tail "ed on"/"ed at"; the word before is checked in Python.
_DATE_LINE = re.compile(
    rb"ed (?:on|at)\b(?:\s+\S+){0,3}?\s+\S*\d{4}\S*(?:\s+\d{1,2}:\d{2}(?::\d{2})?)?"
)
_DATE_LABELS = (b"printed", b"retrieved", b"accessed", b"downloaded")
_DATE_LABEL_MAX = max(map(len, _DATE_LABELS))
# "Retrieved from http://..." (a URL instead of a date).
_FROM_URL = re.compile(rb"[Rr]etrieved from\s+" + _URL)
# The "Links:" heading of a print view's link list.
_LINKS = b"Links:"
_FOOTNOTE_STRIP = functools.partial(_FOOTNOTE.sub, b" ")
_URL_STRIP = functools.partial(_URL_LINE.sub, b" ")
_FROM_STRIP = functools.partial(_FROM_URL.sub, b" ")


def _drop_dates(data: bytes) -> bytes:
    parts = []
    last = 0
    for match in _DATE_LINE.finditer(data):
        end = match.start() + 2  # the label ends with "ed"
        start = end - _DATE_LABEL_MAX
        word = data[max(last, start) : end].rsplit(None, 1)[-1].lower() if end > last else b""
        if word not in _DATE_LABELS:
            continue
        parts.append(data[last : end - len(word)])
        last = match.end()
    if not parts:
        return data
    parts.append(data[last:])
    return b" ".join(parts)


# The rules' bits for ``_speedups.not_content_rules`` (the same values as its RULE_* constants).
_RULE_FOOTNOTE, _RULE_URL, _RULE_DATE, _RULE_FROM, _RULE_LINKS = 1, 2, 4, 8, 16
_ALL_RULES = 31


def strip_not_content(data: bytes) -> bytes:
    """``data`` (UTF-8 text) without the text that is not content (see the module docstring).

    Footnote markers (with the URL after them), "URL:" lines, "Printed on/Retrieved
    from/Accessed on <date>" and a "Links:" heading become spaces.
    """
    if _native.speedups is not None:
        return _strip_marked(data, _native.speedups.not_content_rules)
    if b"[" in data:
        data = _FOOTNOTE.sub(b" ", data)
    if b"URL" in data:
        data = _URL_LINE.sub(b" ", data)
    if b"ed on" in data or b"ed at" in data:
        data = _drop_dates(data)
    if b"etrieved from" in data:
        data = _FROM_URL.sub(b" ", data)
    if _LINKS in data:
        data = data.replace(_LINKS, b" ")
    return data


def _strip_marked(data: bytes, rules_of: Any) -> bytes:
    """``strip_not_content`` with one C scan telling which rules may change the text: the same
    rules in the same order, each skipped only when the text lacks what its regex must start
    with.  A rule that removed text may have joined the start of a later one ("URL[1]:" becomes
    "URL :"), so the later rules are looked for again in the new text."""
    rules = rules_of(data, _DATE_LABELS, _DATE_LABEL_MAX, _ALL_RULES)
    for rule, strip in ((_RULE_FOOTNOTE, _FOOTNOTE_STRIP), (_RULE_URL, _URL_STRIP), (_RULE_DATE, _drop_dates),
                        (_RULE_FROM, _FROM_STRIP)):
        if rules & rule:
            stripped = strip(data)
            if len(stripped) != len(data):  # every rule's removal is longer than the space left for it
                data = stripped
                rules = rules_of(data, _DATE_LABELS, _DATE_LABEL_MAX, _ALL_RULES & ~(2 * rule - 1))
    if rules & _RULE_LINKS:
        data = data.replace(_LINKS, b" ")
    return data


def tokenize(text: str | bytes, cjk_ngram: int = defaults.CJK_NGRAM) -> list[str]:
    """The normalised tokens of ``text``, as the fingerprint sees them (for display and tests)."""
    tokens: list[str] = []
    for piece in strip_not_content(_to_bytes(text)).translate(_ASCII_TABLE).split():
        if piece.isascii():
            tokens.append(piece.decode("ascii"))
        else:
            tokens.extend(_split_unicode_piece(piece.decode("utf-8", "replace"), cjk_ngram))
    return tokens


def _chunk_hashes(chunk: bytes, cjk_ngram: int) -> np.ndarray:
    if _native.speedups is not None:
        packed, specials = _native.speedups.hash_tokens(chunk)
        return _with_specials(np.frombuffer(packed, dtype=np.uint64), chunk, specials, cjk_ngram)
    codes = np.frombuffer(chunk, dtype=np.uint8)
    n = len(codes)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    in_token = codes != 32
    edges = np.flatnonzero(in_token[1:] != in_token[:-1]) + 1
    # Token boundaries alternate start, end, start...; pad the first start / last end.
    if in_token[0]:
        edges = np.concatenate((np.zeros(1, dtype=edges.dtype), edges))
    if in_token[-1]:
        edges = np.concatenate((edges, np.full(1, n, dtype=edges.dtype)))
    starts, ends = edges[0::2], edges[1::2]
    if len(starts) == 0:
        return np.zeros(0, dtype=np.uint64)
    hashes = span_hashes(chunk, starts, ends)
    if chunk.isascii():
        return hashes
    high = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(codes >= 128, out=high[1:])
    special = np.flatnonzero(high[ends] != high[starts])
    return _with_unicode_tokens(hashes, chunk, special, starts[special], ends[special], cjk_ngram)


def span_hashes(data: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``stable_hash64(data[start:end])`` of each span (int64 offset arrays), vectorised (uint64 array)."""
    codes = np.frombuffer(data, dtype=np.uint8)
    n = len(codes)
    if n < len(_POWERS):
        powers, inverse = _POWERS, _INV_POWERS
    else:  # (longer than a token chunk: a page's lines, for core.cluster.sitetemplate)
        powers, inverse = _power_table(_P, n + 1), _power_table(_P_INV, n + 1)
    prefix = np.empty(n + 1, dtype=np.uint64)
    prefix[0] = 0
    np.cumsum(np.multiply(codes, powers[:n], dtype=np.uint64), out=prefix[1:])
    poly = (prefix[ends] - prefix[starts]) * inverse[starts]
    return _mix64(poly + (ends - starts).astype(np.uint64))


def _with_specials(
    hashes: np.ndarray, chunk: bytes, specials: list[tuple[int, int, int]], cjk_ngram: int, translate: bool = False
) -> np.ndarray:
    """The C hashes with its ``specials`` (index, start, end) re-tokenised with Unicode rules;
    ``translate``: ``chunk`` has not been put through ``_ASCII_TABLE`` (each piece then is)."""
    if not specials:
        return hashes
    index, starts, ends = (np.array(column, dtype=np.int64) for column in zip(*specials))
    return _with_unicode_tokens(hashes, chunk, index, starts, ends, cjk_ngram, translate)


def _with_unicode_tokens(
    hashes: np.ndarray, chunk: bytes, special: np.ndarray, starts: np.ndarray, ends: np.ndarray, cjk_ngram: int,
    translate: bool = False,
) -> np.ndarray:
    """``hashes`` with the tokens at ``special`` (pieces with non-ASCII bytes) re-tokenised with Unicode rules
    (``translate``: the pieces of ``chunk`` are put through ``_ASCII_TABLE`` first)."""
    cache = _cache_for(cjk_ngram)
    pieces = [chunk[s:e] for s, e in zip(starts.tolist(), ends.tolist())]
    replacements = [cache[piece.translate(_ASCII_TABLE) if translate else piece] for piece in pieces]
    counts = np.ones(len(hashes), dtype=np.int64)
    counts[special] = [len(r) for r in replacements]
    is_special = np.zeros(len(hashes), dtype=bool)
    is_special[special] = True
    out = np.repeat(hashes, counts)
    out[np.repeat(is_special, counts)] = np.concatenate(replacements)
    return out


def token_hashes(text: str | bytes, cjk_ngram: int = defaults.CJK_NGRAM) -> np.ndarray:
    """The stable 64-bit hash of every token of ``text``, in order (uint64 array)."""
    data = strip_not_content(_to_bytes(text))
    if len(data) <= _CHUNK and _native.speedups is not None:
        # The C hash reads the text through _ASCII_TABLE itself (no translated copy).
        packed, specials = _native.speedups.hash_text(data, _ASCII_TABLE)
        return _with_specials(np.frombuffer(packed, dtype=np.uint64), data, specials, cjk_ngram, translate=True)
    data = data.translate(_ASCII_TABLE)
    if len(data) <= _CHUNK:
        return _chunk_hashes(data, cjk_ngram)
    parts = []
    begin = 0
    while begin < len(data):
        end = begin + _CHUNK
        if end < len(data):
            cut = data.rfind(b" ", begin, end)
            end = cut + 1 if cut > begin else end
        parts.append(_chunk_hashes(data[begin:end], cjk_ngram))
        begin = end
    return np.concatenate(parts)


def _shingle(seq: np.ndarray, n: int) -> np.ndarray:
    """Hashes of all length-n windows of ``seq`` (fewer than n items: one window of all)."""
    if n == 1:
        return seq
    if len(seq) < n:
        n = len(seq)
        if n <= 1:
            return seq
    count = len(seq) - n + 1
    acc: np.ndarray = seq[:count].copy()
    for j in range(1, n):
        acc = _mix64(acc * _GOLDEN + seq[j : j + count])
    return acc


def _char_hashes(text: str | bytes, n: int, cjk_ngram: int) -> np.ndarray:
    normalised = " ".join(tokenize(text, cjk_ngram))
    codes = np.frombuffer(normalised.encode("utf-32-le"), dtype="<u4").astype(np.uint64)
    return _mix64(_shingle(_mix64(codes + _GOLDEN), n))


def _distinct(seq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(seq, return_counts=True)``: the distinct hashes in ascending order, and their counts."""
    if _native.speedups is not None:
        counted = _native.speedups.count_distinct(np.ascontiguousarray(seq, dtype=np.uint64))
        if counted is not None:  # (None: hashes made to collide in its table, see _speedups.c)
            return np.frombuffer(counted[0], dtype=np.uint64), np.frombuffer(counted[1], dtype=np.int64)
    return np.unique(seq, return_counts=True)


def feature_hashes(
    text: str | bytes,
    config: FeatureConfig = DEFAULT_FEATURES,
    with_token_count: bool = False,
    hashes: np.ndarray | None = None,
) -> Any:
    """Distinct feature hashes of ``text`` (uint64) and their weights (float64).

    With ``with_token_count=True`` also the number of tokens (for "too little text" checks).
    ``hashes``: ``token_hashes(text, config.cjk_ngram)`` when the caller has it (not computed twice).
    """
    tokens = token_hashes(text, config.cjk_ngram) if hashes is None else hashes
    if config.char_ngram:
        seq = _char_hashes(text, config.char_ngram, config.cjk_ngram)
    else:
        seq = _shingle(tokens, config.word_ngram)
    if len(seq) == 0:
        features, weights = seq, np.zeros(0, dtype=np.float64)
    else:
        features, counts = _distinct(seq)
        if config.weighting == "tf":
            weights = counts.astype(np.float64)
        elif config.weighting == "log":
            weights = 1.0 + defaults.LOG_WEIGHT_SLOPE * np.log(counts)
        elif config.weighting == "sublinear":
            weights = 1.0 + np.log(counts)
        else:
            weights = np.ones(len(features), dtype=np.float64)
    if with_token_count:
        return features, weights, len(tokens)
    return features, weights


if _native.speedups is not None:
    _native.speedups.set_separators(SEPARATOR_CODE_POINTS)
