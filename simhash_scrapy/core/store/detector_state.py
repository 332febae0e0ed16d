"""What clustering steps 5-7 learned, saved with the store and restored from it (store format 6).

A ``core.detector.Detector`` learns, page after page, what steps 5-7 match
by: the text lines each host repeats across articles (``HostTemplates``),
the canonical pages' template-free and second simhashes and sentence
sketches (in ``Clusterer``), and how many pages had each sentence
(``SentenceCounts``).  The persistent backend keeps them in the store's
``extra`` table (each blob with its checksum, committed in the same
transaction as the page records, so a ``kill -9`` loses at most one flush
interval of both):

* ``detector/journal/<n>`` (one a flush): what changed since the previous
  one: the learner's input of each page checked (host, fingerprint, the
  digests of its lines: replaying them rebuilds the learner exactly), the
  sentence hashes counted, and for each page recorded its current
  template-free simhash, second simhash and sketch (set when it is
  canonical);
* ``detector/snapshot``: the whole state at once, with the number of the
  first journal not in it (written when the crawl closes, if a journal was
  written since the last one, and when the journals since the last one pass
  ``COMPACT_BYTES``, those a crash left included; the journals it holds are
  dropped in the same commit).

Restoring (``restore``) applies the snapshot, then the journals in order,
then indexes the canonical entries' rows: the same state, and so the same
decisions, as the crawl that wrote them had (a canonical page's sketch goes
back in entry order, which only matters for an anchor shared by more than
``containment.MAX_OWNERS`` pages).  Every blob is one zlib stream of plain
arrays (a JSON list of names, dtypes and shapes, then their bytes; never
pickles); a blob that cannot be read is named in a
``StoreError`` ("corrupt extra record 'detector/journal/3' (...)"), never
skipped.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cluster.clustering import Clusterer
from ..cluster.containment import ContainmentIndex, SentenceCounts, Sketch
from ..detector import Detector
from ..index.index import BlockPermutedIndex
from ..cluster.sitetemplate import HostTemplates, _Host, line_hashes_many

__all__ = ["Recorder", "restore", "restore_copy_rows", "contained_entries", "JOURNAL", "SNAPSHOT", "COMPACT_BYTES", "is_detector_blob"]

#: Names of the blobs in the store's ``extra`` table.
JOURNAL = "detector/journal/"
SNAPSHOT = "detector/snapshot"
#: Journals written since the last snapshot past this many bytes: the next flush writes a snapshot.
COMPACT_BYTES = 32 << 20

#: Per entry: (template-free simhash, second simhash, sketch), each ``None`` when it has none.
Extras = tuple[int | None, int | None, Sketch | None]


def is_detector_blob(name: str) -> bool:
    return name == SNAPSHOT or name.startswith(JOURNAL)


# ------------------------------------------------------------------ encoding
def _pack(arrays: Mapping[str, np.ndarray]) -> bytes:
    """Named arrays as one zlib stream: a JSON list of (name, dtype, shape), a NUL, the arrays' bytes."""
    meta = [(name, a.dtype.str, list(a.shape)) for name, a in arrays.items()]
    body = b"".join(np.ascontiguousarray(a).tobytes() for a in arrays.values())
    return zlib.compress(json.dumps(meta).encode() + b"\0" + body, 1)


def _unpack(data: bytes) -> dict[str, np.ndarray]:
    raw = zlib.decompress(data)
    head, _, body = raw.partition(b"\0")
    out, at = {}, 0
    for name, kind, shape in json.loads(head):
        dtype = np.dtype(kind)
        if dtype.hasobject or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise ValueError(f"array {name!r}: not plain values")
        size = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        if at + size > len(body):
            raise ValueError(f"array {name!r} runs past the end")
        out[name] = np.frombuffer(body, dtype=dtype, count=size // dtype.itemsize if dtype.itemsize else 0,
                                  offset=at).reshape(shape)  # fmt: skip
        at += size
    if at != len(body):
        raise ValueError("bytes left after the arrays")
    return out


def _strings(values: Sequence[str]) -> dict[str, np.ndarray]:
    encoded = [v.encode("utf-8", "surrogatepass") for v in values]
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    return {"text": np.frombuffer(b"".join(encoded), dtype=np.uint8), "lengths": lengths}


def _read_strings(text: np.ndarray, lengths: np.ndarray) -> list[str]:
    data = text.tobytes()
    ends = np.cumsum(lengths).tolist()
    starts = [0, *ends[:-1]]
    return [data[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts, ends)]


def _ragged(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.array([len(x) for x in lists], dtype=np.int64)
    flat = np.array([h for x in lists for h in x], dtype=np.uint64)
    return flat, lengths


def _split(flat: np.ndarray, lengths: np.ndarray) -> list[list[int]]:
    values: list[int] = flat.tolist()
    out, at = [], 0
    for n in lengths.tolist():
        if n < 0 or at + n > len(values):
            raise ValueError("lengths do not match the values")
        out.append(values[at : at + n])
        at += n
    if at != len(values):
        raise ValueError("lengths do not match the values")
    return out


def _extras_arrays(entries: Sequence[int], extras: Sequence[Extras]) -> dict[str, np.ndarray]:
    also = [e[0] for e in extras]
    second = [e[1] for e in extras]
    sketches = [e[2] for e in extras]
    hashes, _ = _ragged([s.hashes if s is not None else () for s in sketches])
    return {
        "entries": np.array(entries, dtype=np.int64),
        "also": np.array([0 if a is None else a for a in also], dtype=np.uint64),
        "has_also": np.array([a is not None for a in also], dtype=bool),
        "second": np.array([0 if s is None else s for s in second], dtype=np.uint64),
        "has_second": np.array([s is not None for s in second], dtype=bool),
        "sketch_hashes": hashes,
        "sketch_lengths": np.array([-1 if s is None else len(s.hashes) for s in sketches], dtype=np.int64),
        "sketch_sentences": np.array([0 if s is None else s.sentences for s in sketches], dtype=np.int64),
    }


def _read_extras(a: Mapping[str, np.ndarray]) -> dict[int, Extras]:
    lengths = a["sketch_lengths"]
    hashes = _split(a["sketch_hashes"], np.maximum(lengths, 0))
    out: dict[int, Extras] = {}
    rows = zip(a["entries"].tolist(), a["also"].tolist(), a["has_also"].tolist(), a["second"].tolist(),
               a["has_second"].tolist(), hashes, lengths.tolist(), a["sketch_sentences"].tolist())  # fmt: skip
    for entry, also, has_also, second, has_second, sketch, length, sentences in rows:
        out[entry] = (
            also if has_also else None, second if has_second else None,
            Sketch(tuple(sketch), sentences) if length >= 0 else None,
        )  # fmt: skip
    return out


def extras_of(rule: Clusterer, entry: int) -> Extras:
    """An entry's template-free simhash, second simhash and sketch as the rule holds them now."""
    sketch = None
    for contained in rule._contained.values():
        sketch = contained.sketch(entry)
        if sketch is not None:
            break
    return rule.also[entry], rule.second[entry], sketch


# ------------------------------------------------------------------ recording
@dataclass
class Recorder:
    """Collects what a detector learns between two flushes (it turns the detector's logs on)."""

    detector: Detector
    #: Entries recorded since the last journal (their extras are read when it is written).
    entries: set[int] = field(default_factory=set)
    #: Bytes of journals written since the last snapshot.
    journal_bytes: int = 0
    #: Entries whose latest check step 7 matched (or kept in its cluster): the report names their rule.
    contained: set[int] = field(default_factory=set)

    def recorded(self, entry: int, via: str | None) -> None:
        """An entry was checked (``via``: its record's, ``"containment"`` when step 7 matched it)."""
        self.entries.add(entry)
        if via == "containment":
            self.contained.add(entry)
        else:
            self.contained.discard(entry)

    def __post_init__(self) -> None:
        rule = self.detector.rule
        if rule._sentences is None:
            rule._sentences = SentenceCounts()
        rule._sentences.log = []
        if self.detector.templates is not None:
            self.detector.templates.log = []

    def journal(self) -> bytes | None:
        """What changed since the last call, as one journal blob (``None``: nothing)."""
        rule = self.detector.rule
        counts = rule._sentences
        assert counts is not None and counts.log is not None
        templates = self.detector.templates
        learned = templates.log if templates is not None and templates.log is not None else []
        if not self.entries and not counts.log and not learned:
            return None
        entries = sorted(self.entries)
        arrays = _extras_arrays(entries, [extras_of(rule, e) for e in entries])
        arrays["contained"] = np.array([e in self.contained for e in entries], dtype=bool)
        arrays["counted"] = np.array(counts.log, dtype=np.uint64)
        hosts = _strings([host for host, _, _ in learned])
        digests, lengths = _ragged(line_hashes_many([text for _, _, text in learned]))
        arrays.update(
            hosts=hosts["text"], host_lengths=hosts["lengths"], digests=digests, digest_lengths=lengths,
            fingerprints=np.array([fp for _, fp, _ in learned], dtype=np.uint64),
        )  # fmt: skip
        self.entries.clear()
        counts.log.clear()
        learned.clear()
        data = _pack(arrays)
        self.journal_bytes += len(data)
        return data

    def snapshot(self, through: int) -> bytes:
        """The whole state (journals numbered below ``through`` included)."""
        self.journal_bytes = 0
        rule = self.detector.rule
        entries = sorted(
            {e for e, a in enumerate(rule.also) if a is not None}
            | {e for e, s in enumerate(rule.second) if s is not None}
            | {e for contained in rule._contained.values() for e in contained._sketches}
        )
        arrays = _extras_arrays(entries, [extras_of(rule, e) for e in entries])
        arrays["contained_entries"] = np.array(sorted(self.contained), dtype=np.int64)
        counts = rule._sentences
        assert counts is not None
        arrays["through"] = np.array([through], dtype=np.int64)
        tables = np.frombuffer(bytes(counts._low) + bytes(counts._high), dtype=np.uint8)
        used = np.flatnonzero(tables)
        if 5 * len(used) < len(tables):  # few counted sentences: the counters in use, not 4 MB of mostly zeros
            arrays["counts_at"], arrays["counts_used"] = used.astype(np.uint32), tables[used]
        else:
            arrays["counts"] = tables
        arrays["count_bits"] = np.array([counts._bits], dtype=np.int64)
        arrays.update(_templates_arrays(self.detector.templates))
        return _pack(arrays)


def _templates_arrays(templates: HostTemplates | None) -> dict[str, np.ndarray]:
    hosts = list(templates._hosts.items()) if templates is not None else []
    names = _strings([name for name, _ in hosts])
    articles, article_lengths = _ragged([h.articles for _, h in hosts])
    lines, line_lengths = _ragged([list(h.lines) for _, h in hosts])
    values = np.array([v for _, h in hosts for v in h.lines.values()], dtype=np.uint64)
    return {
        "hosts": names["text"], "host_lengths": names["lengths"], "articles": articles,
        "article_lengths": article_lengths, "lines": lines, "line_lengths": line_lengths, "line_values": values,
    }  # fmt: skip


# ------------------------------------------------------------------ restoring
def restore(detector: Detector, blobs: Mapping[str, bytes], scopes: Sequence[str], path: object) -> int:
    """Put back what steps 5-7 learned from the store's detector blobs; returns the next journal number.

    ``scopes``: each restored entry's scope.  Raises ``StoreError`` naming a blob that cannot be read.
    """
    from .store_rows import fail

    extras: dict[int, Extras] = {}
    through = 0
    name = SNAPSHOT
    try:
        if SNAPSHOT in blobs:
            through = _apply_snapshot(detector, _unpack(blobs[SNAPSHOT]), extras)
        journals = sorted(int(n[len(JOURNAL) :]) for n in blobs if n.startswith(JOURNAL))
        counted: list[np.ndarray] = []  # the sentence hashes the journals counted: added at once
        for number in journals:
            name = f"{JOURNAL}{number}"
            if number >= through:
                _apply_journal(detector, _unpack(blobs[name]), extras, counted)
        name = "detector extras"
        if counted:
            if detector.rule._sentences is None:
                detector.rule._sentences = SentenceCounts()
            detector.rule._sentences.add_many(np.concatenate(counted))
        _index(detector.rule, extras, scopes)
    except (ValueError, KeyError, IndexError, TypeError, zlib.error) as exc:
        raise fail(path, f"corrupt extra record {name!r} ({type(exc).__name__}: {exc})") from None
    return max(through, journals[-1] + 1 if journals else 0)


def restore_copy_rows(rule: Clusterer, contained: set[int], scopes: Sequence[str]) -> None:
    """The rows of the pages step 7 joined to a canonical page further than k (``Clusterer.add_copy_row``),
    back in the index from the restored entries, in entry order (``contained``: ``contained_entries``)."""
    for entry in sorted(contained):
        canonical = rule.canonical[entry] if entry < len(rule) else -1
        if canonical >= 0 and not rule.exact[entry] and rule.distance[entry] > rule.max_distance:
            rule.add_copy_row(scopes[entry], canonical, rule.fingerprint[entry])


def contained_entries(blobs: Mapping[str, bytes], path: object) -> set[int]:
    """The entries whose latest check step 7 matched, from the store's detector blobs (a report names their
    rule ``containment``); ``StoreError`` naming a blob that cannot be read."""
    from .store_rows import fail

    contained: set[int] = set()
    through, name = 0, SNAPSHOT
    try:
        if SNAPSHOT in blobs:
            snapshot = _unpack(blobs[SNAPSHOT])
            through = int(snapshot["through"][0])
            contained.update(snapshot["contained_entries"].tolist())
        for number in sorted(int(n[len(JOURNAL) :]) for n in blobs if n.startswith(JOURNAL)):
            name = f"{JOURNAL}{number}"
            if number >= through:
                journal = _unpack(blobs[name])
                for entry, flag in zip(journal["entries"].tolist(), journal["contained"].tolist()):
                    (contained.add if flag else contained.discard)(entry)
    except (ValueError, KeyError, IndexError, TypeError, zlib.error) as exc:
        raise fail(path, f"corrupt extra record {name!r} ({type(exc).__name__}: {exc})") from None
    return contained


def _apply_snapshot(detector: Detector, a: Mapping[str, np.ndarray], extras: dict[int, Extras]) -> int:
    extras.update(_read_extras(a))
    bits = int(a["count_bits"][0])
    counts = SentenceCounts(bits)
    if "counts" in a:
        tables = a["counts"].tobytes()
    else:
        dense = np.zeros(2 << bits, dtype=np.uint8)
        dense[a["counts_at"]] = a["counts_used"]  # (an index past the end raises IndexError: named as damage)
        tables = dense.tobytes()
    if len(tables) != 2 << bits:
        raise ValueError("the sentence counts have the wrong size")
    counts._low[:] = tables[: 1 << bits]
    counts._high[:] = tables[1 << bits :]
    log = detector.rule._sentences.log if detector.rule._sentences is not None else None
    counts.log = log
    detector.rule._sentences = counts
    templates = detector.templates
    names = _read_strings(a["hosts"], a["host_lengths"])
    articles = _split(a["articles"], a["article_lengths"])
    lines = _split(a["lines"], a["line_lengths"])
    values: list[int] = a["line_values"].tolist()
    if len(values) != sum(map(len, lines)) or not len(names) == len(articles) == len(lines):
        raise ValueError("the host templates do not add up")
    if templates is not None:
        at = 0
        for host_name, host_articles, host_lines in zip(names, articles, lines):
            host = templates._hosts[host_name] = _Host()
            host.articles = host_articles
            host.lines = dict(zip(host_lines, values[at : at + len(host_lines)]))
            at += len(host_lines)
            templates._lines += len(host_lines)
    return int(a["through"][0])


def _apply_journal(
    detector: Detector, a: Mapping[str, np.ndarray], extras: dict[int, Extras], counted: list[np.ndarray]
) -> None:
    extras.update(_read_extras(a))
    counted.append(a["counted"])
    templates = detector.templates
    hosts = _read_strings(a["hosts"], a["host_lengths"])
    digests = _split(a["digests"], a["digest_lengths"])
    fingerprints: list[int] = a["fingerprints"].tolist()
    if not len(hosts) == len(digests) == len(fingerprints):
        raise ValueError("the learned pages do not add up")
    if templates is not None:
        for host, fingerprint, lines in zip(hosts, fingerprints, digests):
            templates.learn(host, fingerprint, lines)


def _index(rule: Clusterer, extras: Mapping[int, Extras], scopes: Sequence[str]) -> None:
    """The canonical entries' template-free rows, second simhashes and sketches, back in their indexes (the
    rows in bulk, per scope; sketches in entry order)."""
    rows: dict[str, tuple[list[int], list[int]]] = {}
    seconds: dict[str, tuple[list[int], list[int]]] = {}
    for entry in sorted(extras):
        also, second, sketch = extras[entry]
        if entry >= len(rule) or rule.indexed[entry] is None or rule.exact[entry]:
            continue  # not canonical (any more), or a record a crash lost
        scope = scopes[entry]
        if also is not None and also != rule.indexed[entry]:
            keys, fps = rows.setdefault(scope, ([], []))
            keys.append(entry)
            fps.append(also)
            rule.also[entry] = also
        if second is not None:
            keys, fps = seconds.setdefault(scope, ([], []))
            keys.append(entry)
            fps.append(second)
            rule.second[entry] = second
        if sketch is not None:
            contained = rule._contained.get(scope)
            if contained is None:
                contained = rule._contained[scope] = ContainmentIndex()
            if contained.add(entry, sketch):
                rule.list_view(scope, entry)  # (step 7's other views: core.cluster.views)
    for scope, (keys, fps) in rows.items():
        rule._index(scope).add_many(keys, fps)
        rule._also_rows += len(keys)
    for scope, (keys, fps) in seconds.items():
        table = rule._seconds.get(scope)
        if table is None:
            table = rule._seconds[scope] = BlockPermutedIndex(rule.max_distance, rule.blocks)
        table.add_many(keys, fps)


def state_of(detector: Detector) -> dict[str, Any]:
    """The detector's steps 5-7 state as plain values (tests compare a restored detector with the original)."""
    rule = detector.rule
    templates = detector.templates
    counts = rule._sentences
    return {
        "also": list(rule.also), "second": list(rule.second), "also_rows": rule._also_rows,
        "sketches": {s: dict(c._sketches) for s, c in rule._contained.items()},
        "anchors": {s: {h: sorted(o) if isinstance(o, list) else o for h, o in c._anchors.items()}
                    for s, c in rule._contained.items()},
        "seconds": {s: len(t) for s, t in rule._seconds.items()},
        "views": dict(rule._views._where),
        "copy_rows": {e: list(r) for e, r in rule.copy_rows.items() if r},
        "counts": None if counts is None else (bytes(counts._low), bytes(counts._high)),
        "templates": None if templates is None else {
            h: (list(v.articles), dict(v.lines)) for h, v in templates._hosts.items()
        },
        "template_lines": None if templates is None else len(templates),
    }  # fmt: skip
