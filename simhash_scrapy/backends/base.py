"""The dedup backend interface: where fingerprints, canonical pages and clusters live.

Every backend applies the clustering rule of ``core.clustering`` (read its
docstring: identity first, then the nearest canonical page of another
identity, short pages by exact digest, pages of a few dozen tokens also by
their one-edit keys) and keeps **one record per identity**.
The memory backend is the reference; the Redis backend's Lua script mirrors
the rule and a test compares their decisions page by page.

* ``check(record)`` is one atomic query-and-record step: two pages checked at
  the same time can never both become canonical pages of one cluster.
* ``check(record, index=False)`` records the page and returns its verdict but
  a unique page does not become a canonical page (nothing is indexed).
* **Scope**: one index per ``record.scope`` string (the spider name, or the
  host name with ``SIMHASH_SCOPE = "domain"``); pages of different scopes
  never match.
* ``load_extra`` / ``save_extra``: small named blobs that live and are shared
  as the index does (the learned URL rules).

This module imports no Scrapy: backends are usable from plain Python.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.clustering import Outcome

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from ..config import SimhashConfig

__all__ = ["PageRecord", "Verdict", "ClusterMember", "DedupBackend", "BackendError", "Outcome", "UNCHECKED"]


class BackendError(RuntimeError):
    """A backend cannot be used (raised by ``open`` with a message saying why and what to change)."""


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
    #: A short page: matched by equal digest only (``core.exact``).
    exact: bool = False
    #: When it was checked (``time.time()``; 0 when unknown).
    seen: float = 0.0
    #: The one-edit keys of a simhash page of a few dozen tokens (``core.edits``), else empty.
    edit_keys: tuple[int, ...] = ()
    #: The content digest (``Analysis.digest``): tells an unchanged page from an edited one; ``None``: unknown.
    digest: int | None = None
    #: The HTTP validators the server sent (``ETag``, ``Last-Modified``), kept for conditional re-crawls.
    etag: str | None = None
    last_modified: str | None = None
    #: The URL the page names as its canonical one (``rel=canonical`` tag or ``Link`` header), else ``None``.
    canonical_link: str | None = None

    @property
    def key(self) -> str:
        """The identity, defaulting to the URL."""
        return self.identity or self.url


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
    #: Found by the one-edit rule (``core.edits``): one token apart, farther than k.
    one_edit: bool = False
    #: The rel=canonical URL that canonical page names, when known.
    canonical_link: str | None = None

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

    @property
    def key(self) -> str:
        return self.identity or self.url


class DedupBackend(abc.ABC):
    """Stores canonical pages per scope and records every checked page.

    Lifecycle: ``from_crawler`` (at crawler start), ``open`` (when the spider
    opens, before the first page), ``check`` for each page, ``members`` and
    ``index_size`` at close, then ``close``.  All methods except
    ``from_crawler`` run on the event loop: they must not block it for long.
    """

    #: Entries loaded at ``open`` (persistent backends); reported as the stat ``simhash/initial``.
    initial: int = 0

    def __init__(self, config: SimhashConfig) -> None:
        self.config = config
        self._extra: dict[str, bytes] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler, config: SimhashConfig) -> DedupBackend:
        return cls(config)

    @abc.abstractmethod
    async def open(self, spider_name: str) -> None:
        """Get ready; raise ``BackendError`` (or another clear exception) if the backend is unusable."""

    @abc.abstractmethod
    async def check(self, record: PageRecord, index: bool = True) -> Verdict:
        """Query the canonical pages of ``record.scope`` and record the page, in one atomic step."""

    @abc.abstractmethod
    async def members(self) -> list[ClusterMember]:
        """Every recorded page, in the order they were checked (for the cluster report)."""

    @abc.abstractmethod
    async def index_size(self) -> int:
        """Number of canonical pages in all scopes."""

    async def previous(self, scope: str, identity: str) -> ClusterMember | None:  # noqa: B027 - optional lookup
        """The record of ``identity`` in ``scope`` (its latest version), or ``None``.

        Conditional re-crawls read its validators (``etag``, ``last_modified``)
        and, on a 304, check it again as it was.  A backend that cannot look a
        record up returns ``None`` (no conditional requests then).
        """
    async def cluster_members(self, scope: str, anchor: str) -> list[ClusterMember] | None:
        """The recorded members of the cluster whose canonical page has identity ``anchor`` (that page
        first, then in first-check order), or ``None`` when this backend cannot tell cheaply (then the crawl
        knows the cluster from the pages this process checked: ``core.representative.ClusterBook``)."""
        return None

    async def position(self, scope: str, anchor: str, identity: str) -> int | None:
        """The position of near-duplicate ``identity`` in the cluster anchored at ``anchor`` (the anchor is 1),
        counted where the index is shared (Redis: by every worker); ``None``: the crawl's own count decides."""
        return None

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (flush, disconnect)."""

    async def load_extra(self, name: str) -> bytes | None:
        """A named blob saved earlier with ``save_extra`` (persisted/shared like the index), or ``None``."""
        return self._extra.get(name)

    async def save_extra(self, name: str, data: bytes) -> None:
        """Keep a named blob (e.g. the learned URL rules) where the index lives."""
        self._extra[name] = data
