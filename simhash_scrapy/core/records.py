"""The records every backend takes and gives, and the small rules about them (no Scrapy, no backend).

* ``PageRecord``: one fingerprinted page (or item) to check, built in one place
  (``page_record``: from its ``Analysis``; ``record_again``: a 304 answer, from its
  stored record), keyword-only; ``Verdict``: what
  the check found (``UNCHECKED``: nobody could check it); ``ClusterMember``:
  one recorded identity, as a backend lists it.  The backend interface
  (``backends.base.DedupBackend``) takes and gives these.
* **Scope** (``page_scope``, ``item_scope``): which index a page is checked in.
  Pages of different scopes never match.  The crawl, ``compare`` and ``dedup``
  call ``page_scope``; ``core.cluster.distinct.scope_key`` then folds in the page's
  protected text.
* **Flag fields** (``flag_item``): the item fields the flag action writes.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .analysis import Analysis
from .cluster.clustering import Outcome
from .cluster.containment import Sketch

__all__ = [
    "PageRecord", "page_record", "record_again", "Verdict", "ClusterMember", "UNCHECKED", "page_scope",
    "item_scope", "is_item_scope", "record_scope",
    "ITEM_SCOPE_PREFIX", "FLAG_FIELDS", "flag_item", "is_flagged",
]


@dataclass
class PageRecord:
    """One fingerprinted page (or item)."""

    url: str
    #: The simhash; for ``exact`` records the exact digest of a short page.
    fingerprint: int
    scope: str
    referer: str | None = None
    depth: int | None = None
    #: The page's extracted text, kept only when the report format needs it (html).
    text: str | None = None
    #: What makes two checks "the same page" ("" means the URL).  The crawl
    #: passes Scrapy's request fingerprint, so the user's URL canonicalisation applies.
    identity: str = ""
    #: A short page: matched by equal digest only (``core.features.exact``).
    exact: bool = False
    #: When it was checked (``time.time()``; 0 when unknown).
    seen: float = 0.0
    #: The one-edit keys of a simhash page of a few dozen tokens (``core.features.edits``), else empty.
    edit_keys: tuple[int, ...] = ()
    #: The content digest (``Analysis.digest``): tells an unchanged page from an edited one; ``None``: unknown.
    digest: int | None = None
    #: The HTTP validators the server sent (``ETag``, ``Last-Modified``), kept for conditional re-crawls.
    etag: str | None = None
    last_modified: str | None = None
    #: The URL the page names as its canonical one (``rel=canonical`` tag or ``Link`` header), else ``None``.
    canonical_link: str | None = None
    #: The simhash of its text without its host's learned template lines (``core.cluster.sitetemplate``): a
    #: second query of the rule, used by backends with ``extra_queries``; ``None``: none.
    also: int | None = None
    #: Its second, independent simhash (``core.features.second``): a verified query in a wider radius, used by
    #: backends with ``extra_queries``; ``None``: none.
    second: int | None = None
    #: Its sentence sketch (``core.cluster.containment``): clustering step 7, used by backends with
    #: ``extra_queries``; ``None``: none.
    sketch: Sketch | None = None
    #: The text its simhash was made from (``Analysis.source``): a backend with ``extra_queries`` learns
    #: its host's template from it (``core.detector``) and gives ``also``; ``None``: none.
    source: str | bytes | None = None

    @property
    def key(self) -> str:
        """The identity, defaulting to the URL."""
        return self.identity or self.url


def page_record(
    answer: Analysis, *, url: str, scope: str, seen: float, referer: str | None = None, depth: int | None = None,
    identity: str = "", etag: str | None = None, last_modified: str | None = None,
    canonical_link: str | None = None, also: int | None = None,
) -> PageRecord:
    """The record of a page (or item) fingerprinted now: what ``answer`` found (its fingerprint, text,
    exact digest, one-edit keys, content digest, second simhash, sentence sketch, source text) and where the crawl
    met it.  The middleware and the pipeline build every record they check here."""
    assert answer.fingerprint is not None, "a skipped page has no record"
    return PageRecord(
        url=url,
        fingerprint=answer.fingerprint,
        scope=scope,
        referer=referer,
        depth=depth,
        text=answer.text,
        identity=identity,
        exact=answer.exact,
        seen=seen,
        edit_keys=answer.edit_keys,
        digest=answer.digest,
        etag=etag,
        last_modified=last_modified,
        canonical_link=canonical_link,
        also=also,
        second=answer.second,
        sketch=answer.sketch,
        source=answer.source,  # a backend with extra_queries learns its host's template from it (core.detector)
    )


def record_again(
    previous: ClusterMember, *, url: str, scope: str, seen: float, referer: str | None = None,
    depth: int | None = None, identity: str = "", etag: str | None = None, last_modified: str | None = None,
) -> PageRecord:
    """The record of a page that answered 304 (not modified): its stored record as it was, met again
    now (the validators the server sent this time, else the stored ones)."""
    return PageRecord(
        url=url,
        fingerprint=previous.fingerprint,
        scope=scope,
        referer=referer,
        depth=depth,
        text=previous.text,
        identity=identity,
        exact=previous.exact,
        seen=seen,
        digest=previous.digest,
        etag=etag or previous.etag,
        last_modified=last_modified or previous.last_modified,
        canonical_link=previous.canonical_link,  # the page is as it was: so is the URL it names
    )


@dataclass(frozen=True)
class Verdict:
    """What ``check`` found for one page."""

    outcome: Outcome
    #: The canonical page (another identity) whose cluster this page belongs to, else ``None``.
    canonical_url: str | None = None
    #: Hamming distance to that canonical page (0 for exact matches), else ``None``.
    distance: int | None = None
    #: Fingerprint of that canonical page, else ``None``.
    canonical_fingerprint: int | None = None
    #: Identity of that canonical page, else ``None``.
    canonical_identity: str | None = None
    #: The fingerprint of this identity's last recorded version, when it was recorded before.
    previous_fingerprint: int | None = None
    #: When that version was checked (``time.time()``), when known.
    previous_seen: float | None = None
    #: Found by the one-edit rule (``core.features.edits``): one token apart, farther than k.
    one_edit: bool = False
    #: Found by the template-free text (``"template"``), the second simhash (``"second"``) or sentence
    #: containment (``"containment"``), else ``None``.
    via: str | None = None
    #: The rel=canonical URL that canonical page names, when known.
    canonical_link: str | None = None
    #: The page's template-free fingerprint (``core.detector``, step 5), when it got one.
    also: int | None = None

    @property
    def is_duplicate(self) -> bool:
        """Another page has this content (drop/flag decisions use this)."""
        return self.canonical_url is not None

    @property
    def checked(self) -> bool:
        """``False`` when the backend could not check the page (a fail-open backend error)."""
        return self.outcome is not Outcome.UNCHECKED


#: The verdict for a page a fail-open backend could not check.
UNCHECKED = Verdict(Outcome.UNCHECKED)


@dataclass
class ClusterMember:
    """One recorded identity (its latest version), as ``members()`` returns it, in first-check order."""

    url: str
    fingerprint: int
    scope: str
    #: URL of the canonical page of its cluster; ``None`` when this page is canonical or unique.
    canonical_url: str | None = None
    #: Distance to the canonical page; ``None`` when this page is canonical or unique.
    distance: int | None = None
    referer: str | None = None
    depth: int | None = None
    text: str | None = None
    #: ``True`` when this page is a canonical page (unique and indexed).
    indexed: bool = False
    identity: str = ""
    exact: bool = False
    #: The outcome of its latest check.
    outcome: Outcome = Outcome.UNIQUE
    #: The fingerprint before its latest check (re-crawled pages), else ``None``.
    previous_fingerprint: int | None = None
    first_seen: float = 0.0
    last_seen: float = 0.0
    #: Its content digest (``PageRecord.digest``), else ``None``.
    digest: int | None = None
    #: The HTTP validators of its latest version (``ETag``, ``Last-Modified``), else ``None``.
    etag: str | None = None
    last_modified: str | None = None
    #: The rel=canonical URL the page names (``PageRecord.canonical_link``), else ``None``.
    canonical_link: str | None = None
    #: How it was found (``Verdict.via``), as far as this process knows: ``"containment"`` for a member
    #: matched by clustering step 7 in this crawl (the rule reports name), else ``None``.
    via: str | None = None

    @property
    def key(self) -> str:
        return self.identity or self.url


# ------------------------------------------------------------------ scope
#: The scopes of items (``SimhashPipeline``) start with this: items have indexes of their own, so an item
#: never matches the page it was scraped from; reports and the ``simhash/pages`` stat leave them out.
ITEM_SCOPE_PREFIX = "item:"


def page_scope(by: str, url: str, name: str = "") -> str:
    """The plain scope of a page of ``url``: its host, lower case (``SIMHASH_SCOPE = "domain"``), else ``name``
    (the spider's name in a crawl, ``""`` in the commands)."""
    if by == "domain":
        return (urlsplit(url).hostname or "").lower()
    return name


def item_scope(scope: str) -> str:
    """The scope of the items of ``scope``."""
    return ITEM_SCOPE_PREFIX + scope


def record_scope(by: str, url: str, name: str = "", items: bool = False) -> str:
    """The scope a page of ``url`` (``items``: an item whose URL field is ``url``) is recorded and reported in,
    before any protected text or declared identity splits it (``core.detector.crawl_scope``): ``page_scope``,
    or its item scope (``item_scope``).  The one rule of the crawl (``DedupState.scope_for``: its pages and the
    item pipeline's items) and ``scrapy simhash dedup`` (a folder's pages, a feed's items)."""
    scope = page_scope(by, url, name)
    return item_scope(scope) if items else scope


def is_item_scope(scope: str | None) -> bool:
    """Whether ``scope`` is an item scope (``item_scope``)."""
    return (scope or "").startswith(ITEM_SCOPE_PREFIX)


# ------------------------------------------------------------------- flag
#: The item fields ``SIMHASH_ITEM_ACTION = "flag"`` writes: the canonical page's URL and the distance to it.
FLAG_FIELDS = ("simhash_duplicate_of", "simhash_distance")


def is_flagged(fields: Mapping[str, Any]) -> bool:
    """Whether ``flag_item`` flagged these fields already (an item of a flagged page, flagged again for its field)."""
    try:
        return fields.get(FLAG_FIELDS[0]) is not None
    except KeyError:
        return False


def flag_item(fields: MutableMapping[str, Any], duplicate_of: str, distance: int | None) -> None:
    """Write the flag fields into ``fields`` (an ``ItemAdapter`` in the crawl), leaving out each one the item
    refuses with ``KeyError`` (an item class that does not declare it)."""
    for key, value in zip(FLAG_FIELDS, (duplicate_of, distance)):
        try:
            fields[key] = value
        except KeyError:
            pass
