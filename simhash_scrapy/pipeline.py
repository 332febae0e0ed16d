"""``SimhashPipeline``: drop (or flag) near-duplicate items.

Two ways to judge an item:

* ``SIMHASH_ITEM_FIELD`` names a field holding the item's text or HTML
  (``SIMHASH_ITEM_FORMAT``: ``auto``, ``html`` or ``text``): the pipeline
  fingerprints it and checks it against the items seen before.  Items have
  their own indexes (scope ``item:<scope>``), so an item never matches the
  page it was scraped from.
* The items of near-duplicate pages that reached the spider (flag mode) are
  handled by ``SimhashSpiderMiddleware``, which sees each item with its
  response: no page verdict is kept here.

A near-duplicate item is dropped with ``NearDuplicateItem`` (a ``DropItem``)
or, with ``SIMHASH_ITEM_ACTION = "flag"``, goes on with
``simhash_duplicate_of`` and ``simhash_distance`` set when the item accepts
those fields (dicts always; ``Item`` classes and dataclasses when they
declare them).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem

from .backends import BackendError
from .core.analysis import Analysis, analyse_html, analyse_text
from .core.deadline import TooSlow
from .core.redact import LOG_REDACTION, redact
from .core.records import flag_item, is_flagged
from .core.ruling import Action, Ruling
from .core.skip import item_is_html, too_large
from .state import DedupState

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

__all__ = ["SimhashPipeline", "NearDuplicateItem", "PIPELINE_PRIORITY"]

logger = logging.getLogger(__name__)
logger.addFilter(LOG_REDACTION)  # no password of a page URL in a log line (core.redact)

#: Default position in ``ITEM_PIPELINES`` (early, so storage pipelines never see dropped items).
PIPELINE_PRIORITY = 200


class NearDuplicateItem(DropItem):
    """Raised for a near-duplicate item (stat ``item_dropped_reasons_count/NearDuplicateItem``)."""

    def __init__(
        self, url: str | None, canonical_url: str, distance: int, log_level: Any = None, rule: str | None = None
    ) -> None:
        what = f": {url}" if url else ""
        super().__init__(
            redact(f"Near-duplicate of {canonical_url} ({rule or f'distance {distance}'}){what}"), log_level=log_level
        )
        self.rule = rule
        self.url = url
        self.canonical_url = canonical_url
        self.distance = distance


class SimhashPipeline:
    """Drop or flag near-duplicate items (see the module docstring)."""

    def __init__(self, state: DedupState) -> None:
        self.state = state
        self.config = state.config
        self._anonymous = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SimhashPipeline:
        return cls(DedupState.for_crawler(crawler))

    def _fingerprint(self, value: str | bytes) -> Analysis:
        options = self.state.item_analysis
        if item_is_html(value, self.config.item_format):
            return analyse_html(value, None, options)
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        return analyse_text(text, options)

    async def _check_field(self, value: Any, url: str | None, flagged: bool) -> Ruling | None:
        """The item's ruling (``DedupState.judge_item``), or ``None`` (skipped, counted)."""
        state = self.state
        if not isinstance(value, (str, bytes)) or not value:
            state.skip("no_field", items=True)
            return None
        if too_large(len(value), self.config.max_bytes):
            state.skip("too_large", items=True)
            return None
        try:
            answer = await state.run_analysis(self._fingerprint, value, size=len(value))
            if answer.fingerprint is None:
                state.skip(answer.skip_reason or "error", items=True)
                return None
            shown = url or "(no URL)"
            if url is None:
                self._anonymous += 1
                url = f"item-{self._anonymous}"
            return await state.judge_item(answer, url, flagged, shown)
        except BackendError as exc:
            # Fail-closed: an item nobody could check must not pass.
            state.skip("backend_error", items=True)
            raise DropItem(f"Not checked for near-duplicates (fail-closed backend error): {exc}") from None
        except TooSlow:
            state.log_cut(url, items=True)
            state.skip("too_slow", items=True)
            return None
        except Exception:
            logger.exception(
                "simhash-scrapy: cannot fingerprint the item from %(url)s; it goes on unchecked",
                {"url": url},
                extra={"spider": state.spider},
            )
            state.skip("error", items=True)
            return None

    async def process_item(self, item: Any, spider: Spider | None = None) -> Any:
        state = self.state
        if state.error is not None:
            return item
        adapter = ItemAdapter(item)
        url_value = adapter.get(self.config.item_url_field)
        url = url_value if isinstance(url_value, str) and url_value else None
        field = self.config.item_field
        if field is None:
            return item
        if adapter.get(field) is None:
            state.skip("no_field", items=True)
            return item
        # (flagged already for its page, by the spider middleware: counted once)
        ruling = await self._check_field(adapter.get(field), url, is_flagged(adapter))
        if ruling is None or ruling.action is Action.PASS:
            return item
        verdict = ruling.verdict
        assert verdict.distance is not None and verdict.canonical_url is not None
        if ruling.action is Action.DROP:
            raise NearDuplicateItem(url, verdict.canonical_url, verdict.distance, self.config.log_level, ruling.rule)
        flag_item(adapter, verdict.canonical_url, verdict.distance)
        return item
