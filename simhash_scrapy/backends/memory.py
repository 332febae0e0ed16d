"""The default backend: everything in this process, gone when the crawl ends.

One ``BlockPermutedIndex`` per scope holds the canonical pages (keys are
positions in the member list); every checked page is appended to the member
list.  ``check`` runs without awaiting anything, so it is atomic on the event
loop.

Subclassing (e.g. a persistent backend): ``_recorded(member)`` is called once
for every new member, right after it is stored; ``_load(members)`` restores
members recorded earlier (before the first ``check``), rebuilding the indexes
from the members whose ``indexed`` is true, and sets ``initial``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..index import BlockPermutedIndex
from .base import ClusterMember, DedupBackend, PageRecord, Verdict

if TYPE_CHECKING:
    from ..config import SimhashConfig

__all__ = ["MemoryBackend"]


class MemoryBackend(DedupBackend):
    """In-process index and member list (the default, ``SIMHASH_BACKEND = "memory"``)."""

    def __init__(self, config: SimhashConfig) -> None:
        super().__init__(config)
        self._indexes: dict[str, BlockPermutedIndex] = {}
        self._members: list[ClusterMember] = []

    # --------------------------------------------------------------- hooks
    def _recorded(self, member: ClusterMember) -> None:
        """Called for every new member, after it is stored (override to persist it)."""

    def _load(self, members: Iterable[ClusterMember]) -> int:
        """Restore members recorded earlier (call before the first ``check``).  Returns how many."""
        start = len(self._members)
        self._members.extend(members)
        by_scope: dict[str, tuple[list[int], list[int]]] = {}
        for position in range(start, len(self._members)):
            member = self._members[position]
            if member.indexed:
                keys, fps = by_scope.setdefault(member.scope, ([], []))
                keys.append(position)
                fps.append(member.fingerprint)
        for scope, (keys, fps) in by_scope.items():
            self._index_for(scope).add_many(keys, fps)
        loaded = len(self._members) - start
        self.initial += loaded
        return loaded

    # ----------------------------------------------------------- interface
    def _index_for(self, scope: str) -> BlockPermutedIndex:
        index = self._indexes.get(scope)
        if index is None:
            index = self._indexes[scope] = BlockPermutedIndex(self.config.max_distance, self.config.blocks)
        return index

    async def open(self, spider_name: str) -> None:
        pass

    def check_now(self, record: PageRecord, index: bool = True) -> Verdict:
        """``check`` without the coroutine (the memory backend never waits)."""
        scope_index = self._index_for(record.scope)
        matches = scope_index.query(record.fingerprint)
        if matches:
            best = matches[0]  # nearest first, ties: the canonical page indexed first
            canonical = self._members[best.key]
            verdict = Verdict(canonical.url, best.distance, canonical.fingerprint)
        else:
            verdict = Verdict(None, None, None)
        position = len(self._members)
        indexed = index and not matches
        member = ClusterMember.from_check(record, verdict, indexed)
        self._members.append(member)
        if indexed:
            scope_index.add(position, record.fingerprint)
        self._recorded(member)
        return verdict

    async def check(self, record: PageRecord, index: bool = True) -> Verdict:
        return self.check_now(record, index)

    async def members(self) -> list[ClusterMember]:
        return list(self._members)

    async def index_size(self) -> int:
        return sum(len(index) for index in self._indexes.values())
