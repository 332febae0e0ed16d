"""URL rewrite rules learned from the duplicates a crawl finds ("Do not crawl in the DUST").

Most near-duplicates on real sites come from URL patterns a site repeats:
tracking and session parameters, default parameter values, print/AMP/mobile
path variants, a mirrored prefix, ``index.html`` versus ``/``.  Every pair
(duplicate URL, canonical URL) the crawl finds, and every
``<link rel="canonical">`` a page declares, is a lesson: the difference
between the two URLs is explained by candidate *rules*, each a rewrite that
maps the more complex URL onto the simpler one, per host:

* ``param``: a query parameter that does not change the content, with any
  value (``utm_source``, ``sessionid``), host-wide or under a path prefix;
* ``value``: one parameter value that is a default (``sort=date``,
  ``page=1``), host-wide or under a path prefix;
* ``path``: a run of path segments replaced by another (often empty) run,
  anchored at a segment position from the start (``/print/X -> /X``,
  ``/m/X``, ``/mirror/docs/X -> /docs/X``) or at the end (``X/index.html ->
  X/``, ``X/amp -> X``).

Evidence, per rule: *support* (pairs it explains, and crawled URLs it
rewrites onto a crawled URL of the same cluster) and *counter-evidence*
(crawled URLs it rewrites onto a crawled URL of another cluster: the
content turned out different).  Each crawled URL counts at most once per
rule, in whichever order the two URLs are crawled.  A rule is *trusted*
with at least ``min_support`` confirmations and a Wilson lower confidence
bound (one-sided 95 %) on its precision of at least ``min_precision``; a
rule contradicted by a verification download is never trusted again.

Three guards keep a rule from losing a whole family of pages (issue 23):

* **List pages are their own evidence.**  A *list page* is a page with at
  least ``LIST_MIN_ITEMS`` distinct links to URLs of one shape (``is_listing``).  Parameter and
  value rules count the evidence in which either page is a list page apart
  (``list_support``, ``list_counter``, ``list_values``) and are trusted
  separately on list pages (``on_lists``) and on other pages
  (``on_pages``): ``?page=2`` ignored by a thousand articles says nothing
  about ``/shop/?page=2``.  A prediction whose target is a list page (or a
  URL of a kind never crawled, or of a kind that had a list page) needs
  every parameter rule it used trusted on list pages.
* **Revocation spreads.**  A rule that loses its trust (on either kind of
  page, by counter-evidence or by a verification) wipes the support of the
  rules ``core.urlrules.urlrewrite.related`` names (the same parameter, the same
  prefix, the same path anchor): they earn their trust again from new
  evidence only.  A path rule is also learned within its next segment, a
  section (``/en/shop/… -> /shop/…`` beside ``/en/… -> /…``, issue 37): a
  section rule that never met a counter-example of its own outlives its
  broader rule's revocation (``/en/news-N`` translations leave the
  ``/en/shop/`` mirror trusted), and a contradiction inside the section
  blames both.
* **Exploration by kind of page.**  ``explore`` downloads the first
  predictions of each (rule, ``page_kind`` of the target) until
  ``EXPLORE_FIRST`` of them confirmed the rule, then keeps a share of them;
  a verification whose target is not crawled yet waits for it.  A parameter
  rule verified on many values and pages without a counter-example is tested
  per stratum instead (``core.urlrules.urltrust``, issue 37); path rules never are.

``predict(url)`` rewrites a URL with the trusted rules (to a fixpoint) and
says whether a crawled or scheduled URL has the same rewritten form: then
the request is a predicted duplicate of that URL.  It costs a dictionary
lookup per path segment and query parameter (``benchmarks/url_rules.py``
measures it).  ``dumps``/``merge`` keep the rules (not the URLs) across
crawls and share them between workers.

Pure Python, no Scrapy: the glue is ``simhash_scrapy.urlrules``; URL parsing,
the rule kinds and their index are in ``core.urlrules.urlrewrite``.  This module is
over 400 lines because the learner's evidence bookkeeping (pairs, images of
URLs crawled in either order, rules checked against earlier URLs, trust and
its incremental lookup tables) shares one per-host state; splitting it would
spread one invariant over several modules.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .. import defaults
from .urlrewrite import (
    Rule,
    RuleIndex,
    apply_one,
    make_key,
    page_kind,
    parse_url,
    related,
    section_rule,
    site_of,
    url_key,
    wilson_lower_bound,
)
from .urltrust import SAFE_VALUES, explore_scope

__all__ = ["Rule", "Prediction", "UrlRuleLearner", "wilson_lower_bound", "url_key", "is_listing", "LIST_MIN_ITEMS"]

#: Limits per host that keep memory bounded on huge sites.
MAX_CANDIDATES = 20_000
MAX_IMAGES = 400_000
MAX_ANCHORED = 1_000_000
#: Default-value rules kept per parameter and prefix.
MAX_VALUES_PER_PARAM = 20
#: Path segments (from the start) under which crawled URLs are indexed for new rules.
ANCHOR_DEPTH = 3
#: At most this many rules are saved (the best supported first).
MAX_SAVED = 20_000
#: A "param" rule (any value) needs confirmations with this many distinct values: evidence that
#: only ever showed ``page=1`` is evidence for the value rule ``drop ?page=1``, not for ``page=*``.
MIN_PARAM_VALUES = 2
#: Distinct values kept per parameter rule and stratum (``core.urlrules.urltrust`` needs ``SAFE_VALUES`` of them).
_VALUES_KEPT = max(MIN_PARAM_VALUES, SAFE_VALUES)
#: Hysteresis of trust: a trusted rule is dropped when its bound falls this far below the threshold.
TRUST_SLACK = 0.05
#: A list page has at least this many distinct links to URLs of one shape (``is_listing``).
LIST_MIN_ITEMS = 10
#: Exploration downloads the predictions of a rule on a kind of page until this many confirmed it.
EXPLORE_FIRST = 2
#: Bounds of the exploration bookkeeping per host.
MAX_TESTS = 200_000
MAX_AWAITING = 100_000
_MAGIC = b"SHUR1"
#: ``_lookup``'s answer when a target was found but a rule is not trusted on its kind of page.
_UNTRUSTED_THERE = object()
#: Version 2 rows add the revocation count and the list-page evidence (version 1 rows are read as before).
_VERSION = 2


def _kind_of(key: str) -> str:
    parts = parse_url(key)
    return page_kind(parts[2], parts[3]) if parts is not None else ""


def is_listing(hrefs: Iterable[str]) -> bool:
    """A list page: at least ``LIST_MIN_ITEMS`` distinct links to URLs of one shape (``page_kind``
    of the path: ``/shop/product-1`` ... ``/shop/product-20``), the shape of a listing's items.

    ``hrefs``: the page's ``<a href>`` values as written; fragments, queries,
    ``javascript:``, ``mailto:`` and ``tel:`` links are left out.  A menu of
    fewer than ``LIST_MIN_ITEMS`` links of one shape (sections, a few related
    articles) does not make a page a list page; a longer one does.
    """
    seen: set[str] = set()
    shapes: dict[str, int] = {}
    for href in hrefs:
        href = href.strip().partition("#")[0].partition("?")[0]
        if not href or href in seen or href.lower().startswith(("javascript:", "mailto:", "tel:")):
            continue
        seen.add(href)
        _, sep, rest = href.partition("://")
        path = "/" + rest.partition("/")[2] if sep else href if href.startswith("/") else "/" + href
        kind = page_kind(path)
        shapes[kind] = shapes.get(kind, 0) + 1
        if shapes[kind] >= LIST_MIN_ITEMS:
            return True
    return False


class _Host:
    """Everything learned about one host."""

    __slots__ = ("rules", "candidates", "trusted", "known", "norm", "images", "image_count",
                 "by_anchor", "anchored", "values_of", "gained", "lost", "listing", "kind_lists",
                 "tests", "awaiting", "strata")

    def __init__(self) -> None:
        self.rules: dict[tuple[Any, ...], Rule] = {}
        self.candidates = RuleIndex()
        self.trusted = RuleIndex()
        #: Crawled URL key -> its cluster's key (``None``: scheduled, not crawled yet).
        self.known: dict[str, str | None] = {}
        #: Rewritten key (trusted rules) -> (first known URL key with it, the rules that rewrote it).
        self.norm: dict[str, tuple[str, tuple[Rule, ...]]] = {}
        #: Single-rule image key -> {rule: (cluster, is a list page) of the first crawled URL with that image}.
        self.images: dict[str, dict[Rule, tuple[str, bool]]] = {}
        self.image_count = 0
        #: Crawled URL keys by where a new rule could match them (so a new rule is
        #: checked against the URLs crawled before it existed): ("p", name),
        #: ("t", token), ("s", position, segment) for the first segments, ("e", last segment).
        self.by_anchor: dict[tuple[Any, ...], list[str]] = {}
        self.anchored = 0
        #: Value rules per (parameter, prefix): bounded, so session ids cannot fill the table.
        self.values_of: dict[tuple[str, str], int] = {}
        #: Trust changes not applied to the lookup tables yet (``_settle``).
        self.gained: list[Rule] = []
        self.lost = False
        #: Crawled URL key -> is it a list page.
        self.listing: dict[str, bool] = {}
        #: ``page_kind`` -> did a crawled page of that kind turn out to be a list page.
        self.kind_lists: dict[str, bool] = {}
        #: (rule key, page kind of the target) -> [predicted, explored, confirmed by a verification].
        self.tests: dict[tuple[Any, ...], list[int]] = {}
        #: Target URL key not crawled yet -> explored predictions waiting for it to be verified.
        self.awaiting: dict[str, list[Prediction]] = {}
        #: The rules trusted on other pages / on list pages, as two indexes (``None``: to build, after a
        #: change of trust; ``()``: every trusted rule is trusted on both kinds).
        self.strata: tuple[RuleIndex, ...] | None = None


@dataclass(frozen=True)
class Prediction:
    """A request predicted to duplicate a crawled or scheduled URL."""

    url: str
    #: The crawled (or scheduled) URL it is predicted to duplicate.
    target: str
    rules: tuple[Rule, ...]
    #: ``page_kind`` of the target (exploration tests each rule per kind; "" until needed: ``target_kind``).
    kind: str = ""
    #: Whether the target is (or may be) a list page.
    listing: bool = False
    #: The rules that rewrote the request's URL (the others rewrote the target's): exploration tests
    #: these, and a contradiction blames these.
    fired: tuple[Rule, ...] = ()

    @property
    def rule_names(self) -> str:
        return "; ".join(dict.fromkeys(r.describe() for r in self.rules))

    @property
    def target_kind(self) -> str:
        return self.kind or _kind_of(self.target)

    @property
    def fired_names(self) -> str:
        """The rules that rewrote the request's URL (those a contradiction blames)."""
        return "; ".join(dict.fromkeys(r.describe() for r in self.fired or self.rules))


# -------------------------------------------------------------------- learner
class UrlRuleLearner:
    """Learns rules per host from crawled pages and predicts duplicates of requests."""

    def __init__(self, min_support: int = defaults.URL_RULES_MIN_SUPPORT,
                 min_precision: float = defaults.URL_RULES_MIN_PRECISION) -> None:
        self.min_support = min_support
        self.min_precision = min_precision
        self._hosts: dict[str, _Host] = {}
        #: Pairs (duplicate, canonical) and declarations learned from.
        self.pairs = 0
        #: URLs passed to ``scheduled`` (exactly as given), to answer repeats at the cost of a set lookup.
        self._scheduled: set[str] = set()
        #: Explored predictions found wrong (by ``verify`` or, later, when their target was crawled);
        #: the caller drains it to count and log them.
        self.contradictions: list[Prediction] = []
        #: Rules whose support a related rule's revocation wiped.
        self.revocations = 0

    # ------------------------------------------------------------ trust
    def _stratum_trusted(self, kind: str, support: int, counter: int, values: set[str], was: bool) -> bool:
        """Enough support and a high enough lower bound; a trusted rule keeps its trust until the
        bound falls ``TRUST_SLACK`` below the threshold (so a rule near it does not flip on every page)."""
        if support < self.min_support:
            return False
        if was and not counter:
            return True  # more support without counter-evidence only raises the bound
        threshold = self.min_precision - (TRUST_SLACK if was else 0.0)
        return (
            (kind != "param" or len(values) >= MIN_PARAM_VALUES)
            and wilson_lower_bound(support, support + counter) >= threshold
        )

    def _update_trust(self, rule: Rule) -> None:
        """Recompute a rule's trust on list pages and on other pages; a loss revokes the related rules.

        Changes of the lookup index are applied by ``_settle``.
        """
        if rule.contradicted:
            pages = lists = False
        elif rule.stratified:
            pages = self._stratum_trusted(rule.kind, rule.support, rule.counter, rule.values, rule.on_pages)
            lists = self._stratum_trusted(rule.kind, rule.list_support, rule.list_counter, rule.list_values,
                                          rule.on_lists)
        else:
            pages = lists = self._stratum_trusted(rule.kind, rule.support, rule.counter, rule.values, rule.trusted)
        lost = (rule.on_pages and not pages) or (rule.on_lists and not lists)
        was = rule.trusted
        hr = self._hosts[rule.host]
        if (pages, lists) != (rule.on_pages, rule.on_lists):
            hr.strata = None
        rule.on_pages, rule.on_lists = pages, lists
        rule.trusted = pages or lists
        if rule.trusted and not was:
            hr.gained.append(rule)
        elif was and not rule.trusted:
            hr.lost = True
        if lost:
            self._revoke_related(hr, rule)

    def _revoke_related(self, hr: _Host, rule: Rule) -> None:
        """``rule`` lost its trust: the rules it subsumes and those sharing its parameter, prefix or
        path anchor lose theirs and their support (their counter-evidence stays); they are
        trusted again only on evidence gathered from now on."""
        for other in hr.rules.values():
            if not related(rule, other):
                continue
            if other.trusted:
                hr.lost = True
                hr.strata = None
            other.support = other.list_support = 0
            other.values.clear()
            other.list_values.clear()
            other.trusted = other.on_pages = other.on_lists = False
            other.revoked += 1
            self.revocations += 1

    def _rebuild(self, hr: _Host) -> None:
        """Trusted index and rewritten keys of a host from scratch (after a rule lost its trust)."""
        hr.trusted = RuleIndex(r for r in hr.rules.values() if r.trusted)
        hr.norm = {}
        if hr.trusted:
            for raw in hr.known:
                self._index_known(hr, raw)

    def _settle(self, hr: _Host) -> None:
        """Apply the trust changes of a host to its lookup tables.

        A lost rule rebuilds everything (keys made with it are no longer
        safe).  A gained rule is added, and only the crawled URLs it can
        rewrite get their new key: the old keys stay valid (they were made
        with a subset of the trusted rules), so nothing else is touched.
        """
        if hr.lost:
            hr.lost = False
            hr.gained = []
            self._rebuild(hr)
            return
        if not hr.gained:
            return
        gained, hr.gained = [r for r in hr.gained if r.trusted], []
        if not hr.trusted:
            self._rebuild(hr)
            return
        for rule in gained:
            hr.trusted.add(rule)
        for rule in gained:
            for raw in hr.by_anchor.get(self._anchor(rule) or (), ()):
                self._index_known(hr, raw)

    def _index_known(self, hr: _Host, raw: str) -> None:
        parts = parse_url(raw)
        if parts is None:
            return
        fired: list[Rule] = []
        norm = hr.trusted.normalise(*parts, fired)
        entry = hr.norm.get(norm)
        # The URL in its canonical form (no rule rewrites it) owns the entry, so that
        # predictions name it rather than a variant seen earlier.
        if entry is None or (entry[1] and not fired):
            hr.norm[norm] = (raw, tuple(fired))

    def _evidence(self, rule: Rule, same: bool, *params: list[tuple[str, str]], listing: bool = False) -> None:
        """Count one piece of evidence (a change of trust is applied by ``_settle``).

        ``params``: the query parameters of the URLs involved (the values a param rule was confirmed with);
        ``listing``: one of the two pages is a list page (kept apart for parameter rules).
        """
        on_lists = listing and rule.stratified
        if same:
            values = rule.list_values if on_lists else rule.values
            if on_lists:
                rule.list_support += 1
            else:
                rule.support += 1
            if rule.kind == "param" and len(values) < _VALUES_KEPT:
                for plist in params:
                    for name, token in plist:
                        if name == rule.name and len(values) < _VALUES_KEPT:
                            values.add(token)
        elif on_lists:
            rule.list_counter += 1
        else:
            rule.counter += 1
        self._update_trust(rule)

    def _rule(self, hr: _Host, probe: Rule) -> Rule | None:
        """The registered rule equal to ``probe`` (created, and checked against earlier URLs, if new)."""
        rule = hr.rules.get(probe.key)
        if rule is not None:
            return rule
        if probe.kind == "value":
            slot = (probe.name, probe.prefix)
            if hr.values_of.get(slot, 0) >= MAX_VALUES_PER_PARAM:
                return None
            hr.values_of[slot] = hr.values_of.get(slot, 0) + 1
        if len(hr.rules) >= MAX_CANDIDATES:
            self._evict(hr)
            if len(hr.rules) >= MAX_CANDIDATES:
                return None
        hr.rules[probe.key] = probe
        hr.candidates.add(probe)
        self._retro(hr, probe)
        return probe

    def _evict(self, hr: _Host) -> None:
        """Drop the weakest half of the untrusted single-support candidates (a full table)."""
        weak = [k for k, r in hr.rules.items()
                if not r.trusted and r.support + r.counter + r.list_support + r.list_counter <= 1]
        for key in weak[: max(1, len(weak) // 2)]:
            del hr.rules[key]
        hr.candidates = RuleIndex(hr.rules.values())

    def _anchors(self, path: str, params: list[tuple[str, str]]) -> list[tuple[Any, ...]]:
        segs = path.split("/")[1:]
        found: list[tuple[Any, ...]] = [("s", i, seg) for i, seg in enumerate(segs[:ANCHOR_DEPTH])]
        if segs:
            found.append(("e", segs[-1]))
        for name, token in params:
            found.append(("p", name))
            found.append(("t", token))
        return found

    @staticmethod
    def _anchor(rule: Rule) -> tuple[Any, ...] | None:
        """Where ``by_anchor`` keeps the crawled URLs ``rule`` can rewrite (``None``: not indexed)."""
        if rule.kind == "path":
            if rule.at < 0:
                return ("e", rule.old[-1])
            return ("s", rule.at, rule.old[0]) if rule.at < ANCHOR_DEPTH else None
        return ("p", rule.name) if rule.kind == "param" else ("t", rule.value)

    def _retro(self, hr: _Host, rule: Rule) -> None:
        """Check a new rule against the URLs crawled before it existed."""
        anchor = self._anchor(rule)
        for raw in hr.by_anchor.get(anchor, ()) if anchor is not None else ():
            cluster = hr.known.get(raw)
            parts = parse_url(raw)
            if cluster is not None and parts is not None:
                image = apply_one(rule, *parts)
                if image is not None and image != raw:
                    self._compare(hr, rule, image, cluster, parts[3], hr.listing.get(raw, False))

    def _compare(self, hr: _Host, rule: Rule, image: str, cluster: str, params: list[tuple[str, str]],
                 listing: bool) -> None:
        """Evidence from a crawled URL the rule rewrites to ``image`` (or remember it for later)."""
        target = hr.known.get(image)
        if target is None:
            other = hr.images.get(image)
            seen = other.get(rule) if other is not None else None
            if seen is None:
                if hr.image_count < MAX_IMAGES:
                    hr.images.setdefault(image, {})[rule] = (cluster, listing)
                    hr.image_count += 1
                return
            target, other_listing = seen
            listing = listing or other_listing
        else:
            listing = listing or hr.listing.get(image, False)
        self._evidence(rule, target == cluster, params, listing=listing)

    # ------------------------------------------------------------ learning
    def _explain(self, host: str, a: tuple[str, str, str, list[tuple[str, str]]],
                 b: tuple[str, str, str, list[tuple[str, str]]]) -> list[Rule]:
        """Candidate rules (unregistered) for two URLs of one host with the same content ([] if none explains it)."""
        _, _, path_a, params_a = a
        _, _, path_b, params_b = b
        if (len(path_a.split("/")), len(path_a), path_a) < (len(path_b.split("/")), len(path_b), path_b):
            path_a, path_b = path_b, path_a  # the path rule rewrites the longer path into the shorter
        found: list[Rule] = []
        if path_a != path_b:
            sa, sb = path_a.split("/")[1:], path_b.split("/")[1:]
            i = 0
            while i < min(len(sa), len(sb)) and sa[i] == sb[i]:
                i += 1
            j = 0
            while j < min(len(sa), len(sb)) - i and sa[-1 - j] == sb[-1 - j]:
                j += 1
            old, new = tuple(sa[i : len(sa) - j]), tuple(sb[i : len(sb) - j])
            if old and j >= 2:
                # Also the rule within the next segment (a section: ``/en/shop/… -> /shop/…`` beside
                # ``/en/… -> /…``), first: it keeps its own evidence when the broader rule meets
                # another section's counter-examples (``related``).
                section = sa[len(sa) - j]
                found.append(Rule(host, "path", at=i, old=old + (section,), new=new + (section,)))
            if old:
                found.append(Rule(host, "path", at=-1 if j == 0 else i, old=old, new=new))
        # Parameter rules are scoped by the shorter path (the form the path rules lead to).
        segs = path_b.split("/")
        prefixes = ["/"] + ([f"/{segs[1]}/"] if len(segs) > 2 else [])
        values_a: dict[str, list[str]] = {}
        values_b: dict[str, list[str]] = {}
        for name, token in params_a:
            values_a.setdefault(name, []).append(token)
        for name, token in params_b:
            values_b.setdefault(name, []).append(token)
        for name in sorted(set(values_a) | set(values_b)):
            va, vb = sorted(values_a.get(name, ())), sorted(values_b.get(name, ()))
            if va == vb:
                continue
            only = va if not vb else vb if not va else None
            for prefix in prefixes:
                found.append(Rule(host, "param", name=name, prefix=prefix))
                if only is not None and len(only) == 1:
                    found.append(Rule(host, "value", name=name, value=only[0], prefix=prefix))
        if not found:
            return []
        index = RuleIndex(found)
        if index.normalise(*a, []) != index.normalise(*b, []):
            return []
        return found

    def _learn_pairs(self, hr: _Host, site: str, parts: tuple[str, str, str, list[tuple[str, str]]], raw: str,
                     others: tuple[str | None, ...], listing: bool) -> set[Rule]:
        """Evidence from the pairs (this page, its duplicate or declared canonical URL): the rules confirmed."""
        confirmed: set[Rule] = set()
        for other in others:
            other_parts = parse_url(other) if other else None
            if other_parts is None or other_parts[1] != parts[1]:
                continue
            other_raw = make_key(*other_parts[:3], [t for _, t in other_parts[3]])
            if other_raw == raw:
                continue
            probes = self._explain(site, parts, other_parts)
            if probes:
                self.pairs += 1
            pair_listing = listing or hr.listing.get(other_raw, False)
            for probe in probes:
                rule = self._rule(hr, probe)
                if rule is not None and rule not in confirmed:
                    confirmed.add(rule)
                    self._evidence(rule, True, parts[3], other_parts[3], listing=pair_listing)
        return confirmed

    def _check_candidates(self, hr: _Host, parts: tuple[str, str, str, list[tuple[str, str]]], raw: str,
                          cluster_key: str, listing: bool, confirmed: set[Rule]) -> None:
        """Compare this crawled page with the crawled URL each candidate rule rewrites it to (or remember
        the image for later); the rules ``confirmed`` by this page's pairs only remember it."""
        candidates = hr.candidates
        scheme, host, path, params = parts
        applicable = candidates.path_rules(path.split("/")[1:]) if candidates.paths else []
        for name, token in params:
            applicable.extend(candidates.params.get(name, ()))
            applicable.extend(candidates.values.get(token, ()))
        seen: set[Rule] = set()
        for rule in applicable:
            if rule in seen:
                continue
            seen.add(rule)
            image = apply_one(rule, scheme, host, path, params)
            if image is None or image == raw:
                continue
            if rule in confirmed:
                if image not in hr.known and hr.image_count < MAX_IMAGES:
                    hr.images.setdefault(image, {}).setdefault(rule, (cluster_key, listing))
                    hr.image_count += 1
                continue
            self._compare(hr, rule, image, cluster_key, params, listing)

    def observe(self, url: str, cluster: str | None = None, duplicate_of: str | None = None,
                declared: str | None = None, aliases: Iterable[str] = (), listing: bool = False) -> None:
        """Learn from one crawled page.

        ``cluster`` is the canonical URL of its cluster (``None``: the page
        itself), ``duplicate_of`` the canonical URL when the crawl found it a
        near-duplicate, ``declared`` its ``<link rel="canonical">`` (absolute),
        ``aliases`` other URLs that led to the same response (redirects),
        ``listing`` whether it is a list page (``is_listing`` of its links).
        """
        parts = parse_url(url)
        if parts is None:
            return
        scheme, host, path, params = parts
        tokens = [t for _, t in params]
        raw = make_key(scheme, host, path, tokens)
        cluster_key = url_key(cluster) if cluster else raw
        site = site_of(host)
        hr = self._hosts.get(site)
        if hr is None:
            hr = self._hosts[site] = _Host()
        for alias in aliases:
            alias_parts = parse_url(alias)
            if alias_parts is not None and alias_parts[1] == host:
                self._add_known(hr, make_key(alias_parts[0], host, alias_parts[2], [t for _, t in alias_parts[3]]),
                                cluster_key)
        if hr.known.get(raw) is not None:  # crawled before: a re-crawl teaches nothing new
            hr.known[raw] = cluster_key
            return
        hr.listing[raw] = listing
        kind = page_kind(path, params)
        if listing or kind not in hr.kind_lists:
            hr.kind_lists[kind] = listing
        confirmed = self._learn_pairs(hr, site, parts, raw, (duplicate_of, declared), listing)
        # Rules that rewrite this URL: compare with the crawled URL they lead to.
        if hr.candidates:
            self._check_candidates(hr, parts, raw, cluster_key, listing, confirmed)
        # URLs crawled earlier that a rule rewrites onto this one.
        earlier = hr.images.pop(raw, None)
        if earlier:
            hr.image_count -= len(earlier)
            for rule, (other_cluster, other_listing) in earlier.items():
                if rule not in confirmed:
                    self._evidence(rule, other_cluster == cluster_key, listing=listing or other_listing)
        self._add_known(hr, raw, cluster_key)
        # Explored predictions of this URL, downloaded before it.
        waiting = hr.awaiting.pop(raw, None)
        for prediction in waiting or ():
            mine = url_key(prediction.url)
            self._check(hr, prediction, hr.known.get(mine) or mine, cluster_key)
        if hr.anchored < MAX_ANCHORED:
            for anchor in self._anchors(path, params):
                hr.by_anchor.setdefault(anchor, []).append(raw)
                hr.anchored += 1
        self._settle(hr)

    def _add_known(self, hr: _Host, raw: str, cluster_key: str | None) -> None:
        new = raw not in hr.known
        if new or cluster_key is not None:
            hr.known[raw] = cluster_key
        if new and hr.trusted:
            self._index_known(hr, raw)

    def remember(self, url: str, cluster: str | None = None) -> None:
        """A page crawled before (a resumed job, an earlier crawl): known, but no new evidence."""
        parts = parse_url(url)
        if parts is not None:
            hr = self._hosts.get(site_of(parts[1]))
            if hr is None:
                hr = self._hosts[site_of(parts[1])] = _Host()
            raw = make_key(parts[0], parts[1], parts[2], [t for _, t in parts[3]])
            self._add_known(hr, raw, url_key(cluster) if cluster else raw)

    def scheduled(self, url: str) -> bool:
        """A request for ``url`` was scheduled: later variants of it are predicted duplicates.

        ``True`` if the URL was not known before (``forget`` undoes it if the request is dropped).
        """
        if url in self._scheduled:  # the same request again (most scheduled requests are repeats)
            return False
        parts = parse_url(url)
        if parts is None:
            return False
        self._scheduled.add(url)
        hr = self._hosts.get(site_of(parts[1]))
        if hr is None:
            hr = self._hosts[site_of(parts[1])] = _Host()
        raw = make_key(parts[0], parts[1], parts[2], [t for _, t in parts[3]])
        if raw in hr.known:
            return False
        self._add_known(hr, raw, None)
        return True

    def forget(self, url: str) -> None:
        """``url`` will not be crawled (it was skipped): it must not protect its variants."""
        self._scheduled.discard(url)
        parts = parse_url(url)
        hr = self._hosts.get(site_of(parts[1])) if parts is not None else None
        if hr is None or parts is None:
            return
        raw = url_key(url)
        if raw in hr.known and hr.known[raw] is None:
            del hr.known[raw]
            if hr.trusted:
                fired: list[Rule] = []
                norm = hr.trusted.normalise(*parts, fired)
                entry = hr.norm.get(norm)
                if entry is not None and entry[0] == raw:
                    del hr.norm[norm]

    # ------------------------------------------------------------ prediction
    def predict(self, url: str) -> Prediction | None:
        """The crawled or scheduled URL that ``url`` duplicates by the trusted rules, else ``None``.

        Only a URL that a trusted rule rewrites is predicted: a URL in its
        canonical form is never skipped, even when a variant of it was seen
        first (the variant, a print page say, may lack the canonical page's links).
        """
        parts = parse_url(url)
        if parts is None:
            return None
        scheme, host, path, params = parts
        hr = self._hosts.get(site_of(host))
        if hr is None or not hr.norm:
            return None
        raw = make_key(scheme, host, path, [t for _, t in params])
        found = self._lookup(hr, hr.trusted, url, parts, raw, None)
        if found is not _UNTRUSTED_THERE:
            return found  # type: ignore[return-value]
        # A rule of the whole trusted set may not be trusted on the target's kind of page (``?page=``
        # ignored by articles, the target a list page): again with the rules of each kind alone.
        if hr.strata is None:  # built when trust changed since: () when no rule is trusted on one kind only
            split = any(r.on_pages != r.on_lists for r in hr.rules.values())
            hr.strata = () if not split else (
                RuleIndex(r for r in hr.rules.values() if r.on_pages),
                RuleIndex(r for r in hr.rules.values() if r.on_lists))
        if not hr.strata:
            return None
        for listing in (True, False):
            found = self._lookup(hr, hr.strata[listing], url, parts, raw, listing)
            if isinstance(found, Prediction):
                return found
        return None

    def _lookup(self, hr: _Host, index: RuleIndex, url: str, parts: tuple[str, str, str, list[tuple[str, str]]],
                raw: str, listing: bool | None) -> Prediction | object | None:
        """The prediction of ``index``'s rules if they, and the rules that rewrote the target, are trusted on
        the target's kind of page (``listing``: the kind the target must be; ``None``: any);
        ``_UNTRUSTED_THERE`` if a target was found but a rule is not trusted on its kind of page."""
        fired: list[Rule] = []
        norm = index.normalise(*parts, fired)
        if not fired:
            return None
        entry = hr.norm.get(norm)
        if entry is None or entry[0] == raw:
            return None
        target = entry[0]
        kind = ""
        is_list = hr.listing.get(target)
        if is_list is None:  # scheduled, or crawled in an earlier run: what its kind of page says
            kind = _kind_of(target)
            is_list = hr.kind_lists.get(kind, True)
        if listing is not None and is_list != listing:
            return None
        rules = tuple(dict.fromkeys(fired + list(entry[1])))
        for rule in rules:
            if not rule.trusted_for(is_list):
                return _UNTRUSTED_THERE  # e.g. ?page= ignored by articles, but the target is a list page
        return Prediction(url, target, rules, kind, is_list, tuple(dict.fromkeys(fired)))

    def explore(self, prediction: Prediction, share: float) -> bool:
        """Download this predicted duplicate anyway, to verify its rules?

        ``True`` for every prediction of a rule on a kind of page (``page_kind``
        of the target) until ``EXPLORE_FIRST`` verifications on that kind
        confirmed it, then for a ``share`` of them (each kind keeps being
        tested).  A parameter rule that earned it (``core.urlrules.urltrust.explore_scope``:
        many values, many pages, no counter-example) is tested per stratum (list
        pages, other pages) instead of per kind of page.  ``share`` 0: never.
        """
        if share <= 0:
            return False
        parts = parse_url(prediction.url)
        hr = self._hosts.get(site_of(parts[1])) if parts is not None else None
        if hr is None:
            return False
        decision = False
        counts: list[list[int]] = []
        kind = prediction.target_kind
        for rule in prediction.fired or prediction.rules:
            key = (rule.key, explore_scope(rule, kind, prediction.listing))
            counts_of = hr.tests.get(key)
            if counts_of is None:
                if len(hr.tests) >= MAX_TESTS:
                    decision = True  # a full table: test rather than trust blindly
                    continue
                counts_of = hr.tests[key] = [0, 0, 0]
            counts_of[0] += 1
            counts.append(counts_of)
            if counts_of[2] < EXPLORE_FIRST or counts_of[1] < share * counts_of[0]:
                decision = True
        if decision:
            for counts_of in counts:
                counts_of[1] += 1
        return decision

    def verify(self, prediction: Prediction, cluster: str | None) -> bool | None:
        """A predicted duplicate was downloaded anyway (exploration): ``True`` if the rules held.

        ``cluster`` is the canonical URL of the downloaded page's cluster
        (``None``: itself).  On a contradiction every rule that rewrote the
        request's URL (``fired``) loses trust at once (and for good), and takes its related rules with
        it (``_revoke_related``); the prediction is added to
        ``contradictions``.  ``None``: the target has not been crawled yet;
        the check waits until it is (``observe``).
        """
        parts = parse_url(prediction.url)
        hr = self._hosts.get(site_of(parts[1])) if parts is not None else None
        if hr is None:
            return None
        mine = url_key(cluster) if cluster else url_key(prediction.url)
        target = hr.known.get(prediction.target)
        if target is None:
            if prediction.target in hr.known and len(hr.awaiting) < MAX_AWAITING:
                hr.awaiting.setdefault(prediction.target, []).append(prediction)
            return None
        return self._check(hr, prediction, mine, target)

    def _check(self, hr: _Host, prediction: Prediction, mine: str, target: str) -> bool:
        """Compare an explored page's cluster with its target's; count the test or revoke the rules."""
        blamed = prediction.fired or prediction.rules
        if mine == target:
            kind = prediction.target_kind
            for rule in blamed:
                counts_of = hr.tests.get((rule.key, explore_scope(rule, kind, prediction.listing)))
                if counts_of is not None:
                    counts_of[2] += 1
            return True
        # The rules that rewrote the target (a variant crawled first) only led to a crawled URL;
        # the request's own rules made the claim, and so did the trusted rules a section apart that
        # rewrite the request's URL too (``/en/… -> /…`` beside ``/en/shop/… -> /shop/…``).
        blamed = tuple(blamed) + self._section_kin(hr, blamed, prediction.url)
        if all(rule.contradicted for rule in blamed):
            return False  # already revoked by an earlier verification: nothing new to report
        for rule in blamed:
            rule.contradicted = True
            if prediction.listing and rule.stratified:
                rule.list_counter += 1
            else:
                rule.counter += 1
            rule.trusted = rule.on_pages = rule.on_lists = False
        hr.strata = None
        for rule in blamed:
            self._revoke_related(hr, rule)
        self.contradictions.append(prediction)
        hr.lost = False
        hr.gained = []
        self._rebuild(hr)
        return False

    @staticmethod
    def _section_kin(hr: _Host, blamed: Iterable[Rule], url: str) -> tuple[Rule, ...]:
        """The trusted path rules a section broader or narrower than a ``blamed`` one that rewrite ``url``."""
        parts = parse_url(url)
        if parts is None:
            return ()
        paths = [rule for rule in blamed if rule.kind == "path"]
        return tuple(
            other for other in hr.trusted.path_rules(parts[2].split("/")[1:])
            if other not in paths and any(section_rule(r, other) or section_rule(other, r) for r in paths)
            and apply_one(other, *parts) is not None
        )

    # ------------------------------------------------------------ inspection
    def rules(self, trusted_only: bool = False) -> list[Rule]:
        """Rules, trusted first, then by support."""
        found = [r for hr in self._hosts.values() for r in hr.rules.values() if r.trusted or not trusted_only]
        found.sort(key=lambda r: (not r.trusted, -(r.support + r.list_support), r.counter + r.list_counter,
                                  r.host, r.describe()))
        return found

    def report(self, limit: int = 200) -> list[dict[str, Any]]:
        """The rules for a report: trusted ones, then candidates with support of at least 2.

        Parameter rules that a trusted, broader one covers (a value of a dropped
        parameter, a prefix inside a trusted prefix) are left out unless they skipped requests.
        """
        broad = {(r.host, r.name, r.prefix) for r in self.rules(trusted_only=True) if r.kind == "param"}

        def covered(rule: Rule) -> bool:
            if rule.kind == "path" or rule.skipped:
                return False
            return any(
                (rule.host, rule.name, prefix) in broad and (prefix, rule.kind) != (rule.prefix, "param")
                for prefix in {"/", rule.prefix}
            )

        return [r.as_dict() for r in self.rules()
                if (r.trusted or r.support + r.list_support >= 2) and not covered(r)][:limit]

    def known_count(self) -> int:
        return sum(len(hr.known) for hr in self._hosts.values())

    # ------------------------------------------------------------ persistence
    def dumps(self) -> bytes:
        """The rules and their evidence (not the URLs), compressed."""
        rows = [
            [r.host, r.kind, r.name, r.value, r.prefix, r.at, list(r.old), list(r.new),
             r.support, r.counter, int(r.contradicted), sorted(r.values),
             r.revoked, r.list_support, r.list_counter, sorted(r.list_values)]
            for r in sorted(self.rules(), key=lambda r: (
                not r.trusted, -(r.support + r.counter + r.list_support + r.list_counter)))[:MAX_SAVED]
        ]
        return _MAGIC + zlib.compress(
            json.dumps({"version": _VERSION, "rules": rows}, separators=(",", ":")).encode())

    def merge(self, data: bytes | None) -> int:
        """Merge rules saved by ``dumps`` (an earlier crawl, another worker): evidence counts take the maximum.

        A rule revoked more often in ``data`` than here takes ``data``'s
        support (its wiped support must not come back through a merge); one
        revoked less often there keeps its own.  Version 1 blobs (no
        revocation count, no list-page evidence) read as revoked 0 times.
        Returns the number of rules read.  Unreadable data raises ``ValueError``.
        """
        if not data:
            return 0
        if not data.startswith(_MAGIC):
            raise ValueError("not a simhash-scrapy URL rules blob")
        try:
            rows = json.loads(zlib.decompress(data[len(_MAGIC) :]))["rules"]
        except (zlib.error, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"corrupt URL rules blob: {exc}") from None
        for row in rows:
            host, kind, name, value, prefix, at, old, new, support, counter, contradicted = row[:11]
            hr = self._hosts.get(host)
            if hr is None:
                hr = self._hosts[host] = _Host()
            rule = self._rule(hr, Rule(host, kind, name=name, value=value, prefix=prefix, at=at,
                                       old=tuple(old), new=tuple(new)))
            if rule is None:
                continue
            revoked = int(row[12]) if len(row) > 12 else 0
            list_support = int(row[13]) if len(row) > 13 else 0
            list_counter = int(row[14]) if len(row) > 14 else 0
            if revoked > rule.revoked:  # wiped there since: theirs is the evidence gathered after it
                rule.revoked = revoked
                rule.support, rule.list_support = 0, 0
                rule.values.clear()
                rule.list_values.clear()
            if revoked == rule.revoked:
                rule.support = max(rule.support, int(support))
                rule.list_support = max(rule.list_support, list_support)
                for token in row[11] if len(row) > 11 else ():
                    if len(rule.values) < _VALUES_KEPT:
                        rule.values.add(str(token))
                for token in row[15] if len(row) > 15 else ():
                    if len(rule.list_values) < _VALUES_KEPT:
                        rule.list_values.add(str(token))
            rule.counter = max(rule.counter, int(counter))
            rule.list_counter = max(rule.list_counter, list_counter)
            rule.contradicted = rule.contradicted or bool(contradicted)
            self._update_trust(rule)
        for hr in self._hosts.values():
            self._settle(hr)
        return len(rows)

