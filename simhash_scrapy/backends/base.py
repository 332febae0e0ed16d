"""The dedup backend interface: where fingerprints, canonical pages and clusters live.

Every backend applies the clustering rule of ``core.cluster.clustering`` (read its
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
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..core.cluster.clustering import Outcome
# The records live in the core (backends, commands and the crawl share them); the interface lives here.
from ..core.records import UNCHECKED, ClusterMember, PageRecord, Verdict

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from ..core.settings.config import SimhashConfig

__all__ = ["PageRecord", "Verdict", "ClusterMember", "DedupBackend", "BackendError", "Outcome", "UNCHECKED"]


class BackendError(RuntimeError):
    """A backend cannot be used (raised by ``open`` with a message saying why and what to change)."""


class DedupBackend(abc.ABC):
    """Stores canonical pages per scope and records every checked page.

    Lifecycle: ``from_crawler`` (at crawler start), ``open`` (when the spider
    opens, before the first page), ``check`` for each page, ``members`` and
    ``index_size`` at close, then ``close``.  All methods except
    ``from_crawler`` run on the event loop: they must not block it for long.
    """

    #: Entries loaded at ``open`` (persistent backends); reported as the stat ``simhash/initial``.
    initial: int = 0
    #: Whether ``check`` also matches by ``PageRecord.also``, ``PageRecord.second`` and ``PageRecord.sketch``
    #: (``core.cluster.clustering`` steps 5-7); the crawl learns host templates and sends second simhashes and
    #: sentence sketches only to such a backend.
    extra_queries: bool = False

    def __init__(self, config: SimhashConfig) -> None:
        self.config = config
        self._extra: dict[str, bytes] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler, config: SimhashConfig) -> DedupBackend:
        return cls(config)

    @abc.abstractmethod
    async def open(self, spider_name: str) -> None:
        """Get ready; raise ``BackendError`` (or another clear exception) if the backend is unusable."""

    def restored_pages(self) -> Iterable[tuple[str, str]]:
        """``(url, scope)`` of the records loaded at ``open`` (a store's), in the order they were first checked:
        the crawl replays what their scopes say (``core.cluster.viewidentity``); none by default."""
        return ()

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
        knows the cluster from the pages this process checked: ``core.cluster.representative.ClusterBook``)."""
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

    async def load_replay(self, scope: str, identity: str) -> bytes | None:
        """The requests page ``identity`` yielded when last downloaded (``simhash_scrapy.replay``), or ``None``.

        Kept as a named blob (``save_extra``: a key of its own with Redis) unless the backend keeps them
        elsewhere (the store's ``<name>.store.replay``: ``backends.replay_file``)."""
        return await self.load_extra(f"replay/{scope}\t{identity}")

    async def save_replay(self, scope: str, identity: str, data: bytes) -> None:
        """Keep the requests a downloaded page yielded, for a later 304 of that page (``load_replay``)."""
        await self.save_extra(f"replay/{scope}\t{identity}", data)
