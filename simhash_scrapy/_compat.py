"""Scrapy version flags, in one place (supported: Scrapy 2.13 to 2.19)."""

from __future__ import annotations

import scrapy
from packaging.version import Version

__all__ = ["SCRAPY_VERSION", "HAS_CLOSE_SPIDER_ASYNC", "CLOSE_SPIDER_FROM_OPENED"]

SCRAPY_VERSION = Version(scrapy.__version__)

#: ``ExecutionEngine.close_spider_async(reason=...)`` exists (2.14+); before,
#: ``ExecutionEngine.close_spider(spider, reason)`` (deprecated since 2.14).
HAS_CLOSE_SPIDER_ASYNC = SCRAPY_VERSION >= Version("2.14")

#: Raising ``CloseSpider`` from a ``spider_opened`` handler aborts the crawl
#: cleanly (2.18+); before, the exception is only logged.
CLOSE_SPIDER_FROM_OPENED = SCRAPY_VERSION >= Version("2.18")
