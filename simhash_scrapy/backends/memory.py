"""The default backend: everything in this process, gone when the crawl ends.

A ``core.cluster.clustering.Clusterer`` applies the rule and keeps the canonical
pages' indexes; ``_members[entry]`` is the record of each identity (its
latest version).  ``check`` runs without awaiting anything, so it is atomic
on the event loop.

Subclassing (the persistent backend): ``_recorded(entry, member, new)`` is
called after every check with the identity's entry number and record (``new``: first time seen);
records saved earlier go back into ``_clusters`` with ``Clusterer.restore_many``
before the first ``check``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..core.cluster.clustering import Decision, Outcome, is_one_edit
from ..core.detector import Detector, Page
from ..core.cluster.sitetemplate import host_of
from .base import ClusterMember, DedupBackend, PageRecord, Verdict

if TYPE_CHECKING:
    from ..core.settings.config import SimhashConfig

__all__ = ["MemoryBackend"]


def _first_not_none(value: int | None, default: int) -> int:
    return default if value is None else value


class MemoryBackend(DedupBackend):
    """In-process index and records (the default, ``SIMHASH_BACKEND = "memory"``)."""

    extra_queries = True

    def __init__(self, config: SimhashConfig) -> None:
        super().__init__(config)
        #: Steps 1-7 (``core.detector``): the rule and what steps 5-7 learn.
        self.detector = Detector.from_config(config)
        self._clusters = self.detector.rule
        self._members: list[ClusterMember] = []
        # Steps 5-7 match pages of one host only: a canonical entry's host is its page's.
        self._clusters.host_of_entry = self._host_of_entry
        self._clusters.url_of_entry = self._url_of_entry  # (step 7's views of a restored page: core.cluster.views)
        #: canonical entry -> entries recorded as its near-duplicates (built at the first
        #: ``cluster_members``; an entry that moved to another cluster is filtered out on reading).
        self._groups: dict[int, list[int]] | None = None

    # --------------------------------------------------------------- hooks
    def _recorded(self, entry: int, member: ClusterMember, new: bool) -> None:
        """Called after every check with the identity's entry number and record (override to persist it)."""

    def _host_of_entry(self, entry: int) -> str | None:
        return host_of(self._members[entry].url) if entry < len(self._members) else None

    def _url_of_entry(self, entry: int) -> str | None:
        return self._members[entry].url if entry < len(self._members) else None

    # ----------------------------------------------------------- interface
    async def open(self, spider_name: str) -> None:
        pass

    def _verdict(self, decision: Decision, via: str | None = None) -> Verdict:
        previous_seen = None
        if decision.previous_fingerprint is not None:
            previous_seen = self._members[decision.entry].last_seen or None
        if decision.canonical is None:
            return Verdict(
                decision.outcome, previous_fingerprint=decision.previous_fingerprint, previous_seen=previous_seen,
                also=decision.also,
            )  # fmt: skip
        canonical = self._members[decision.canonical]
        return Verdict(
            decision.outcome,
            canonical_url=canonical.url,
            distance=decision.distance,
            canonical_fingerprint=_first_not_none(self._clusters.indexed[decision.canonical], canonical.fingerprint),
            canonical_identity=canonical.key,
            previous_fingerprint=decision.previous_fingerprint,
            previous_seen=previous_seen,
            one_edit=via is None and is_one_edit(decision.distance, self._clusters.max_distance),
            canonical_link=canonical.canonical_link,
            via=via,
            also=decision.also,
        )

    def check_now(self, record: PageRecord, index: bool = True) -> Verdict:
        """``check`` without the coroutine (the memory backend never waits)."""
        decision = self.detector.check(
            Page(
                record.scope, record.key, record.fingerprint, record.url, record.exact, record.edit_keys,
                record.digest, record.source, record.also, record.second, record.sketch,
            ),
            index,
        )
        entry = decision.entry
        new = entry == len(self._members)
        via = decision.via
        if via is None and not new and decision.outcome is not Outcome.NEAR_DUPLICATE and decision.canonical is not None:
            via = self._members[entry].via  # still in the cluster step 7 put it in
        verdict = self._verdict(decision, via)
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
            digest=self._clusters.digest[entry],
            etag=record.etag,
            last_modified=record.last_modified,
            canonical_link=record.canonical_link,
            via=via if via == "containment" else None,
        )
        if new:
            member = ClusterMember(first_seen=record.seen, **fields)  # type: ignore[arg-type]
            self._members.append(member)
        else:
            member = self._members[entry] = replace(self._members[entry], **fields)  # type: ignore[arg-type]
        if self._groups is not None and decision.canonical is not None:
            self._groups.setdefault(decision.canonical, []).append(entry)
        self._recorded(entry, member, new)
        return verdict

    async def cluster_members(self, scope: str, anchor: str) -> list[ClusterMember] | None:
        entry = self._clusters.entry_of(scope, anchor)
        if entry is None:
            return None
        canonical = self._clusters.canonical
        if self._groups is None:
            groups: dict[int, list[int]] = {}
            for position, owner in enumerate(canonical):
                if owner >= 0:
                    groups.setdefault(owner, []).append(position)
            self._groups = groups
        entries = sorted({e for e in self._groups.get(entry, ()) if canonical[e] == entry})
        return [self._members[entry]] + [self._members[e] for e in entries]

    async def check(self, record: PageRecord, index: bool = True) -> Verdict:
        return self.check_now(record, index)

    async def members(self) -> list[ClusterMember]:
        return list(self._members)

    async def previous(self, scope: str, identity: str) -> ClusterMember | None:
        entry = self._clusters.entry_of(scope, identity)
        return None if entry is None else self._members[entry]

    async def index_size(self) -> int:
        return self._clusters.index_size()

