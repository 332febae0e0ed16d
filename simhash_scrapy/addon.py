"""``Addon``: ``ADDONS = {"simhash_scrapy.Addon": 0}`` is the whole activation.

It enables the crawl's dedup state as an extension (``EXTENSIONS``: ``DedupState``, the one object the
components share, which Scrapy builds first), and adds ``SimhashMiddleware`` to ``DOWNLOADER_MIDDLEWARES`` (priority 540),
``UrlRulesMiddleware`` (50; only when ``SIMHASH_URL_RULES`` is not ``"off"``),
``SimhashSpiderMiddleware`` to ``SPIDER_MIDDLEWARES`` (950), ``SimhashReplayMiddleware``
(10: the requests a page yielded, for a 304 of it on a re-crawl) and
``SimhashPipeline`` to ``ITEM_PIPELINES`` (priority 200), unless the
project already lists them (then its priorities are kept).

``scrapy startproject`` writes ``ADDONS = {}`` into settings.py: the entry
goes into that dict (a second ``ADDONS = ...`` line replaces the first).
When the add-on is missing, Scrapy loads nothing of this package during a
crawl, so nothing here can warn; ``scrapy simhash`` does
(``commands._common.activation_problem``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .config import enabled, url_rules_mode
from .middleware import MIDDLEWARE_PRIORITY, SimhashMiddleware
from .pipeline import PIPELINE_PRIORITY, SimhashPipeline
from .replay import REPLAY_PRIORITY, SimhashReplayMiddleware
from .spidermw import SPIDER_MIDDLEWARE_PRIORITY, SimhashSpiderMiddleware
from .state import STATE_PRIORITY, DedupState
from .urlrules import URL_RULES_MIDDLEWARE_PRIORITY, UrlRulesMiddleware

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["Addon"]


class Addon:
    """Scrapy add-on that enables simhash-scrapy's middleware and pipeline."""

    def update_settings(self, settings: BaseSettings) -> None:
        try:
            on = enabled(settings)
        except ValueError:
            on = True  # a bad value: the state logs it in one line (finish reason simhash_error)
        if on:  # (off: the components are left out, each saying so, as without the add-on)
            settings.setdefault_in_component_priority_dict("EXTENSIONS", DedupState, STATE_PRIORITY)
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", SimhashMiddleware, MIDDLEWARE_PRIORITY
        )
        try:
            rules = url_rules_mode(settings) != "off"
        except ValueError:
            rules = False  # a bad value: the middleware's state logs it in one line (finish reason simhash_error)
        if rules:
            settings.setdefault_in_component_priority_dict(
                "DOWNLOADER_MIDDLEWARES", UrlRulesMiddleware, URL_RULES_MIDDLEWARE_PRIORITY
            )
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", SimhashSpiderMiddleware, SPIDER_MIDDLEWARE_PRIORITY
        )
        settings.setdefault_in_component_priority_dict("SPIDER_MIDDLEWARES", SimhashReplayMiddleware, REPLAY_PRIORITY)
        settings.setdefault_in_component_priority_dict("ITEM_PIPELINES", SimhashPipeline, PIPELINE_PRIORITY)
