"""Cross-page template learning: the text lines a host repeats across its different articles.

A crawl sees many pages of each host.  Lines of text that come back on pages
of *different articles* of one host (related-article lists, "most popular"
boxes, bylines, cookie banners and comment widgets left beside the article)
are the host's template.  Main-content extraction removes most of a template,
but what it leaves (10-20 words beside a 500-word article) moves a simhash
5-10 bits: the same article in two sites' templates is then missed.

``HostTemplates`` learns, per host and in the order pages are checked, which
lines were seen in more than one article, and gives a page its
**template-free fingerprint**: the simhash of its text without the lines that
some *other* article of its host also had.  The page's fingerprint never
changes (the same input gives the same fingerprint on every path); the
template-free one is a second query of the clustering rule
(``core.cluster.clustering``: ``also``), and a canonical page is also found by it.

Two pages are "one article" when their fingerprints are within
``ARTICLE_DISTANCE`` bits (wider than k, so that a print view or an edited
copy of an article never teaches the learner that the article is template):
a line repeated only among copies of one article stays article text.

Decisions are deterministic: the learner's state is a function of the pages
checked before (their order, host, fingerprint and text), nothing else: a line
is keyed by ``features.stable_hash64`` of its bytes, the same in every process
(the pass over a page's lines runs in C, ``_speedups.template_lines``, or in
its pure-Python twin).  It is bounded (``MAX_LINES`` lines over all hosts,
``MAX_ARTICLES`` remembered articles per host: after that, new articles are
not learned, known ones still are; when the lines are full, the hosts least
recently useful are forgotten to make room, so thousands of junk hosts never
switch learning off for the hosts after them) and lives in the crawl's
process; the persistent store saves its inputs and replays them on resume
(``core.store.detector_state``), and Redis workers share them through the
scope's mirror (``backends.redis.mirror``).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import numpy as np

from .. import _native, defaults
from ..features.features import DEFAULT_FEATURES, FeatureConfig, feature_hashes, span_hashes
from ..features.fingerprint import simhash_from_features

__all__ = [
    "HostTemplates", "host_of", "line_hashes", "line_hashes_many", "ARTICLE_DISTANCE", "MAX_LINES", "MAX_ARTICLES",
]

#: Pages whose fingerprints are within this many bits are copies of one article (print views,
#: edits, tracking variants: at most ~12 bits apart on the real-web tuning half), never two articles.
ARTICLE_DISTANCE = 12
#: The most lines remembered, over all hosts (about 100 bytes each).
MAX_LINES = 200_000
#: The most articles remembered per host (each page is compared with them: a few microseconds each).
MAX_ARTICLES = 64

_NONE = -1


def _utf8(text: str | bytes) -> bytes:
    return text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text


def _lines(data: bytes) -> list[bytes]:
    """The lines of ``data`` (the extracted text: one block a line), stripped; blank ones dropped."""
    return list(filter(None, map(bytes.strip, data.split(b"\n"))))


def _digests(lines: list[bytes]) -> list[int]:
    """``features.stable_hash64`` of each line (vectorised over the lines joined by newlines)."""
    if not lines:
        return []
    lengths = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
    ends = np.cumsum(lengths + 1) - 1
    digests: list[int] = span_hashes(b"\n".join(lines), ends - lengths, ends).tolist()
    return digests


def line_hashes(text: str | bytes) -> list[int]:
    """The learner's digest of each non-blank line of ``text``, stripped: ``features.stable_hash64`` of its
    UTF-8 bytes, the same in every process (a decision never depends on a hash seed)."""
    return _digests(_lines(_utf8(text)))


def line_hashes_many(texts: list[str | bytes]) -> list[list[int]]:
    """``line_hashes`` of each text, in one vectorised pass over all of their lines."""
    per_text = [_lines(_utf8(text)) for text in texts]
    digests = _digests([line for lines in per_text for line in lines])
    out, at = [], 0
    for lines in per_text:
        out.append(digests[at : at + len(lines)])
        at += len(lines)
    return out


def _template_lines_py(data: bytes, known: dict[int, int], article: int, room: int) -> tuple[bytes | None, int]:
    """The learner's pass over the lines of ``data`` (UTF-8) for a page of ``article``: its lines
    without the host's template joined by newlines (``None`` when no line is template), and how many
    lines it added to ``known`` (at most ``room``).  ``_speedups.template_lines`` is its C twin."""
    lines = _lines(data)
    kept = []
    added = 0
    for line, digest in zip(lines, _digests(lines)):
        seen = known.get(digest)
        if seen is None:
            kept.append(line)
            if added < room:
                known[digest] = article << 32  # (first article, no second yet)
                added += 1
            continue
        if not _other_article(seen, article):
            kept.append(line)
        elif (seen & 0xFFFFFFFF) == 0:
            known[digest] = seen | (article + 1)  # a second article had it
    return (None if len(kept) == len(lines) else b"\n".join(kept)), added


def _template_lines(data: bytes, known: dict[int, int], article: int, room: int) -> tuple[bytes | None, int]:
    if _native.speedups is not None:
        result: tuple[bytes | None, int] = _native.speedups.template_lines(data, known, article, room)
        return result
    return _template_lines_py(data, known, article, room)




#: A URL whose host ``urlsplit`` would give as it is (lower-cased): http(s), a plain host name, no port, no user.
_PLAIN_HOST = re.compile(r"https?://([A-Za-z0-9.-]+)(?:[/?#]|\Z)")


def plain_parts(url: str) -> tuple[str, str, str] | None:
    """``(host, path, query)`` as ``host_of`` and ``urlsplit`` give them, of a plain http(s) URL (``_PLAIN_HOST``,
    no tab or line break, which urlsplit would drop first) without urlsplit's cost; ``None`` for any other."""
    plain = _PLAIN_HOST.match(url)
    if plain is None or "\t" in url or "\n" in url or "\r" in url:
        return None
    path, _, query = url[plain.end(1) :].partition("#")[0].partition("?")
    return plain.group(1).lower(), path, query


def host_of(url: str) -> str:
    """The host a page's template is learned for: its host name and port (lower case, no user name)."""
    plain = _PLAIN_HOST.match(url)
    if plain is not None:  # (the usual URL, without urlsplit's cost: the same host)
        return plain.group(1).lower()
    try:
        parts = urlsplit(url)
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError:  # a port that is not a number
        return ""
    return f"{host}:{port}" if port is not None else host


class _Host:
    __slots__ = ("articles", "lines")

    def __init__(self) -> None:
        self.articles: list[int] = []  # one fingerprint per article (the first page of it seen)
        # line digest -> (first article, a second article or _NONE), packed as first * 2**32 + second + 1
        self.lines: dict[int, int] = {}


class HostTemplates:
    """What each host's pages repeat across articles, learned in check order (one per crawl)."""

    def __init__(
        self,
        features: FeatureConfig = DEFAULT_FEATURES,
        min_tokens: int = defaults.MIN_TOKENS,
        max_lines: int = MAX_LINES,
        max_articles: int = MAX_ARTICLES,
    ) -> None:
        self.features = features
        self.min_tokens = min_tokens
        self.max_lines = max_lines
        self.max_articles = max_articles
        self._hosts: dict[str, _Host] = {}
        self._lines = 0
        #: What each ``check`` learned from, ``(host, fingerprint, text)``, when not ``None`` (the store saves
        #: it, with the text's ``line_hashes``; ``learn`` replays it: ``core.store.detector_state``).
        self.log: list[tuple[str, int, str | bytes]] | None = None

    def _article(self, host: _Host, fingerprint: int) -> int:
        """The article ``fingerprint`` belongs to (a new one when none is within ``ARTICLE_DISTANCE``)."""
        for number, other in enumerate(host.articles):
            if (fingerprint ^ other).bit_count() <= ARTICLE_DISTANCE:
                return number
        if len(host.articles) < self.max_articles:
            host.articles.append(fingerprint)
            return len(host.articles) - 1
        return self.max_articles  # "another article", never remembered

    def check(self, host: str, fingerprint: int, text: str | bytes) -> int | None:
        """Learn from one simhash page of ``host``; return its template-free fingerprint.

        ``None`` when no line of the page was seen in another article of its
        host, or when what is left is too short for a simhash (fewer than
        ``min_tokens`` tokens) or has the same fingerprint.
        """
        if self.log is not None:
            self.log.append((host, fingerprint, text))
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _Host()
        data = _utf8(text)
        if self._lines + data.count(b"\n") + 1 > self.max_lines:  # (the exact count only when it may not fit)
            self._make_room(host, len(_lines(data)))
        article = self._article(state, fingerprint)
        kept, added = _template_lines(data, state.lines, article, self.max_lines - self._lines)
        self._lines += added
        if kept is None:  # nothing is template
            return None
        self._hosts[host] = self._hosts.pop(host)  # useful: the last host to be forgotten
        hashes, weights, tokens = feature_hashes(kept, self.features, with_token_count=True)
        if tokens < self.min_tokens:
            return None
        free = simhash_from_features(hashes, weights)
        return None if free == fingerprint else free

    def learn(self, host: str, fingerprint: int, digests: list[int]) -> None:
        """What ``check`` learns from a page of ``host`` whose lines have ``digests`` (``line_hashes``), without
        its answer: replaying the pages a crawl checked rebuilds its learner exactly."""
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _Host()
        self._make_room(host, len(digests))  # as ``check`` does, so the replay evicts the same hosts
        article = self._article(state, fingerprint)
        known, room, added, useful = state.lines, self.max_lines - self._lines, 0, False
        for digest in digests:
            seen = known.get(digest)
            if seen is None:
                if added < room:
                    known[digest] = article << 32
                    added += 1
            elif _other_article(seen, article):
                useful = True  # a template line: ``check`` would give a template-free text
                if (seen & 0xFFFFFFFF) == 0:
                    known[digest] = seen | (article + 1)
        self._lines += added
        if useful:
            self._hosts[host] = self._hosts.pop(host)  # (as ``check``: the last host to be forgotten)

    def template_lines(self, url: str) -> set[int]:
        """The digests (``line_hashes``) of the lines learned as template of ``url``'s host so far: seen in
        two articles or more (``compare`` shows them)."""
        state = self._hosts.get(host_of(url))
        if state is None:
            return set()
        return {digest for digest, seen in state.lines.items() if seen & 0xFFFFFFFF}
    def _make_room(self, host: str, lines: int) -> None:
        """Forget the least recently useful hosts (other than ``host``) until ``lines`` more lines fit.

        Hosts are kept in the order they were last useful (a page given a template-free fingerprint) or,
        never useful, first seen: thousands of one-page hosts fill the table, then make room for each other,
        and a host whose template keeps matching is the last to go.
        """
        hosts = self._hosts
        while self._lines + lines > self.max_lines and len(hosts) > 1:
            oldest = next(name for name in hosts if name != host)  # (never the host being checked)
            self._lines -= len(hosts.pop(oldest).lines)

    def __len__(self) -> int:
        """Lines remembered, over all hosts."""
        return self._lines


def _other_article(seen: int | None, article: int) -> bool:
    """Whether a line recorded as ``seen`` was seen in an article other than ``article``."""
    if seen is None:
        return False
    second = (seen & 0xFFFFFFFF) - 1
    return (seen >> 32) != article or (second != _NONE and second != article)
