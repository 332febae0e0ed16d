"""What changed since the last crawl: each page of the latest crawl is new, changed, edited, unchanged or gone.

* ``new``: first recorded by the latest crawl (a re-crawl: the record held pages before it);
* ``changed`` / ``edited`` / ``unchanged``: re-checked by the latest crawl, its outcome (farther than k from
  its last version; other text within k; the same text, or a 304);
* ``gone``: a page the record knew, answered 404 or 410 by the latest crawl.

A crawl leaves a small blob (``LAST_CRAWL_EXTRA``, through the backend's ``save_extra``: the store's
``extra`` table, a Redis key) saying when it started, whether the record held pages before it, and the pages
that were gone; with the records, ``build_page_changes`` lists every page of that crawl, so the crawl's own
report and ``scrapy simhash report --changes`` on the store (or Redis) list the same pages.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from ..features.fingerprint import hamming_distance
from ..records import is_item_scope

__all__ = [
    "CHANGE_COLUMNS", "CHANGE_KINDS", "LAST_CRAWL_EXTRA", "LastCrawl", "build_page_changes", "count_changes",
    "decode_last_crawl", "encode_last_crawl",
]  # fmt: skip

CHANGE_KINDS = ("new", "changed", "edited", "unchanged", "gone")
#: Name of the blob a crawl leaves with its backend (``save_extra``).
LAST_CRAWL_EXTRA = "changes/last_crawl"
#: Columns of the CSV list of the latest crawl's pages (``<name>.changes.csv``, ``report --changes``).
CHANGE_COLUMNS = ("change", "url", "scope", "previous_fingerprint", "fingerprint", "distance", "status")


class LastCrawl:
    """When the latest crawl started, whether the record held pages before it, and its gone pages."""

    __slots__ = ("started", "previous_crawl", "gone")

    def __init__(self, started: float, previous_crawl: bool, gone: Iterable[tuple[str, str, int]] = ()) -> None:
        self.started = started
        self.previous_crawl = previous_crawl
        #: ``(url, scope, status)`` of each page the record knew that answered 404 / 410.
        self.gone = list(gone)


def encode_last_crawl(last: LastCrawl) -> bytes:
    record = {"version": 1, "started": last.started, "previous_crawl": last.previous_crawl, "gone": last.gone}
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def decode_last_crawl(data: bytes) -> LastCrawl:
    """The blob of ``encode_last_crawl`` (``ValueError`` naming what is wrong)."""
    try:
        record = json.loads(data.decode("utf-8", "surrogatepass"))
        if record.get("version") != 1:
            raise ValueError(f"unknown version {record.get('version')!r}")
        gone = [(str(url), str(scope), int(status)) for url, scope, status in record["gone"]]
        return LastCrawl(float(record["started"]), bool(record["previous_crawl"]), gone)
    except (UnicodeDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"damaged {LAST_CRAWL_EXTRA} record ({exc})") from None


def _get(member: Any, name: str) -> Any:
    return member.get(name) if isinstance(member, Mapping) else getattr(member, name, None)


def _entry(kind: str, member: Any) -> dict[str, Any]:
    fp = int(_get(member, "fingerprint"))
    previous = _get(member, "previous_fingerprint") if kind in ("changed", "edited", "unchanged") else None
    distance = None
    if previous is not None and not _get(member, "exact"):
        distance = hamming_distance(fp, int(previous))
    return {
        "change": kind,
        "url": _get(member, "url"),
        "scope": _get(member, "scope") or "",
        "previous_fingerprint": None if previous is None else f"{int(previous):016x}",
        "fingerprint": f"{fp:016x}",
        "distance": distance,
        "status": None,
    }


def build_page_changes(members: Iterable[Any], last: LastCrawl) -> list[dict[str, Any]]:
    """Every page of the latest crawl (checked at or after ``last.started``), then its gone pages.

    Pages only (no ``item:`` scopes); nothing when the record held no pages before that crawl (a first
    crawl has no "since the last crawl").  A gone page is listed once (the latest crawl's last answer).
    """
    if not last.previous_crawl:
        return []
    entries = []
    for member in members:
        if is_item_scope(_get(member, "scope")) or float(_get(member, "last_seen") or 0.0) < last.started:
            continue
        outcome = str(_get(member, "outcome") or "")
        if float(_get(member, "first_seen") or 0.0) >= last.started:
            entries.append(_entry("new", member))
        elif outcome in ("changed", "edited", "unchanged"):
            entries.append(_entry(outcome, member))
    listed: set[tuple[str, str]] = set()
    for url, scope, status in last.gone:
        if (url, scope) not in listed:
            listed.add((url, scope))
            entries.append({"change": "gone", "url": url, "scope": scope, "previous_fingerprint": None,
                            "fingerprint": None, "distance": None, "status": status})  # fmt: skip
    return entries


def count_changes(entries: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """``{kind: pages}`` for every kind of ``CHANGE_KINDS``."""
    counts = Counter(str(entry["change"]) for entry in entries)
    return {kind: counts.get(kind, 0) for kind in CHANGE_KINDS}
