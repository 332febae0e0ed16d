"""The Redis mirror's batch cut (``backends.redis.mirror.first_related``): all pairs at once, the same cut."""

from __future__ import annotations

import random

import pytest

from simhash_scrapy.backends.base import PageRecord
from simhash_scrapy.backends.redis.mirror import _first_related_py, first_related
from simhash_scrapy.core.cluster.containment import Sketch


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


@pytest.mark.parametrize("seed", range(40))
def test_first_related_is_the_page_by_page_cut(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        k = rng.choice([3, 4])
        records = _batch(rng, rng.randint(0, 16), k)
        assert first_related(records, k) == _first_related_py(records, k)
