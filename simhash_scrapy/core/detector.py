"""The crawl's decisions, steps 1-7: the one place where the clustering rule is applied to pages.

``Detector`` is what the in-process backends (``backends.memory``, and
through it ``backends.persistent``) apply to every checked page, and what
the library (``decide``, ``decide_html``) and the ``scrapy simhash
compare`` / ``dedup`` commands apply to pages given in a fixed order: the
same pages in the same order get the same decisions everywhere.

A page (``Page``) is what ``core.analysis`` gave for it (fingerprint, short
or not, one-edit keys, content digest, the text it was made from, second
simhash, sentence sketch) with its scope, identity and URL.  ``check``

* learns from it its host's template lines (``core.cluster.sitetemplate``, step 5:
  the host is ``host_of(url)``), which gives its template-free fingerprint,
* then applies the clustering rule (``core.cluster.clustering.Clusterer``: identity,
  nearest canonical page within k, short pages, one edit, the template-free
  text, the second simhash, sentence containment) and records the page.

What steps 5-7 learn (template lines per host, the canonical pages'
template-free and second simhashes, their sentence sketches, the common
sentence counts) is in ``Detector.rule`` and ``Detector.templates``; the
persistent backend saves and restores it with the store
(``core.store.detector_state``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from . import defaults
from .analysis import Analysis, AnalysisOptions, analyse_html
from .cluster.clustering import AnyIndex, Clusterer, Decision, Outcome, Rule, rule_of
from .cluster.containment import Sketch
from .features.features import DEFAULT_FEATURES, FeatureConfig
from .records import page_scope
from .cluster.sitetemplate import HostTemplates, host_of
from .index.index import BlockPermutedIndex
from .cluster.views import page_address
from .cluster.viewidentity import AddressIdentities

if TYPE_CHECKING:
    from .settings.config import SimhashConfig

__all__ = [
    "Page", "Detector", "PageDecision", "decide", "decide_html", "page_of", "canonical_positions", "assign_canonicals",
    "scope_of", "crawl_scope",
]


@dataclass(frozen=True)
class Page:
    """One fingerprinted page, as the rule takes it (``page_of`` builds one from an ``Analysis``)."""

    scope: str
    #: What makes two checks "the same page" (the crawl: Scrapy's request fingerprint; the library: the URL).
    identity: str
    #: The simhash, or a short page's exact digest (``exact``).
    fingerprint: int
    #: Its URL: the host its template is learned for (``core.cluster.sitetemplate.host_of``).
    url: str = ""
    exact: bool = False
    edit_keys: tuple[int, ...] = ()
    digest: int | None = None
    #: The text the simhash was made from (``Analysis.source``): template learning (step 5); ``None``: none.
    source: str | bytes | None = None
    #: A template-free fingerprint computed elsewhere (used when there is no ``source``).
    also: int | None = None
    second: int | None = None
    sketch: Sketch | None = None


def page_of(analysis: Analysis, scope: str, identity: str, url: str = "") -> Page:
    """The ``Page`` of a fingerprinted page's ``core.analysis`` answer."""
    assert analysis.fingerprint is not None, "a skipped page has no decision"
    return Page(
        scope, identity, analysis.fingerprint, url, analysis.exact, analysis.edit_keys, analysis.digest,
        analysis.source, None, analysis.second, analysis.sketch,
    )  # fmt: skip


class Detector:
    """The clustering rule (``Clusterer``) and the host template learner of one crawl, applied page by page."""

    def __init__(
        self,
        max_distance: int = defaults.MAX_DISTANCE,
        blocks: int | None = defaults.BLOCKS,
        features: FeatureConfig = DEFAULT_FEATURES,
        min_tokens: int = defaults.MIN_TOKENS,
        templates: bool = defaults.TEMPLATES,
        index_type: type[AnyIndex] = BlockPermutedIndex,
    ) -> None:
        self.rule = Clusterer(max_distance, blocks, index_type)  # (index_type: ``Clusterer.index_type``)
        #: The host template learner (``SIMHASH_TEMPLATES``), else ``None``.
        self.templates = HostTemplates(features, min_tokens) if templates else None
        #: The host of each entry's page, in entry order: step 7 wants stronger evidence across hosts
        #: (``Clusterer.host_of_entry``; a backend that knows more entries, restored ones, sets its own).
        self._entry_hosts: dict[int, str | None] = {}
        self.rule.host_of_entry = self._host_of_entry

    def _host_of_entry(self, entry: int) -> str | None:
        return self._entry_hosts.get(entry)

    @classmethod
    def from_config(cls, config: SimhashConfig, index_type: type[AnyIndex] = BlockPermutedIndex) -> Detector:
        return cls(config.max_distance, config.blocks, config.features, config.min_tokens, config.templates,
                   index_type)

    def template_free(self, page: Page) -> int | None:
        """Learn from ``page`` (a simhash page with its text) and give its template-free fingerprint, else
        ``page.also``."""
        if page.exact or page.source is None or self.templates is None:
            return None if page.exact else page.also
        return self.templates.check(host_of(page.url), page.fingerprint, page.source)

    def check(self, page: Page, index: bool = True) -> Decision:
        """Steps 1-7 for one page, in check order: learn, decide, record (``index=False``: a unique page is
        not made canonical).  ``Decision.also`` is the page's template-free fingerprint, when it has one."""
        also = self.template_free(page)
        host = host_of(page.url) if page.url else None
        decision = self.rule.check(
            page.scope, page.identity, page.fingerprint, page.exact, index, page.edit_keys, page.digest, also,
            page.second, page.sketch, host, page_address(page.url, page.sketch, host),
        )  # fmt: skip
        self._entry_hosts.setdefault(decision.entry, host)
        return decision if also is None else replace(decision, also=also)


@dataclass(frozen=True)
class PageDecision:
    """What a crawl meeting the pages in this order decides for one of them (``decide``)."""

    #: The page's position in the input.
    position: int
    outcome: Outcome
    #: The position of the canonical page of its cluster (another page), else ``None``.
    canonical: int | None = None
    #: The Hamming distance to that canonical page's indexed fingerprint (0 for a short page).
    distance: int | None = None
    #: The step that matched beyond the first simhash: ``"template"``, ``"second"``, ``"containment"``.
    via: str | None = None
    #: The rule that matched (``core.cluster.clustering.Rule``), for a near-duplicate.
    rule: Rule | None = None

    @property
    def is_duplicate(self) -> bool:
        return self.canonical is not None


def decide(
    pages: Iterable[Page], detector: Detector | None = None, before: Callable[[int, Page], None] | None = None
) -> list[PageDecision]:
    """The crawl's decisions for ``pages`` checked in this order (steps 1-7), one per page.

    A page whose (scope, identity) came before is re-checked as its own later version (``unchanged``,
    ``edited``, ``changed``), as in a crawl; its ``canonical`` is then the position of the first page of
    that canonical identity.  ``before(position, page)`` is called before each check (``compare`` reads
    what the detector knew then).
    """
    detector = detector if detector is not None else Detector()
    rule = detector.rule
    first: dict[int, int] = {}  # entry -> position of its first page
    out = []
    for position, page in enumerate(pages):
        if before is not None:
            before(position, page)
        decision = detector.check(page)
        first.setdefault(decision.entry, position)
        if decision.canonical is None:
            out.append(PageDecision(position, decision.outcome))
            continue
        kind = rule_of(page.exact, decision.distance, rule.max_distance, decision.via)
        out.append(
            PageDecision(position, decision.outcome, first[decision.canonical], decision.distance, decision.via, kind)
        )
    return out


def decide_html(
    pages: Iterable[tuple[str, str | bytes]],
    config: SimhashConfig | None = None,
    spider: str = "",
) -> list[PageDecision | None]:
    """The crawl's decisions for HTML pages ``(url, body)`` fetched in this order: each page analysed as
    the crawl does (``core.analysis.analyse_html`` with the config's options) and checked by a
    ``Detector`` of ``config`` (the settings' defaults when ``None``); the URL is the page's identity, its
    scope the crawl's (``SIMHASH_SCOPE``; ``spider``: the spider name; with the digests of the page's
    protected text and declared identity, ``scope_of``).  ``None`` for a page with no
    fingerprint (no text).  Positions count every page given."""
    from .settings.config import SimhashConfig

    config = config if config is not None else SimhashConfig.from_settings({})
    options: AnalysisOptions = config.analysis
    detector = Detector.from_config(config)
    addresses = AddressIdentities()
    checked: list[Page] = []
    where: list[int] = []
    total = 0
    for position, (url, body) in enumerate(pages):
        total = position + 1
        answer = analyse_html(body, None, options)
        if answer.fingerprint is None:
            continue
        checked.append(page_of(answer, scope_of(config, url, body, spider, addresses), url, url))
        where.append(position)
    out: list[PageDecision | None] = [None] * total
    for d in decide(checked, detector):
        canonical = None if d.canonical is None else where[d.canonical]
        out[where[d.position]] = replace(d, position=where[d.position], canonical=canonical)
    return out


def scope_of(
    config: SimhashConfig, url: str, body: str | bytes, spider: str = "", addresses: AddressIdentities | None = None
) -> str:
    """The scope the crawl checks the page ``body`` of ``url`` in (``DedupState.scope_for``): ``SIMHASH_SCOPE``'s,
    with the digest of its protected text (``SIMHASH_DISTINCT_SELECTORS``, ``core.cluster.distinct``) and of the
    identity it declares (``SIMHASH_IDENTITY_SIGNALS``, ``core.cluster.identity``: its markup and the product options
    its URL names), or, with ``addresses`` (the identities of the addresses of the pages before it,
    ``core.cluster.viewidentity``), the one its address's pages declared when it declares none; the page is
    parsed again only when one of them may apply."""
    scope = page_scope(config.scope, url, spider)
    if config.distinct is None and not config.identity_signals:
        return scope
    protected, declared = page_digests(config, url, body)
    return crawl_scope(scope, url, protected, declared, addresses if config.identity_signals else None)[0]


def crawl_scope(
    scope: str, url: str | None, protected: str | None, declared: str | None,
    addresses: AddressIdentities | None = None,
) -> tuple[str, bool]:
    """``(scope, inherited)``: the scope the crawl checks a page of ``url`` in, from its plain scope
    (``core.records.page_scope``) and the digests of its protected text and of the identity it declares
    (``page_digests``): with ``addresses`` (the identities the pages checked before it declared, per address,
    ``core.cluster.viewidentity``; ``SIMHASH_IDENTITY_SIGNALS`` on), a page declaring none takes the one its
    address's pages declared (``inherited``: a print view), and a page declaring one teaches it to its address.
    The crawl (``DedupState.scope_for``), the library (``scope_of``), ``compare`` and ``dedup`` all call it, in
    check order."""
    from .cluster.distinct import scope_key
    from .cluster.identity import combine_digests

    inherited = False
    if addresses is not None:
        declared, inherited = addresses.resolve(scope_key(scope, protected), url, declared)
    return scope_key(scope, combine_digests((protected, declared))), inherited


def page_digests(
    config: SimhashConfig, url: str | None, body: str | bytes, encoding: str | None = None
) -> tuple[str | None, str | None]:
    """The digests that split the scope of the page ``body`` (of ``url``): of its protected text
    (``SIMHASH_DISTINCT_SELECTORS``, ``core.cluster.distinct``) and of the identity it declares
    (``SIMHASH_IDENTITY_SIGNALS``, ``core.cluster.identity``: its markup and the product options its URL
    names); the page is parsed once, and only when one of them may
    apply.  ``scope_of``, and the commands ``compare`` and ``dedup``, the crawl's scope from a body."""
    from .cluster.identity import identity_digest
    from .extract.text import parse_html

    raw = body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass")
    parsed: list[Any] = []

    def root() -> Any:
        if not parsed:
            parsed.append(parse_html(body, encoding))
        return parsed[0]

    distinct = config.distinct
    protected = None if distinct is None or root() is None else distinct.digest(root())
    declared = identity_digest(root, raw, url) if config.identity_signals else None
    return protected, declared


def canonical_positions(decisions: Sequence[PageDecision | None]) -> list[tuple[int, int]]:
    """The (near-duplicate, canonical) position pairs of ``decisions``."""
    return [(d.position, d.canonical) for d in decisions if d is not None and d.canonical is not None]


def assign_canonicals(
    fingerprints: Iterable[int] | np.ndarray,
    scopes: Iterable[int] | np.ndarray | None = None,
    max_distance: int = defaults.MAX_DISTANCE,
    blocks: int | None = defaults.BLOCKS,
    exact: Iterable[bool] | np.ndarray | None = None,
    edit_keys: Sequence[Sequence[int]] | None = None,
    also: Sequence[int | None] | None = None,
    second: Sequence[int | None] | None = None,
    sketches: Sequence[Sketch | None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The crawl's rule over a batch of distinct pages given by their fingerprints, in order.

    Returns ``(canonical, distance)``: for each page the position of its
    canonical page and the distance to it, ``-1`` for canonical pages.  Every
    page is its own identity (positions), so this is what a crawl of these
    pages in this order decides, but for what a URL tells (below).  ``also`` (template-free fingerprints,
    learned in this order: ``core.cluster.sitetemplate``), ``second`` and ``sketches``
    give steps 5-7 (``core.detector.decide`` applies the rule).  Without URLs it has neither step 7's rule
    for views of one address nor the identities views take from their address: ``decide`` with ``Page`` objects
    at their URLs, in ``crawl_scope``'s scopes, has both (``scrapy simhash dedup``).
    """
    fps = np.asarray(fingerprints, dtype=np.uint64).tolist()
    n = len(fps)
    scope_list = [0] * n if scopes is None else np.asarray(scopes).tolist()
    exact_list = [False] * n if exact is None else [bool(x) for x in exact]
    none: list[Any] = [None] * n
    pages = (
        Page(str(s), str(page), fp, "", x, tuple(keys), None, None, a, b, c)
        for page, (s, fp, x, keys, a, b, c) in enumerate(zip(
            scope_list, fps, exact_list, edit_keys if edit_keys is not None else [()] * n,
            also if also is not None else none, second if second is not None else none,
            sketches if sketches is not None else none,
        ))
    )  # fmt: skip
    canonical = np.full(n, -1, dtype=np.int64)
    distance = np.full(n, -1, dtype=np.int64)
    for decision in decide(pages, Detector(max_distance, blocks, templates=False)):
        if decision.canonical is not None and decision.distance is not None:
            canonical[decision.position] = decision.canonical
            distance[decision.position] = decision.distance
    return canonical, distance
