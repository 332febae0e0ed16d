"""The Redis worker's replica (compact arrays, bulk load) against a brute-force model of the canonical log."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simhash_scrapy.backends.redis import replica as replica_module
from simhash_scrapy.backends.redis.layout import EDIT_MATCH, ENTRY
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
    """What the log says, kept the plain way (every add entry not removed is live; every query by brute force,
    over the live entries, as ``check.lua`` scans the entries after its caller's sync)."""

    def __init__(self) -> None:
        self.live: dict[int, int] = {}  # add entry position -> fingerprint
        self.seq: dict[int, int] = {}
        self.exact_of: dict[int, int] = {}  # live exact add entry position -> digest
        self.keys_of: dict[int, list[int]] = {}  # live add entry position -> its one-edit keys
        self.entries: list[bytes] = []

    def log(self, entry: bytes, seq: int) -> int:
        self.entries.append(entry)
        self.seq[len(self.entries) - 1] = seq
        return len(self.entries) - 1

    def candidates(self, fp: int, k: int) -> set[tuple[int, int, int]]:
        return {(p, self.seq[p], (f ^ fp).bit_count()) for p, f in self.live.items() if (f ^ fp).bit_count() <= k}

    def exact(self, digest: int) -> int | None:
        """The live entry holding ``digest`` that check.lua picks: the lowest seq (then the first in the log)."""
        return min((p for p, d in self.exact_of.items() if d == digest), key=lambda p: (self.seq[p], p), default=None)

    def owners(self, keys: set[int]) -> list[int]:
        return sorted(p for p, mine in self.keys_of.items() if keys.intersection(mine))


def random_log(rng: random.Random, count: int, model: Model, contested: bool) -> None:
    """About: 60% adds (half near an earlier page, some with one-edit keys), 15% exact, 15% removals.

    ``contested``: a digest or one-edit key may be taken while another live entry holds it (and seqs
    are not in log order: a page that changed keeps its seq), so that holders are removed and others
    take their place; else a digest or key is taken again only once its holder is gone.
    """
    keys = [rng.getrandbits(64) for _ in range(12)]  # few keys: pages share them
    digests = [rng.getrandbits(64) for _ in range(8)]
    seq = 0
    while len(model.entries) < count:
        seq += 1
        page_seq = rng.randint(1, seq) if contested and rng.random() < 0.3 else seq
        r = rng.random()
        if r < 0.15 and (model.live or model.exact_of):
            pos = rng.choice(sorted([*model.live, *model.exact_of]))
            model.log(remove(pos), 0)
            model.live.pop(pos, None)
            model.exact_of.pop(pos, None)
            model.keys_of.pop(pos, None)
        elif r < 0.3:
            held = set(model.exact_of.values())
            digest = rng.choice([d for d in digests if contested or d not in held] or [rng.getrandbits(64)])
            pos = model.log(exact(digest, page_seq), page_seq)
            model.exact_of[pos] = digest
        else:
            near = model.live and rng.random() < 0.5
            fp = flip(rng.choice(list(model.live.values())), rng.randint(0, 6), rng) if near else rng.getrandbits(64)
            pos = model.log(add(fp, page_seq), page_seq)
            model.live[pos] = fp
            held = {k for mine in model.keys_of.values() for k in mine}
            free = [k for k in keys if contested or k not in held]
            mine = rng.sample(free, min(len(free), rng.choice([0, 0, 1, 3])))
            for k in mine:
                model.log(key(k, page_seq, pos), page_seq)
            if mine:
                model.keys_of[pos] = mine


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
        pos = model.exact(digest)
        assert found == (b"" if pos is None else pos.to_bytes(4, "big") + model.seq[pos].to_bytes(4, "big") + b"\0")
    keys = sorted({int.from_bytes(e[1:9], "big") for e in model.entries if e[0] == 4})
    for _ in range(20 if keys else 0):
        some = rng.sample(keys, min(len(keys), rng.randint(1, 3)))
        found = replica.edit_candidates(tuple(some))
        assert found == b"".join(p.to_bytes(4, "big") + model.seq[p].to_bytes(4, "big") + bytes([EDIT_MATCH])
                                 for p in model.owners(set(some)))


@pytest.mark.slow  # a long random log
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), loaded=st.integers(0, 1500), later=st.integers(0, 600), k=st.sampled_from([3, 4]),
       recent=st.sampled_from([16, 1 << 18]), settle=st.booleans(), compiled=st.booleans(), contested=st.booleans())
def test_replica_answers_as_the_log_says(monkeypatch: pytest.MonkeyPatch, seed: int, loaded: int, later: int, k: int,
                                         recent: int, settle: bool, compiled: bool, contested: bool) -> None:
    # A bulk load (reserve, pieces, settle), then the entries that checks bring back a few at a time
    # (the small ``recent`` index, merged into the big one every ``recent`` entries): every answer is
    # the brute-force answer over what the log holds at that point.
    monkeypatch.setattr(replica_module, "RECENT", recent)
    with switched(compiled):
        check_log(seed, loaded, later, k, settle, contested)


def check_log(seed: int, loaded: int, later: int, k: int, settle: bool, contested: bool = False) -> None:
    rng = random.Random(seed)
    model = Model()
    random_log(rng, loaded, model, contested)
    digests = sorted({int.from_bytes(e[1:9], "big") for e in model.entries if e[0] == 3})
    replica = Replica(k)
    replica.reserve(len(model.entries))
    apply_in_pieces(replica, b"".join(model.entries), 0, len(model.entries), rng, 400)
    if settle:  # the backend settles after a load; a replica that was not settled answers all the same
        replica.settle()
    assert_same(replica, model, rng, k, digests)
    random_log(rng, loaded + later, model, contested)
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


@pytest.mark.parametrize("pieces", [[3], [1, 2], [2, 1], [1, 1, 1]])
def test_a_removed_holder_leaves_its_digest_and_key_to_the_other_live_holder(pieces: list[int]) -> None:
    # Y (seq 1) holds digest d and key q; X (seq 2) gets them too; then Y is removed.  The log has X live with
    # d and q, so check.lua (scanning these entries) finds X: the replica must too, however the log is cut.
    d, q = 0xD16E57, 0x0E1D17
    for first in (exact, add):
        entries = [first(d, 1), first(d, 2), remove(0)] if first is exact else [
            add(1, 1), key(q, 1, 0), add(2 << 40, 2), key(q, 2, 2), remove(0)]
        data = b"".join(entries)
        cuts = [0, *[sum(pieces[: i + 1]) for i in range(len(pieces))]]
        cuts[-1] = len(entries)
        replica = Replica(4)
        for start, end in itertools.pairwise(cuts):
            replica.apply(data[start * ENTRY : end * ENTRY], start)
        if first is exact:
            assert replica.candidates(d, True) == (1).to_bytes(4, "big") + (2).to_bytes(4, "big") + b"\0"
        else:
            assert replica.edit_candidates((q,)) == (2).to_bytes(4, "big") + (2).to_bytes(4, "big") + bytes([EDIT_MATCH])
