"""The one-edit rule (``core.features.edits``): pages of a few dozen tokens one token apart are near-duplicates.

The real pair is from the wide set's tuning half (``llvm-15-doc``, the AMDGPU operand reference):
two ``vdst`` pages of 31 and 32 tokens that differ in one word ("Operands: v" vs "Operands: v, a").
Their simhashes are 11 bits apart (a word seen once more moves a short page far), so only the
one-edit rule finds them.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import pytest_twisted
from conftest import RecordingSpider, run_crawl, simhash_stats
from crawl_helpers import run  # drives the in-process backends' coroutines
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_scrapy.backends.base import PageRecord
from simhash_scrapy.backends.persistent import PersistentBackend
from simhash_scrapy.config import SimhashConfig
from simhash_scrapy.core import defaults
from simhash_scrapy.core.analysis import AnalysisOptions, analyse_html, analyse_text
from simhash_scrapy.core.cluster.clustering import Clusterer, Outcome
from simhash_scrapy.core.detector import assign_canonicals
from simhash_scrapy.core.features.edits import edit_keys, edit_keys_of_tokens
from simhash_scrapy.core.features.exact import exact_digest
from simhash_scrapy.core.features.features import token_hashes
from simhash_scrapy.core.store.store import StoreError, read_store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "quality"
GFX10 = (FIXTURES / "amdgpu_vdst_gfx10.html").read_bytes()  # "... Operands: v"
GFX940 = (FIXTURES / "amdgpu_vdst_gfx940.html").read_bytes()  # "... Operands: v, a"
# The same page with two words changed: two edits apart, not a one-edit duplicate.
TWO_EDITS = GFX10.replace(b"data read from", b"data written to")


def one_apart_brute_force(a: list[int], b: list[int]) -> bool:
    """The rule by definition: equal after leaving out at most one token of each."""
    drops_a = [a] + [a[:i] + a[i + 1 :] for i in range(len(a))]
    drops_b = [b] + [b[:j] + b[j + 1 :] for j in range(len(b))]
    return any(x == y for x, y in itertools.product(drops_a, drops_b))


def keys_of(tokens: list[int]) -> tuple[int, ...]:
    return edit_keys_of_tokens(np.array(tokens, dtype=np.uint64))


# ------------------------------------------------------------------ the keys
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=9),
    st.lists(st.integers(0, 3), min_size=1, max_size=9),
)
def test_keys_meet_exactly_when_one_token_apart(a: list[int], b: list[int]) -> None:
    # A tiny vocabulary makes near-misses common: every shared key is a real one-token difference.
    assert bool(set(keys_of(a)) & set(keys_of(b))) == one_apart_brute_force(a, b)


def test_substitution_insertion_deletion_share_a_key_and_two_edits_do_not() -> None:
    rng = random.Random(5)
    base = [rng.getrandbits(64) for _ in range(40)]
    keys = set(keys_of(base))
    assert len(keys) == 41  # the sequence and each one-token deletion
    assert keys & set(keys_of(base[:7] + [1] + base[8:]))  # one token substituted
    assert keys & set(keys_of(base[:7] + [1] + base[7:]))  # one token inserted
    assert keys & set(keys_of(base[:7] + base[8:]))  # one token deleted
    assert not keys & set(keys_of(base[:7] + [1] + base[8:30] + [2] + base[31:]))  # two substituted


def test_the_whole_sequence_key_is_the_exact_digest_on_both_paths(implementation: str) -> None:
    text = "Size: 1 dword. Operands: v, a. This is an optional operand."
    keys = edit_keys(text)
    assert keys == tuple(sorted(set(keys)))
    assert exact_digest(text) in keys
    assert keys == keys_of(token_hashes(text).tolist())


def test_analysis_gives_keys_only_between_min_tokens_and_one_edit_below() -> None:
    words = [f"w{i}" for i in range(80)]
    for count, has_keys in ((defaults.MIN_TOKENS - 1, False), (defaults.MIN_TOKENS, True),
                            (defaults.ONE_EDIT_BELOW - 1, True), (defaults.ONE_EDIT_BELOW, False)):  # fmt: skip
        answer = analyse_text(" ".join(words[:count]))
        assert bool(answer.edit_keys) == has_keys, count
        assert answer.exact == (count < defaults.MIN_TOKENS)
    assert not analyse_text(" ".join(words[:40]), AnalysisOptions(one_edit_below=0)).edit_keys
    # Never under 30 tokens, whatever min_tokens: one-word pages would all share the empty sequence's key.
    low = AnalysisOptions(min_tokens=1)
    assert not analyse_text("Sorry", low).edit_keys and not analyse_text(" ".join(words[:29]), low).edit_keys
    assert analyse_text(" ".join(words[:30]), low).edit_keys


# ------------------------------------------------------------ real markup
def test_the_real_pair_is_found_only_by_the_one_edit_rule() -> None:
    a, b, far = (analyse_html(page) for page in (GFX10, GFX940, TWO_EDITS))
    assert not a.exact and not b.exact and not far.exact  # 30+ tokens: simhash pages
    assert (a.fingerprint ^ b.fingerprint).bit_count() > defaults.MAX_DISTANCE
    assert set(a.edit_keys) & set(b.edit_keys)
    assert not set(a.edit_keys) & set(far.edit_keys)
    fps = [a.fingerprint, b.fingerprint, far.fingerprint]
    canonical, distance = assign_canonicals(fps, exact=[False] * 3, edit_keys=[a.edit_keys, b.edit_keys, far.edit_keys])
    assert canonical.tolist() == [-1, 0, -1]
    assert distance[1] == (a.fingerprint ^ b.fingerprint).bit_count()
    # Without the keys (the rule off), the pair is two unique pages.
    canonical, _ = assign_canonicals(fps)
    assert canonical.tolist() == [-1, -1, -1]


@pytest_twisted.ensureDeferred
async def test_a_crawl_drops_the_one_edit_duplicate_and_counts_it(serve: Any) -> None:
    site = serve({"/gfx10": GFX10.decode(), "/gfx940": GFX940.decode(), "/two-edits": TWO_EDITS.decode()})
    crawler = await run_crawl(
        RecordingSpider,
        {"ADDONS": {"simhash_scrapy.Addon": 0}},
        start_urls=[site.url("/gfx10"), site.url("/gfx940"), site.url("/two-edits")],
    )
    spider = crawler.spider
    assert [entry["url"] for entry in spider.seen] == [site.url("/gfx10"), site.url("/two-edits")]
    (failure,) = spider.failures
    assert failure.value.url == site.url("/gfx940") and failure.value.canonical_url == site.url("/gfx10")
    assert failure.value.distance > defaults.MAX_DISTANCE
    stats = simhash_stats(crawler)
    assert stats["simhash/near_duplicates"] == 1 and stats["simhash/one_edit/near_duplicates"] == 1
    assert stats["simhash/unique"] == 2 and stats["simhash/dropped"] == 1


# ------------------------------------------------------------ the rule
def test_simhash_matches_come_first_and_keys_leave_with_their_page() -> None:
    rule = Clusterer(max_distance=4)
    shared = (1, 2, 3)
    assert rule.check("s", "a", 0x0, edit_keys=shared).outcome is Outcome.UNIQUE
    assert rule.check("s", "b", 0xFF00, edit_keys=(9,)).outcome is Outcome.UNIQUE
    # Shares a key with "a" and is within k of "b": the simhash match wins.
    decision = rule.check("s", "c", 0xFF01, edit_keys=(3, 7))
    assert (decision.outcome, decision.canonical, decision.distance) == (Outcome.NEAR_DUPLICATE, 1, 1)
    # Only a key in common: near-duplicate of "a" at the real distance, more than k.
    decision = rule.check("s", "d", 0xFFFF_0000, edit_keys=(2,))
    assert (decision.outcome, decision.canonical, decision.distance) == (Outcome.NEAR_DUPLICATE, 0, 16)
    # Other scopes never match; a page not indexed leaves no keys.
    assert rule.check("t", "d", 0xFFFF_0000, edit_keys=(2,)).outcome is Outcome.UNIQUE
    assert rule.check("s", "e", 0xF0F0_F0F0, edit_keys=(40,), index=False).outcome is Outcome.UNIQUE
    assert rule.check("s", "f", 0x0F0F_0F0F_0000, edit_keys=(40,)).outcome is Outcome.UNIQUE
    # "a" changes: its old keys leave the index with its old fingerprint.
    assert rule.check("s", "a", 0x1234_5678_9ABC, edit_keys=(50,)).outcome is Outcome.CHANGED
    assert rule.check("s", "g", 0xAAAA_AAAA_0000, edit_keys=(1,)).outcome is Outcome.UNIQUE
    assert rule.check("s", "h", 0x5555_0000_0000, edit_keys=(50,)).canonical == 0


def test_keys_are_kept_in_the_store_and_damage_to_them_is_detected(tmp_path: Path) -> None:
    config = SimhashConfig(store_dir=str(tmp_path))
    a, b = analyse_html(GFX10), analyse_html(GFX940)

    def record(url: str, answer: Any) -> PageRecord:
        return PageRecord(url, answer.fingerprint, "spider", edit_keys=answer.edit_keys)

    first = PersistentBackend(config)
    run(first.open("spider"))
    assert first.check_now(record("https://x/gfx10", a)).outcome is Outcome.UNIQUE
    run(first.close())
    contents = read_store(tmp_path / "spider.store")
    assert contents.edit_keys[0] == a.edit_keys
    # Next crawl: the stored keys find the one-edit duplicate of last crawl's page.
    second = PersistentBackend(config)
    run(second.open("spider"))
    verdict = second.check_now(record("https://x/gfx940", b))
    assert verdict.is_duplicate and verdict.one_edit and verdict.canonical_url == "https://x/gfx10"
    run(second.close())
    # One flipped bit in a stored key: the store is refused, naming the file and the record, and left as it is.
    path = tmp_path / "spider.store"
    with sqlite3.connect(path) as db:  # the keys are the chunk's last section
        (blob,) = db.execute("SELECT data FROM chunks WHERE chunk = 0").fetchone()
        at = len(blob) - 8 * len(a.edit_keys)
        db.execute("UPDATE chunks SET data = ? WHERE chunk = 0", (blob[:at] + bytes([blob[at] ^ 4]) + blob[at + 1 :],))
    before = path.read_bytes()
    with pytest.raises(StoreError, match=rf"{path}: corrupt chunk 0 \(checksum mismatch\)"):
        read_store(path)
    with pytest.raises(Exception, match="corrupt chunk 0"):
        run(PersistentBackend(config).open("spider"))
    assert path.read_bytes() == before


@pytest.mark.slow  # the commands in subprocesses
def test_the_commands_decide_as_the_crawl(tmp_path: Path) -> None:
    from command_helpers import read_jsonl, simhash  # the commands' own helpers (a real ``scrapy`` process)

    folder = tmp_path / "pages"
    folder.mkdir()
    for name, body in (("1-gfx10.html", GFX10), ("2-gfx940.html", GFX940), ("3-two-edits.html", TWO_EDITS)):
        (folder / name).write_bytes(body)
    proc = simhash("dedup", str(folder), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (cluster,) = read_jsonl(proc.stdout)
    assert [m["url"].rsplit("/", 1)[1] for m in cluster["members"]] == ["1-gfx10.html", "2-gfx940.html"]
    assert cluster["members"][1]["distance"] > defaults.MAX_DISTANCE
    off = simhash("dedup", str(folder), "-s", "SIMHASH_ONE_EDIT_BELOW=0", cwd=tmp_path)
    assert off.returncode == 0, off.stderr
    assert read_jsonl(off.stdout) == []
    compare = simhash("compare", *(str(p) for p in sorted(folder.iterdir())), cwd=tmp_path)
    assert compare.returncode == 0, compare.stderr
    assert "2  near-duplicate of 1 (one edit, distance 11 > k=4): dropped" in compare.stdout
    assert "3  unique: becomes a canonical page" in compare.stdout


def test_the_key_table_answers_as_a_dict(monkeypatch: pytest.MonkeyPatch) -> None:
    from simhash_scrapy.core.index import keytable

    monkeypatch.setattr(keytable, "_RECENT", 16)  # merge into the sorted arrays often
    rng = random.Random(3)
    table, reference = keytable.KeyTable(), {}
    owned: dict[int, tuple[int, ...]] = {}
    for owner in range(600):
        if owned and rng.random() < 0.25:  # a canonical page leaves the index with its keys
            gone = rng.choice(sorted(owned))
            table.remove(gone, owned.pop(gone))
            reference = {k: o for k, o in reference.items() if o != gone}
        keys = tuple({rng.randrange(400) for _ in range(rng.randint(1, 6))})
        for key in keys:
            reference.setdefault(key, owner)  # the first owner keeps a key
        table.add(owner, keys)
        owned[owner] = keys
        probe = [rng.randrange(450) for _ in range(5)]
        assert table.owners(probe) == {reference[k] for k in probe if k in reference}
        assert len(table) == len(reference)
    # In bulk, as a store is loaded: the same owners.
    bulk = keytable.KeyTable()
    bulk.add_many(list(owned), list(owned.values()))
    for key in range(450):
        assert bulk.owner([key]) == min((o for o, ks in owned.items() if key in ks), default=None)
