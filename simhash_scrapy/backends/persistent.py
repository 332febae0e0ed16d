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
  this week's crawl recognises last week's pages (a page fetched again is
  ``unchanged`` or ``changed``, never its own near-duplicate).
* ``SIMHASH_RESET = True`` or ``-a simhash_reset=1`` starts afresh (the old
  file is kept as ``<name>.store.previous``); both arrive as ``config.reset``
  (the spider argument is read by ``simhash_scrapy.config.from_crawler``).

The store (``core.store.store``: SQLite, one checked row per identity) gets the
latest version of every checked page; the rows of one flush interval
(``SIMHASH_FLUSH_INTERVAL``, default 1 s) are committed in one transaction,
so a ``kill -9`` loses at most the pages checked in the last interval.  A
store written with other settings is refused with an error naming the
setting; a corrupt one is refused with an error naming the file and the
record, and left untouched; a store file that cannot be written is refused
at open.  Loaded pages count as the stat ``simhash/initial``; a store file
that existed but held no pages sets ``simhash/store_empty``.

A commit that fails during the crawl (a full disk) never stops a page: pages
are checked in memory as before, one ERROR line names the file and the cause,
the records stay pending and are retried with a back-off
(``simhash/store_write_errors`` counts the failures); at close, the records
still not written are logged and counted (``simhash/store_unsaved``), never
a traceback.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import re
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import defaults
from ..core.defaults import default_blocks
from ..core.store.detector_state import (
    COMPACT_BYTES, JOURNAL, SNAPSHOT, Recorder, contained_entries, is_detector_blob, restore,
    restore_copy_rows,
)  # fmt: skip
from ..core.index.keytable import pack_keys
from ..core.store.store import PageStore, StoreConfig, StoreContents, StoreError, StoreRecord, read_store
from ..core.store.store_rows import fail
from .base import BackendError, ClusterMember, Outcome
from .memory import MemoryBackend
from .replay_file import ReplayFile, ReplayFileError, replay_path

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from ..core.settings.config import SimhashConfig

__all__ = ["PersistentBackend", "load_members", "members_of", "store_path"]

logger = logging.getLogger(__name__)


def store_path(config: SimhashConfig, spider_name: str, createdir: bool = True) -> Path:
    """Where the store of this crawl lives (``SIMHASH_DIR`` first, then ``JOBDIR``)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", spider_name) or "spider"
    if config.store_dir is not None:
        folder = Path(config.store_dir)
        if createdir:
            _make_folder(folder, "SIMHASH_DIR")
        return folder / f"{safe}.store"
    if config.jobdir is None:
        raise BackendError("the persistent backend needs JOBDIR or SIMHASH_DIR")
    if createdir:
        _make_folder(Path(config.jobdir), "JOBDIR")
    return Path(config.jobdir) / defaults.JOB_STORE_NAME


def _make_folder(folder: Path, setting: str) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BackendError(f"{setting}={str(folder)!r}: cannot make the folder: {exc.strerror or exc}") from None


class _Keys(Sequence[str]):
    """Each record's key: its identity, or else its URL (read when asked: the columns may decode lazily)."""

    __slots__ = ("identities", "urls")

    def __init__(self, identities: Sequence[str], urls: Sequence[str]) -> None:
        self.identities, self.urls = identities, urls

    def __len__(self) -> int:
        return len(self.identities)

    def __getitem__(self, row: int) -> str:  # type: ignore[override]
        return self.identities[row] or self.urls[row]

    def __iter__(self) -> Iterator[str]:
        for identity, url in zip(self.identities, self.urls):
            yield identity or url


class _Members:
    """The records: rows loaded from the store (built on access), updated ones, then new ones."""

    __slots__ = ("_contents", "_loaded", "_changed", "_new", "links", "contained")

    def __init__(self, contents: StoreContents) -> None:
        self._contents = contents
        self._loaded = len(contents)
        self._changed: dict[int, ClusterMember] = {}
        self._new: list[ClusterMember] = []
        #: The rel=canonical URL each loaded entry names (``_LINKS`` blobs), where it names one.
        self.links = stored_links(contents)
        #: The loaded entries step 7 matched (``core.store.detector_state``): their ``via``.
        self.contained = {e for e in contained_entries(contents.extra, contents.path) if e < self._loaded}

    def __len__(self) -> int:
        return self._loaded + len(self._new)

    def _build(self, row: int) -> ClusterMember:
        c = self._contents
        canonical = int(c.canonical[row])
        depth = int(c.depth[row])
        return ClusterMember(
            url=c.url_list[row],
            fingerprint=int(c.fingerprints[row]),
            scope=c.scopes[row],
            canonical_url=c.url_list[canonical] if canonical >= 0 else None,
            distance=int(c.distance[row]) if canonical >= 0 else None,
            referer=c.referers[row],
            depth=depth if depth >= 0 else None,
            text=c.texts[row],
            indexed=bool(c.is_indexed[row]),
            identity=c.identities[row],
            exact=bool(c.exact[row]),
            outcome=Outcome(c.outcomes[row]),
            previous_fingerprint=int(c.previous[row]) if c.has_previous[row] else None,
            first_seen=float(c.first_seen[row]),
            last_seen=float(c.last_seen[row]),
            digest=c.digests[row],
            etag=c.etags[row],
            last_modified=c.last_modified[row],
            canonical_link=self.links.get(row),
            via="containment" if row in self.contained else None,
        )

    def __getitem__(self, position: int) -> ClusterMember:
        if position < 0:
            position += len(self)
        if 0 <= position < self._loaded:
            member = self._changed.get(position)
            return member if member is not None else self._build(position)
        return self._new[position - self._loaded]

    def __setitem__(self, position: int, member: ClusterMember) -> None:
        if position < 0:
            position += len(self)
        if 0 <= position < self._loaded:
            self._changed[position] = member
        else:
            self._new[position - self._loaded] = member

    def append(self, member: ClusterMember) -> None:
        self._new.append(member)

    def __iter__(self) -> Iterator[ClusterMember]:
        for row in range(self._loaded):
            member = self._changed.get(row)
            yield member if member is not None else self._build(row)
        yield from self._new


#: Names of the extra blobs holding the entries' rel=canonical URLs: ``rel_canonical/<n>``, each a JSON
#: list of ``[entry, url or null]`` written at a flush (later blobs win).  Kept in blobs, not a column of
#: ``pages``, so the store's format (version) is unchanged: a store without them names no rel=canonical URL.
#: A crawl that opens a store with several folds them into one (``rel_canonical/0``, the links as loaded).
_LINKS = "rel_canonical/"


def _link_chunks(extra: dict[str, bytes]) -> list[tuple[int, str]]:
    chunks = []
    for name in extra:
        if name.startswith(_LINKS) and name[len(_LINKS) :].isdigit():
            chunks.append((int(name[len(_LINKS) :]), name))
    return sorted(chunks)


def stored_links(contents: StoreContents) -> dict[int, str]:
    """The rel=canonical URL of each entry that names one (``StoreError`` naming the blob when it is damaged)."""
    links: dict[int, str] = {}
    for _, name in _link_chunks(contents.extra):
        try:
            pairs = json.loads(contents.extra[name].decode("utf-8"))
            for entry, link in pairs:
                if not isinstance(entry, int) or entry < 0:
                    raise ValueError(f"entry {entry!r} is not an entry number")
                if entry >= len(contents):
                    continue  # written just before its record, which a crash then lost
                if link is None:
                    links.pop(entry, None)
                elif isinstance(link, str):
                    links[entry] = link
                else:
                    raise ValueError(f"{link!r} is not a URL")
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            raise fail(contents.path, f"corrupt extra record {name!r} ({exc})") from None
    return links


def members_of(contents: StoreContents) -> list[ClusterMember]:
    """Every record of a loaded store, as ``members()`` returns them."""
    return list(_Members(contents))


def load_members(path: str | Path) -> list[ClusterMember]:
    """Every record of a store file, as ``members()`` returns them (for reports of a stopped job)."""
    return members_of(read_store(path))


class PersistentBackend(MemoryBackend):
    """``MemoryBackend`` whose records are kept in a store and loaded back at open."""

    def __init__(self, config: SimhashConfig, crawler: Crawler | None = None) -> None:
        super().__init__(config)
        self.crawler = crawler
        self.reset = config.reset
        self.path: Path | None = None
        self.store: PageStore | None = None
        self._last_flush = 0.0
        self._timer: Any = None
        #: Why the store could not be written (None: the last commit worked); logged once per outage.
        self._write_error: str | None = None
        self._retry_after = 0.0
        self._links: dict[int, str] = {}  # entry -> rel=canonical URL, as stored
        self._pending_links: dict[int, str | None] = {}
        self._link_chunk = 0
        #: What steps 5-7 learn, journalled at every flush (``core.store.detector_state``), made at open.
        self._recorder: Recorder | None = None
        self._journals: list[int] = []  # numbers of the journals since the last snapshot
        self._journal_next = 0
        #: The requests each page yielded (``<name>.store.replay``), opened with the store.
        self.replay: ReplayFile | None = None
        self._restored: StoreContents | None = None  # the records loaded at open (``restored_pages``)

    @classmethod
    def from_crawler(cls, crawler: Crawler, config: SimhashConfig) -> PersistentBackend:
        return cls(config, crawler)

    def store_config(self) -> StoreConfig:
        config = self.config
        return StoreConfig(
            max_distance=config.max_distance,
            blocks=config.blocks or default_blocks(config.max_distance),
            features=config.features.signature(),
            text_mode=config.text_mode,
        )

    async def open(self, spider_name: str) -> None:
        self.path = store_path(self.config, spider_name)
        store = PageStore(self.path, self.store_config())
        started = time.perf_counter()
        try:
            contents = store.open(reset=self.reset)
        except StoreError as exc:
            raise BackendError(str(exc)) from exc
        except (OSError, sqlite3.Error) as exc:
            setting = "SIMHASH_DIR" if self.config.store_dir is not None else "JOBDIR"
            raise BackendError(f"{setting}: cannot open the simhash store {self.path}: {exc}") from exc
        try:
            if len(contents):
                self._restore(contents)
            self._restore_detector(contents)
        except BaseException:
            store.abandon()
            raise
        replay = ReplayFile(replay_path(self.path))
        try:
            replay.open(reset=self.reset)
        except (ReplayFileError, OSError, sqlite3.Error) as exc:
            store.abandon()
            raise BackendError(str(exc)) from exc
        self.replay = replay
        self.store = store
        self._extra.update((k, v) for k, v in contents.extra.items() if not is_detector_blob(k))
        self._journals = sorted(int(k[len(JOURNAL) :]) for k in contents.extra if k.startswith(JOURNAL))
        if self._recorder is not None:  # journals a crash left: in the snapshot of this crawl's close (or sooner)
            self._recorder.journal_bytes = sum(len(contents.extra[f"{JOURNAL}{n}"]) for n in self._journals)
        chunks = _link_chunks(contents.extra)
        self._link_chunk = chunks[-1][0] + 1 if chunks else 0
        if len(chunks) > 1:  # one blob per flush that changed a link: folded into one, with the next commit
            for _, name in chunks:
                store.drop_extra(name)
                self._extra.pop(name, None)
            self._pending_links = dict(sorted(self._links.items()))
            self._link_chunk = 0
            self._write_links()
        atexit.register(self._flush_at_exit)
        if store.empty_file and self.crawler is not None and self.crawler.stats is not None:
            self.crawler.stats.set_value("simhash/store_empty", 1)
        if len(contents):
            logger.info(
                "simhash: loaded %d pages (%d canonical) from %s in %.2f s",
                len(contents),
                int(np.count_nonzero(contents.is_indexed)),
                self.path,
                time.perf_counter() - started,
            )
        else:
            logger.info("simhash: recording pages in %s", self.path)
        self._last_flush = time.monotonic()

    def _restore(self, contents: StoreContents) -> None:
        """The rows of the store, back in the clustering rule's entries and indexes."""
        if len(self._members):
            raise RuntimeError("the store must be loaded before the first check")
        c = contents
        keys = _Keys(c.identities, c.url_list)
        packed = c.packed_keys if len(c.packed_keys) == len(c) else [pack_keys(k) if k else b"" for k in c.edit_keys]
        hashes = c.key_hashes if len(c.key_hashes) == len(c) else None
        try:
            self._clusters.restore_arrays(
                c.scopes, keys, c.fingerprints, c.exact, c.canonical, c.distance, c.is_indexed, c.indexed, packed,
                c.digests, hashes,
            )  # fmt: skip
        except ValueError:
            seen: dict[tuple[str, str], int] = {}
            for row, key in enumerate(zip(c.scopes, keys)):
                if key in seen:
                    raise BackendError(
                        f"{self.path}: corrupt record #{row} (the same page as record #{seen[key]}). "
                        f"The file was not changed; start afresh with SIMHASH_RESET = True."
                    ) from None
                seen[key] = row
            raise
        try:
            self._members = _Members(contents)  # type: ignore[assignment]
        except StoreError as exc:
            raise BackendError(str(exc)) from exc
        self._links = dict(self._members.links)  # type: ignore[attr-defined]
        self.initial += len(contents)
        self._restored = contents

    def restored_pages(self) -> Iterable[tuple[str, str]]:
        contents = self._restored
        return () if contents is None else zip(contents.url_list, contents.scopes)

    def _restore_detector(self, contents: StoreContents) -> None:
        """What steps 5-7 learned (the store's detector blobs), back in the detector; then recorded anew."""
        try:
            self._journal_next = restore(self.detector, contents.extra, contents.scopes, self.path)
        except StoreError as exc:
            raise BackendError(f"{exc}. The file was not changed; start afresh with SIMHASH_RESET = True.") from exc
        contained: set[int] = self._members.contained if isinstance(self._members, _Members) else set()
        restore_copy_rows(self.detector.rule, contained, contents.scopes)
        self._recorder = Recorder(self.detector, contained=set(contained))

    def _write_detector(self, snapshot: bool = False) -> None:
        """Stage what steps 5-7 learned since the last flush (a journal), or all of it (a snapshot)."""
        recorder, store = self._recorder, self.store
        if recorder is None or store is None:
            return
        data = recorder.journal()
        if data is not None:
            store.keep_extra(f"{JOURNAL}{self._journal_next}", data)
            self._journals.append(self._journal_next)
            self._journal_next += 1
        if (snapshot and self._journals) or recorder.journal_bytes > COMPACT_BYTES:
            self._write_snapshot()

    def _write_snapshot(self) -> None:
        assert self._recorder is not None and self.store is not None
        self.store.keep_extra(SNAPSHOT, self._recorder.snapshot(self._journal_next))
        for number in self._journals:  # in it now: dropped in the same commit
            self.store.drop_extra(f"{JOURNAL}{number}")
        self._journals = []

    def _recorded(self, entry: int, member: ClusterMember, new: bool) -> None:
        store = self.store
        if store is None:
            return
        if self._recorder is not None:
            self._recorder.recorded(entry, member.via)
        clusters = self._clusters
        canonical = clusters.canonical[entry]
        store.put(
            StoreRecord(
                entry=entry,
                scope=member.scope,
                identity=member.identity,
                url=member.url,
                fingerprint=member.fingerprint,
                exact=member.exact,
                outcome=str(member.outcome),
                canonical=canonical if canonical >= 0 else None,
                distance=clusters.distance[entry] if canonical >= 0 else None,
                indexed=clusters.indexed[entry],
                previous=member.previous_fingerprint,
                referer=member.referer,
                depth=member.depth,
                text=member.text,
                first_seen=member.first_seen,
                last_seen=member.last_seen,
                edit_keys=clusters.keys_of(entry),
                digest=member.digest,
                etag=member.etag,
                last_modified=member.last_modified,
            )
        )
        if member.canonical_link != self._links.get(entry):
            self._pending_links[entry] = member.canonical_link
            if member.canonical_link is None:
                self._links.pop(entry, None)
            else:
                self._links[entry] = member.canonical_link
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        """Commit now when a flush interval has passed since the last commit, else arm the timer once."""
        wait = max(self.config.flush_interval, self._retry_after) - (time.monotonic() - self._last_flush)
        if wait <= 0:
            self._flush()
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # driven without an event loop (tests, scripts): flushed at the next check
                return
            self._timer = loop.call_later(wait, self._flush_soon)

    def _flush_soon(self) -> None:
        self._timer = None
        self._flush()

    def _stat(self, name: str, value: int, inc: bool = True) -> None:
        stats = self.crawler.stats if self.crawler is not None else None
        if stats is not None:
            (stats.inc_value if inc else stats.set_value)(f"simhash/{name}", value)

    def _flush(self) -> bool:
        """Commit what is pending; never raises: a store that cannot be written is logged once, not fatal.

        The pages stay checked (the index is in memory); their records stay pending and are
        retried, with a back-off (up to a minute), until a commit works or the crawl ends.
        """
        self._last_flush = time.monotonic()
        store = self.store
        if store is None or store.closed:
            return True
        pending = store.pending
        try:
            self._write_links()
            self._write_detector()
            store.flush()
            self._flush_replay()
        except StoreError as exc:
            self._stat("store_write_errors", 1)
            self._retry_after = min(60.0, max(1.0, 2 * self._retry_after))
            if self._write_error is not None:  # logged once until a commit works again
                logger.debug("simhash: %s (still failing)", exc)
            else:
                logger.error(
                    "simhash: %s. The crawl goes on and checks pages as before; the %d page records not yet "
                    "committed stay in memory and are retried (next in %.0f s, then less and less often, "
                    "at least once a minute) until a commit works.",
                    exc, store.pending, self._retry_after,
                )  # fmt: skip
            self._write_error = str(exc)
            return False
        if self._write_error is not None:
            logger.warning("simhash: the store %s is written again (%d page records committed)", self.path, pending)
            self._write_error = None
        self._retry_after = 0.0
        return True

    def _write_links(self) -> None:
        """The rel=canonical URLs recorded since the last flush, as one more ``_LINKS`` blob."""
        if not self._pending_links or self.store is None:
            return
        data = json.dumps(sorted(self._pending_links.items()), ensure_ascii=False, separators=(",", ":"))
        # Staged, committed with the next flush (with the records, or kept pending if that fails).
        self.store.keep_extra(f"{_LINKS}{self._link_chunk}", data.encode("utf-8", "surrogatepass"))
        self._link_chunk += 1
        self._pending_links.clear()

    def _flush_replay(self) -> None:
        if self.replay is not None:
            try:
                self.replay.flush()
            except (OSError, sqlite3.Error, ReplayFileError) as exc:
                raise StoreError(f"{self.replay.path}: cannot write the replay file: {exc}") from exc

    async def load_replay(self, scope: str, identity: str) -> bytes | None:
        if self.replay is None:
            return None
        try:
            return self.replay.get(scope, identity)
        except sqlite3.Error as exc:
            raise ReplayFileError(f"{self.replay.path}: cannot read the replay file: {exc}") from exc

    async def save_replay(self, scope: str, identity: str, data: bytes) -> None:
        if self.replay is not None:
            self.replay.put(scope, identity, data)
            self._schedule_flush()  # committed within one flush interval, as the records are

    async def save_extra(self, name: str, data: bytes) -> None:
        await super().save_extra(name, data)
        if self.store is not None and not self.store.closed:
            self.store.keep_extra(name, data)
            self._flush()

    def _close_replay(self) -> None:
        replay, self.replay = self.replay, None
        if replay is None:
            return
        pending = replay.pending
        try:
            replay.close()
        except (OSError, sqlite3.Error, ReplayFileError) as exc:
            self._stat("replay_unsaved", pending, inc=False)
            logger.error(
                "simhash: %s: cannot write the replay file (%s): the next crawl requests those %d pages again "
                "without validators", replay.path, exc, pending,
            )  # fmt: skip

    def _flush_at_exit(self) -> None:
        if self.store is not None and not self.store.closed:
            try:
                self._write_links()
                self._write_detector()
                self.store.flush()
                self._flush_replay()
            except (OSError, ValueError, sqlite3.Error, StoreError):  # pragma: no cover - best effort at exit
                pass

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        store = self.store
        if store is None:
            return
        atexit.unregister(self._flush_at_exit)
        if not store.closed:
            self._write_links()
            self._write_detector(snapshot=True)
        self._close_replay()
        unsaved = store.pending
        try:
            store.close()
        except StoreError as exc:
            self._stat("store_unsaved", unsaved, inc=False)
            logger.error(
                "simhash: %s. %d page records of this crawl (new pages, or new versions of known ones) are not "
                "in the store: the next crawl does not know what this one saw of those pages.",
                exc, unsaved,
            )  # fmt: skip
            return
        logger.info("simhash: %d pages in %s", store.count, self.path)
