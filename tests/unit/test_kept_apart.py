"""``core.cluster.kept_apart``: which signal kept a page apart from an earlier one the text rule would have joined."""

from __future__ import annotations

from simhash_scrapy.core.cluster.kept_apart import KeptApart


def test_a_near_page_that_declared_another_identity_is_named_by_the_signals_that_differ() -> None:
    kept = KeptApart(max_distance=4)
    assert kept.check("shop", 0b1011, (), {"sku": {"a-1"}, "price": {"10"}}) == []  # the first: nothing before
    assert kept.check("shop", 0b1010, (), {"sku": {"a-2"}, "price": {"10"}}) == ["sku"]
    assert kept.check("shop", 0b1000, (), {"sku": {"a-3"}, "price": {"12"}, "name": {"x"}}) == [
        "name", "price", "sku",
    ]  # fmt: skip  (nearest: the second page, distance 1)
    assert len(kept) == 3


def test_far_pages_other_scopes_and_one_edit_keys() -> None:
    kept = KeptApart(max_distance=3)
    kept.check("shop", 0, (11, 12), {"price": {"10"}})
    assert kept.check("shop", (1 << 40) - 1, (), {"price": {"11"}}) == []  # 40 bits apart: not a pair
    assert kept.check("other", 1, (), {"price": {"11"}}) == []  # another plain scope
    assert kept.check("shop", (1 << 30) - 1, (12, 99), {"price": {"12"}}) == ["price"]  # one token apart


def test_the_limit_stops_keeping_not_checking() -> None:
    kept = KeptApart(max_distance=3, limit=1)
    kept.check("s", 0, (), {"sku": {"1"}})
    assert kept.check("s", 1, (), {"sku": {"2"}}) == ["sku"]
    assert len(kept) == 1
