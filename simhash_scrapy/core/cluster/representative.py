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
     rel="canonical"`` header; a page naming itself counts; a page without
     either that was reached through a redirect from another page is named
     by that redirect: ``redirect_named``);
  2. ``no_query``: a URL without a query string;
  3. ``not_variant``: not a copy by the site's own signals: a member whose
     rel=canonical names another URL says it is a copy (an AMP, mobile,
     print or syndicated page names its original; a tracking copy names the
     clean URL), and that counts before the URL's look (``is_variant``: a
     print, AMP, mobile, mirror or promo path segment, file name, host name
     or query parameter; a static check, not the learned URL rules);
  4. ``first_crawled``: the member crawled first (across hosts this is the
     page that was there first, not the shorter domain);
  5. ``shortest``: the shortest URL (a tie-break only: crawl order already
     tells any two members apart).

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
    "Reason", "Candidate", "choose", "is_variant", "names_elsewhere", "copy_signal", "redirect_named", "rank", "ClusterBook", "Placement", "link_header_canonical",
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
    Reason.REL_CANONICAL: "named by rel=canonical or a redirect",
    Reason.NO_QUERY: "no query string",
    Reason.NOT_VARIANT: "not a copy (its page names no other canonical URL; not a print/AMP/mobile/mirror URL)",
    Reason.SHORTEST: "shortest URL",
    Reason.FIRST_CRAWLED: "first crawled",
}
_ORDER = (Reason.REL_CANONICAL, Reason.NO_QUERY, Reason.NOT_VARIANT, Reason.FIRST_CRAWLED, Reason.SHORTEST)

#: Path segments (and file-name stems) that mark a print, AMP, mobile, mirror or promotional copy.
_VARIANT_SEGMENTS = frozenset({
    "print", "printable", "printer-friendly", "print-version", "amp", "mobile", "m", "mirror", "mirrors", "promo",
    "syndicated", "syndication",
})  # fmt: skip
#: File names such as ``page.amp.html``, ``page-print.html``, ``page_amp``.
_VARIANT_NAME = re.compile(r"(?:^|[._-])(?:amp|print|printable|mobile)(?:\.[a-z0-9]+)?$")
#: First host labels of a mobile or AMP host (``m.example.com``, ``amp.example.com``).
_VARIANT_HOSTS = frozenset({"m", "mobile", "amp", "print"})
#: Query parameters that ask for a print, AMP or mobile rendering.
_VARIANT_FLAGS = frozenset({"print", "amp", "mobile", "printable"})
#: ... and parameters whose value does (``?output=amp``, ``?view=print``).
_VARIANT_PARAMS = frozenset({"output", "view", "format", "version"})
_VARIANT_VALUES = frozenset({"print", "amp", "mobile", "printable"})
#: Parameters a tracking or session copy adds to the page's URL (and any ``utm_…``).
_TRACKING_PARAMS = frozenset({
    "sessionid", "sid", "jsessionid", "phpsessid", "fbclid", "gclid", "msclkid", "mc_cid", "mc_eid", "ref_src",
})  # fmt: skip


def is_variant(url: str) -> bool:
    """``True`` for a URL that looks like a print, AMP, mobile, mirror, promo or tracking copy (a static
    pattern check: path segments, file names, host names, query parameters)."""
    parts = parse_url(url)
    if parts is None:
        return False
    _, host, path, _ = parts
    if host.split(".", 1)[0] in _VARIANT_HOSTS and host.count(".") >= 2:
        return True
    for segment in path.lower().split("/"):
        if segment in _VARIANT_SEGMENTS or (segment and _VARIANT_NAME.search(segment)):
            return True
    return any(_variant_param(name, value) for name, value in _query_params(url))


def _query_params(url: str) -> list[tuple[str, str]]:
    """``(name, value)`` of the query, lower case; a second ``?`` counts as a separator (a tracking suffix
    glued onto a URL that had a query: ``/q?page=3?utm_source=x``)."""
    query = url.partition("#")[0].partition("?")[2].replace("?", "&")
    pairs = [part.partition("=") for part in query.split("&") if part]
    return [(name.lower(), value.lower()) for name, _, value in pairs]


def _variant_param(name: str, value: str) -> bool:
    """A parameter asking for a print/AMP/mobile rendering, or one a tracking or session copy adds."""
    if name in _VARIANT_FLAGS or (name in _VARIANT_PARAMS and value in _VARIANT_VALUES):
        return True
    return name in _TRACKING_PARAMS or name.startswith("utm_")


@dataclass(frozen=True)
class Candidate:
    """A member as the rule sees it: its URL, the rel=canonical URL it names (or ``None``), its crawl order."""

    url: str
    link: str | None = None
    order: int = 0


def names_elsewhere(url: str, link: str | None) -> bool:
    """Whether a page at ``url`` whose rel=canonical is ``link`` names another page: the site says it is a copy.

    Another path or query is another page; another scheme or host alone is not (``http://example.com/a``
    naming ``https://www.example.com/a`` names itself under the site's preferred host).
    """
    if not link:
        return False
    here, there = parse_url(url), parse_url(link)
    if here is None or there is None:
        return url_key(link) != url_key(url)
    return _page_of(here) != _page_of(there)


def redirect_named(url: str, sources: Sequence[str]) -> str | None:
    """``url`` when the page was reached through a redirect from another page (``sources``: the URLs
    redirected from, Scrapy's ``redirect_urls``), else ``None``: a redirect names its target, as a
    rel=canonical tag would.  A redirect that only changes the scheme or host (``http`` -> ``https``,
    ``www.``) names nothing: a whole site may do that to every page; nor does one to a URL with a query
    string: short links and old URLs often redirect to a tracking copy (``/old/a`` -> ``/a?ref=old``)."""
    if "?" in url.partition("#")[0]:
        return None
    return url if any(names_elsewhere(source, url) for source in sources) else None


def _page_of(parts: tuple[str, str, str, list[tuple[str, str]]]) -> tuple[str, list[str]]:
    """The path (without a trailing slash) and sorted query tokens of a parsed URL."""
    return parts[2].rstrip("/"), sorted(token for _, token in parts[3])


def copy_signal(url: str, link: str | None) -> int:
    """0 for a page with no sign of being a copy; 1 for a copy by its URL's look alone (``is_variant``);
    2 for a page that names another canonical URL (3 with both): the site's own word counts first."""
    return 2 * names_elsewhere(url, link) + int(is_variant(url))


def _url_rank(url: str, link: str | None, order: int) -> tuple[int, int, int, int]:
    """The rank of a member without the rel=canonical element: query, copy signal, crawl order, length."""
    return int("?" in url.partition("#")[0]), copy_signal(url, link), order, len(url)


def rank(candidate: Candidate, named: bool) -> tuple[int, int, int, int, int]:
    """The sort key of ``candidate`` (smaller is better), one element per ``Reason`` in order."""
    return (0 if named else 1, *_url_rank(candidate.url, candidate.link, candidate.order))


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
#: Where the crawl order sits in ``_url_rank``.
_ORDER_AT = 2


@dataclass(slots=True)
class _Member:
    base: tuple[int, int, int, int]  # rank without the rel=canonical element (_url_rank)
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
            return _Member((0, 0, order, 0), url, idh, 0)
        key = hash(url_key(url))
        member = _Member(_url_rank(url, link, order), url, idh, key)
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
        return Placement(member.base[_ORDER_AT] + 1, chosen, reason, replaced)


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
