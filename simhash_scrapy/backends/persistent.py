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

from .._values import parse_bool
from ..core import defaults
from ..core.store import PageStore, StoreConfig, StoreContents, StoreError, read_store
from .base import BackendError, ClusterMember, Outcome
from .memory import MemoryBackend

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from ..config import SimhashConfig

__all__ = ["PersistentBackend", "load_members", "store_path", "uses_persistence"]

logger = logging.getLogger(__name__)

def uses_persistence(config: SimhashConfig) -> bool:
    """Whether ``JOBDIR`` or ``SIMHASH_DIR`` asks for a persistent in-process backend."""
    return config.persistent


def store_path(config: SimhashConfig, spider_name: str, createdir: bool = True) -> Path:
    """Where the store of this crawl lives (``SIMHASH_DIR`` first, then ``JOBDIR``)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", spider_name) or "spider"
    if config.store_dir is not None:
        folder = Path(config.store_dir)
        if createdir:
            folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{safe}.store"
    if config.jobdir is None:
        raise BackendError("the persistent backend needs JOBDIR or SIMHASH_DIR")
    if createdir:
        Path(config.jobdir).mkdir(parents=True, exist_ok=True)
    return Path(config.jobdir) / defaults.JOB_STORE_NAME


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
            outcome=Outcome.NEAR_DUPLICATE if canonical >= 0 else Outcome.UNIQUE,
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
                    outcome=Outcome.NEAR_DUPLICATE if canon >= 0 else Outcome.UNIQUE,
                )
        yield from self._new


def load_members(path: str | Path) -> list[ClusterMember]:
    """Every page of a store file, as ``members()`` returns them (for reports of a stopped job)."""
    return list(_Members(read_store(path)))


class PersistentBackend(MemoryBackend):
    """``MemoryBackend`` whose pages are appended to a store file and loaded back at open."""

    def __init__(self, config: SimhashConfig, crawler: Crawler | None = None) -> None:
        super().__init__(config)
        self.crawler = crawler
        self.reset = config.reset
        self.path: Path | None = None
        self.store: PageStore | None = None
        self._last_flush = 0.0

    @classmethod
    def from_crawler(cls, crawler: Crawler, config: SimhashConfig) -> PersistentBackend:
        return cls(config, crawler)

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
            reset = reset or parse_bool("-a simhash_reset", spider.simhash_reset)
        self.path = store_path(self.config, spider_name)
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

    def _restore(self, contents: StoreContents) -> None:
        """The records of the store, back in the clustering rule's entries and indexes."""
        if len(self._members):
            raise RuntimeError("the store must be loaded before the first check")
        self._load(_Members(contents))

    def _recorded(self, entry: int, member: ClusterMember, new: bool) -> None:
        store = self.store
        if store is None:
            return
        canonical = self._clusters.canonical[entry]
        store.append(
            member.url,
            member.fingerprint,
            member.scope,
            canonical=canonical if canonical >= 0 else None,
            distance=member.distance if canonical >= 0 else None,
            referer=member.referer,
            depth=member.depth,
            text=member.text,
            indexed=member.indexed,
        )
        now = time.monotonic()
        if now - self._last_flush >= self.config.flush_interval:
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
