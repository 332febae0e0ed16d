"""The clustering rule: which page is canonical, which is a near-duplicate of which.

This is the one implementation of the rule in Python: the in-process and
persistent backends (``backends.memory``) and the ``scrapy simhash dedup`` /
``compare`` commands (``core.detector``: ``decide``, ``assign_canonicals``) call it; the Redis backend's Lua
script mirrors it, and a test compares their decisions page by page.

Pages are checked one at a time, each identified by ``(scope, identity)``
(the crawl's identity is Scrapy's request fingerprint, so "the same page"
follows the user's URL canonicalisation):

1. **Identity first.**  A page recorded before under the same identity is
   compared with its own last version, never with the index: within k it is
   ``UNCHANGED`` when its content digest (``core.features.exact``: the normalised token
   sequence) is the one recorded, ``EDITED`` when the text differs (either way
   it keeps its role: canonical, or member of another page's cluster; a page
   recorded without a digest is ``UNCHANGED`` within k); further away it is ``CHANGED`` and is checked again against the
   canonical pages of *other* identities (its own index entry is removed
   first): a match makes it a ``NEAR_DUPLICATE``, else it becomes canonical
   with its new content.  A page is never a near-duplicate of itself.
2. **A new identity** joins the cluster of the nearest canonical page of its
   scope within k (ties: the canonical page checked first): ``NEAR_DUPLICATE``.
   With none, it becomes a canonical page: ``UNIQUE``.  Only canonical pages
   are indexed, so a chain of small edits (A ~ B ~ C, A far from C) never
   drifts.
3. **Short pages** (``exact``) are matched by equal digest in a table of
   their own, never by Hamming distance; distance 0.
4. **The one-edit rule** (``core.features.edits``): a page given ``edit_keys`` (a few
   dozen tokens) that has no canonical page within k joins the cluster of the
   first-recorded canonical page sharing one of its keys (one token apart);
   its distance is their real Hamming distance, which is then more than k.
   Canonical pages keep their keys in a table per scope.  Whether a page
   re-checked under its identity is unchanged stays a matter of distance.
5. **The template-free text** (``core.cluster.sitetemplate``, in-process backends): a
   page may also carry ``also``, the simhash of its text without the lines its
   host repeats across other articles.  A page with no canonical page within k
   of its fingerprint joins the cluster of the nearest one within k of
   ``also``; a canonical page is indexed under both (one entry, two rows), so
   a later page is found by either.  The distance is the two fingerprints'
   own when they are within k (whichever row was nearer), else the one of the
   matching pair (within k): the rule is "simhash within k".
6. **The second simhash** (``core.features.second``, in-process backends): a page may
   also carry ``second``, an independent simhash of the same features.  A page
   still unmatched joins the nearest canonical page whose second simhash is
   within k of its own, verified: their first simhashes are within
   ``VERIFY_FACTOR * k``.  Canonical pages' second simhashes have an index of
   their own per scope; the distance is the second simhashes'.
7. **Sentence containment** (``core.cluster.containment``, in-process backends): a
   page may also carry ``sketch``, the smallest hashes of its sentences.  A
   page that steps 1-6 left unmatched joins the canonical page, found by a
   shared anchor (one of its few smallest sentence hashes), whose sentences
   hold nearly all of its own or whose own it holds (``containment.verify``:
   estimated containment, comparable size, enough shared sentences; sentences
   counted on ``COMMON`` pages that came this far are left out); several:
   the highest containment, then the canonical page checked first.  The
   distance is the two fingerprints' real Hamming distance (``rule_of``
   names the step when given ``via``).  Between two pages of one address
   (``core.cluster.views``: host, path and page number; the query aside) the
   smaller may hold as little as a twentieth of the larger's sentences (a print
   view of a recipe or product page), found by the address, not only by an
   anchor.  A page step 7 joined further than k becomes a row of its
   canonical page in the index (``add_copy_row``): its own copies, within k
   of it, find the cluster (``via`` ``"containment"``, the real distance).

Which step matched a near-duplicate (``Rule``: ``simhash`` within k,
``exact`` short page, ``one_edit``) follows from its kind and distance
(``rule_of``); logs, reports and ``compare`` name it with this vocabulary.

One entry per identity: re-checking a page updates its entry, so re-crawling
a site N times keeps one entry per URL.
"""

from __future__ import annotations

import enum
import functools
import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import defaults
from ..index.index import BlockPermutedIndex
from ..index.keytable import KeyTable, pack_keys, unpack_keys
from ..index.layered import LayeredIndex
from ..index.scan import ScanIndex
from .containment import COMMON, MAX_PAGES, ContainmentIndex, SentenceCounts, Sketch, estimate, verify
from .distinct import scoped_hash
from .views import MIN_CONTAINMENT as VIEW_MIN_CONTAINMENT
from .views import MIN_RATIO as VIEW_MIN_RATIO
from .views import MIN_SHARED as VIEW_MIN_SHARED
from .views import AddressBook, address_of
from ..features.second import VERIFY_FACTOR

__all__ = [
    "Outcome", "RECORDED_OUTCOMES", "Rule", "rule_of", "is_one_edit", "Decision", "Clusterer",
]

#: The most rows of step-7 copies a canonical page gets (``Clusterer.add_copy_row``).
MAX_COPY_ROWS = 4
#: Distance given to a page whose kind changed (short <-> long): "more than any k".
_FAR = 64
#: The index classes a ``Clusterer`` can keep its canonical pages in (``Clusterer.index_type``): the same answers.
AnyIndex = BlockPermutedIndex | LayeredIndex | ScanIndex


@functools.lru_cache(maxsize=64, typed=True)  # (typed: True is not 1 here)
def _check_layout(max_distance: int, blocks: int | None) -> None:
    """``ValueError`` for a layout ``BlockPermutedIndex`` refuses (once a layout: a global backend makes a
    ``Clusterer`` a batch)."""
    BlockPermutedIndex(max_distance, blocks)


class Outcome(str, enum.Enum):
    """What a check found (also the name of the ``simhash/<outcome>`` stat)."""

    UNIQUE = "unique"
    NEAR_DUPLICATE = "near_duplicate"
    UNCHANGED = "unchanged"
    CHANGED = "changed"
    #: Re-checked under its identity: other text (content digest), but within k of its last version.
    EDITED = "edited"
    #: A backend could not check the page (fail-open error); never decided by ``Clusterer``.
    UNCHECKED = "unchecked"

    def __str__(self) -> str:
        return self.value


#: The outcomes a record can hold (every one but ``UNCHECKED``), in the order of their codes: an outcome's
#: position here is its number in a Redis identity record (``backends.redis.layout``, ``check.lua``) and in
#: the check script's reply (``backends.redis.protocol``); the store keeps the values.  Append only.
RECORDED_OUTCOMES = (Outcome.UNIQUE, Outcome.NEAR_DUPLICATE, Outcome.UNCHANGED, Outcome.CHANGED, Outcome.EDITED)


class Rule(str, enum.Enum):
    """Which step of the rule made a page a near-duplicate: the one vocabulary of logs, reports and ``compare``.

    The value is what the JSON Lines and CSV reports write (``"rule"``);
    ``label`` is what people read (logs, the HTML report, ``compare``).
    """

    #: Step 2: the nearest canonical page is within k bits.
    SIMHASH = "simhash"
    #: Step 3: a short page with the same exact digest (distance 0).
    EXACT = "exact"
    #: Step 4: one token apart (``core.features.edits``); the distance is then more than k.
    ONE_EDIT = "one_edit"
    #: Step 7: the sentences of one page hold the other's (``core.cluster.containment``); any distance.
    CONTAINMENT = "containment"

    def __str__(self) -> str:
        return self.value

    @property
    def label(self) -> str:
        return _RULE_LABELS[self]

    def describe(self, distance: int | None, max_distance: int | None) -> str:
        """The rule and k as logs, reports and ``compare`` print them (the distance when given).

        ``"simhash within k=4, distance 3"``, ``"exact short page, distance 0, k=4"``,
        ``"one edit, distance 9 > k=4"``, ``"sentence containment, distance 17, k=4"``; without a
        distance ``"simhash within k=4"``, ``"exact short page, k=4"``, ``"one edit, beyond k=4"``.
        """
        k = "?" if max_distance is None else str(max_distance)
        d = "" if distance is None else f", distance {distance}"
        if self is Rule.SIMHASH:
            return f"simhash within k={k}{d}"
        if self is Rule.EXACT or self is Rule.CONTAINMENT:
            return f"{self.label}{d}, k={k}"
        return f"{self.label}{d} > k={k}" if d else f"{self.label}, beyond k={k}"


_RULE_LABELS = {
    Rule.SIMHASH: "simhash within k", Rule.EXACT: "exact short page", Rule.ONE_EDIT: "one edit",
    Rule.CONTAINMENT: "sentence containment",
}


def rule_of(exact: bool, distance: int | None, max_distance: int, via: str | None = None) -> Rule:
    """The rule that matched a near-duplicate, from what every backend records (kind, distance) and k.

    A short page is matched by its exact digest; a simhash page within k by
    distance; a simhash page farther than k was found by the one-edit rule
    (its distance is the real Hamming distance, see step 4), unless ``via``
    (the verdict's, when known) says step 7 found it: ``"containment"``.
    """
    if exact:
        return Rule.EXACT
    if via == "containment":
        return Rule.CONTAINMENT
    if is_one_edit(distance, max_distance):
        return Rule.ONE_EDIT
    return Rule.SIMHASH


def nearest_match(matches: Sequence[Any]) -> tuple[Any, int]:
    """``(entry, distance)`` of the nearest of an index's matches (not empty).  Ties: the entry recorded first (a
    re-indexed CHANGED page keeps its place)."""
    nearest = min(m.distance for m in matches)
    return min(m.key for m in matches if m.distance == nearest), nearest


def is_one_edit(distance: int | None, max_distance: int) -> bool:
    """Whether a near-duplicate at ``distance`` was found by the one-edit rule: farther than k (step 4 records
    the real Hamming distance; an exact short page's distance is 0, never beyond k)."""
    return distance is not None and distance > max_distance


@dataclass(frozen=True)
class Decision:
    """The rule's answer for one page: positions are entry numbers (``Clusterer.entry``)."""

    outcome: Outcome
    #: This page's entry (new, or its identity's existing one).
    entry: int
    #: The canonical entry of the cluster this page belongs to (another identity), else ``None``.
    canonical: int | None = None
    #: Distance to that canonical entry's indexed content (0 for exact matches).
    distance: int | None = None
    #: The fingerprint of this identity's last version (``UNCHANGED`` / ``CHANGED``, and a
    #: ``NEAR_DUPLICATE`` that was recorded before), else ``None``.
    previous_fingerprint: int | None = None
    #: How a ``NEAR_DUPLICATE`` was found beyond the first simhash: ``"template"`` (step 5),
    #: ``"second"`` (step 6), ``"containment"`` (step 7), else ``None``.
    via: str | None = None
    #: The page's template-free fingerprint (step 5), when ``core.detector.Detector`` gave it one.
    also: int | None = None


class Clusterer:
    """Entries (one per identity) and the canonical pages' indexes, per scope."""

    def __init__(self, max_distance: int = defaults.MAX_DISTANCE, blocks: int | None = defaults.BLOCKS,
                 index_type: type[AnyIndex] = BlockPermutedIndex) -> None:
        _check_layout(max_distance, blocks)  # now, not at the first page
        self.max_distance = max_distance
        self.blocks = blocks
        self._indexes: dict[str, AnyIndex] = {}
        #: The class of the canonical pages' indexes (first and second simhash), all with the same answers:
        #: ``LayeredIndex`` where canonical pages arrive one by one into a big index (``backends.redis.mirror``),
        #: ``ScanIndex`` where a rule lives for one batch of a few dozen entries (``backends.redis.cluster_backend``).
        self.index_type: type[AnyIndex] = index_type
        self._exact: dict[str, dict[int, int]] = {}
        self._edits: dict[str, KeyTable] = {}  # one-edit key -> canonical entry, per scope
        self._identities: dict[tuple[str, str], int] = {}
        # Entries restored in bulk (``restore_arrays``): their ``identity_hash`` sorted, with the entry of
        # each, and their scopes and identities (looked up, never made into a million dict keys).
        self._restored_hashes = np.zeros(0, dtype=np.uint64)
        self._restored_entries = np.zeros(0, dtype=np.int64)
        self._restored_scopes: Sequence[str] = ()
        self._restored_keys: Sequence[str] = ()
        # Per entry (parallel lists, indexed by entry number):
        self.fingerprint: list[int] = []  # the latest version's fingerprint (or digest)
        self.exact: list[bool] = []
        self.canonical: list[int] = []  # canonical entry, -1 for canonical/unique entries
        self.distance: list[int] = []  # distance to it, -1 for canonical/unique entries
        self.indexed: list[int | None] = []  # the fingerprint in the index (canonical entries), else None
        self.indexed_keys: list[bytes] = []  # one-edit keys in the index (canonical entries, pack_keys), else b""
        self.digest: list[int | None] = []  # the latest version's content digest (core.features.exact), None if unknown
        self._pending: list[tuple[str, int]] = []  # restored canonical entries, indexed by restore_indexes
        self.also: list[int | None] = []  # a canonical entry's template-free fingerprint in the index, else None
        self.second: list[int | None] = []  # a canonical entry's second simhash in its index, else None
        self._seconds: dict[str, AnyIndex] = {}  # second simhashes of canonical pages, per scope
        self._also_rows = 0  # index rows holding one (not counted by index_size)
        #: canonical entry -> fingerprints of the pages step 7 joined to it further than k (rows of its own)
        self.copy_rows: dict[int, list[int]] = {}
        self._copy_rows = 0  # index rows holding one (not counted by index_size)
        self._contained: dict[str, ContainmentIndex] = {}  # canonical pages' sentence sketches, per scope (step 7)
        self._sentences: SentenceCounts | None = None  # sentences of the pages step 7 saw (made at the first)
        #: The host of an entry's page (the backend's, from its URL), for step 7: across hosts it wants a
        #: closer size (``containment.CROSS_HOST_MIN_RATIO``); ``None``: every entry counts as of the page's host.
        self.host_of_entry: Callable[[int], str | None] | None = None
        self._host: str | None = None  # the host of the page being checked (``check``)
        self._address: str | None = None  # its address (``views.address_of``), for step 7's other views
        self._views = AddressBook()  # canonical pages with a sketch, per scope and address (``core.cluster.views``)
        #: The URL of an entry's page (the backend's), for the address of a canonical page restored from a
        #: store (``list_view``); ``None``: restored pages are not listed.
        self.url_of_entry: Callable[[int], str | None] | None = None

    def __len__(self) -> int:
        return len(self.fingerprint)

    def entry_of(self, scope: str, identity: str) -> int | None:
        """The entry of ``identity`` in ``scope``, or ``None`` if it was never checked."""
        entry = self._identities.get((scope, identity))
        if entry is None and len(self._restored_hashes):
            return self._restored_entry(scope, identity)
        return entry

    def _restored_entry(self, scope: str, identity: str) -> int | None:
        hashes = self._restored_hashes
        h = np.uint64(identity_hash(scope, identity))
        at = int(hashes.searchsorted(h))
        while at < len(hashes) and hashes[at] == h:
            entry = int(self._restored_entries[at])
            if self._restored_keys[entry] == identity and self._restored_scopes[entry] == scope:
                return entry
            at += 1
        return None

    def index_size(self) -> int:
        """Canonical entries in all scopes (simhash and exact)."""
        indexed = sum(len(index) for index in self._indexes.values()) - self._also_rows - self._copy_rows
        return indexed + sum(len(t) for t in self._exact.values())

    # ------------------------------------------------------------ lookups
    def _index(self, scope: str) -> AnyIndex:
        return self._table(self._indexes, scope)

    def _table(self, tables: dict[str, AnyIndex], scope: str) -> AnyIndex:
        """``scope``'s index in ``tables`` (first simhashes, or second ones), made when first needed."""
        table = tables.get(scope)
        if table is None:
            table = tables[scope] = self.index_type(self.max_distance, self.blocks)
        return table

    def _nearest(
        self,
        scope: str,
        fingerprint: int,
        exact: bool,
        keys: Sequence[int] = (),
        also: int | None = None,
        second: int | None = None,
        sketch: Sketch | None = None,
        count: bool = True,
        found: tuple[list[Any] | None, ...] = (None, None, None),
    ) -> tuple[int, int, str | None] | None:
        """``(canonical entry, distance, via)`` of the nearest canonical page, or ``None`` (``count=False``:
        a page reaching step 7 is not counted in ``SentenceCounts``; ``found``: what the scope's first and
        second simhash indexes answer for ``fingerprint`` and ``second``, and the first for ``also``, when the
        caller asked them already)."""
        if exact:
            owner = self._exact.get(scope, {}).get(fingerprint)
            return None if owner is None else (owner, 0, None)
        index = self._indexes.get(scope)
        matches = self._query(scope, index, fingerprint, found[0]) if index is not None else []  # nearest first
        via = None
        if not matches and also is not None and index is not None:
            matches, via = self._query(scope, index, also, found[2]), "template"  # step 5: the template-free text
        if not matches and second is not None and scope in self._seconds:
            # step 6: the second simhash, verified by the first within VERIFY_FACTOR * k
            wide = VERIFY_FACTOR * self.max_distance
            matches = [
                m for m in (self._seconds[scope].query(second) if found[1] is None else found[1])
                if (fingerprint ^ self.indexed[m.key]).bit_count() <= wide
            ]
            via = "second"
        if matches:
            owner, nearest = nearest_match(matches)
            if via is None:
                real = (fingerprint ^ self.indexed[owner]).bit_count()
                if real > self.max_distance:
                    # found by the canonical page's template-free row, or by a copy step 7 joined to it
                    row = self.also[owner]
                    found_by_also = row is not None and (fingerprint ^ row).bit_count() <= self.max_distance
                    via = "template" if found_by_also else "containment"
                    if not found_by_also:
                        nearest = real  # (step 7's distance: the two fingerprints' own)
                else:
                    # The nearest row may be the owner's template-free one: the distance a report shows
                    # is the fingerprints' own whenever they are within k (anyone can recompute it).
                    nearest = real
            return owner, nearest, via
        table = self._edits.get(scope)
        owner = table.owner(keys) if keys and table is not None else None  # ties: the entry recorded first
        if owner is None:
            return self._contained_match(scope, fingerprint, sketch, count)  # step 7
        indexed = self.indexed[owner]
        assert indexed is not None
        return owner, (fingerprint ^ indexed).bit_count(), None

    def _query(self, scope: str, index: AnyIndex, value: int, found: list[Any] | None = None) -> list[Any]:
        """``index.query(value)`` (``found``, when asked already) without the matches only a copy row
        (``add_copy_row``) explains when the page is at another address than the canonical page: a copy's rows
        serve the other views of its address."""
        matches = index.query(value) if found is None else found
        if not self.copy_rows or not matches:
            return matches
        k = self.max_distance
        kept = []
        for m in matches:
            rows = self.copy_rows.get(m.key)
            if rows and (value ^ self.indexed[m.key]).bit_count() > k:
                also = self.also[m.key]
                if (also is None or (value ^ also).bit_count() > k) and not self._views.listed_at(m.key, scope, self._address):
                    continue
            kept.append(m)
        return kept

    def _other_host(self, entry: int) -> bool:
        """Whether ``entry``'s page is of another host than the page checked (step 7 wants more then)."""
        host_of_entry = self.host_of_entry
        return host_of_entry is not None and self._host is not None and host_of_entry(entry) != self._host

    def _contains(self, scope: str, sketch: Sketch, count: bool = True, anchored: set[int] | None = None) -> int | None:
        """Step 7: the canonical entry whose sentences hold this page's (or the other way round), else ``None``;
        the page's sentences are then counted (``SentenceCounts``; not with ``count=False``).  ``anchored``:
        the anchors among the hashes of this page and others (``ContainmentIndex.shared_anchors``), when known."""
        counts = self._counts()
        index = self._contained.get(scope)
        found = None
        if index is not None and (anchored is None or not anchored.isdisjoint(sketch.hashes)):
            found = index.match(sketch, counts, self._other_host)
        if found is None and index is not None and self._address is not None:
            found = self._other_view(scope, index, sketch, counts)
        if count:
            counts.add(sketch.hashes)
        return None if found is None else found[0]

    def _counts(self) -> SentenceCounts:
        counts = self._sentences
        if counts is None:
            counts = self._sentences = SentenceCounts()
        return counts

    # ------------------------------------------- a mirror of a shared index (backends.redis.mirror)
    def nearest(
        self,
        scope: str,
        fingerprint: int,
        edit_keys: Sequence[int] = (),
        also: int | None = None,
        second: int | None = None,
        sketch: Sketch | None = None,
        host: str | None = None,
        address: str | None = None,
    ) -> tuple[int, int, str | None] | None:
        """What ``check`` would match a new simhash page with now, ``(canonical entry, distance, via)``, without
        recording the page or counting its sentences (a backend deciding elsewhere, with this rule's answer
        as its hint: ``backends.redis.mirror``); ``host`` and ``address`` as ``check`` takes them."""
        self._host = host
        self._address = address
        return self._nearest(scope, fingerprint, False, edit_keys, also, second, sketch, count=False)

    def nearest_many(
        self,
        scope: str,
        pages: Sequence[tuple[int, Sequence[int], int | None, int | None, Sketch | None, str | None, str | None]],
        firsts: list[list[Any]] | None = None,
    ) -> list[tuple[int, int, str | None] | None]:
        """``nearest`` of each page (``(fingerprint, edit_keys, also, second, sketch, host, address)``), the same
        answers: nothing is recorded in between, so the first and second simhash indexes are asked for all
        the pages at once (``LayeredIndex.query_many``: one call an index); ``firsts``: ``first_matches`` of the
        pages' fingerprints, when the caller asked it already."""
        seconds = self._seconds.get(scope)
        if firsts is None:
            firsts = self.first_matches(scope, [page[0] for page in pages])
        asked = [n for n, page in enumerate(pages) if page[3] is not None and not (firsts and firsts[n])]
        by_second = {}
        if seconds and asked:
            by_second = dict(zip(asked, seconds.query_many([second for n in asked if (second := pages[n][3]) is not None])))
        index, by_also = self._indexes.get(scope), {}
        asked = [n for n, page in enumerate(pages) if page[2] is not None and not (firsts and firsts[n])]
        if index is not None and asked:  # step 5's question too, at once
            by_also = dict(zip(asked, index.query_many([also for n in asked if (also := pages[n][2]) is not None])))
        contained = self._contained.get(scope)
        anchored = None if contained is None else contained.shared_anchors([page[4] for page in pages])
        out: list[tuple[int, int, str | None] | None] = []
        for n, (fingerprint, keys, also, second, sketch, host, address) in enumerate(pages):
            self._host, self._address = host, address
            first, by = None if firsts is None else firsts[n], by_second.get(n)
            if not first and not by and also is None and not keys:
                # No row of the first simhash near, nor of the second (every such page with a second simhash
                # was asked, when the scope has any), nothing for steps 4-5: only step 7 can match it.
                out.append(self._contained_match(scope, fingerprint, sketch, False, anchored))
            else:
                found = (first, by, by_also.get(n))
                out.append(self._nearest(scope, fingerprint, False, keys, also, second, sketch, False, found))
        return out

    def _contained_match(
        self, scope: str, fingerprint: int, sketch: Sketch | None, count: bool = False,
        anchored: set[int] | None = None,
    ) -> tuple[int, int, str] | None:
        """Step 7 of a page steps 1-6 left unmatched: ``(canonical entry, distance, "containment")``, else ``None``
        (``count``, ``anchored``: as ``_contains`` takes them)."""
        if sketch is None:
            return None
        owner = self._contains(scope, sketch, count, anchored)
        if owner is None:
            return None
        indexed = self.indexed[owner]
        assert indexed is not None
        return owner, (fingerprint ^ indexed).bit_count(), "containment"

    def first_matches(self, scope: str, fingerprints: Sequence[int]) -> list[list[Any]] | None:
        """What the scope's first-simhash index answers for each fingerprint (``Match``es: its canonical
        entries' rows within k, nearest first; rows of template-free text and step-7 copies too), ``None``
        when the scope has no index yet."""
        index = self._indexes.get(scope)
        return index.query_many(list(fingerprints)) if index is not None and fingerprints else None

    def add_canonical(
        self,
        scope: str,
        fingerprint: int,
        exact: bool = False,
        edit_keys: Sequence[int] = (),
        also: int | None = None,
        second: int | None = None,
        sketch: Sketch | None = None,
        address: str | None = None,
    ) -> int:
        """A canonical page decided elsewhere, indexed as ``check`` indexes a unique one (listed under its
        ``address`` for step 7's other views); its new entry."""
        self._address = address
        entry = self._new_entry(fingerprint, exact, -1, -1)
        self._make_canonical(scope, entry, fingerprint, exact, () if exact else edit_keys, also, second, sketch)
        return entry

    def add_canonicals(
        self,
        scope: str,
        pages: Sequence[tuple[int, bool, Sequence[int], int | None, int | None, Sketch | None, str | None]],
        packed: Sequence[bytes | None] | None = None,
    ) -> list[int]:
        """``add_canonical`` of each page (``(fingerprint, exact, edit_keys, also, second, sketch, address)``), in
        order: the same entries and rows (``test_clustering``), made a column at a time and added to the indexes
        in one step (a worker's mirror takes every canonical page of every worker: ``backends.redis.mirror``).
        ``packed``: each page's sketch hashes packed (``ContainmentIndex.add``), when the caller has them."""
        if not pages:
            return []
        fingerprints, exacts, keys, alsos, seconds, sketches, addresses = (list(column) for column in zip(*pages))
        return self.add_canonical_columns(scope, fingerprints, exacts, keys, alsos, seconds, sketches, addresses, packed)

    def add_canonical_columns(
        self,
        scope: str,
        fingerprints: list[int],
        exacts: list[bool],
        keys: Sequence[Sequence[int]],
        alsos: list[int | None],
        seconds: list[int | None],
        sketches: Sequence[Sketch | None],
        addresses: Sequence[str | None],
        packed: Sequence[bytes | None] | None = None,
    ) -> list[int]:
        """``add_canonicals`` of pages given as columns (one list per field, a page per position)."""
        first, count = len(self.fingerprint), len(fingerprints)
        if not count:
            return []
        # ``_new_entry`` and ``_make_canonical`` of each page, a column at a time (the same lists)
        self.fingerprint += fingerprints
        self.exact += exacts
        self.canonical += [-1] * count
        self.distance += [-1] * count
        self.indexed += fingerprints
        self.indexed_keys += [b""] * count
        self.digest += [None] * count
        self.also += [None] * count
        self.second += [None] * count
        entries = range(first, first + count)
        simhash: Sequence[int] = entries
        if any(exacts):
            simhash = [entry for entry, exact in zip(entries, exacts) if not exact]
            table = self._exact.setdefault(scope, {})
            for entry, fingerprint, exact in zip(entries, fingerprints, exacts):
                if exact:
                    table.setdefault(fingerprint, entry)
        rows = self._canonical_rows(first, simhash, fingerprints, alsos)
        if any(keys):
            for entry in simhash:
                if keys[entry - first]:
                    self._add_keys(scope, entry, keys[entry - first])
        if simhash is entries and None not in seconds:  # (every page has one: a column at once)
            second_rows: Sequence[int] = entries
            second_values = seconds
            self.second[first:] = seconds
        else:
            second_rows = [entry for entry in simhash if seconds[entry - first] is not None]
            second_values = [seconds[entry - first] for entry in second_rows]
            for entry, second in zip(second_rows, second_values):
                self.second[entry] = second
        if sketches.count(None) != count:
            self._add_sketches(scope, first, simhash, sketches, addresses, packed)
        self._address = addresses[-1]
        for row_keys, values, tables in ((rows[0], rows[1], self._indexes), (second_rows, second_values, self._seconds)):
            if len(row_keys):
                # (fingerprints checked already: the pages', or the rows made from them)
                self._table(tables, scope).add_many(_entry_array(row_keys), np.array(values, dtype=np.uint64))
        return list(entries)

    def sketch_room(self, scope: str) -> int:
        """How many more canonical pages of ``scope`` the containment index takes a sketch of (step 7; then
        ``add_canonicals`` of a page with a sketch is the same as of that page without one)."""
        contained = self._contained.get(scope)
        return MAX_PAGES if contained is None else max(0, contained.max_pages - len(contained))

    def _canonical_rows(
        self, first: int, simhash: Sequence[int], fingerprints: list[int], alsos: list[int | None]
    ) -> tuple[Sequence[int], list[int]]:
        """``add_canonicals``: the index rows of its simhash entries (keys, values), in entry order: each entry's
        fingerprint, then its template-free one when it differs (recorded in ``also``)."""
        if alsos.count(None) == len(alsos):
            return simhash, fingerprints if len(simhash) == len(fingerprints) else [fingerprints[e - first] for e in simhash]
        keys: list[int] = []
        values: list[int] = []
        for entry in simhash:
            fingerprint, also = fingerprints[entry - first], alsos[entry - first]
            keys.append(entry)
            values.append(fingerprint)
            if also is not None and also != fingerprint:
                keys.append(entry)
                values.append(also)
                self.also[entry] = also
                self._also_rows += 1
        return keys, values

    def _add_sketches(
        self, scope: str, first: int, simhash: Sequence[int], sketches: Sequence[Sketch | None],
        addresses: Sequence[str | None], packed: Sequence[bytes | None] | None,
    ) -> None:
        """``add_canonicals``: the sketches of its simhash entries, in entry order, until the scope's
        containment index is full (``ContainmentIndex.add`` takes no more then: nothing changes)."""
        for entry in simhash:
            at = entry - first
            sketch = sketches[at]
            if sketch is None:
                continue
            contained = self._contained.get(scope)
            if contained is not None and len(contained) >= contained.max_pages:
                return
            self._add_sketch(scope, entry, sketch, addresses[at], None if packed is None else packed[at])

    def _add_sketch(
        self, scope: str, entry: int, sketch: Sketch, address: str | None, packed: bytes | None = None
    ) -> None:
        """A canonical entry's sketch in the scope's containment index, listed under its address (step 7)."""
        contained = self._contained.get(scope)
        if contained is None:
            contained = self._contained[scope] = ContainmentIndex()
        if contained.add(entry, sketch, packed) and address is not None:
            self._views.add(scope, address, entry)

    def remove_canonical(self, scope: str, entry: int) -> None:
        """``entry`` is no longer canonical (decided elsewhere): out of every index of ``scope``."""
        self._unindex(scope, entry)

    def count_sentences(self, hashes: np.ndarray) -> None:
        """Pages decided elsewhere reached step 7: their sentences are counted (``SentenceCounts.add_many``;
        ``hashes``: each page's distinct sentence hashes, one after the other)."""
        self._counts().add_many(hashes)

    def _other_view(
        self, scope: str, index: ContainmentIndex, sketch: Sketch, counts: SentenceCounts
    ) -> tuple[int, float] | None:
        """Step 7 between views of one address (``core.cluster.views``): the canonical page of this page's
        address whose sentences hold its own (or the other way round) at ``views.MIN_RATIO``: all of
        its sampled sentences (at least ``views.MIN_SHARED``), or ``views.MIN_CONTAINMENT`` of them once
        the common sentences are left out (a view of an edited copy); several: the highest containment, then the one listed first.
        (All of them: no sentence is left out as common, the copies of one address, its tracking copies
        and print views, would make their own sentences common.)"""
        assert self._address is not None
        best: tuple[int, float] | None = None
        common = lambda h: counts.count(h) >= COMMON  # noqa: E731
        for entry in self._views.entries(scope, self._address):
            other = index.sketch(entry)
            if other is None:
                continue
            if verify(sketch, other, min_ratio=VIEW_MIN_RATIO, min_shared=VIEW_MIN_SHARED):
                contained = estimate(sketch, other)[0]
            elif verify(sketch, other, min_containment=VIEW_MIN_CONTAINMENT, min_ratio=VIEW_MIN_RATIO,
                        min_shared=VIEW_MIN_SHARED, common=common):
                contained = estimate(sketch, other, common=common)[0]
            else:
                continue
            if best is None or contained > best[1]:
                best = (entry, contained)
        return best

    def add_copy_row(self, scope: str, canonical: int, fingerprint: int) -> None:
        """Index ``fingerprint``, a page step 7 joined to ``canonical`` further than k, as a row of
        ``canonical`` (at most ``MAX_COPY_ROWS``): a later copy of that page, within k of it, finds the
        cluster (its print view with the link list, a tracking copy of it)."""
        rows = self.copy_rows.setdefault(canonical, [])
        near = any((fingerprint ^ row).bit_count() <= self.max_distance for row in rows)  # found by a row: no chain
        if len(rows) < MAX_COPY_ROWS and not near and self.indexed[canonical] is not None:
            rows.append(fingerprint)
            self._index(scope).add(canonical, fingerprint)
            self._copy_rows += 1

    def list_view(self, scope: str, entry: int) -> None:
        """List a canonical entry restored with its sketch under its page's address (``url_of_entry``)."""
        address = address_of(self.url_of_entry(entry)) if self.url_of_entry is not None else None
        if address is not None:
            self._views.add(scope, address, entry)

    def _make_canonical(
        self,
        scope: str,
        entry: int,
        fingerprint: int,
        exact: bool,
        keys: Sequence[int],
        also: int | None = None,
        second: int | None = None,
        sketch: Sketch | None = None,
        packed: bytes | None = None,
        batch: tuple[list[int], list[int]] | None = None,
    ) -> None:
        """``entry`` indexed as a canonical page.  ``batch``: two lists (first-simhash rows, second-simhash rows)
        that collect the index rows as ``entry, fingerprint, ...``, for the caller to add in one step
        (``add_canonicals``), instead of adding them one at a time."""
        if exact:
            self._exact.setdefault(scope, {}).setdefault(fingerprint, entry)
        else:
            rows = [entry, fingerprint]
            self._add_keys(scope, entry, keys)
            if also is not None and also != fingerprint:
                rows += (entry, also)  # removed with the entry (BlockPermutedIndex.remove: every row of a key)
                self.also[entry] = also
                self._also_rows += 1
            if batch is not None:
                batch[0].extend(rows)
            else:
                index = self._index(scope)
                for row in range(0, len(rows), 2):
                    index.add(rows[row], rows[row + 1])
            if second is not None:
                if batch is not None:
                    batch[1].extend((entry, second))
                else:
                    self._table(self._seconds, scope).add(entry, second)
                self.second[entry] = second
            if sketch is not None:
                self._add_sketch(scope, entry, sketch, self._address, packed)
        self.indexed[entry] = fingerprint
        self.canonical[entry] = self.distance[entry] = -1

    def keys_of(self, entry: int) -> tuple[int, ...]:
        """The one-edit keys ``entry`` has in the index (a canonical page of a few dozen tokens), else ()."""
        return unpack_keys(self.indexed_keys[entry])

    def _add_keys(self, scope: str, entry: int, keys: Sequence[int]) -> None:
        if keys:
            self._key_table(scope).add(entry, keys)
            self.indexed_keys[entry] = pack_keys(keys)

    def _key_table(self, scope: str) -> KeyTable:
        table = self._edits.get(scope)
        if table is None:
            table = self._edits[scope] = KeyTable()
        return table

    def _unindex(self, scope: str, entry: int) -> None:
        indexed = self.indexed[entry]
        if indexed is None:
            return
        if self.exact[entry]:
            table = self._exact.get(scope, {})
            if table.get(indexed) == entry:
                del table[indexed]
        else:
            self._index(scope).remove(entry)
            if self.also[entry] is not None:
                self.also[entry] = None
                self._also_rows -= 1
            self._copy_rows -= len(self.copy_rows.pop(entry, ()))
            if self.second[entry] is not None:
                self._seconds[scope].remove(entry)
                self.second[entry] = None
            if scope in self._contained:
                self._contained[scope].remove(entry)
                self._views.remove(entry)
            key_table = self._edits.get(scope)
            if key_table is not None and self.indexed_keys[entry]:
                key_table.remove(entry, self.keys_of(entry))
            self.indexed_keys[entry] = b""
        self.indexed[entry] = None

    def _new_entry(self, fingerprint: int, exact: bool, canonical: int, distance: int) -> int:
        entry = len(self.fingerprint)
        self.fingerprint.append(fingerprint)
        self.exact.append(exact)
        self.canonical.append(canonical)
        self.distance.append(distance)
        self.indexed.append(None)
        self.indexed_keys.append(b"")
        self.digest.append(None)
        self.also.append(None)
        self.second.append(None)
        return entry

    # ---------------------------------------------------------------- rule
    def check(
        self,
        scope: str,
        identity: str,
        fingerprint: int,
        exact: bool = False,
        index: bool = True,
        edit_keys: Sequence[int] = (),
        digest: int | None = None,
        also: int | None = None,
        second: int | None = None,
        sketch: Sketch | None = None,
        host: str | None = None,
        address: str | None = None,
    ) -> Decision:
        """Apply the rule to one page and record it (``index=False``: a unique page is not made canonical).

        ``edit_keys``: the page's one-edit keys (``core.features.edits``), for a simhash page of a few dozen tokens.
        ``also``: its template-free fingerprint (``core.cluster.sitetemplate``; step 5), else ``None``.
        ``second``: its second simhash (``core.features.second``; step 6), else ``None``.
        ``sketch``: its sentence sketch (``core.cluster.containment``; step 7), else ``None``.
        ``digest``: its content digest (``core.features.exact.exact_digest``; a short page's is its fingerprint),
        which tells ``UNCHANGED`` from ``EDITED`` when it is re-checked; ``None``: unknown.
        ``host``: its host (``sitetemplate.host_of``): step 7 matches it with a canonical page of another
        host (``host_of_entry``) only on stronger evidence (``containment.CROSS_HOST_MIN_RATIO``).
        ``address``: its address (``views.address_of``): step 7 matches it with a canonical page of the same
        address at a smaller size (``core.cluster.views``).
        """
        self._host = host
        self._address = address
        if exact:
            edit_keys = ()
            digest = fingerprint
            also = second = sketch = None
        key = (scope, identity)
        entry = self._identities.get(key)
        if entry is None and len(self._restored_hashes):
            entry = self._restored_entry(scope, identity)
        if entry is not None:
            return self._recheck(scope, entry, fingerprint, exact, index, edit_keys, digest, also, second, sketch)
        found = self._nearest(scope, fingerprint, exact, edit_keys, also, second, sketch)
        if found is not None:
            entry = self._new_entry(fingerprint, exact, found[0], found[1])
            self.digest[entry] = digest
            self._identities[key] = entry
            if found[2] == "containment" and found[1] > self.max_distance:
                self.add_copy_row(scope, found[0], fingerprint)
            return Decision(Outcome.NEAR_DUPLICATE, entry, found[0], found[1], via=found[2])
        entry = self._new_entry(fingerprint, exact, -1, -1)
        self.digest[entry] = digest
        self._identities[key] = entry
        if index:
            self._make_canonical(scope, entry, fingerprint, exact, edit_keys, also, second, sketch)
        return Decision(Outcome.UNIQUE, entry)

    def check_many(
        self,
        scope: str,
        identities: Sequence[str],
        fingerprints: Sequence[int],
        exact: Sequence[bool],
        index: Sequence[bool],
        digests: Sequence[int | None],
        canonicals: list[tuple[int | None, int] | None] | None = None,
    ) -> list[Decision]:
        """``check`` of each page of ``scope`` in turn, by steps 1-4 (no one-edit keys, template-free fingerprint,
        second simhash, sketch, host or address): the same decisions and the same entries and indexes (tested
        against it).  A batch of the global Redis backend is checked so (``backends.redis.cluster_backend``):
        while the rule holds no row of steps 5-7, a new identity is looked up (``_nearest``) and recorded here
        without ``check``'s general steps, in about 0.9x its time; a page seen before goes through ``_recheck``.

        ``canonicals``: each decision's canonical entry's ``(indexed fingerprint, fingerprint)`` as they were when
        it was decided (``None``: no canonical entry) is appended to it (a later page may re-index that entry).
        """
        # Rows that are not their entry's own fingerprint (a template-free one, a copy step 7 joined) may give a
        # match farther than k, which ``check`` handles: then every page goes through it.
        plain = not (self.copy_rows or self._also_rows)
        self._host = self._address = None
        decisions = []
        for identity, fp, is_exact, indexed, digest in zip(identities, fingerprints, exact, index, digests):
            if not plain:
                decision = self.check(scope, identity, fp, is_exact, indexed, (), digest)
            else:
                if is_exact:
                    digest = fp
                entry = self.entry_of(scope, identity)
                if entry is not None:
                    decision = self._recheck(scope, entry, fp, is_exact, indexed, (), digest)
                else:
                    owner, distance = -1, -1
                    if is_exact:
                        at = self._exact.get(scope, {}).get(fp)
                        if at is not None:
                            owner, distance = at, 0
                    elif (table := self._indexes.get(scope)) is not None and (matches := table.query(fp)):
                        owner, distance = nearest_match(matches)  # (each row its entry's own fingerprint)
                    entry = self._new_entry(fp, is_exact, owner, distance)
                    self.digest[entry] = digest
                    self._identities[scope, identity] = entry
                    if owner >= 0:
                        decision = Decision(Outcome.NEAR_DUPLICATE, entry, owner, distance)
                    else:
                        if indexed:
                            self._make_canonical(scope, entry, fp, is_exact, ())
                        decision = Decision(Outcome.UNIQUE, entry)
            decisions.append(decision)
            if canonicals is not None:
                c = decision.canonical
                canonicals.append(None if c is None else (self.indexed[c], self.fingerprint[c]))
        return decisions

    def _recheck(
        self,
        scope: str,
        entry: int,
        fingerprint: int,
        exact: bool,
        index: bool,
        edit_keys: Sequence[int],
        digest: int | None = None,
        also: int | None = None,
        second: int | None = None,
        sketch: Sketch | None = None,
    ) -> Decision:
        previous = self.fingerprint[entry]
        old_digest = self.digest[entry]
        self.digest[entry] = digest
        if exact != self.exact[entry]:
            moved = _FAR
        elif exact:
            moved = 0 if fingerprint == previous else _FAR
        else:
            moved = (fingerprint ^ previous).bit_count()
        self.fingerprint[entry] = fingerprint
        if moved <= self.max_distance:
            # Same text (or no digest to tell): unchanged; other text within k: edited.
            same = digest is None or old_digest is None or digest == old_digest
            outcome = Outcome.UNCHANGED if same else Outcome.EDITED
            canonical = self.canonical[entry]
            if canonical < 0:
                return Decision(outcome, entry, previous_fingerprint=previous)
            return Decision(outcome, entry, canonical, self.distance[entry], previous)
        self._unindex(scope, entry)
        self.exact[entry] = exact
        found = self._nearest(scope, fingerprint, exact, edit_keys, also, second, sketch)
        if found is not None:
            self.canonical[entry], self.distance[entry] = found[0], found[1]
            if found[2] == "containment" and found[1] > self.max_distance:
                self.add_copy_row(scope, found[0], fingerprint)
            return Decision(Outcome.NEAR_DUPLICATE, entry, found[0], found[1], previous, found[2])
        self.canonical[entry] = self.distance[entry] = -1
        if index:
            self._make_canonical(scope, entry, fingerprint, exact, edit_keys, also, second, sketch)
        return Decision(Outcome.CHANGED, entry, previous_fingerprint=previous)

    # ------------------------------------------------------------ restore
    def restore_many(
        self,
        scopes: Sequence[str],
        identities: Sequence[str],
        fingerprints: list[int],
        exact: list[bool],
        canonical: list[int],
        distance: list[int],
        indexed: list[int | None],
        indexed_keys: Sequence[tuple[int, ...]] | None = None,
        digests: Sequence[int | None] | None = None,
    ) -> None:
        """Put back entries recorded earlier (sequences in entry order); ``ValueError`` if two share an identity.

        ``indexed`` is the fingerprint each entry has in the index (canonical
        entries), else ``None``, and ``indexed_keys`` its one-edit keys there;
        ``digests`` their content digests (``None``: unknown, e.g. a store of
        format 3); ``restore_indexes`` then indexes them in bulk.
        """
        start = len(self.fingerprint)
        self.fingerprint.extend(fingerprints)
        self.exact.extend(exact)
        self.canonical.extend(canonical)
        self.distance.extend(distance)
        self.indexed.extend(indexed)
        if indexed_keys is None:
            self.indexed_keys.extend([b""] * len(fingerprints))
        else:
            self.indexed_keys.extend(pack_keys(keys) if keys else b"" for keys in indexed_keys)
        self.digest.extend([None] * len(fingerprints) if digests is None else digests)
        self.also.extend([None] * len(fingerprints))  # a template-free fingerprint is never stored
        self.second.extend([None] * len(fingerprints))  # nor a second simhash
        self._identities.update(zip(zip(scopes, identities), range(start, start + len(fingerprints))))
        if len(self._identities) != len(self.fingerprint):
            raise ValueError("two entries have the same (scope, identity)")
        self._pending.extend((scopes[i], start + i) for i, fp in enumerate(indexed) if fp is not None)

    def restore_arrays(
        self,
        scopes: Sequence[str],
        identities: Sequence[str],
        fingerprints: np.ndarray,
        exact: np.ndarray,
        canonical: np.ndarray,
        distance: np.ndarray,
        is_indexed: np.ndarray,
        indexed: np.ndarray,
        packed_keys: Sequence[bytes],
        digests: Sequence[int | None],
        identity_hashes: np.ndarray | None = None,
    ) -> None:
        """``restore_many`` then ``restore_indexes`` for entries given as arrays (a store's columns), in bulk.

        ``identity_hashes``: ``identity_hash`` of each entry's scope and identity (a store keeps them):
        the entries of a first restore into an empty rule are then found through them, and
        ``identities`` is read only to confirm a match (it may decode lazily).

        ``fingerprints``/``indexed`` uint64, ``exact``/``is_indexed`` bool, ``canonical``/``distance``
        int64 (-1: none); ``packed_keys`` the one-edit keys packed (``keytable.pack_keys``), b"" for none.
        The same entries, indexes and ties as entry-by-entry restoring; ``ValueError`` if two entries
        share an identity.
        """
        if self._pending:
            self.restore_indexes()
        enabled = gc.isenabled()
        gc.disable()  # a million objects and no cycle: the collector would only slow this down
        try:
            self._restore_arrays(scopes, identities, fingerprints, exact, canonical, distance, is_indexed, indexed,
                                 packed_keys, digests, identity_hashes)  # fmt: skip
        finally:
            if enabled:
                gc.enable()

    def _restore_arrays(self, scopes: Sequence[str], identities: Sequence[str], *arrays: Any) -> None:
        fingerprints, exact, canonical, distance, is_indexed, indexed, packed_keys, digests, identity_hashes = arrays
        start, n = len(self.fingerprint), len(fingerprints)
        if start or len(self._restored_hashes):
            identity_hashes = None  # only a first restore into an empty rule keeps the table
        values: list[int] = fingerprints.tolist()
        self.fingerprint.extend(values)
        self.exact.extend(exact.tolist())
        self.canonical.extend(canonical.tolist())
        self.distance.extend(distance.tolist())
        column: list[int | None] = list(values)  # a canonical page's indexed fingerprint is mostly its own
        for row in np.flatnonzero(is_indexed & (indexed != fingerprints)).tolist():
            column[row] = int(indexed[row])
        for row in np.flatnonzero(~is_indexed).tolist():
            column[row] = None
        self.indexed.extend(column)
        self.indexed_keys.extend(packed_keys)
        self.digest.extend(digests)
        # Restored pages carry no template-free or second simhash nor sentence sketch (none is stored:
        # steps 5-7 serve pages checked in this process).
        self.also.extend([None] * n)
        self.second.extend([None] * n)
        if identity_hashes is None:
            self._identities.update(zip(zip(scopes, identities), range(start, start + n)))
            if len(self._identities) != len(self.fingerprint):
                raise ValueError("two entries have the same (scope, identity)")
        elif n:
            order = np.argsort(identity_hashes)
            hashes = identity_hashes[order]
            for at in np.flatnonzero(hashes[1:] == hashes[:-1]).tolist():  # the same hash: the same page?
                a, b = int(order[at]), int(order[at + 1])
                if scopes[a] == scopes[b] and identities[a] == identities[b]:
                    raise ValueError("two entries have the same (scope, identity)")
            self._restored_hashes, self._restored_entries = hashes, order
            self._restored_scopes, self._restored_keys = scopes, identities
        names = list(dict.fromkeys(scopes))
        if len(names) == 1:
            codes = np.zeros(n, dtype=np.int64)
        else:
            number = {name: code for code, name in enumerate(names)}
            codes = np.fromiter(map(number.__getitem__, scopes), dtype=np.int64, count=n)
        with_keys = np.fromiter(map(bool, packed_keys), dtype=bool, count=n) if any(packed_keys) else None
        for code, scope in enumerate(names):
            mine = is_indexed & (codes == code)
            simhash = np.flatnonzero(mine & ~exact)
            if len(simhash):
                self._index(scope).add_many(simhash + start, indexed[simhash])
            for row in np.flatnonzero(mine & exact).tolist():
                self._exact.setdefault(scope, {}).setdefault(self.indexed[start + row], start + row)
            if with_keys is not None:
                owners = (np.flatnonzero(with_keys[simhash]) if len(simhash) else simhash)
                owners = (simhash[owners] + start).tolist()
                if owners:
                    self._key_table(scope).add_many(owners, [self.keys_of(entry) for entry in owners])

    def restore_indexes(self) -> None:
        """Index the canonical entries given to ``restore_many`` (one bulk add per scope)."""
        by_scope: dict[str, tuple[list[int], list[int]]] = {}
        keyed: dict[str, tuple[list[int], list[tuple[int, ...]]]] = {}
        for scope, entry in self._pending:
            indexed = self.indexed[entry]
            assert indexed is not None
            if self.exact[entry]:
                self._exact.setdefault(scope, {}).setdefault(indexed, entry)
            else:
                if self.indexed_keys[entry]:
                    owners, key_lists = keyed.setdefault(scope, ([], []))
                    owners.append(entry)
                    key_lists.append(self.keys_of(entry))
                keys, fps = by_scope.setdefault(scope, ([], []))
                keys.append(entry)
                fps.append(indexed)
        for scope, (keys, fps) in by_scope.items():
            self._index(scope).add_many(keys, fps)
        for scope, (owners, key_lists) in keyed.items():
            self._key_table(scope).add_many(owners, key_lists)
        self._pending = []


def _entry_array(entries: Sequence[int]) -> np.ndarray:
    """Entry numbers as an array (a range without a list made of it; uint32, the index's own key type, while
    they fit)."""
    if isinstance(entries, range):
        return np.arange(entries.start, entries.stop, dtype=np.uint32 if entries.stop <= 1 << 32 else np.int64)
    return np.asarray(entries, dtype=np.int64)


def identity_hash(scope: str, identity: str) -> int:
    """A 64-bit hash of a page's scope and identity, the same in every process (``distinct.scoped_hash``)."""
    return scoped_hash(scope, identity)
