"""The default backend: everything in this process, gone when the crawl ends.

A ``core.clustering.Clusterer`` applies the rule and keeps the canonical
pages' indexes; ``_members[entry]`` is the record of each identity (its
latest version).  ``check`` runs without awaiting anything, so it is atomic
on the event loop.

Subclassing (the persistent backend): ``_recorded(entry, member, new)`` is
called after every check with the identity's entry number and record (``new``: first time seen);
``_load(members)`` restores records saved earlier (before the first
``check``) and sets ``initial``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from ..core.clustering import Clusterer, Decision
from .base import ClusterMember, DedupBackend, PageRecord, Verdict

if TYPE_CHECKING:
    from ..config import SimhashConfig

__all__ = ["MemoryBackend"]


def _first_not_none(value: int | None, default: int) -> int:
    return default if value is None else value


class MemoryBackend(DedupBackend):
    """In-process index and records (the default, ``SIMHASH_BACKEND = "memory"``)."""

    def __init__(self, config: SimhashConfig) -> None:
        super().__init__(config)
        self._clusters = Clusterer(config.max_distance, config.blocks)
        self._members: list[ClusterMember] = []

    # --------------------------------------------------------------- hooks
    def _recorded(self, entry: int, member: ClusterMember, new: bool) -> None:
        """Called after every check with the identity's entry number and record (override to persist it)."""

    def _load(self, members: Iterable[ClusterMember]) -> int:
        """Restore records saved earlier, in first-check order (call before the first ``check``)."""
        clusters = self._clusters
        position_of: dict[tuple[str, str], int] = {}
        pending: list[tuple[int, ClusterMember]] = []
        for member in members:
            entry = clusters.restore(
                member.scope,
                member.key,
                member.fingerprint,
                member.exact,
                -1,
                -1 if member.distance is None else member.distance,
                member.fingerprint if member.indexed else None,
            )
            self._members.append(member)
            position_of[(member.scope, member.url)] = entry
            if member.canonical_url is not None:
                pending.append((entry, member))
        # Canonical pages are stored by URL: point each member at its canonical entry.
        for entry, member in pending:
            canonical = position_of.get((member.scope, member.canonical_url or ""))
            clusters.canonical[entry] = -1 if canonical is None else canonical
        clusters.restore_indexes()
        self.initial += len(self._members)
        return len(self._members)

    # ----------------------------------------------------------- interface
    async def open(self, spider_name: str) -> None:
        pass

    def _verdict(self, decision: Decision) -> Verdict:
        previous_seen = None
        if decision.previous_fingerprint is not None:
            previous_seen = self._members[decision.entry].last_seen or None
        if decision.canonical is None:
            return Verdict(decision.outcome, previous_fingerprint=decision.previous_fingerprint, previous_seen=previous_seen)
        canonical = self._members[decision.canonical]
        return Verdict(
            decision.outcome,
            canonical_url=canonical.url,
            distance=decision.distance,
            canonical_fingerprint=_first_not_none(self._clusters.indexed[decision.canonical], canonical.fingerprint),
            canonical_identity=canonical.key,
            previous_fingerprint=decision.previous_fingerprint,
            previous_seen=previous_seen,
        )

    def check_now(self, record: PageRecord, index: bool = True) -> Verdict:
        """``check`` without the coroutine (the memory backend never waits)."""
        decision = self._clusters.check(record.scope, record.key, record.fingerprint, record.exact, index)
        verdict = self._verdict(decision)
        entry = decision.entry
        new = entry == len(self._members)
        fields = dict(
            url=record.url,
            fingerprint=record.fingerprint,
            scope=record.scope,
            canonical_url=verdict.canonical_url,
            distance=verdict.distance,
            referer=record.referer,
            depth=record.depth,
            text=record.text,
            indexed=self._clusters.indexed[entry] is not None,
            identity=record.identity,
            exact=record.exact,
            outcome=decision.outcome,
            previous_fingerprint=decision.previous_fingerprint,
            last_seen=record.seen,
        )
        if new:
            member = ClusterMember(first_seen=record.seen, **fields)  # type: ignore[arg-type]
            self._members.append(member)
        else:
            member = self._members[entry] = replace(self._members[entry], **fields)  # type: ignore[arg-type]
        self._recorded(entry, member, new)
        return verdict

    async def check(self, record: PageRecord, index: bool = True) -> Verdict:
        return self.check_now(record, index)

    async def members(self) -> list[ClusterMember]:
        return list(self._members)

    async def index_size(self) -> int:
        return self._clusters.index_size()

