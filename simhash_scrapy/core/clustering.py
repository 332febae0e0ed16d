"""The clustering rule: which page is canonical, which is a near-duplicate of which.

This is the one implementation of the rule in Python: the in-process and
persistent backends (``backends.memory``) and the ``scrapy simhash dedup`` /
``compare`` commands (``assign_canonicals``) call it; the Redis backend's Lua
script mirrors it, and a test compares their decisions page by page.

Pages are checked one at a time, each identified by ``(scope, identity)``
(the crawl's identity is Scrapy's request fingerprint, so "the same page"
follows the user's URL canonicalisation):

1. **Identity first.**  A page recorded before under the same identity is
   compared with its own last version, never with the index: within k it is
   ``UNCHANGED`` when its content digest (``core.exact``: the normalised token
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
4. **The one-edit rule** (``core.edits``): a page given ``edit_keys`` (a few
   dozen tokens) that has no canonical page within k joins the cluster of the
   first-recorded canonical page sharing one of its keys (one token apart);
   its distance is their real Hamming distance, which is then more than k.
   Canonical pages keep their keys in a table per scope.  Whether a page
   re-checked under its identity is unchanged stays a matter of distance.

Which step matched a near-duplicate (``Rule``: ``simhash`` within k,
``exact`` short page, ``one_edit``) follows from its kind and distance
(``rule_of``); logs, reports and ``compare`` name it with this vocabulary.

One entry per identity: re-checking a page updates its entry, so re-crawling
a site N times keeps one entry per URL.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from . import defaults
from .index import BlockPermutedIndex
from .keytable import KeyTable, pack_keys, unpack_keys

__all__ = ["Outcome", "Rule", "rule_of", "Decision", "Clusterer", "assign_canonicals"]

#: Distance given to a page whose kind changed (short <-> long): "more than any k".
_FAR = 64


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


class Rule(str, enum.Enum):
    """Which step of the rule made a page a near-duplicate: the one vocabulary of logs, reports and ``compare``.

    The value is what the JSON Lines and CSV reports write (``"rule"``);
    ``label`` is what people read (logs, the HTML report, ``compare``).
    """

    #: Step 2: the nearest canonical page is within k bits.
    SIMHASH = "simhash"
    #: Step 3: a short page with the same exact digest (distance 0).
    EXACT = "exact"
    #: Step 4: one token apart (``core.edits``); the distance is then more than k.
    ONE_EDIT = "one_edit"

    def __str__(self) -> str:
        return self.value

    @property
    def label(self) -> str:
        return _RULE_LABELS[self]

    def describe(self, distance: int | None, max_distance: int | None) -> str:
        """The rule and k as logs, reports and ``compare`` print them (the distance when given).

        ``"simhash within k=4, distance 3"``, ``"exact short page, distance 0, k=4"``,
        ``"one edit, distance 9 > k=4"``; without a distance ``"simhash within k=4"``,
        ``"exact short page, k=4"``, ``"one edit, beyond k=4"``.
        """
        k = "?" if max_distance is None else str(max_distance)
        d = "" if distance is None else f", distance {distance}"
        if self is Rule.SIMHASH:
            return f"simhash within k={k}{d}"
        if self is Rule.EXACT:
            return f"{self.label}{d}, k={k}"
        return f"{self.label}{d} > k={k}" if d else f"{self.label}, beyond k={k}"


_RULE_LABELS = {Rule.SIMHASH: "simhash within k", Rule.EXACT: "exact short page", Rule.ONE_EDIT: "one edit"}


def rule_of(exact: bool, distance: int | None, max_distance: int) -> Rule:
    """The rule that matched a near-duplicate, from what every backend records (kind, distance) and k.

    A short page is matched by its exact digest; a simhash page within k by
    distance; a simhash page farther than k can only have been found by the
    one-edit rule (its distance is the real Hamming distance, see step 4).
    """
    if exact:
        return Rule.EXACT
    if distance is not None and distance > max_distance:
        return Rule.ONE_EDIT
    return Rule.SIMHASH


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


class Clusterer:
    """Entries (one per identity) and the canonical pages' indexes, per scope."""

    def __init__(self, max_distance: int = defaults.MAX_DISTANCE, blocks: int | None = defaults.BLOCKS) -> None:
        BlockPermutedIndex(max_distance, blocks)  # validates the layout now, not at the first page
        self.max_distance = max_distance
        self.blocks = blocks
        self._indexes: dict[str, BlockPermutedIndex] = {}
        self._exact: dict[str, dict[int, int]] = {}
        self._edits: dict[str, KeyTable] = {}  # one-edit key -> canonical entry, per scope
        self._identities: dict[tuple[str, str], int] = {}
        # Per entry (parallel lists, indexed by entry number):
        self.fingerprint: list[int] = []  # the latest version's fingerprint (or digest)
        self.exact: list[bool] = []
        self.canonical: list[int] = []  # canonical entry, -1 for canonical/unique entries
        self.distance: list[int] = []  # distance to it, -1 for canonical/unique entries
        self.indexed: list[int | None] = []  # the fingerprint in the index (canonical entries), else None
        self.indexed_keys: list[bytes] = []  # one-edit keys in the index (canonical entries, pack_keys), else b""
        self.digest: list[int | None] = []  # the latest version's content digest (core.exact), None if unknown
        self._pending: list[tuple[str, int]] = []  # restored canonical entries, indexed by restore_indexes

    def __len__(self) -> int:
        return len(self.fingerprint)

    def entry_of(self, scope: str, identity: str) -> int | None:
        """The entry of ``identity`` in ``scope``, or ``None`` if it was never checked."""
        return self._identities.get((scope, identity))

    def index_size(self) -> int:
        """Canonical entries in all scopes (simhash and exact)."""
        return sum(len(index) for index in self._indexes.values()) + sum(len(t) for t in self._exact.values())

    # ------------------------------------------------------------ lookups
    def _index(self, scope: str) -> BlockPermutedIndex:
        index = self._indexes.get(scope)
        if index is None:
            index = self._indexes[scope] = BlockPermutedIndex(self.max_distance, self.blocks)
        return index

    def _nearest(self, scope: str, fingerprint: int, exact: bool, keys: Sequence[int] = ()) -> tuple[int, int] | None:
        """``(canonical entry, distance)`` of the nearest canonical page, or ``None``."""
        if exact:
            owner = self._exact.get(scope, {}).get(fingerprint)
            return None if owner is None else (owner, 0)
        index = self._indexes.get(scope)
        matches = index.query(fingerprint) if index is not None else []  # nearest first
        if matches:
            nearest = matches[0].distance
            # Ties: the entry recorded first (a re-indexed CHANGED page keeps its place).
            return min(m.key for m in matches if m.distance == nearest), nearest
        table = self._edits.get(scope)
        owner = table.owner(keys) if keys and table is not None else None  # ties: the entry recorded first
        if owner is None:
            return None
        indexed = self.indexed[owner]
        assert indexed is not None
        return owner, (fingerprint ^ indexed).bit_count()

    def _make_canonical(self, scope: str, entry: int, fingerprint: int, exact: bool, keys: Sequence[int]) -> None:
        if exact:
            self._exact.setdefault(scope, {}).setdefault(fingerprint, entry)
        else:
            self._index(scope).add(entry, fingerprint)
            self._add_keys(scope, entry, keys)
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
    ) -> Decision:
        """Apply the rule to one page and record it (``index=False``: a unique page is not made canonical).

        ``edit_keys``: the page's one-edit keys (``core.edits``), for a simhash page of a few dozen tokens.
        ``digest``: its content digest (``core.exact.exact_digest``; a short page's is its fingerprint),
        which tells ``UNCHANGED`` from ``EDITED`` when it is re-checked; ``None``: unknown.
        """
        if exact:
            edit_keys = ()
            digest = fingerprint
        key = (scope, identity)
        entry = self._identities.get(key)
        if entry is not None:
            return self._recheck(scope, entry, fingerprint, exact, index, edit_keys, digest)
        found = self._nearest(scope, fingerprint, exact, edit_keys)
        if found is not None:
            entry = self._new_entry(fingerprint, exact, found[0], found[1])
            self.digest[entry] = digest
            self._identities[key] = entry
            return Decision(Outcome.NEAR_DUPLICATE, entry, found[0], found[1])
        entry = self._new_entry(fingerprint, exact, -1, -1)
        self.digest[entry] = digest
        self._identities[key] = entry
        if index:
            self._make_canonical(scope, entry, fingerprint, exact, edit_keys)
        return Decision(Outcome.UNIQUE, entry)

    def _recheck(
        self,
        scope: str,
        entry: int,
        fingerprint: int,
        exact: bool,
        index: bool,
        edit_keys: Sequence[int],
        digest: int | None = None,
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
        found = self._nearest(scope, fingerprint, exact, edit_keys)
        if found is not None:
            self.canonical[entry], self.distance[entry] = found
            return Decision(Outcome.NEAR_DUPLICATE, entry, found[0], found[1], previous)
        self.canonical[entry] = self.distance[entry] = -1
        if index:
            self._make_canonical(scope, entry, fingerprint, exact, edit_keys)
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
        self._identities.update(zip(zip(scopes, identities), range(start, start + len(fingerprints))))
        if len(self._identities) != len(self.fingerprint):
            raise ValueError("two entries have the same (scope, identity)")
        self._pending.extend((scopes[i], start + i) for i, fp in enumerate(indexed) if fp is not None)

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


def assign_canonicals(
    fingerprints: Iterable[int] | np.ndarray,
    scopes: Iterable[int] | np.ndarray | None = None,
    max_distance: int = defaults.MAX_DISTANCE,
    blocks: int | None = defaults.BLOCKS,
    exact: Iterable[bool] | np.ndarray | None = None,
    edit_keys: Sequence[Sequence[int]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The crawl's rule over a batch of distinct pages, in order (the ``dedup`` command).

    Returns ``(canonical, distance)``: for each page the position of its
    canonical page and the distance to it, ``-1`` for canonical pages.  Every
    page is its own identity (positions), so this is exactly what a crawl of
    these pages in this order decides.
    """
    fps = np.asarray(fingerprints, dtype=np.uint64).tolist()
    n = len(fps)
    scope_list = [0] * n if scopes is None else np.asarray(scopes).tolist()
    exact_list = [False] * n if exact is None else [bool(x) for x in exact]
    clusterer = Clusterer(max_distance, blocks)
    canonical = np.full(n, -1, dtype=np.int64)
    distance = np.full(n, -1, dtype=np.int64)
    for page in range(n):
        keys = edit_keys[page] if edit_keys is not None else ()
        decision = clusterer.check(str(scope_list[page]), str(page), fps[page], exact_list[page], edit_keys=keys)
        if decision.canonical is not None and decision.distance is not None:
            canonical[page] = decision.canonical  # entries are numbered in page order
            distance[page] = decision.distance
    return canonical, distance
