"""``SimhashSpiderMiddleware``: the items of pages the downloader middleware let through.

The verdict of a page travels with its response (``response.meta``), and a
spider middleware sees each item together with the response it came from,
so no state is kept between the two:

* a near-duplicate page that reached the spider (flag mode, or a
  ``dont_filter`` request in drop mode): its items are dropped, or flagged
  with ``SIMHASH_ITEM_ACTION = "flag"`` (fields ``simhash_duplicate_of``,
  ``simhash_distance`` where the item accepts them);
* an unchanged page of a re-crawl with ``SIMHASH_UNCHANGED = "drop_items"``:
  its items are dropped (only what changed since the last crawl goes on).

Requests the callback yields always pass.  Stats: ``simhash/items/dropped``,
``simhash/items/flagged``, ``simhash/items/unchanged_dropped``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter, is_item
from scrapy import Request

from .core.records import flag_item
from .core.redact import LOG_REDACTION
from .state import DedupState

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

__all__ = ["SimhashSpiderMiddleware", "SPIDER_MIDDLEWARE_PRIORITY"]

logger = logging.getLogger(__name__)
logger.addFilter(LOG_REDACTION)  # no password of a page URL in a log line (core.redact)

#: Default position in ``SPIDER_MIDDLEWARES`` (after the built-in ones, nearest the spider).
SPIDER_MIDDLEWARE_PRIORITY = 950


class SimhashSpiderMiddleware:
    """Drop or flag the items of near-duplicate and unchanged pages (see the module docstring)."""

    def __init__(self, state: DedupState) -> None:
        self.state = state
        self.config = state.config

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SimhashSpiderMiddleware:
        return cls(DedupState.for_crawler(crawler))

    def _rule(self, response: Response) -> str | None:
        """What happens to this response's items: ``"drop"``, ``"flag"``, ``"unchanged"``, ``"edited"`` or ``None``."""
        meta = getattr(response, "meta", None) if getattr(response, "request", None) is not None else None
        if not meta:
            return None
        if meta.get("simhash_duplicate_of") and not meta.get("simhash_kept"):
            return self.config.item_action
        if meta.get("simhash_unchanged") and self.config.unchanged == "drop_items":
            return "unchanged"
        if meta.get("simhash_edited") and self.config.edited == "drop_items":
            return "edited"
        return None

    def _apply(self, rule: str, response: Response, item: Any) -> Any | None:
        state = self.state
        meta = response.meta
        if rule in ("unchanged", "edited"):
            state.inc(f"simhash/items/{rule}_dropped")
            return None
        if rule == "drop":
            state.inc("simhash/items/dropped")
            return None
        state.inc("simhash/items/flagged")
        flag_item(ItemAdapter(item), meta["simhash_duplicate_of"], meta.get("simhash_distance"))
        return item

    def _pass(self, rule: str | None, response: Response, entry: Any) -> Any | None:
        """The entry to pass on (requests and non-items always), or ``None`` for a dropped item."""
        if rule is None or isinstance(entry, Request) or not is_item(entry):
            return entry
        return self._apply(rule, response, entry)

    # Universal spider middleware: a sync and an async version of the same filter.
    def process_spider_output(self, response: Response, result: Iterable[Any], spider: Spider | None = None) -> Iterator[Any]:
        rule = self._rule(response)
        for entry in result:
            kept = self._pass(rule, response, entry)
            if kept is not None:
                yield kept

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Spider | None = None
    ) -> AsyncIterator[Any]:
        rule = self._rule(response)
        async for entry in result:
            kept = self._pass(rule, response, entry)
            if kept is not None:
                yield kept
