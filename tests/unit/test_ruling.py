"""``core.ruling``: what the crawl does with a checked page or item (the glue's one answer per page)."""

from __future__ import annotations

from typing import Any

import pytest

from simhash_scrapy.core.cluster.clustering import Outcome
from simhash_scrapy.core.cluster.representative import Placement, Reason
from simhash_scrapy.core.records import Verdict
from simhash_scrapy.core.ruling import Action, rule_item, rule_page, verdict_stats
from simhash_scrapy.core.settings.config import SimhashConfig

DUPLICATE = Verdict(Outcome.NEAR_DUPLICATE, "https://e/a", 3, 0b101, "a-id")
UNCHANGED = Verdict(Outcome.UNCHANGED, previous_fingerprint=7, previous_seen=1.5)
EDITED = Verdict(Outcome.EDITED, previous_fingerprint=7, previous_seen=1.5)
UNIQUE = Verdict(Outcome.UNIQUE)


def config(**settings: Any) -> SimhashConfig:
    return SimhashConfig.from_settings({f"SIMHASH_{name.upper()}": value for name, value in settings.items()})


def placed(position: int) -> Placement:
    return Placement(position, "https://e/a", Reason.FIRST_CRAWLED, replaced=False)


def test_a_near_duplicate_is_dropped_with_its_rule_and_representative() -> None:
    ruling = rule_page(config(), DUPLICATE, placed(2), fingerprint=9, exact=False)
    assert ruling.action is Action.DROP and ruling.stats == ("simhash/dropped",) and ruling.logged == "Dropped"
    assert ruling.rule == "simhash within k=4, distance 3" and ruling.representative == "https://e/a"
    assert ruling.meta == {
        "simhash": 9, "simhash_short": False, "simhash_outcome": "near_duplicate",
        "simhash_duplicate_of": "https://e/a", "simhash_distance": 3, "simhash_one_edit": False,
        "simhash_rule": "simhash", "simhash_representative": "https://e/a",
        "simhash_representative_reason": "first_crawled", "simhash_kept": False,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("settings", "forced", "action", "stats"),
    [
        ({"action": "flag"}, False, Action.FLAG, ("simhash/flagged",)),
        ({}, True, Action.FLAG, ("simhash/flagged",)),  # dont_filter: flagged, never dropped
        ({"keep_per_cluster": 2}, False, Action.PASS, ("simhash/kept_per_cluster",)),
    ],
)
def test_flag_mode_a_forced_page_and_the_first_members_of_a_cluster_go_on(
    settings: dict[str, Any], forced: bool, action: Action, stats: tuple[str, ...]
) -> None:
    ruling = rule_page(config(**settings), DUPLICATE, placed(2), fingerprint=9, exact=False, forced=forced)
    assert (ruling.action, ruling.stats) == (action, stats)
    assert ruling.meta["simhash_kept"] is (action is Action.PASS)


def test_re_crawled_pages_are_dropped_only_when_asked() -> None:
    assert rule_page(config(), UNCHANGED, None, fingerprint=7, exact=False).action is Action.PASS
    ruling = rule_page(config(unchanged="drop"), UNCHANGED, None, fingerprint=7, exact=False)
    assert ruling.action is Action.DROP_UNCHANGED and ruling.stats == ("simhash/unchanged_dropped",)
    assert ruling.meta["simhash_unchanged"] is True and ruling.meta["simhash_previous"] == 7
    assert "simhash_kept" not in ruling.meta  # (not placed in a cluster)
    edited = rule_page(config(edited="drop"), EDITED, None, fingerprint=8, exact=True)
    assert edited.action is Action.DROP_EDITED and edited.meta["simhash_edited"] is True
    forced = rule_page(config(edited="drop"), EDITED, None, fingerprint=8, exact=True, forced=True)
    assert forced.action is Action.PASS and forced.stats == ()


def test_a_304_no_callback_handles_ends_as_unchanged_flagged_or_not() -> None:
    ruling = rule_page(config(), UNCHANGED, None, fingerprint=7, exact=False, not_modified=True, passes_304=False)
    assert ruling.action is Action.DROP_UNCHANGED and ruling.stats == ("simhash/unchanged_dropped",)
    in_cluster = Verdict(Outcome.UNCHANGED, "https://e/a", 1)
    flagged = rule_page(config(action="flag"), in_cluster, placed(2), fingerprint=7, exact=False,
                        not_modified=True, passes_304=False)  # fmt: skip
    assert flagged.action is Action.DROP_UNCHANGED and flagged.logged == "Flagged"
    assert flagged.stats == ("simhash/flagged", "simhash/unchanged_dropped")
    handled = rule_page(config(), UNCHANGED, None, fingerprint=7, exact=False, not_modified=True)
    assert handled.action is Action.PASS and handled.stats == ()


def test_the_stats_of_one_check() -> None:
    one_edit = Verdict(Outcome.NEAR_DUPLICATE, "https://e/a", 5, one_edit=True, also=3)
    assert verdict_stats(one_edit, exact=False) == [
        "simhash/fingerprinted", "simhash/near_duplicates", "simhash/distance_count/5",
        "simhash/one_edit/near_duplicates", "simhash/template/pages",
    ]  # fmt: skip
    second = Verdict(Outcome.NEAR_DUPLICATE, "https://e/a", 6, via="second")
    assert verdict_stats(second, exact=True, items=True) == [
        "simhash/items/fingerprinted", "simhash/items/near_duplicates", "simhash/items/short/near_duplicates",
        "simhash/items/distance_count/6", "simhash/items/second/near_duplicates",
    ]  # fmt: skip
    assert verdict_stats(UNCHANGED, exact=False, not_modified=True) == ["simhash/not_modified", "simhash/unchanged"]


def test_items_are_dropped_or_flagged_once() -> None:
    assert rule_item(config(), UNIQUE, exact=False).action is Action.PASS
    dropped = rule_item(config(), DUPLICATE, exact=False)
    assert dropped.action is Action.DROP and dropped.stats == ("simhash/items/dropped",) and dropped.logged is None
    flagged = rule_item(config(item_action="flag"), DUPLICATE, exact=False)
    assert flagged.stats == ("simhash/items/flagged",) and flagged.logged == "Flagged"
    again = rule_item(config(item_action="flag"), DUPLICATE, exact=False, flagged=True)
    assert again.action is Action.FLAG and again.stats == ()
