"""The in-process backend, kept on disk: pause/resume (``JOBDIR``) and state across crawls (``SIMHASH_DIR``).

Selected automatically instead of the memory backend when ``JOBDIR`` or
``SIMHASH_DIR`` is set (``SIMHASH_BACKEND`` left at ``"memory"``).

* ``JOBDIR``: ``<JOBDIR>/simhash.store``.  Ctrl-C, then the same command
  again: every page checked before is loaded back, so the resumed run finds
  duplicates of first-run pages and the final cluster report covers the
  whole job.
* ``SIMHASH_DIR`` (a folder name, relative to the project's ``.scrapy``
  folder through ``scrapy.utils.project.data_path``, or an absolute path):
  ``<SIMHASH_DIR>/<spider>.store``, one per spider, kept across crawls, so
  this week's crawl recognises last week's pages.  It wins over ``JOBDIR``
  when both are set.
* ``SIMHASH_RESET = True`` or ``-a simhash_reset=1`` starts afresh (the old
  file is kept as ``<name>.store.previous``).

Every checked page is appended to the store (one buffered write, flushed at
least once a second and at close).  The file records k, the block layout,
the feature settings and the text mode; a file written with other values is
refused with an error naming the setting.  Loaded pages count as the stat
``simhash/initial``.
"""

from __future__ import annotations

import atexit
import logging
import re
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..index import BlockPermutedIndex, Match
from ..store import PageStore, StoreConfig, StoreContents, StoreError, read_store
from .base import BackendError, ClusterMember
from .memory import MemoryBackend

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

    from ..config import SimhashConfig

__all__ = ["PersistentBackend", "load_members", "store_path", "uses_persistence"]

logger = logging.getLogger(__name__)

JOB_STORE_NAME = "simhash.store"
DEFAULT_DIR = "simhash"
_FLUSH_EVERY = 1.0  # seconds
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "", "none")


def _flag(name: str, value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{name} must be a boolean (True/False, 1/0), got {value!r}")


def _simhash_dir(settings: BaseSettings) -> str | None:
    value = settings.get("SIMHASH_DIR")
    if value is None or value is False:
        return None
    if value is True:
        return DEFAULT_DIR
    if not isinstance(value, str):
        raise ValueError(f"SIMHASH_DIR must be a folder name or path (e.g. 'simhash'), got {value!r}")
    text = value.strip()
    if text.lower() in _FALSE:
        return None
    if text.lower() in _TRUE:
        return DEFAULT_DIR
    return text


def uses_persistence(settings: BaseSettings) -> bool:
    """Whether ``JOBDIR`` or ``SIMHASH_DIR`` asks for a persistent in-process backend."""
    return bool(settings.get("JOBDIR")) or _simhash_dir(settings) is not None


def store_path(settings: BaseSettings, spider_name: str) -> Path:
    """Where the store of this crawl lives (``SIMHASH_DIR`` first, then ``JOBDIR``)."""
    folder = _simhash_dir(settings)
    if folder is not None:
        from scrapy.utils.project import data_path

        safe = re.sub(r"[^A-Za-z0-9._-]", "_", spider_name) or "spider"
        return Path(data_path(folder, createdir=True)) / f"{safe}.store"
    from scrapy.utils.job import job_dir

    jobdir = job_dir(settings)
    if not jobdir:
        raise BackendError("the persistent backend needs JOBDIR or SIMHASH_DIR")
    return Path(jobdir) / JOB_STORE_NAME


class _RememberingIndex(BlockPermutedIndex):
    """An index that remembers its last query, so recording a duplicate needs no second query."""

    last_fingerprint: int | None = None
    last_matches: list[Match] = []

    def query(self, fingerprint: int) -> list[Match]:
        matches = super().query(fingerprint)
        self.last_fingerprint, self.last_matches = fingerprint, matches
        return matches


class _Members:
    """The member list: pages loaded from the store (built on access) followed by new ones."""

    __slots__ = ("_contents", "_loaded", "_new")

    def __init__(self, contents: StoreContents) -> None:
        self._contents = contents
        self._loaded = len(contents)
        self._new: list[ClusterMember] = []

    def __len__(self) -> int:
        return self._loaded + len(self._new)

    def _build(self, row: int) -> ClusterMember:
        c = self._contents
        canonical = int(c.canonical[row])
        depth = int(c.depth[row])
        return ClusterMember(
            url=c.url(row),
            fingerprint=int(c.fingerprints[row]),
            scope=c.scope(row),
            canonical_url=c.url(canonical) if canonical >= 0 else None,
            distance=int(c.distance[row]) if canonical >= 0 else None,
            referer=c.referer(row),
            depth=depth if depth >= 0 else None,
            text=c.text(row),
            indexed=bool(c.indexed[row]),
        )

    def __getitem__(self, position: int) -> ClusterMember:
        if position < 0:
            position += len(self)
        if 0 <= position < self._loaded:
            return self._build(position)
        return self._new[position - self._loaded]

    def append(self, member: ClusterMember) -> None:
        self._new.append(member)

    def extend(self, members: Iterable[ClusterMember]) -> None:
        self._new.extend(members)

    def __iter__(self) -> Iterator[ClusterMember]:
        c = self._contents
        if self._loaded:
            urls = c.urls()
            fps = c.fingerprints.tolist()
            canonical = c.canonical.tolist()
            distance = c.distance.tolist()
            depth = c.depth.tolist()
            indexed = c.indexed.tolist()
            names = c.scope_names
            scopes = c.scope_ids.tolist()
            for row in range(self._loaded):
                canon = canonical[row]
                yield ClusterMember(
                    url=urls[row],
                    fingerprint=fps[row],
                    scope=names[scopes[row]],
                    canonical_url=urls[canon] if canon >= 0 else None,
                    distance=distance[row] if canon >= 0 else None,
                    referer=c.referer(row),
                    depth=depth[row] if depth[row] >= 0 else None,
                    text=c.text(row),
                    indexed=indexed[row],
                )
        yield from self._new


def load_members(path: str | Path) -> list[ClusterMember]:
    """Every page of a store file, as ``members()`` returns them (for reports of a stopped job)."""
    return list(_Members(read_store(path)))


class PersistentBackend(MemoryBackend):
    """``MemoryBackend`` whose pages are appended to a store file and loaded back at open."""

    def __init__(self, config: SimhashConfig, settings: BaseSettings, crawler: Crawler | None = None) -> None:
        super().__init__(config)
        self.settings = settings
        self.crawler = crawler
        self.reset = _flag("SIMHASH_RESET", settings.get("SIMHASH_RESET"))
        _simhash_dir(settings)  # validate now: a bad value stops the crawl at start
        self.path: Path | None = None
        self.store: PageStore | None = None
        self._last_flush = 0.0

    @classmethod
    def from_crawler(cls, crawler: Crawler, config: SimhashConfig) -> PersistentBackend:
        return cls(config, crawler.settings, crawler)

    def store_config(self) -> StoreConfig:
        config = self.config
        return StoreConfig(
            max_distance=config.max_distance,
            blocks=config.blocks or config.max_distance + 1,
            features=config.features.signature(),
            text_mode=config.text_mode,
        )

    async def open(self, spider_name: str) -> None:
        reset = self.reset
        spider = getattr(self.crawler, "spider", None) if self.crawler is not None else None
        if spider is not None and getattr(spider, "simhash_reset", None) is not None:
            reset = reset or _flag("-a simhash_reset", spider.simhash_reset)
        self.path = store_path(self.settings, spider_name)
        store = PageStore(self.path, self.store_config())
        started = time.perf_counter()
        try:
            contents = store.open(reset=reset)
        except StoreError as exc:
            raise BackendError(str(exc)) from exc
        except OSError as exc:
            raise BackendError(f"cannot open the simhash store {self.path}: {exc}") from exc
        self.store = store
        atexit.register(self._flush_at_exit)
        if len(contents):
            self._restore(contents)
            logger.info(
                "simhash: loaded %d pages (%d canonical) from %s in %.2f s",
                len(contents),
                int(np.count_nonzero(contents.indexed)),
                self.path,
                time.perf_counter() - started,
            )
        else:
            logger.info("simhash: recording pages in %s", self.path)
        self._last_flush = time.monotonic()

    def _index_for(self, scope: str) -> BlockPermutedIndex:
        index = self._indexes.get(scope)
        if index is None:
            index = self._indexes[scope] = _RememberingIndex(self.config.max_distance, self.config.blocks)
        return index

    def _restore(self, contents: StoreContents) -> None:
        """Members from the store (built lazily) and the indexes of canonical pages, scope by scope."""
        if len(self._members):
            raise RuntimeError("the store must be loaded before the first check")
        self._members = _Members(contents)  # type: ignore[assignment]
        rows = np.flatnonzero(contents.indexed)
        scope_of = contents.scope_ids[rows]
        order = np.argsort(scope_of, kind="stable")
        rows, scope_of = rows[order], scope_of[order]
        bounds = np.flatnonzero(np.diff(scope_of)) + 1
        for group in np.split(rows, bounds) if len(rows) else []:
            scope = contents.scope_names[int(contents.scope_ids[group[0]])]
            self._index_for(scope).add_many(group.tolist(), contents.fingerprints[group])
        self.initial += len(contents)

    def _recorded(self, member: ClusterMember) -> None:
        store = self.store
        if store is None:
            return
        canonical = None
        if member.canonical_url is not None:
            # The canonical page is the first match of the query check_now just made (its key is
            # the page's position = record number).  Query again only if that is not at hand.
            index = self._indexes[member.scope]
            if isinstance(index, _RememberingIndex) and index.last_fingerprint == member.fingerprint:
                matches = index.last_matches
            else:
                matches = index.query(member.fingerprint)
            canonical = matches[0].key if matches else None
        store.append(
            member.url,
            member.fingerprint,
            member.scope,
            canonical=canonical,
            distance=member.distance if canonical is not None else None,
            referer=member.referer,
            depth=member.depth,
            text=member.text,
            indexed=member.indexed,
        )
        now = time.monotonic()
        if now - self._last_flush >= _FLUSH_EVERY:
            self._last_flush = now
            store.flush()

    def _flush_at_exit(self) -> None:
        if self.store is not None and not self.store.closed:
            try:
                self.store.flush()
            except (OSError, ValueError):  # pragma: no cover - best effort at interpreter exit
                pass

    async def close(self) -> None:
        if self.store is not None:
            atexit.unregister(self._flush_at_exit)
            self.store.close()
            logger.info("simhash: %d pages in %s", self.store.count, self.path)
