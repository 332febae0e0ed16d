"""The Redis worker's replica (compact arrays, bulk load) against a brute-force model of the canonical log."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_scrapy.backends.redis import replica as replica_module
from simhash_scrapy.backends.redis.layout import ENTRY
from simhash_scrapy.backends.redis.replica import Replica
from simhash_scrapy.core._native import switched

pytestmark = pytest.mark.usefixtures("implementation")


def add(fp: int, seq: int) -> bytes:
    return b"\1" + fp.to_bytes(8, "big") + seq.to_bytes(4, "big") + bytes(11)


def exact(digest: int, seq: int) -> bytes:
    return b"\3" + digest.to_bytes(8, "big") + seq.to_bytes(4, "big") + bytes(11)


def key(k: int, seq: int, owner: int) -> bytes:
    return b"\4" + k.to_bytes(8, "big") + seq.to_bytes(4, "big") + owner.to_bytes(4, "big") + bytes(7)


def remove(pos: int) -> bytes:
    return b"\2" + pos.to_bytes(4, "big") + bytes(ENTRY - 5)


def flip(fp: int, bits: int, rng: random.Random) -> int:
    for bit in rng.sample(range(64), bits):
        fp ^= 1 << bit
    return fp


class Model:
    """What the log says, kept the plain way (dicts; every query by brute force)."""

    def __init__(self) -> None:
        self.live: dict[int, int] = {}  # add entry position -> fingerprint
        self.seq: dict[int, int] = {}
        self.exact: dict[int, int] = {}  # digest -> first live position holding it
        self.exact_of: dict[int, int] = {}
        self.edits: dict[int, int] = {}  # one-edit key -> first live owner
        self.entries: list[bytes] = []

    def log(self, entry: bytes, seq: int) -> int:
        self.entries.append(entry)
        self.seq[len(self.entries) - 1] = seq
        return len(self.entries) - 1

    def candidates(self, fp: int, k: int) -> set[tuple[int, int, int]]:
        return {(p, self.seq[p], (f ^ fp).bit_count()) for p, f in self.live.items() if (f ^ fp).bit_count() <= k}


def random_log(rng: random.Random, count: int, model: Model) -> None:
    """About: 60% adds (half near an earlier page, some with one-edit keys), 15% exact, 15% removals."""
    keys = [rng.getrandbits(64) for _ in range(12)]  # few keys: pages share them
    digests = [rng.getrandbits(64) for _ in range(8)]
    seq = 0
    while len(model.entries) < count:
        seq += 1
        r = rng.random()
        if r < 0.15 and (model.live or model.exact_of):
            pos = rng.choice(sorted([*model.live, *model.exact_of]))
            model.log(remove(pos), 0)
            model.live.pop(pos, None)
            digest = model.exact_of.pop(pos, None)
            if digest is not None and model.exact.get(digest) == pos:
                del model.exact[digest]
            for k in [k for k, owner in model.edits.items() if owner == pos]:
                del model.edits[k]
        elif r < 0.3:
            # A digest or key is taken again only once its holder is gone: a page that arrives while another
            # holds it never holds it (the entries of a chunk are applied removals first; see Replica.apply).
            digest = rng.choice([d for d in digests if d not in model.exact] or [rng.getrandbits(64)])
            pos = model.log(exact(digest, seq), seq)
            model.exact_of[pos] = digest
            model.exact[digest] = pos
        else:
            near = model.live and rng.random() < 0.5
            fp = flip(rng.choice(list(model.live.values())), rng.randint(0, 6), rng) if near else rng.getrandbits(64)
            pos = model.log(add(fp, seq), seq)
            model.live[pos] = fp
            free = [k for k in keys if k not in model.edits]
            for k in rng.sample(free, min(len(free), rng.choice([0, 0, 1, 3]))):
                model.log(key(k, seq, pos), seq)
                model.edits[k] = pos


def apply_in_pieces(replica: Replica, data: bytes, first: int, last: int, rng: random.Random, most: int) -> None:
    """Entries [first, last) of ``data`` in pieces of 1..most entries, each overlapping the one before."""
    while replica.sync < last:
        start = max(0, replica.sync - rng.randint(0, 3))
        end = min(last, replica.sync + rng.randint(1, most))
        replica.apply(data[start * ENTRY : end * ENTRY], start)


def assert_same(replica: Replica, model: Model, rng: random.Random, k: int, digests: list[int]) -> None:
    for _ in range(60):
        base = rng.choice(list(model.live.values())) if model.live and rng.random() < 0.8 else rng.getrandbits(64)
        fp = flip(base, rng.randint(0, k + 2), rng)
        found = replica.candidates(fp, False)
        got = [(int.from_bytes(found[i : i + 4], "big"), int.from_bytes(found[i + 4 : i + 8], "big"), found[i + 8])
               for i in range(0, len(found), 9)]
        assert len(got) == len(set(got))
        assert set(got) == model.candidates(fp, k)
    assert [replica.candidates_many([fp])[0] for fp in model.live.values()][:5] == [
        replica.candidates(fp, False) for fp in model.live.values()][:5]
    for digest in digests:
        found = replica.candidates(digest, True)
        pos = model.exact.get(digest)
        assert found == (b"" if pos is None else pos.to_bytes(4, "big") + model.seq[pos].to_bytes(4, "big") + b"\0")
    for k in list(model.edits)[:20]:
        found = replica.edit_candidates((k,))
        assert int.from_bytes(found[:4], "big") == model.edits[k]
        assert int.from_bytes(found[4:8], "big") == model.seq[model.edits[k]]


@pytest.mark.slow  # a long random log
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), loaded=st.integers(0, 1500), later=st.integers(0, 600), k=st.sampled_from([3, 4]),
       recent=st.sampled_from([16, 1 << 18]), settle=st.booleans(), compiled=st.booleans())
def test_replica_answers_as_the_log_says(monkeypatch: pytest.MonkeyPatch, seed: int, loaded: int, later: int, k: int,
                                         recent: int, settle: bool, compiled: bool) -> None:
    # A bulk load (reserve, pieces, settle), then the entries that checks bring back a few at a time
    # (the small ``recent`` index, merged into the big one every ``recent`` entries): every answer is
    # the brute-force answer over what the log holds at that point.
    monkeypatch.setattr(replica_module, "RECENT", recent)
    with switched(compiled):
        check_log(seed, loaded, later, k, settle)


def check_log(seed: int, loaded: int, later: int, k: int, settle: bool) -> None:
    rng = random.Random(seed)
    model = Model()
    random_log(rng, loaded, model)
    digests = sorted({int.from_bytes(e[1:9], "big") for e in model.entries if e[0] == 3})
    replica = Replica(k)
    replica.reserve(len(model.entries))
    apply_in_pieces(replica, b"".join(model.entries), 0, len(model.entries), rng, 400)
    if settle:  # the backend settles after a load; a replica that was not settled answers all the same
        replica.settle()
    assert_same(replica, model, rng, k, digests)
    random_log(rng, loaded + later, model)
    apply_in_pieces(replica, b"".join(model.entries), loaded, len(model.entries), rng, 8)
    assert replica.sync == len(model.entries)
    digests = sorted({int.from_bytes(e[1:9], "big") for e in model.entries if e[0] == 3})
    assert_same(replica, model, rng, k, digests)


def test_a_loaded_replica_is_compact() -> None:
    # The bytes the replica's arrays hold a canonical page (no timing: memory only).
    rng = random.Random(1)
    n = 50_000
    data = b"".join(add(rng.getrandbits(64), i) for i in range(n))
    replica = Replica(4)
    replica.reserve(n)
    for start in range(0, n, replica_module.LOAD_CHUNK):
        replica.apply(data[start * ENTRY : (start + replica_module.LOAD_CHUNK) * ENTRY], start)
    replica.settle()
    assert len(replica.index) == n and replica.index.table_count == 3
    # fingerprint 8, key 4, 3 tables x (row 4 + filter 2), directories, seq 4 (pages of 65,536 entries)
    assert replica.nbytes() / n < 50
