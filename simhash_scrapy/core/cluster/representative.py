"""A cluster's representative: the URL a person would keep (``SIMHASH_REPRESENTATIVE``).

Two different things name a page of a cluster:

* the **matching anchor** (``canonical`` in reports, ``simhash_duplicate_of``
  in meta): the first page of the cluster that was crawled, whose fingerprint
  the index holds.  Later pages are matched against it; it never changes, so
  which pages are near-duplicates of which never depends on this module;
* the **representative**: the member a person would keep, chosen from what
  every backend records about the members (URL, the ``rel=canonical`` target
  the page names, crawl order).  With ``"best"`` (the default), the first of
  these that tells the members apart decides (``Reason``):

  1. ``rel_canonical``: a member whose URL a member of the cluster names as
     its canonical URL (``<link rel="canonical">`` or a ``Link: <…>;
     rel="canonical"`` header; a page naming itself counts);
  2. ``no_query``: a URL without a query string;
  3. ``not_variant``: a URL that is not a print, AMP or mobile copy
     (``is_variant``: a static check of path segments, file names, host
     names and query parameters; it does not use the learned URL rules);
  4. ``shortest``: the shortest URL;
  5. ``first_crawled``: the member crawled first.

  With ``"first"`` the representative is the anchor (reason ``first_crawled``),
  as before this setting existed.

``choose`` is the one rule (reports of every backend call it on the recorded
members); ``ClusterBook`` applies it page by page during a crawl, so the crawl
can say when a later page replaced the representative
(``simhash/canonical/replaced``) and how many members of a cluster passed
(``SIMHASH_KEEP_PER_CLUSTER``).  Pure Python, no Scrapy.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urljoin

from ..urlrules.urlrewrite import parse_url, url_key

__all__ = [
    "Reason", "Candidate", "choose", "is_variant", "rank", "ClusterBook", "Placement", "link_header_canonical",
    "html_canonical", "absolute", "REPRESENTATIVES",
]  # fmt: skip

#: The values of ``SIMHASH_REPRESENTATIVE``.
REPRESENTATIVES = ("best", "first")


class Reason(str, enum.Enum):
    """Why a member represents its cluster (the report's ``representative_reason``)."""

    REL_CANONICAL = "rel_canonical"
    NO_QUERY = "no_query"
    NOT_VARIANT = "not_variant"
    SHORTEST = "shortest"
    FIRST_CRAWLED = "first_crawled"

    def __str__(self) -> str:
        return self.value

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    Reason.REL_CANONICAL: "named by rel=canonical",
    Reason.NO_QUERY: "no query string",
    Reason.NOT_VARIANT: "not a print/AMP/mobile copy",
    Reason.SHORTEST: "shortest URL",
    Reason.FIRST_CRAWLED: "first crawled",
}
_ORDER = (Reason.REL_CANONICAL, Reason.NO_QUERY, Reason.NOT_VARIANT, Reason.SHORTEST, Reason.FIRST_CRAWLED)

#: Path segments (and file-name stems) that mark a print, AMP or mobile copy.
_VARIANT_SEGMENTS = frozenset({"print", "printable", "printer-friendly", "print-version", "amp", "mobile", "m"})
#: File names such as ``page.amp.html``, ``page-print.html``, ``page_amp``.
_VARIANT_NAME = re.compile(r"(?:^|[._-])(?:amp|print|printable|mobile)(?:\.[a-z0-9]+)?$")
#: First host labels of a mobile or AMP host (``m.example.com``, ``amp.example.com``).
_VARIANT_HOSTS = frozenset({"m", "mobile", "amp", "print"})
#: Query parameters that ask for a print, AMP or mobile rendering.
_VARIANT_FLAGS = frozenset({"print", "amp", "mobile", "printable"})
#: ... and parameters whose value does (``?output=amp``, ``?view=print``).
_VARIANT_PARAMS = frozenset({"output", "view", "format", "version"})
_VARIANT_VALUES = frozenset({"print", "amp", "mobile", "printable"})


def is_variant(url: str) -> bool:
    """``True`` for a URL that looks like a print, AMP or mobile copy (a static pattern check)."""
    parts = parse_url(url)
    if parts is None:
        return False
    _, host, path, params = parts
    if host.split(".", 1)[0] in _VARIANT_HOSTS and host.count(".") >= 2:
        return True
    for segment in path.lower().split("/"):
        if segment in _VARIANT_SEGMENTS or (segment and _VARIANT_NAME.search(segment)):
            return True
    for name, token in params:
        name, value = name.lower(), token.partition("=")[2].lower()
        if name in _VARIANT_FLAGS or (name in _VARIANT_PARAMS and value in _VARIANT_VALUES):
            return True
    return False


@dataclass(frozen=True)
class Candidate:
    """A member as the rule sees it: its URL, the rel=canonical URL it names (or ``None``), its crawl order."""

    url: str
    link: str | None = None
    order: int = 0


def _url_rank(url: str, order: int) -> tuple[int, int, int, int]:
    """The rank of a URL without the rel=canonical element: query, variant, length, crawl order."""
    return int("?" in url.partition("#")[0]), int(is_variant(url)), len(url), order


def rank(candidate: Candidate, named: bool) -> tuple[int, int, int, int, int]:
    """The sort key of ``candidate`` (smaller is better), one element per ``Reason`` in order."""
    return (0 if named else 1, *_url_rank(candidate.url, candidate.order))


def _named_keys(candidates: Sequence[Candidate]) -> set[str]:
    return {url_key(c.link) for c in candidates if c.link}


def choose(candidates: Sequence[Candidate], policy: str = "best") -> tuple[int, Reason]:
    """``(position in candidates, reason)`` of the representative; ``candidates[0]`` is the anchor.

    ``policy``: ``"best"`` (the ranking above) or ``"first"`` (the anchor).
    The reason is the first criterion that sets the winner apart from the
    runner-up (``first_crawled`` when nothing else does, or with ``"first"``).
    """
    if not candidates:
        raise ValueError("a cluster has at least one member")
    if policy == "first" or len(candidates) == 1:
        return 0, Reason.FIRST_CRAWLED
    named = _named_keys(candidates)
    keys = [rank(c, url_key(c.url) in named) for c in candidates]
    order = sorted(range(len(candidates)), key=keys.__getitem__)
    best, second = keys[order[0]], keys[order[1]]
    reason = next((r for r, a, b in zip(_ORDER, best, second) if a != b), Reason.FIRST_CRAWLED)
    return order[0], reason


# ---------------------------------------------------------------- the crawl
_Rank = tuple[int, int, int, int, int]


@dataclass(slots=True)
class _Member:
    base: tuple[int, int, int, int]  # rank without the rel=canonical element
    url: str
    identity: int  # hash of the identity
    key: int  # hash of the URL's url_key


@dataclass(slots=True)
class _Cluster:
    orders: dict[int, int] = field(default_factory=dict)  # hash(identity) -> crawl order in the cluster
    by_key: dict[int, _Member | list[_Member]] = field(default_factory=dict)  # hash(url_key) -> member(s)
    named: set[int] = field(default_factory=set)  # hash(url_key) of the URLs members name
    top: list[_Member] = field(default_factory=list)  # the best two, best first
    anchor_url: str = ""


@dataclass(frozen=True)
class Placement:
    """Where a checked near-duplicate stands in its cluster (``ClusterBook.place``)."""

    #: Its position in the cluster in crawl order (the anchor is 1); a page seen before keeps its position.
    position: int
    #: The cluster's representative URL after this page, and why.
    representative: str
    reason: Reason
    #: This page became the representative now (it replaced another one).
    replaced: bool


class ClusterBook:
    """The clusters a crawl has seen, member by member: ``choose`` applied incrementally.

    ``place`` is called for each near-duplicate with its cluster's anchor
    (identity, URL and the rel=canonical URL the anchor names); the anchor
    counts as the cluster's first member.  A rank only ever improves (a URL
    becomes named), so the best two members, kept up to date with every
    member whose rank changed, give ``choose``'s answer in time independent
    of the cluster's size.  One difference: a member checked again that names
    another URL leaves its earlier target named here (the report, computed
    from the latest records, forgets it).  It holds the members of clusters
    only (their URLs and hashes: about 300 bytes each), never unique pages;
    it knows what this process checked, plus what ``seed`` gives it (with
    several Redis workers each keeps its own book).
    """

    def __init__(self, policy: str = "best") -> None:
        if policy not in REPRESENTATIVES:
            raise ValueError(f"unknown representative policy {policy!r} (one of {', '.join(REPRESENTATIVES)})")
        self.policy = policy
        self._clusters: dict[tuple[str, str], _Cluster] = {}

    def __len__(self) -> int:
        return len(self._clusters)

    def known(self, scope: str, anchor: str) -> bool:
        return (scope, anchor) in self._clusters

    def _rank(self, cluster: _Cluster, member: _Member) -> _Rank:
        return (0 if member.key in cluster.named else 1, *member.base)

    def _add(self, cluster: _Cluster, identity: str, url: str, link: str | None) -> _Member:
        """Add (or update) a member and bring the best two up to date."""
        idh = hash(identity)
        order = cluster.orders.setdefault(idh, len(cluster.orders))
        if self.policy == "first":
            return _Member((0, 0, 0, order), url, idh, 0)
        key = hash(url_key(url))
        member = _Member(_url_rank(url, order), url, idh, key)
        held = cluster.by_key.get(key)
        if held is None or (isinstance(held, _Member) and held.identity == idh):
            cluster.by_key[key] = member
        else:  # another identity with the same URL (rare): a list
            same = [held] if isinstance(held, _Member) else held
            cluster.by_key[key] = [m for m in same if m.identity != idh] + [member]
        changed = [member]
        if link:
            target = hash(url_key(link))
            if target not in cluster.named:
                cluster.named.add(target)
                found = cluster.by_key.get(target)
                if found is not None:
                    changed += [found] if isinstance(found, _Member) else found
        pool: dict[int, _Member] = {m.identity: m for m in cluster.top if m.identity != idh}
        for m in changed:
            pool[m.identity] = m
        cluster.top = sorted(pool.values(), key=lambda m: self._rank(cluster, m))[:2]
        return member

    def _answer(self, cluster: _Cluster) -> tuple[str, str, Reason]:
        """(representative URL, hash of its identity as str, reason)."""
        if self.policy == "first" or not cluster.top:
            return cluster.anchor_url, "", Reason.FIRST_CRAWLED
        best = cluster.top[0]
        if len(cluster.top) == 1:
            return best.url, str(best.identity), Reason.FIRST_CRAWLED
        a, b = self._rank(cluster, best), self._rank(cluster, cluster.top[1])
        reason = next((r for r, x, y in zip(_ORDER, a, b) if x != y), Reason.FIRST_CRAWLED)
        return best.url, str(best.identity), reason

    def seed(self, scope: str, anchor: str, members: Sequence[tuple[str, str, str | None]]) -> None:
        """Start a cluster from recorded ``(identity, url, link)`` members, the anchor first."""
        cluster = self._clusters[(scope, anchor)] = _Cluster()
        for i, (identity, url, link) in enumerate(members):
            if i == 0:
                cluster.anchor_url = url
            self._add(cluster, identity, url, link)

    def place(
        self, scope: str, anchor: str, anchor_url: str, anchor_link: str | None, identity: str, url: str,
        link: str | None,
    ) -> Placement:
        """Record near-duplicate ``identity`` of the cluster anchored at ``anchor`` and re-choose its representative."""
        key = (scope, anchor)
        cluster = self._clusters.get(key)
        if cluster is None:
            cluster = self._clusters[key] = _Cluster(anchor_url=anchor_url)
            self._add(cluster, anchor, anchor_url, anchor_link)
        before = self._answer(cluster)[1]
        member = self._add(cluster, identity, url, link)
        chosen, chosen_id, reason = self._answer(cluster)
        replaced = chosen_id != before and chosen_id == str(member.identity) and self.policy != "first"
        return Placement(member.base[-1] + 1, chosen, reason, replaced)


def html_canonical(root: object, base_url: str) -> str | None:
    """The URL a parsed page (lxml, its ``<html>`` element) names as canonical in its head, else ``None``.

    The one reader of the tag (the crawl's records and the URL-rules learner call it): the first ``<link>``
    inside ``<head>`` whose ``rel`` holds the token ``canonical`` (tokens split on white space, any case:
    ``rel="Canonical"``, ``rel="canonical nofollow"``) and whose ``href`` is not empty, resolved against
    ``base_url`` (``absolute``: ``None`` when that is not an http(s) URL).  A link outside the head does
    not count: the tag belongs there, and a page analysed off the event loop is parsed up to its body only.
    """
    if getattr(root, "iter", None) is None:  # not an element
        return None
    head = root.find("head")  # type: ignore[attr-defined]  # a direct child: no walk over the document
    if head is None:
        return None
    for element in head.iter("link"):
        rel = element.get("rel")
        href = element.get("href")
        if rel and href and href.strip() and "canonical" in rel.lower().split():
            return absolute(href, base_url)
    return None


def absolute(target: str, base_url: str) -> str | None:
    """``target`` resolved against ``base_url``; ``None`` when it is not an http(s) URL."""
    target = target.strip()
    if not target:
        return None
    url = urljoin(base_url, target)
    return url if url.startswith(("http://", "https://")) else None


def link_header_canonical(values: Sequence[str]) -> str | None:
    """The target of the first ``Link: <…>; rel="canonical"`` in HTTP ``Link`` header values, else ``None``."""
    for value in values:
        for part in _split_links(value):
            target, _, params = part.partition(">")
            target = target.strip().lstrip("<").strip()
            for param in params.split(";"):
                name, _, val = param.strip().partition("=")
                if name.strip().lower() == "rel" and "canonical" in val.strip().strip('"').lower().split():
                    return target or None
    return None


def _split_links(value: str) -> list[str]:
    """A ``Link`` header value split at the commas between links (not those inside ``<…>`` or quotes)."""
    parts, start, depth, quoted = [], 0, 0, False
    for i, ch in enumerate(value):
        if ch == '"':
            quoted = not quoted
        elif ch == "<" and not quoted:
            depth += 1
        elif ch == ">" and not quoted:
            depth = max(0, depth - 1)
        elif ch == "," and not quoted and depth == 0:
            parts.append(value[start:i])
            start = i + 1
    parts.append(value[start:])
    return [p for p in parts if p.strip()]
