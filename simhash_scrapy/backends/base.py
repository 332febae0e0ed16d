"""The dedup backend interface: where fingerprints, canonical pages and clusters live.

Semantics every backend implements (the memory backend is the reference):

* **Every fingerprinted page is recorded** (``check``), unique or not, so the
  cluster report can list it (``members``).
* **Only unique pages enter the index.**  The index holds canonical pages
  only, so a chain of small edits (A ~ B ~ C with A and C far apart) never
  drifts: each page is compared with canonical pages, never with other
  near-duplicates.
* A new page within ``max_distance`` (k) of one or more canonical pages
  **joins the cluster of the nearest one** (ties: the canonical page crawled
  first).  It is a near-duplicate; the verdict names that canonical page and
  the distance.
* A page with no canonical page within k **becomes a canonical page**: the
  first page crawled of a cluster is its canonical page.  "Crawled" means
  "checked": pages are checked one at a time, in the order their
  fingerprints are ready.
* ``check(record, index=False)`` records the page and returns its verdict but
  a unique page does not become a canonical page (nothing is indexed).
* **Scope**: one index per ``record.scope`` string (the spider name, or the
  host name with ``SIMHASH_SCOPE = "domain"``); pages of different scopes
  never match.
* ``check`` is one atomic query-and-record step: two pages checked at the
  same time can never both become canonical pages of one cluster.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from ..config import SimhashConfig

__all__ = ["PageRecord", "Verdict", "ClusterMember", "DedupBackend", "BackendError"]


class BackendError(RuntimeError):
    """A backend cannot be used (raised by ``open`` with a message saying why and what to change)."""


@dataclass
class PageRecord:
    """One fingerprinted page."""

    url: str
    fingerprint: int
    scope: str
    referer: str | None = None
    depth: int | None = None
    #: The page's extracted text, kept only when the report format needs it (html).
    text: str | None = None


@dataclass
class Verdict:
    """What ``check`` found for one page."""

    #: The canonical page this page duplicates; ``None``: the page is unique
    #: (and became a canonical page unless checked with ``index=False``).
    canonical_url: str | None
    #: Hamming distance to that canonical page (``None`` when unique).
    distance: int | None
    #: Fingerprint of that canonical page (``None`` when unique).
    canonical_fingerprint: int | None
    #: ``False`` when the backend could not check the page (a fail-open backend
    #: error): the page goes on, counted as ``simhash/unchecked``, not unique.
    checked: bool = True

    @property
    def is_duplicate(self) -> bool:
        return self.canonical_url is not None


@dataclass
class ClusterMember:
    """One recorded page, as ``members()`` returns it (in the order pages were checked)."""

    url: str
    fingerprint: int
    scope: str
    #: URL of the canonical page of its cluster; ``None`` when this page is unique.
    canonical_url: str | None = None
    #: Distance to the canonical page; ``None`` when this page is unique.
    distance: int | None = None
    referer: str | None = None
    depth: int | None = None
    text: str | None = None
    #: ``True`` when this page is a canonical page (unique and indexed).
    indexed: bool = False

    @classmethod
    def from_check(cls, record: PageRecord, verdict: Verdict, indexed: bool) -> ClusterMember:
        return cls(
            url=record.url,
            fingerprint=record.fingerprint,
            scope=record.scope,
            canonical_url=verdict.canonical_url,
            distance=verdict.distance,
            referer=record.referer,
            depth=record.depth,
            text=record.text,
            indexed=indexed,
        )


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

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (flush, disconnect)."""
