"""The clustering rule (core.cluster.clustering): identity first, nearest canonical page, exact short pages."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_scrapy.core.cluster.clustering import Clusterer, Outcome
from simhash_scrapy.core.detector import assign_canonicals

K = 4


def flip(fp: int, bits: int, rng: random.Random) -> int:
    for bit in rng.sample(range(64), bits):
        fp ^= 1 << bit
    return fp


def test_a_page_is_never_its_own_near_duplicate() -> None:
    c = Clusterer(K)
    assert c.check("s", "/a", 0xFF00).outcome is Outcome.UNIQUE
    again = c.check("s", "/a", 0xFF00)
    assert again.outcome is Outcome.UNCHANGED and again.canonical is None and again.previous_fingerprint == 0xFF00
    assert c.check("s", "/a", 0xFF01).outcome is Outcome.UNCHANGED  # within k of its last version
    assert len(c) == 1 and c.index_size() == 1  # one entry per identity


def test_changed_unchanged_and_duplicate_are_three_answers() -> None:
    rng = random.Random(1)
    base = rng.getrandbits(64)
    other = rng.getrandbits(64)
    c = Clusterer(K)
    assert c.check("s", "/a", base).outcome is Outcome.UNIQUE
    assert c.check("s", "/b", other).outcome is Outcome.UNIQUE
    dup = c.check("s", "/a?utm=1", flip(base, 2, rng))
    assert dup.outcome is Outcome.NEAR_DUPLICATE and dup.canonical == 0 and dup.distance == 2
    # /b changes completely: CHANGED, still canonical, with its new content indexed
    new_b = rng.getrandbits(64)
    changed = c.check("s", "/b", new_b)
    assert changed.outcome is Outcome.CHANGED and changed.previous_fingerprint == other
    assert c.check("s", "/c", flip(new_b, 1, rng)).canonical == 1
    assert c.check("s", "/d", other).outcome is Outcome.UNIQUE  # the old content is gone from the index
    # /b changes into a copy of /a: a near-duplicate of another page, its own entry unindexed
    moved = c.check("s", "/b", flip(base, 1, rng))
    assert moved.outcome is Outcome.NEAR_DUPLICATE and moved.canonical == 0 and moved.previous_fingerprint == new_b
    # an unchanged near-duplicate keeps its role
    again = c.check("s", "/a?utm=1", c.fingerprint[2])
    assert again.outcome is Outcome.UNCHANGED and again.canonical == 0


def test_exact_pages_match_only_equal_digests() -> None:
    c = Clusterer(K)
    assert c.check("s", "/404/1", 12345, exact=True).outcome is Outcome.UNIQUE
    hit = c.check("s", "/404/2", 12345, exact=True)
    assert hit.outcome is Outcome.NEAR_DUPLICATE and hit.canonical == 0 and hit.distance == 0
    assert c.check("s", "/404/3", 12344, exact=True).outcome is Outcome.UNIQUE  # 1 bit away: another text
    assert c.check("s", "/long", 12345).outcome is Outcome.UNIQUE  # a simhash never meets an exact digest
    assert c.check("other", "/404/4", 12345, exact=True).outcome is Outcome.UNIQUE  # scopes never meet


def reference(pages: list[tuple[str, int, bool]], k: int) -> list[tuple[str, int | None]]:
    """The rule written the slow, obvious way (brute force over canonical pages)."""
    entries: dict[str, dict] = {}
    order: list[str] = []
    out = []
    for identity, fp, exact in pages:
        e = entries.get(identity)

        def nearest() -> tuple[int, int] | None:
            best = None
            for pos, name in enumerate(order):
                other = entries[name]
                if name == identity or other["indexed"] is None or other["exact"] != exact:  # noqa: B023 - called in this iteration
                    continue
                d = 0 if exact and other["indexed"] == fp else (64 if exact else bin(other["indexed"] ^ fp).count("1"))  # noqa: B023
                if d <= (0 if exact else k) and (best is None or d < best[1]):  # noqa: B023
                    best = (pos, d)
            return best

        if e is not None:
            moved = 64 if e["exact"] != exact else (0 if exact and e["fp"] == fp else (64 if exact else bin(e["fp"] ^ fp).count("1")))
            e["fp"] = fp
            if moved <= k:
                out.append(("unchanged", e["canonical"]))
                continue
            e["indexed"], e["exact"] = None, exact
            found = nearest()
            if found:
                e["canonical"] = found[0]
                out.append(("near_duplicate", found[0]))
            else:
                e["canonical"], e["indexed"] = None, fp
                out.append(("changed", None))
            continue
        found = nearest()
        entries[identity] = {"fp": fp, "exact": exact, "canonical": found[0] if found else None,
                             "indexed": None if found else fp}  # fmt: skip
        order.append(identity)
        out.append(("near_duplicate", found[0]) if found else ("unique", None))
    return out


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 6), st.integers(5, 60))
def test_the_rule_matches_a_brute_force_reference(seed: int, k: int, count: int) -> None:
    rng = random.Random(seed)
    bases = [rng.getrandbits(64) for _ in range(4)]
    pages = []
    for _ in range(count):
        exact = rng.random() < 0.2
        fp = rng.choice([1, 2, 3]) if exact else flip(rng.choice(bases), rng.randint(0, k + 3), rng)
        pages.append((f"/p{rng.randint(0, count // 2)}", fp, exact))
    c = Clusterer(k, None if k < 5 else k + 1)
    got = []
    for identity, fp, exact in pages:
        d = c.check("s", identity, fp, exact)
        got.append((d.outcome.value, d.canonical))
    assert got == reference(pages, k)


def test_assign_canonicals_is_the_same_rule_in_batch() -> None:
    rng = random.Random(7)
    base = rng.getrandbits(64)
    fps = [base, flip(base, 2, rng), rng.getrandbits(64), flip(base, 6, rng), base]
    canonical, distance = assign_canonicals(fps, None, K)
    assert canonical.tolist() == [-1, 0, -1, -1, 0]
    assert distance.tolist()[1] == 2 and distance.tolist()[4] == 0


def _restored(source: Clusterer, bulk: bool) -> Clusterer:
    """A rule restored from ``source``'s entries: entry by entry (``restore_many``) or from arrays."""
    import numpy as np

    from simhash_scrapy.core.cluster.clustering import identity_hash
    from simhash_scrapy.core.index.keytable import unpack_keys

    n = len(source)
    keys = sorted(source._identities.items(), key=lambda item: item[1])
    scopes, identities = [s for (s, _), _ in keys], [i for (_, i), _ in keys]
    restored = Clusterer(source.max_distance, source.blocks)
    if not bulk:
        restored.restore_many(scopes, identities, source.fingerprint, source.exact, source.canonical, source.distance,
                              source.indexed, [unpack_keys(k) for k in source.indexed_keys], source.digest)  # fmt: skip
        restored.restore_indexes()
        return restored
    is_indexed = np.array([fp is not None for fp in source.indexed])
    restored.restore_arrays(
        scopes, identities, np.array(source.fingerprint, dtype=np.uint64), np.array(source.exact, dtype=bool),
        np.array(source.canonical, dtype=np.int64), np.array(source.distance, dtype=np.int64), is_indexed,
        np.array([fp or 0 for fp in source.indexed], dtype=np.uint64), list(source.indexed_keys), list(source.digest),
        np.fromiter((identity_hash(s, i) for s, i in zip(scopes, identities)), dtype=np.uint64, count=n),
    )  # fmt: skip
    return restored


def test_restoring_from_arrays_decides_as_restoring_entry_by_entry() -> None:
    """``restore_arrays`` (a store's columns, identities found through their hashes) gives the same entries,
    indexes and decisions as ``restore_many``: re-checks of restored pages, exact pages, one-edit keys, scopes."""
    rng = random.Random(5)
    first = Clusterer(3, 4)
    fps: list[int] = []
    for i in range(400):
        scope = rng.choice(["a", "b", "ü"])
        fp = flip(rng.choice(fps), rng.randint(0, 5), rng) if fps and rng.random() < 0.5 else rng.getrandbits(64)
        fps.append(fp)
        exact = rng.random() < 0.1
        keys = tuple(rng.getrandbits(64) for _ in range(3)) if not exact and rng.random() < 0.2 else ()
        first.check(scope, f"id{i % 350}", fp, exact, index=rng.random() > 0.05, edit_keys=keys,
                    digest=rng.choice([None, rng.getrandbits(64)]))  # fmt: skip
    one, bulk = _restored(first, False), _restored(first, True)
    assert len(bulk._identities) == 0 and len(bulk._restored_hashes) == len(first)  # no dict of a million keys
    assert [one.entry_of(s, i) for (s, i) in first._identities] == [bulk.entry_of(s, i) for (s, i) in first._identities]
    assert bulk.entry_of("a", "never seen") is None and bulk.entry_of("b", "id1") == one.entry_of("b", "id1")
    for name in ("fingerprint", "exact", "canonical", "distance", "indexed", "indexed_keys", "digest"):
        assert getattr(one, name) == getattr(bulk, name), name
    assert one.index_size() == bulk.index_size()
    for i in range(300):  # the next crawl: pages seen before (same identities) and new ones
        scope = rng.choice(["a", "b", "ü"])
        fp = flip(rng.choice(fps), rng.randint(0, 6), rng)
        exact = rng.random() < 0.05
        keys = tuple(rng.getrandbits(64) for _ in range(3)) if not exact and rng.random() < 0.2 else ()
        args = (scope, f"id{rng.randrange(500)}", fp, exact, True, keys, rng.choice([None, 7]))
        assert one.check(*args) == bulk.check(*args), (i, args)
    assert len(one) == len(bulk)


def test_restoring_two_entries_with_one_identity_is_refused() -> None:
    import numpy as np

    from simhash_scrapy.core.cluster.clustering import identity_hash

    rule = Clusterer(3, 4)
    hashes = np.array([identity_hash("s", "x"), identity_hash("s", "y"), identity_hash("s", "x")], dtype=np.uint64)
    with pytest.raises(ValueError, match="same"):
        rule.restore_arrays(["s"] * 3, ["x", "y", "x"], np.arange(3, dtype=np.uint64), np.zeros(3, dtype=bool),
                            np.full(3, -1), np.full(3, -1), np.ones(3, dtype=bool), np.arange(3, dtype=np.uint64),
                            [b""] * 3, [None] * 3, hashes)  # fmt: skip


@pytest.mark.parametrize(("max_pages", "uniform"), [(None, False), (70, False), (None, True)])
def test_add_canonicals_is_add_canonical_page_by_page(max_pages: int | None, uniform: bool) -> None:
    """``Clusterer.add_canonicals`` (a worker's mirror, ``backends.redis.mirror``) leaves the state that
    ``add_canonical`` of each page leaves, and the rule then answers alike (``max_pages``: the scope's
    containment index fills up within a run, and ``sketch_room`` says when; ``uniform``: every page a simhash
    page with a second simhash and no template-free one or keys, the columns taken at once)."""
    import random

    from simhash_scrapy.core.cluster.containment import MAX_PAGES, ContainmentIndex, Sketch
    from simhash_scrapy.core.index.layered import LayeredIndex

    rng = random.Random(4)
    pages = []
    for n in range(300):
        fp = rng.getrandbits(64)
        sketch = Sketch(tuple(sorted(rng.sample(range(2000), 12))), 20) if n % 2 else None
        pages.append((fp, n % 13 == 0 and not uniform, (rng.getrandbits(64),) if n % 5 == 0 and not uniform else (),
                      fp ^ 0xFF00 if n % 3 == 0 and not uniform else None,
                      rng.getrandbits(64) if n % 4 or uniform else None, sketch,
                      f"example.com/a/{n % 40}" if sketch is not None else None))  # fmt: skip
    one, many = Clusterer(), Clusterer(index_type=LayeredIndex)
    assert many.sketch_room("s") == MAX_PAGES
    if max_pages is not None:
        one._contained["s"], many._contained["s"] = ContainmentIndex(max_pages), ContainmentIndex(max_pages)
    entries = [one.add_canonical("s", *page) for page in pages]
    assert many.add_canonicals("s", pages[:100]) + many.add_canonicals("s", pages[100:]) == entries
    assert many.sketch_room("s") == one.sketch_room("s") == (0 if max_pages else MAX_PAGES - len(one._contained["s"]))
    for name in ("fingerprint", "exact", "canonical", "distance", "indexed", "indexed_keys", "also", "second"):
        assert getattr(many, name) == getattr(one, name), name
    assert many._exact == one._exact and many._also_rows == one._also_rows
    assert sorted(many._indexes["s"]) == sorted(one._indexes["s"])
    assert sorted(many._seconds["s"]) == sorted(one._seconds["s"])
    assert many._contained["s"]._sketches == one._contained["s"]._sketches
    assert many._views._entries == one._views._entries
    for fp, _, keys, also, second, sketch, address in pages:
        for probe in (fp, fp ^ 0b1011, fp ^ 0xFF00FF):
            assert (many.nearest("s", probe, keys, also, second, sketch, "example.com", address)
                    == one.nearest("s", probe, keys, also, second, sketch, "example.com", address))  # fmt: skip
    # ``nearest_many`` (a Redis worker's hints for a script call): each page's ``nearest``, a copy row too
    many.add_copy_row("s", 1, pages[1][0] ^ 0xFFFF_FFFF)
    probes = [(fp ^ flip, keys, also, second, sketch, "example.com", address)
              for fp, _, keys, also, second, sketch, address in pages for flip in (0, 0b1011, 0x3F0, 0xFF00FF, 0xFFFF_FFF0)]
    expected = [many.nearest("s", *probe) for probe in probes]
    assert many.nearest_many("s", probes) == expected
    assert {found[2] for found in expected if found is not None} >= {None, "second", "containment"} | (
        set() if uniform else {"template"})


def _near(rng: random.Random, fp: int, bits: int) -> int:
    for bit in rng.sample(range(64), bits):
        fp ^= 1 << bit
    return fp


def _random_page(rng: random.Random, base: list[int]) -> tuple[Any, ...]:
    """``nearest``'s arguments of a page: (fingerprint, keys, also, second, sketch, host, address)."""
    from simhash_scrapy.core.cluster.containment import Sketch

    fp = _near(rng, rng.choice(base), rng.randint(0, 10)) if rng.random() < 0.6 else rng.getrandbits(64)
    also = _near(rng, fp, rng.randint(3, 12)) if rng.random() < 0.3 else None
    second = _near(rng, rng.choice(base), rng.randint(0, 8)) if rng.random() < 0.6 else None
    keys = (rng.getrandbits(8),) if rng.random() < 0.2 else ()
    hashes = sorted(rng.sample(range(400), rng.randint(3, 24)))
    sketch = Sketch(tuple(hashes), len(hashes) + rng.randint(0, 6)) if rng.random() < 0.8 else None
    host = rng.choice(["a.test", "b.test"])
    return fp, keys, also, second, sketch, host, f"{host}/p/{rng.randint(0, 15)}"


def _probe(rng: random.Random, base: list[int], canonical: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """A random page, or one made from a canonical page for step 5, 6 or 7 (matched, unless that one was removed)."""
    from simhash_scrapy.core.cluster.containment import Sketch

    fp, keys, also, second, sketch, host, address = _random_page(rng, base)
    if rng.random() < 0.5:
        cfp, _, _, csecond, csketch, chost, caddress = rng.choice(canonical)
        step = rng.randrange(3)
        if step == 0:
            also = _near(rng, cfp, rng.randint(0, 3))
        elif step == 1 and csecond is not None:
            fp, second = _near(rng, cfp, rng.randint(5, 8)), _near(rng, csecond, rng.randint(0, 3))
        elif csketch is not None:
            sketch = Sketch(csketch.hashes, csketch.sentences + rng.randint(-1, 2))
            host, address = (chost, caddress) if rng.random() < 0.5 else (host, address)
    return fp, keys, also, second, sketch, host, address


@pytest.mark.parametrize("seed", range(6))
def test_nearest_many_is_nearest_page_by_page_on_random_scopes(seed: int) -> None:
    """``nearest_many``'s shortcuts (a page no index row is near goes straight to step 7; the batch's anchors,
    template-free and second simhashes asked at once) give ``nearest``'s answers, on canonical pages with
    template-free and second simhashes, shared sentences, copy rows and removed entries, on both index types."""
    import numpy

    from simhash_scrapy.core.index.layered import LayeredIndex

    rng = random.Random(seed)
    rule = Clusterer(4, index_type=LayeredIndex) if seed % 2 else Clusterer(4)
    rule.host_of_entry = lambda entry: "a.test" if entry % 3 else "b.test"
    base = [rng.getrandbits(64) for _ in range(12)]
    canonical = [_random_page(rng, base) for _ in range(150)]
    entries = [rule.add_canonical("s", fp, False, keys, also, second, sketch, address)
               for fp, keys, also, second, sketch, _, address in canonical]  # fmt: skip
    for entry in rng.sample(entries, 30):
        rule.remove_canonical("s", entry)
    for entry in rng.sample(entries, 20):
        if rule.indexed[entry] is not None:
            rule.add_copy_row("s", entry, _near(rng, rule.indexed[entry], rng.randint(5, 12)))
    rule.count_sentences(numpy.array(rng.choices(range(400), k=150), dtype=numpy.uint64))
    vias = set()
    for _ in range(40):
        probes = [_probe(rng, base, canonical) for _ in range(rng.randint(1, 20))]
        expected = [rule.nearest("s", *one) for one in probes]
        assert rule.nearest_many("s", probes) == expected
        vias |= {found[2] for found in expected if found is not None}
    assert vias == {None, "template", "second", "containment"}


@pytest.mark.parametrize("seed", range(4))
def test_the_rule_decides_alike_on_every_index_type(seed: int) -> None:
    """A ``Clusterer`` whose canonical pages are in a ``ScanIndex`` (a global Redis batch's rule) or a
    ``LayeredIndex`` (a worker's mirror) gives the default index's decisions, page by page, and ends in the same
    state: new pages near others at every distance, short pages, pages checked again (unchanged, changed past k,
    a canonical page's content moved away), pages not indexed, two scopes; restored entries first."""
    from simhash_scrapy.core.index.layered import LayeredIndex
    from simhash_scrapy.core.index.scan import ScanIndex

    rng = random.Random(seed)
    rules = [Clusterer(K), Clusterer(K, None, LayeredIndex), Clusterer(K, None, ScanIndex)]
    base = [rng.getrandbits(64) for _ in range(8)]
    restored = [flip(rng.choice(base), rng.randint(0, K + 2), rng) for _ in range(20)]
    for rule in rules:
        rule.restore_many(["s"] * 20, [f"/r{n}" for n in range(20)], list(restored), [False] * 20, [-1] * 20,
                          [-1] * 20, [fp if n % 3 else None for n, fp in enumerate(restored)])
        rule.restore_indexes()
    seen: list[tuple[str, str, int]] = []
    outcomes = set()
    for n in range(400):
        if seen and rng.random() < 0.25:  # a page checked again: the same, a little or a lot changed
            scope, identity, fp = rng.choice(seen)
            fp = flip(fp, rng.choice([0, 1, K + 3, 20]), rng)
        else:
            scope, identity = rng.choice(["s", "s", "t"]), f"/p{n}"
            fp = flip(rng.choice(base), rng.randint(0, 12), rng) if rng.random() < 0.8 else rng.getrandbits(64)
        exact = rng.random() < 0.1
        index = rng.random() < 0.9
        seen.append((scope, identity, fp))
        decisions = [rule.check(scope, identity, fp, exact, index, digest=fp) for rule in rules]
        assert decisions[1] == decisions[0] and decisions[2] == decisions[0], (n, decisions)
        outcomes.add(decisions[0].outcome)
    assert outcomes >= {Outcome.UNIQUE, Outcome.NEAR_DUPLICATE, Outcome.UNCHANGED, Outcome.CHANGED}
    for name in ("fingerprint", "exact", "canonical", "distance", "indexed", "digest"):
        assert getattr(rules[2], name) == getattr(rules[1], name) == getattr(rules[0], name), name
    assert rules[2].index_size() == rules[1].index_size() == rules[0].index_size()


def _state(c: Clusterer) -> tuple[Any, ...]:
    """Everything ``check`` and ``check_many`` change: the columns, the identities, the indexes' rows."""
    indexes = {scope: sorted(index) for scope, index in c._indexes.items() if len(index)}
    return (c.fingerprint, c.exact, c.canonical, c.distance, c.indexed, c.indexed_keys, c.digest, c.also, c.second,
            c._identities, {scope: t for scope, t in c._exact.items() if t}, indexes, c.index_size())


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["scan", "tables"]), st.booleans())
def test_check_many_is_check_page_by_page(seed: int, kind: str, copy_row: bool) -> None:
    """The batch rule's quick path (``check_many``) against ``check`` in turn: restored entries (canonical pages,
    members, exact short pages), then pages near them or not, seen before or in the same batch, exact or not,
    not to be indexed, with or without a digest; the same decisions, snapshots and state.  A copy row (step 7)
    sends every page through ``check`` itself."""
    from simhash_scrapy.core.index.index import BlockPermutedIndex
    from simhash_scrapy.core.index.scan import ScanIndex

    rng = random.Random(seed)
    index_type = ScanIndex if kind == "scan" else BlockPermutedIndex
    rules = [Clusterer(K, 5, index_type), Clusterer(K, 5, index_type)]
    base: list[int] = []
    for _ in range(rng.randint(0, 12)):  # some near one another: a page may be as near to two (ties)
        base.append(flip(rng.choice(base), rng.randint(1, 3), rng) if base and rng.random() < 0.5 else rng.getrandbits(64))
    restored = len(base)
    canonical = [-1 if i == 0 or rng.random() < 0.6 else rng.randrange(i) for i in range(restored)]
    exact = [rng.random() < 0.15 for _ in range(restored)]
    for i in range(restored):  # a member's canonical is a canonical page, of its own kind
        if canonical[i] >= 0 and (canonical[canonical[i]] >= 0 or exact[canonical[i]] != exact[i]):
            canonical[i] = -1
    indexed = [fp if canonical[i] < 0 and rng.random() < 0.9 else None for i, fp in enumerate(base)]
    distance = [rng.randint(0, K) if c >= 0 else -1 for c in canonical]
    digests = [rng.choice([None, rng.getrandbits(64)]) for _ in range(restored)]
    copy = rng.getrandbits(64)
    for rule in rules:
        rule.restore_many(["s"] * restored, [f"/r{i}" for i in range(restored)], list(base), list(exact),
                          list(canonical), list(distance), list(indexed), None, list(digests))
        rule.restore_indexes()
        if copy_row and restored:
            rule.add_copy_row("s", 0, copy)
    pages = []
    for n in range(rng.randint(1, 30)):
        near = (base or [rng.getrandbits(64)])[rng.randrange(max(1, len(base)))]
        fp = rng.choice([rng.getrandbits(64), flip(near, rng.randint(0, K + 2), rng), near])
        identity = rng.choice([f"/p{n}", f"/p{rng.randrange(n + 1)}", f"/r{rng.randrange(max(1, restored))}"])
        pages.append((identity, fp, rng.random() < 0.15, rng.random() < 0.9, rng.choice([None, rng.getrandbits(8)])))
    one, many = rules
    snapshots_one = []
    decisions_one = []
    for identity, fp, is_exact, index, digest in pages:
        decision = one.check("s", identity, fp, is_exact, index, (), digest)
        decisions_one.append(decision)
        c = decision.canonical
        snapshots_one.append(None if c is None else (one.indexed[c], one.fingerprint[c]))
    snapshots_many: list[Any] = []
    decisions_many = many.check_many("s", *map(list, zip(*pages)), snapshots_many)  # type: ignore[arg-type]
    assert decisions_many == decisions_one
    assert snapshots_many == snapshots_one
    assert _state(many) == _state(one)
