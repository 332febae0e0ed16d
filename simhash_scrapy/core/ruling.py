"""What the crawl does with one checked page or item: its stats, its meta keys and its action (no Scrapy).

The glue asks the dedup state once per page (``DedupState.judge``); the state checks the page's record,
places it in its cluster and applies the rules here, which give one ``Ruling``: the ``simhash/*`` stats the
check and the action count, the ``request.meta`` keys, and what happens to the page (pass, flag, drop as a
near-duplicate, as unchanged or as edited).  The downloader middleware sets the keys and acts; the item
pipeline does the same with ``rule_item``.

* ``verdict_stats``: the stats of one check (``simhash/fingerprinted`` and the outcome's, ...).
* ``rule_page``: a page's ruling (``SIMHASH_ACTION``, ``SIMHASH_UNCHANGED``, ``SIMHASH_EDITED``,
  ``SIMHASH_KEEP_PER_CLUSTER``; a 304 answer nobody handles ends as unchanged).
* ``rule_item``: an item's ruling (``SIMHASH_ITEM_ACTION``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from .cluster.clustering import Outcome, rule_of
from .records import Verdict

if TYPE_CHECKING:
    from .cluster.representative import Placement
    from .settings.config import SimhashConfig

__all__ = ["Action", "Ruling", "verdict_stats", "rule_page", "rule_item", "describe_rule", "OUTCOME_STATS"]

#: Stat name of each outcome (``simhash/<name>``).
OUTCOME_STATS = {
    Outcome.UNIQUE: "unique",
    Outcome.NEAR_DUPLICATE: "near_duplicates",
    Outcome.UNCHANGED: "unchanged",
    Outcome.CHANGED: "changed",
    Outcome.EDITED: "edited",
    Outcome.UNCHECKED: "unchecked",
}
#: The stat of a near-duplicate found beyond the first simhash, by ``Verdict.via`` (clustering steps 5-7).
_VIA_STATS = {"template": "template/near_duplicates", "second": "second/near_duplicates",
              "containment": "containment/near_duplicates"}  # fmt: skip


class Action(Enum):
    """What happens to a checked page (or item)."""

    #: It goes on unchanged (unique, kept per cluster, or nothing to do).
    PASS = "pass"
    #: A near-duplicate that goes on, flagged.
    FLAG = "flag"
    #: A near-duplicate dropped (``NearDuplicate``, ``NearDuplicateItem``).
    DROP = "drop"
    #: A re-crawled page dropped as unchanged (``UnchangedPage``; a 304: ``NotModifiedPage``).
    DROP_UNCHANGED = "drop_unchanged"
    #: A re-crawled page dropped as edited within k (``EditedPage``).
    DROP_EDITED = "drop_edited"


@dataclass(frozen=True)
class Ruling:
    """The one answer the glue gets for a checked page (or item)."""

    action: Action
    verdict: Verdict
    #: The ``request.meta`` keys of the page (docs/reference/meta.md), in the order they are set.
    meta: dict[str, Any] = field(default_factory=dict)
    #: The rule that matched a near-duplicate, with k (``describe_rule``), else ``None``.
    rule: str | None = None
    #: The cluster's representative URL after this page, when it was placed in a cluster.
    representative: str | None = None
    #: The stats the action counts (``simhash/dropped``, ...), beside those of the check (``verdict_stats``).
    stats: tuple[str, ...] = ()
    #: How the near-duplicate log line names what happened (``"Dropped"``, ``"Flagged"``), else ``None``: no line.
    logged: str | None = None


def describe_rule(verdict: Verdict, exact: bool, max_distance: int) -> str:
    """The rule that matched a near-duplicate, and k: ``"simhash within k=4, distance 3"``
    (``core.cluster.clustering.Rule``)."""
    return rule_of(exact, verdict.distance, max_distance, verdict.via).describe(verdict.distance, max_distance)


def verdict_stats(verdict: Verdict, exact: bool, items: bool = False, not_modified: bool = False) -> list[str]:
    """The stats one check counts (each once): ``simhash/fingerprinted`` (``not_modified``: a 304 answer checked
    again as it was recorded, ``simhash/not_modified``) and ``simhash/<outcome>`` (each page counts in exactly
    one outcome), short pages again under ``simhash/short/``, a near-duplicate's distance and the step beyond
    the first simhash that found it; items under ``simhash/items/``."""
    prefix = "simhash/items/" if items else "simhash/"
    name = OUTCOME_STATS[verdict.outcome]
    stats = [prefix + ("not_modified" if not_modified else "fingerprinted"), prefix + name]
    if exact:
        stats.append(prefix + "short/" + name)
    if verdict.outcome is Outcome.NEAR_DUPLICATE:
        stats.append(f"{prefix}distance_count/{verdict.distance}")
        via = "one_edit/near_duplicates" if verdict.one_edit else _VIA_STATS.get(verdict.via or "")
        if via is not None:
            stats.append(prefix + via)
    if verdict.also is not None and not items:  # a page with a template-free fingerprint (core.detector, step 5;
        stats.append("simhash/template/pages")  # items get steps 1-4 only)
    return stats


def _page_meta(verdict: Verdict, placement: Placement | None, fingerprint: int, exact: bool, kept: bool,
               max_distance: int) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {
        "simhash": fingerprint,
        "simhash_short": exact,
        "simhash_outcome": verdict.outcome.value,
        "simhash_duplicate_of": verdict.canonical_url,
        "simhash_distance": verdict.distance,
        "simhash_one_edit": verdict.one_edit,
        # Which step of the rule matched (core.cluster.clustering.Rule's value), for near-duplicates only.
        "simhash_rule": rule_of(exact, verdict.distance, max_distance, verdict.via).value
        if verdict.is_duplicate else None,
    }  # fmt: skip
    if verdict.previous_fingerprint is not None:
        meta["simhash_previous"] = verdict.previous_fingerprint
        meta["simhash_previous_seen"] = verdict.previous_seen
    if verdict.outcome is Outcome.UNCHANGED:
        meta["simhash_unchanged"] = True
    elif verdict.outcome is Outcome.EDITED:
        meta["simhash_edited"] = True
    if placement is not None:
        meta["simhash_representative"] = placement.representative
        meta["simhash_representative_reason"] = placement.reason.value
        meta["simhash_kept"] = kept
    return meta


def _page_action(config: SimhashConfig, verdict: Verdict, kept: bool, forced: bool) -> tuple[Action, str | None]:
    """The action for a page and the stat it counts.  A near-duplicate passes unflagged when it is one of the
    first ``SIMHASH_KEEP_PER_CLUSTER`` members of its cluster; ``forced``: the user asked for this page
    whatever happened before (``dont_filter``): it is flagged, never dropped."""
    if kept:
        return Action.PASS, "simhash/kept_per_cluster"
    if verdict.is_duplicate:
        if config.action == "drop" and not forced:
            return Action.DROP, "simhash/dropped"
        return Action.FLAG, "simhash/flagged"  # flag mode, or drop mode for a dont_filter request
    if verdict.outcome is Outcome.UNCHANGED and config.unchanged == "drop" and not forced:
        return Action.DROP_UNCHANGED, "simhash/unchanged_dropped"
    if verdict.outcome is Outcome.EDITED and config.edited == "drop" and not forced:
        return Action.DROP_EDITED, "simhash/edited_dropped"
    return Action.PASS, None


def rule_page(
    config: SimhashConfig, verdict: Verdict, placement: Placement | None, *, fingerprint: int, exact: bool,
    forced: bool = False, not_modified: bool = False, passes_304: bool = True,
) -> Ruling:  # fmt: skip
    """A checked page's ruling (see the module docstring).  ``placement``: where a near-duplicate stands in
    its cluster (``core.cluster.representative.ClusterBook``); ``fingerprint``, ``exact``: its record's.  A 304
    answer (``not_modified``) found unchanged that no callback handles (``passes_304=False``) ends as
    unchanged whatever else it is (it has no body)."""
    kept = placement is not None and placement.position <= config.keep_per_cluster
    action, stat = _page_action(config, verdict, kept, forced)
    stats = (stat,) if stat is not None else ()
    logged = {Action.DROP: "Dropped", Action.FLAG: "Flagged"}.get(action)
    if not_modified and not passes_304 and verdict.outcome is Outcome.UNCHANGED and action in (Action.PASS, Action.FLAG):
        # (a flagged one is logged and counted as flagged too, then ends here)
        action, stats = Action.DROP_UNCHANGED, (*stats, "simhash/unchanged_dropped")
    return Ruling(
        action,
        verdict,
        _page_meta(verdict, placement, fingerprint, exact, kept, config.max_distance),
        describe_rule(verdict, exact, config.max_distance) if verdict.is_duplicate else None,
        placement.representative if placement is not None else None,
        stats,
        logged,
    )


def rule_item(config: SimhashConfig, verdict: Verdict, exact: bool, flagged: bool = False) -> Ruling:
    """A checked item's ruling (``SIMHASH_ITEM_ACTION``): a near-duplicate is dropped or flagged; ``flagged``:
    it was flagged already for its page (by the spider middleware), so counted once."""
    if not verdict.is_duplicate:
        return Ruling(Action.PASS, verdict)
    rule = describe_rule(verdict, exact, config.max_distance)
    if config.item_action == "drop":
        return Ruling(Action.DROP, verdict, rule=rule, stats=("simhash/items/dropped",))
    return Ruling(Action.FLAG, verdict, rule=rule, stats=() if flagged else ("simhash/items/flagged",), logged="Flagged")
