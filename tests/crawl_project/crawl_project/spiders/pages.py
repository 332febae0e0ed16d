"""``scrapy crawl pages -a base=http://127.0.0.1:PORT -a paths=/a,/b,/c``: fetch those pages in order."""

from __future__ import annotations

from typing import Any

import scrapy


class PagesSpider(scrapy.Spider):
    name = "pages"

    def __init__(self, base: str = "", paths: str = "", paths_file: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base = base.rstrip("/")
        if paths_file:
            with open(paths_file, encoding="utf-8") as handle:
                paths = ",".join(line.strip() for line in handle if line.strip())
        self.paths = [p for p in paths.split(",") if p]

    async def start(self):  # type: ignore[override]
        for priority, path in enumerate(self.paths):
            # Decreasing priority: fetched in the order given (one request at a time).
            yield scrapy.Request(self.base + path, priority=-priority, callback=self.parse)

    def parse(self, response: scrapy.http.Response) -> Any:
        self.logger.info("Reached the spider: %s", response.url)
        yield {"url": response.url, "duplicate_of": response.meta.get("simhash_duplicate_of")}
