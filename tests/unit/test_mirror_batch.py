"""The Redis mirror's batch cut (``backends.redis.mirror.first_related``): all pairs at once, the same cut."""

from __future__ import annotations

import random

import pytest

from simhash_scrapy.backends.base import PageRecord
from simhash_scrapy.backends.redis.mirror import _related_numpy, first_related, has_extras
from simhash_scrapy.core import _native
from simhash_scrapy.core.cluster.containment import Sketch


def _first_related_py(records: list[PageRecord], k: int) -> int | None:
    """``first_related`` page by page (as it was written before it compared all pairs at once)."""
    rows: list[int] = []
    seconds: list[int] = []
    sentences: set[int] = set()
    for at, record in enumerate(records):
        if record.exact:
            continue
        mine = (
            [record.fingerprint]
            if record.also is None
            else [record.fingerprint, record.also]
        )
        if at and has_extras(record):
            if any((a ^ b).bit_count() <= k for a in mine for b in rows):
                return at
            if record.second is not None and any(
                (record.second ^ s).bit_count() <= k for s in seconds
            ):
                return at
            if record.sketch is not None and not sentences.isdisjoint(
                record.sketch.hashes
            ):
                return at
        rows.extend(mine)
        if record.second is not None:
            seconds.append(record.second)
        if record.sketch is not None:
            sentences.update(record.sketch.hashes)
    return None


def _near(rng: random.Random, fp: int, k: int) -> int:
    for bit in rng.sample(range(64), rng.randint(0, k + 2)):
        fp ^= 1 << bit
    return fp


def _batch(rng: random.Random, size: int, k: int) -> list[PageRecord]:
    """Pages often near each other's first, template-free or second simhash, or sharing sentences."""
    base = [rng.getrandbits(64) for _ in range(3)]
    records = []
    for n in range(size):
        pick = lambda: _near(rng, rng.choice(base), k) if rng.random() < 0.5 else rng.getrandbits(64)  # noqa: E731
        exact = rng.random() < 0.1
        extra: dict[str, object] = {}
        if not exact:
            if rng.random() < 0.4:
                extra["also"] = pick()
            if rng.random() < 0.6:
                extra["second"] = pick()
            if rng.random() < 0.4:
                extra["sketch"] = Sketch(tuple(sorted(rng.sample(range(40), 5))), 5)
        records.append(PageRecord(url=f"https://example.com/{n}", fingerprint=pick(), scope="s", exact=exact, **extra))
    return records


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("seed", range(40))
def test_first_related_is_the_page_by_page_cut(seed: int, compiled: bool) -> None:
    """The C helper (``_speedups.batch_related``) and numpy give the page-by-page cut."""
    if compiled and _native.speedups is None:
        pytest.skip("the C helpers are not built")
    rng = random.Random(seed)
    with _native.switched(compiled):
        for _ in range(50):
            k = rng.choice([3, 4])
            records = _batch(rng, rng.randint(0, 16), k)
            assert first_related(records, k) == _first_related_py(records, k)


def test_the_compiled_batch_questions_are_numpys() -> None:
    """``_speedups.batch_related`` answers as ``_related_numpy``: the related pages (all, not only the first) and
    the first page sharing a sentence, on batches of up to 40 pages, sketches as tuples or lists."""
    if _native.speedups is None:
        pytest.skip("the C helpers are not built")
    rng = random.Random(7)
    for _ in range(3000):
        k = rng.choice([0, 3, 4, 6])
        pages = [r for r in _batch(rng, rng.randint(0, 40), k) if not r.exact]
        sketches = [None if r.sketch is None else (list if rng.random() < 0.3 else tuple)(r.sketch.hashes) for r in pages]
        got = _native.speedups.batch_related([r.fingerprint for r in pages], [r.also for r in pages],
                                             [r.second for r in pages], sketches, k)  # fmt: skip
        assert got == _related_numpy(pages, k) if pages else got == ([], None)
    with pytest.raises(ValueError, match="one value a page"):
        _native.speedups.batch_related([1, 2], [None], [None, None], [None, None], 3)
    with pytest.raises(OverflowError):
        _native.speedups.batch_related([-1], [None], [None], [None], 3)
