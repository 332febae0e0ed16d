"""Clustering steps 5-7 on the Redis backend: a worker's mirror of the shared index, the core's rule as the hint.

Steps 1-4 are decided by ``check.lua`` on the server.  Steps 5-7 (the host's
template-free text, the second simhash, sentence containment) are decided by the
core's own rule (``core.detector.Detector``, ``core.cluster.clustering.Clusterer``),
run by each worker over a *mirror* of the scope's canonical pages, and sent to
the script as the page's **hint** (``protocol.Hint``):

* What steps 5-7 need of a page is kept in Redis beside the canonical log, in
  the scope's **extras** (``layout.ScopeKeys.extras``, one ``APPEND``-only
  string): the script appends a page's record (its template-free and second
  simhash, its sentence sketch, its host: ``record_of``) when the page
  *reached step 7* (nothing matched it, or its containment hint did), with its
  log position when it became canonical.  That is what the in-process rule
  learns from the same page: the canonical pages' rows and the sentences
  counted (``SentenceCounts``).
* Every worker's ``Mirror`` holds, per scope, a ``Clusterer`` of the canonical
  pages the log names (add and remove entries) with their extras, and the
  sentence counts of every extras record; it is loaded at the scope's first
  page with steps 5-7 data and follows the log and the extras with every
  check script reply (the same tails the replica takes).
* For a page, ``hint`` asks that rule what ``check`` would match it with
  (``Clusterer.nearest``; ``hints``: a script call's pages together,
  ``Clusterer.nearest_many``, the same answers): a match by step 5 or 6 goes to the script as one
  more candidate within k (it competes with the script's own step 2 by
  distance, before the one-edit rule); a match by step 7 is taken by the
  script only when steps 1-6 and the one-edit rule find nothing.  The
  script takes a hint only if its canonical page is still canonical.
* Host templates (step 5) are learned from every worker's pages: each page's
  learner input (host, fingerprint, the digests of its lines: what the store
  journals, ``core.store.detector_state``) is appended to the key's
  ``templates`` string, and every worker replays the other workers' inputs
  (``HostTemplates.learn``) before it learns from its own pages, in check
  order (``Mirror.learn_templates``): the learner of one in-process crawl of
  the pages in the order they were appended.

Same decisions as in process: with one worker, the mirror holds exactly the
canonical pages and counts the in-process rule has when it checks the page,
except for pages of the same script call: a batch is cut before a page that
may depend on an earlier page of it (``first_related``), so the mirror is
always up to date when it answers.  With several workers, see the Redis guide
(``docs/guides/redis.md``, "what can race").
"""

from __future__ import annotations

import struct
from array import array
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ...core import _native
from ...core.cluster.containment import Sketch, pack_hashes, unpack_hashes
from ...core.cluster.sitetemplate import host_of, line_hashes
from ...core.detector import Detector, Page
from ...core.index.layered import LayeredIndex
from .layout import NO_POSITION, OP_ADD, OP_EDIT_KEY, OP_EXACT, OP_REMOVE
from .protocol import Hint
from .replica import _CANDIDATE, _LOG_DTYPE

if TYPE_CHECKING:
    from ...core.records import PageRecord
    from ...core.settings.config import SimhashConfig

__all__ = ["Mirror", "record_of", "read_record", "first_related", "has_extras"]

_ALSO, _SECOND, _SKETCH, _ADDRESS = 1, 2, 4, 8
_LENGTH = struct.Struct(">H")
_Q = struct.Struct(">Q")
_SKETCH_HEAD = struct.Struct(">IB")
_RECORD_HEAD = struct.Struct(">IH")
_LEARNED_HEAD = struct.Struct(">QHI")  # fingerprint, host length, number of line digests
#: Hint kinds (``check.lua``): a candidate within k (steps 5, 6); taken when nothing else matches (step 7).
KIND_WITHIN_K, KIND_CONTAINMENT = 1, 2


def has_extras(record: PageRecord) -> bool:
    """Whether a page carries steps 5-7 data (a crawled simhash page checked with them on)."""
    return not record.exact and (
        record.also is not None
        or record.second is not None
        or record.sketch is not None
    )


def record_of(record: PageRecord, host: str | None, address: str | None) -> bytes:
    """What the extras keep of a page: flags, its template-free simhash, second simhash, sentence sketch
    (sentence count, hashes), its ``address`` (``views.page_address``: step 7's other views;
    length and UTF-8) and host (UTF-8, the rest).  Records written before addresses were kept have no
    ``_ADDRESS`` flag: their pages are not listed under an address (only fewer print views found)."""
    flags, parts = 0, [b""]
    also, second, sketch = record.also, record.second, record.sketch
    if also is not None:
        flags = _ALSO
        parts.append(_Q.pack(also))
    if second is not None:
        flags |= _SECOND
        parts.append(_Q.pack(second))
    if sketch is not None:
        flags |= _SKETCH
        hashes = sketch.hashes[:255]
        parts += (_SKETCH_HEAD.pack(sketch.sentences, len(hashes)), pack_hashes(hashes))
        encoded = address.encode("utf-8", "surrogatepass") if address else b""
        if encoded and len(encoded) <= 0xFFFF:
            flags |= _ADDRESS
            parts += (_LENGTH.pack(len(encoded)), encoded)
    parts[0] = _FLAGS[flags]
    if host:
        parts.append(host.encode("utf-8", "surrogatepass"))
    return b"".join(parts)


#: A record's first byte, by its flags.
_FLAGS = [bytes([flags]) for flags in range(16)]


def read_record(
    data: bytes,
) -> tuple[int | None, int | None, Sketch | None, str | None, str | None]:
    """``record_of``'s fields back: (template-free simhash, second simhash, sketch, host or None, address
    or None)."""
    _, _, (also,), (second,), (sentences,), (packed,), (host,), (address,), _ = _records_python(
        _RECORD_HEAD.pack(0, len(data)) + data, 0, None
    )
    sketch = None if packed is None else Sketch(unpack_hashes(packed), sentences)
    return also, second, sketch, host, address


#: A record's fields as ``Mirror`` keeps them until its log entry comes: template-free and second simhash, the
#: sketch's sentence count (-1: no sketch) and hashes as the record packs them (big-endian), host, address.
_Fields = tuple[int | None, int | None, int, bytes | None, str | None, str | None]
_NO_FIELDS: _Fields = (None, None, -1, None, None, None)
#: ``Mirror._stage``: the positions of records just read and their fields, a list a field.
_Staged = tuple[list[int], list[list[Any]]]
#: ``_records``: (bytes used, then a list a field of the records with a log position: positions, template-free
#: simhashes, second simhashes, sentence counts, packed sketches, hosts, addresses; every record's sketch hashes
#: as native uint64 bytes).
_Columns = tuple[int, list[int], list[int | None], list[int | None], list[int], list[bytes | None],
                 list[str | None], list[str | None], bytes]  # fmt: skip


def _records(data: bytes, start: int, names: dict[str, str] | None) -> _Columns:
    """The whole extras records of ``data`` from byte ``start`` (a chunk of the string may end within a record:
    the rest comes with the next chunk), in columns (``_Columns``): the records of canonical pages (a log
    position), their fields; every record's sentences, to count.  Hosts are made one object a name through
    ``names``.  In C when the helpers are built (``_speedups.extras_records``; ``_records_python``: the same)."""
    speedups = _native.speedups
    if speedups is not None:
        return cast(_Columns, speedups.extras_records(data, start, names))
    return _records_python(data, start, names)


def _records_python(data: bytes, start: int, names: dict[str, str] | None) -> _Columns:
    """``_records`` in Python (a field past its record's end: ``ValueError``, as in C)."""
    columns: tuple[list[Any], ...] = ([], [], [], [], [], [], [])
    hashes: list[bytes] = []
    at, size = start, len(data)
    while at + _RECORD_HEAD.size <= size:
        pos, length = _RECORD_HEAD.unpack_from(data, at)
        body = at + _RECORD_HEAD.size
        if body + length > size:
            break
        try:
            fields = _parse(data, body, body + length, pos != NO_POSITION, names)
        except (IndexError, struct.error) as exc:
            raise ValueError(f"malformed extras record at byte {at}") from exc
        if fields[3] is not None:
            hashes.append(fields[3])
        if pos != NO_POSITION:
            for column, value in zip(columns, (pos, *fields)):
                column.append(value)
        at = body + length
    counted = np.frombuffer(b"".join(hashes), dtype=">u8").astype(np.uint64).tobytes()
    return cast(_Columns, (at - start, *columns, counted))


def _parse(data: bytes, at: int, end: int, fields: bool, names: dict[str, str] | None) -> _Fields:
    """The fields of the record in ``data[at:end]`` (``_Fields``; only its sketch unless ``fields``)."""
    if at >= end:
        raise IndexError
    flags = data[at]
    at += 1
    packed = None
    also = second = None
    sentences = -1
    if flags & _ALSO:
        (also,) = _Q.unpack_from(data, at)
        at += 8
    if flags & _SECOND:
        (second,) = _Q.unpack_from(data, at)
        at += 8
    if flags & _SKETCH:
        if end - at < _SKETCH_HEAD.size:
            raise IndexError
        sentences, n = _SKETCH_HEAD.unpack_from(data, at)
        at += _SKETCH_HEAD.size
        packed = data[at : at + 8 * n]
        at += 8 * n
    address = None
    if at <= end and flags & _ADDRESS:
        if end - at < _LENGTH.size:
            raise IndexError
        (length,) = _LENGTH.unpack_from(data, at)
        at += _LENGTH.size + length
        if fields and at <= end:
            address = data[at - length : at].decode("utf-8", "surrogatepass")
    if at > end:
        raise IndexError
    if not fields:
        return None, None, -1, packed, None, None
    host = data[at:end].decode("utf-8", "surrogatepass") or None
    if host is not None and names is not None:
        host = names.setdefault(host, host)
    return also, second, sentences, packed, host, address


def first_related(records: list[PageRecord], k: int) -> int | None:
    """The first page of a batch (after the first) that an earlier page of it may match or be matched by
    through steps 2, 5, 6 or 7, or whose sentences an earlier page may count, when it carries steps 5-7 data:
    the batch is cut there, so every hint is made from a mirror holding the pages checked before.  (Every
    pair of the batch's simhash pages at once: ``_speedups.batch_related``, or numpy, ``_related_numpy``, the
    same answers; ``tests/unit/test_mirror_batch.py`` has it page by page.)"""
    simhash = [at for at, record in enumerate(records) if not record.exact]
    if len(simhash) < 2:
        return None
    pages = [records[at] for at in simhash]
    compiled = getattr(_native.speedups, "batch_related", None)  # (None: no C helpers, or an older build)
    if compiled is not None:
        related, shared = compiled(
            [r.fingerprint for r in pages], [r.also for r in pages], [r.second for r in pages],
            [None if r.sketch is None else r.sketch.hashes for r in pages], k,
        )  # fmt: skip
    else:
        related, shared = _related_numpy(pages, k)
    cut = next((simhash[i] for i in related if has_extras(pages[i])), None)
    if shared is not None and (cut is None or simhash[shared] < cut):
        return simhash[shared]
    return cut


def _related_numpy(pages: list[PageRecord], k: int) -> tuple[list[int], int | None]:
    """``_speedups.batch_related`` of simhash pages with numpy: the pages (after the first) within k of an earlier
    one by any pair of their rows (fingerprint, template-free simhash) or by their second simhashes, and the first
    page whose sketch shares a sentence with an earlier page's (``None``: none)."""
    fps = np.array([r.fingerprint for r in pages], dtype=np.uint64)
    # a page's rows: its fingerprint and its template-free one (its fingerprint again when it has none)
    rows = np.concatenate([fps, np.array([r.fingerprint if r.also is None else r.also for r in pages], dtype=np.uint64)])
    n = len(pages)
    near = np.bitwise_count(rows[:, None] ^ rows[None, :]) <= k
    related = near[:n, :n] | near[:n, n:] | near[n:, :n] | near[n:, n:]
    has_second = np.array([r.second is not None for r in pages])
    if has_second.sum() > 1:
        seconds = np.array([r.second or 0 for r in pages], dtype=np.uint64)
        related |= (np.bitwise_count(seconds[:, None] ^ seconds[None, :]) <= k) & has_second[:, None] & has_second[None, :]
    found: list[int] = np.flatnonzero(np.tril(related, -1).any(axis=1)).tolist()  # (an earlier page of the batch)
    sentences: set[int] = set()
    for at, record in enumerate(pages):
        sketch = record.sketch
        if sketch is not None:
            if at and not sentences.isdisjoint(sketch.hashes):
                return found, at
            sentences.update(sketch.hashes)
    return found, None


class _Scope:
    """What a ``Mirror`` holds of one scope: log entries and extras bytes applied, log position <-> entry."""

    __slots__ = ("sync", "xsync", "entry_of", "pending")

    def __init__(self) -> None:
        self.sync = 0
        self.xsync = 0
        self.entry_of: dict[int, int] = {}  # log position -> entry, for the canonical pages of the scope
        #: Extras records read before their log entries (a scope loaded in chunks: ``stage``), by log position.
        self.pending: dict[int, _Fields] = {}


class Mirror:
    """A worker's mirror of steps 5-7: the core ``Detector``, its rule holding the scopes' canonical pages."""

    def __init__(self, config: SimhashConfig) -> None:
        # (``LayeredIndex``: canonical pages arrive one run at a time, into a big index)
        self.detector = Detector.from_config(config, index_type=LayeredIndex)
        self.rule = self.detector.rule
        self.rule.host_of_entry = self._host_of_entry
        # Per entry of the rule (entries are made in order, one per canonical page added): its page's host,
        # log position and seq.
        self._hosts: list[str | None] = []  # (one string a host: ``_host_names``)
        self._host_names: dict[str, str] = {}
        self._pos = array("q")
        self._seq = array("q")
        self.scopes: dict[str, _Scope] = {}
        #: Bytes of the shared learner inputs (the ``templates`` string) replayed, and the ranges this
        #: worker appended there that are not behind ``learned`` yet (never replayed: learned already).
        self.learned = 0
        self._own: list[tuple[int, int]] = []

    def forget_templates(self) -> None:
        """The shared learner inputs are gone (Redis lost them): learn afresh from what comes next."""
        if self.detector.templates is not None:
            templates = self.detector.templates
            self.detector.templates = type(templates)(templates.features, templates.min_tokens)
        self.learned = 0
        self._own = []

    def replay_templates(self, data: bytes, start: int) -> None:
        """The shared learner inputs from byte ``start`` (other workers' pages, in the order they were
        appended; this worker's own are skipped)."""
        templates = self.detector.templates
        at = max(0, self.learned - start)
        while templates is not None and at + _LEARNED_HEAD.size <= len(data):
            fp, hlen, n = _LEARNED_HEAD.unpack_from(data, at)
            end = at + _LEARNED_HEAD.size + hlen + 8 * n
            if not any(a <= start + at < b for a, b in self._own):
                host = data[at + _LEARNED_HEAD.size : at + _LEARNED_HEAD.size + hlen].decode("utf-8", "surrogatepass")
                digests = list(struct.unpack_from(f">{n}Q", data, at + _LEARNED_HEAD.size + hlen))
                templates.learn(host, fp, digests)
            at = end
        self.learned = max(self.learned, start + len(data))
        self._own = [(a, b) for a, b in self._own if b > self.learned]

    def learn_templates(self, records: list[PageRecord]) -> bytes:
        """Learn from each page's text, in this order, and give it its template-free simhash (``also``; its
        text is then dropped); the learner inputs to append to the shared string."""
        out = []
        for record in records:
            if record.source is None:
                continue
            if not record.exact and record.url and self.detector.templates is not None:
                host = host_of(record.url).encode("utf-8", "surrogatepass")
                digests = line_hashes(record.source)
                out.append(_LEARNED_HEAD.pack(record.fingerprint, len(host), len(digests)) + host
                           + struct.pack(f">{len(digests)}Q", *digests))  # fmt: skip
                record.also = self.template_free(record)
            record.source = None
        return b"".join(out)

    def appended(self, end: int, length: int) -> None:
        """This worker appended ``length`` bytes of learner inputs, ending at byte ``end``."""
        if length:
            self._own.append((end - length, end))

    def _host_of_entry(self, entry: int) -> str | None:
        return self._hosts[entry] if entry < len(self._hosts) else None

    def template_free(self, record: PageRecord) -> int | None:
        """Learn the page's host template from its text (in check order) and give its template-free simhash."""
        page = Page(record.scope, record.identity or record.url, record.fingerprint, record.url, record.exact,
                    source=record.source, also=record.also)  # fmt: skip
        return self.detector.template_free(page)

    def drop(self, scope: str) -> None:
        """Forget the scope (Redis lost it; the next check loads it again)."""
        state = self.scopes.pop(scope, None)
        if state is not None:
            for entry in state.entry_of.values():
                self.rule.remove_canonical(scope, entry)

    def load(self, scope: str, log: bytes, extras: bytes) -> None:
        """The scope's whole log and extras, read together (``MULTI``)."""
        self.drop(scope)
        self.scopes[scope] = _Scope()
        self.apply(scope, log, 0, extras, 0)

    def stage(self, scope: str, extras: bytes, xstart: int) -> int:
        """The extras records from byte ``xstart`` (whole records; what the mirror holds already is skipped):
        their sentences counted, each canonical page's record kept until its log entry is applied.  Returns
        the log position up to which the log is needed for them (a scope loaded in chunks reads that far)."""
        state = self.scopes[scope]
        self._hold(state, self._stage(state, extras, xstart))
        return max(state.pending, default=state.sync - 1) + 1

    def _stage(self, state: _Scope, extras: bytes, xstart: int) -> _Staged | None:
        """The new extras records: their sentences counted; the canonical pages' positions and fields, in
        columns (``None``: none)."""
        skip = max(0, state.xsync - xstart)
        if skip >= len(extras):
            return None
        used, positions, *columns, counted = _records(extras, skip, self._host_names)
        state.xsync = max(state.xsync, xstart + skip + used)
        if counted:
            self.rule.count_sentences(np.frombuffer(counted, dtype=np.uint64))
        return (positions, cast(list[list[Any]], columns)) if positions else None

    @staticmethod
    def _hold(state: _Scope, staged: _Staged | None) -> None:
        """Keep staged records until their log entries come (by log position)."""
        if staged is not None:
            state.pending.update(zip(staged[0], zip(*staged[1])))

    def apply(
        self, scope: str, log: bytes, start: int, extras: bytes, xstart: int
    ) -> None:
        """The log entries from position ``start`` and the extras from byte ``xstart`` (a check reply's tails);
        what the mirror holds already is skipped.  Canonical pages are added in runs, a column at a time
        (``Clusterer.add_canonical_columns``: their index rows in one step), a run ended by each remove entry."""
        state = self.scopes[scope]
        staged = self._stage(state, extras, xstart)
        if state.pending:
            self._hold(state, staged)
            staged = None
        entries = np.frombuffer(
            log[: len(log) - len(log) % _LOG_DTYPE.itemsize], dtype=_LOG_DTYPE
        )
        first = max(0, state.sync - start)
        new = entries[first:]
        ops = new["op"]
        if (ops == OP_ADD).all():  # (the usual tail: canonical simhash pages only, one run)
            staged = self._add_run(scope, state, new, list(range(start + first, start + len(entries))), {}, staged)
        else:
            staged = self._apply_runs(scope, state, new, start + first, staged)
        self._hold(state, staged)
        state.sync = max(state.sync, start + len(entries))
        found = state.pending
        if found and min(found) < state.sync:  # (records of entries held already: none are expected)
            for pos in [pos for pos in found if pos < state.sync]:
                del found[pos]

    def _apply_runs(self, scope: str, state: _Scope, new: np.ndarray, start: int, staged: _Staged | None
                    ) -> _Staged | None:  # fmt: skip
        """``apply``: log entries ``new`` (from position ``start``) of several kinds: the add entries in runs, a run
        ended by each remove entry, the one-edit key entries given to their add entries."""
        ops = new["op"]
        keys: dict[int, list[int]] = {}  # add entry's log position -> its one-edit keys
        keyed = np.flatnonzero(ops == OP_EDIT_KEY)
        for owner, key in zip(new["owner"][keyed].tolist(), new["fp"][keyed].tolist()):
            keys.setdefault(owner, []).append(key)
        adds = (ops == OP_ADD) | (ops == OP_EXACT)
        at = 0
        for stop in [*np.flatnonzero(ops == OP_REMOVE).tolist(), len(new)]:
            staged = self._add_run(scope, state, new[at:stop][adds[at:stop]],
                                   (start + np.flatnonzero(adds[at:stop]) + at).tolist(), keys, staged)  # fmt: skip
            if stop < len(new):
                entry = state.entry_of.pop(int(new["fp"][stop]) >> 32, None)
                if entry is not None:
                    self.rule.remove_canonical(scope, entry)
            at = stop + 1
        return staged

    def _add_run(
        self, scope: str, state: _Scope, run: np.ndarray, positions: list[int], keys: dict[int, list[int]],
        staged: _Staged | None,
    ) -> _Staged | None:
        """``apply``: the add entries ``run`` (at log ``positions``), canonical pages added to the rule in
        log order, with their extras (none: steps 1-4 only), a column at a time.  ``staged``: records just
        read, taken as they are when they are the run's first pages' (the usual reply); what is left of them."""
        if not len(run):
            return staged
        count = len(run)
        if staged is not None and staged[0][:count] == positions:
            columns = staged[1] if len(staged[0]) == count else [column[:count] for column in staged[1]]
            staged = None if len(staged[0]) == count else (staged[0][count:], [c[count:] for c in staged[1]])
        else:
            self._hold(state, staged)
            staged = None
            found = state.pending
            fields = [found.pop(pos, _NO_FIELDS) for pos in positions] if found else [_NO_FIELDS] * count
            columns = [list(column) for column in zip(*fields)]
        alsos, seconds, sentences, packed, hosts, addresses = columns
        exacts: list[bool] = (run["op"] == OP_EXACT).tolist()
        added = self.rule.add_canonical_columns(
            scope, run["fp"].tolist(), exacts, [tuple(keys.get(pos, ())) for pos in positions] if keys else [()] * count,
            alsos, seconds, self._sketches(scope, exacts, sentences, packed), addresses, packed,
        )  # fmt: skip
        assert added[0] == len(self._pos)
        self._hosts += hosts
        self._pos.extend(positions)
        self._seq.extend(run["seq"].tolist())
        state.entry_of.update(zip(positions, added))
        return staged

    def _sketches(self, scope: str, exacts: list[bool], sentences: list[int], packed: list[bytes | None]
                  ) -> list[Sketch | None]:  # fmt: skip
        """The pages' sketches, as far as the rule still takes them (``Clusterer.sketch_room``; past it: ``None``, a
        sketch the rule would not keep)."""
        sketches: list[Sketch | None] = [None] * len(packed)
        room = self.rule.sketch_room(scope)
        if room <= 0 or packed.count(None) == len(packed):
            return sketches
        for at, hashes in enumerate(packed):
            if room <= 0:
                break
            if hashes is not None and not exacts[at]:
                sketches[at] = Sketch(unpack_hashes(hashes), sentences[at])
                room -= 1
        return sketches

    def joined(self, scope: str, pos: int, fingerprint: int) -> None:
        """The script took this worker's step-7 hint: the page of ``fingerprint`` joined the canonical page at
        log position ``pos``; further than k from it, it becomes a row of that page (``Clusterer.add_copy_row``,
        as the in-process rule does).  Only this worker learns it (other workers' mirrors do not: a later copy
        of that page is then found by step 7 itself, or kept: a duplicate kept, never a page dropped)."""
        state = self.scopes.get(scope)
        entry = None if state is None else state.entry_of.get(pos)
        canonical = None if entry is None else self.rule.indexed[entry]
        if entry is not None and canonical is not None and (canonical ^ fingerprint).bit_count() > self.rule.max_distance:
            self.rule.add_copy_row(scope, entry, fingerprint)

    def hint(self, scope: str, record: PageRecord, host: str | None, address: str | None) -> tuple[Hint, str] | None:
        """What the rule matches the page with by steps 5-7 now (``Clusterer.nearest``; ``host`` and ``address``
        as ``Detector`` passes them), as the script's hint, with its ``via``; ``None`` when it matches nothing,
        or by steps 1-4 (the script finds those itself)."""
        return self.hints(scope, [(record, host, address)])[0]

    def hints(
        self, scope: str, pages: list[tuple[PageRecord, str | None, str | None]],
        local: tuple[int, dict[int, bytes]] | None = None,
    ) -> list[tuple[Hint, str] | None]:
        """``hint`` of each page (``Clusterer.nearest_many``: the same answers, the indexes asked once).  With
        ``local``, (the replica's sync, a dict): the replica delegated its index (``Replica.delegate``), and the
        simhash pages' local candidates are put in the dict, by the page's place in ``pages``, from the same
        query of the first-simhash index (``_candidates``)."""
        simhash = [n for n, (record, _, _) in enumerate(pages) if not record.exact]
        fingerprints = [pages[n][0].fingerprint for n in simhash]
        firsts = self.rule.first_matches(scope, fingerprints)
        found = self.rule.nearest_many(scope, [
            (record.fingerprint, record.edit_keys, record.also, record.second, record.sketch, host, address)
            for record, host, address in (pages[n] for n in simhash)
        ], firsts)  # fmt: skip
        if local is not None:
            local[1].update(zip(simhash, self._candidates(fingerprints, firsts, local[0])))
        out: list[tuple[Hint, str] | None] = [None] * len(pages)
        for n, match in zip(simhash, found):
            if match is None:
                continue
            entry, distance, via = match
            if via is None:
                continue
            pos, seq = self._pos[entry], self._seq[entry]
            if via == "containment":
                out[n] = Hint(pos, seq, KIND_CONTAINMENT, 0), via
            else:
                out[n] = Hint(pos, seq, KIND_WITHIN_K, distance), via
        return out

    def _candidates(self, fingerprints: list[int], firsts: list[list[Any]] | None, sync: int) -> list[bytes]:
        """``Replica.candidates`` of each fingerprint, from the first-simhash index's answers ``firsts``: the
        canonical pages of log positions before ``sync`` whose own fingerprint is within k (rows of
        template-free text and step-7 copies left out: the replica holds neither), packed as the replica packs
        them.  The mirror holds the log at least to ``sync`` (it takes the same tails after the replica); what it
        removed since, the script leaves out too (``check.lua``: ``removed``)."""
        if firsts is None:
            return [b""] * len(fingerprints)
        indexed, positions, seqs, pack = self.rule.indexed, self._pos, self._seq, _CANDIDATE.pack
        return [
            b"".join([pack(pos, seqs[m.key], m.distance) for m in found
                      if m.fingerprint == indexed[m.key] and (pos := positions[m.key]) < sync])
            for found in firsts
        ]  # fmt: skip
