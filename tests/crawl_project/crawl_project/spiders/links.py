"""``scrapy crawl links -a base=http://127.0.0.1:PORT``: start at ``/`` and follow every link of the site.

The start request is ``dont_filter`` (like Scrapy's ``start_urls``), so a
resumed ``JOBDIR`` job fetches the start URL again.
"""

from __future__ import annotations

from typing import Any

import scrapy


class LinksSpider(scrapy.Spider):
    name = "links"

    def __init__(self, base: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base = base.rstrip("/")

    async def start(self):  # type: ignore[override]
        yield scrapy.Request(self.base + "/", dont_filter=True, callback=self.parse)

    def parse(self, response: scrapy.http.Response) -> Any:
        self.logger.info("Reached the spider: %s", response.url)
        yield {"url": response.url, "unchanged": bool(response.meta.get("simhash_unchanged"))}
        yield from response.follow_all(css="a", callback=self.parse)
