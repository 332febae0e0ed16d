"""Crawl one site and follow its links; near-duplicates are handled by simhash-scrapy.

Without arguments the spider serves the bundled sample site on 127.0.0.1
(port 8741, so that a re-run with ``SIMHASH_DIR`` sees the same URLs; a free
port when 8741 is taken, or ``-a port=N``) and crawls it::

    scrapy crawl site

With ``-a start_url=...`` it crawls a real site instead, following links within
that host only, and stops scheduling after ``max_pages`` pages (default 200)::

    scrapy crawl site -a start_url=https://docs.scrapy.org/en/latest/ -a max_pages=100

The spider knows nothing about duplicates: it yields one item per page that
reaches it.  With ``SIMHASH_ACTION = "drop"`` near-duplicates never arrive here;
with ``"flag"`` they arrive with ``near-duplicate`` in ``response.flags`` and
the item says which page they duplicate.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlparse

import scrapy
from scrapy.http import HtmlResponse, Response
from scrapy.linkextractors import LinkExtractor

from ..sample_site import SampleSite

DEFAULT_MAX_PAGES = 200
#: The sample site's port: fixed, so that the URLs (and the request fingerprints a re-crawl
#: with SIMHASH_DIR compares) are the same from one run to the next.
SAMPLE_SITE_PORT = 8741


class SiteSpider(scrapy.Spider):
    name = "site"

    def __init__(
        self, start_url: str | None = None, max_pages: str | int | None = None, port: str | int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.sample_site: SampleSite | None = None
        try:
            self.port = int(port) if port not in (None, "") else None
        except ValueError:
            raise ValueError(f"port must be a port number (0: any free port), got {port!r}") from None
        if start_url:
            parsed = urlparse(start_url)
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise ValueError(f"start_url must be an http(s) URL, got {start_url!r}")
            self.allowed_domains = [parsed.hostname]
        else:
            self.allowed_domains = ["127.0.0.1"]
        self.start_url = start_url or None
        try:
            self.max_pages = int(max_pages) if max_pages not in (None, "") else DEFAULT_MAX_PAGES
        except ValueError:
            raise ValueError(f"max_pages must be a positive integer, got {max_pages!r}") from None
        if self.max_pages < 1:
            raise ValueError(f"max_pages must be a positive integer, got {max_pages!r}")
        # LinkExtractor(allow_domains=...) compares host *and port*; the offsite
        # rule (host name or a subdomain of it) is applied in _on_site() instead.
        self.link_extractor = LinkExtractor()
        self.scheduled: set[str] = set()
        self._limit_logged = False

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> SiteSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        if spider.start_url is None:
            # Our own server on 127.0.0.1: no politeness delay needed.  Priority
            # "spider" beats settings.py; `-s` on the command line still wins.
            crawler.settings.set("DOWNLOAD_DELAY", 0, priority="spider")
            crawler.settings.set("CONCURRENT_REQUESTS_PER_DOMAIN", 8, priority="spider")
        return spider

    async def start(self) -> AsyncIterator[Any]:
        url = self.start_url
        if url is None:
            self.sample_site = SampleSite(port=SAMPLE_SITE_PORT if self.port is None else self.port)
            try:
                url = self.sample_site.start()
            except OSError as exc:
                if self.port is not None:
                    raise
                self.sample_site = SampleSite()
                url = self.sample_site.start()
                self.logger.warning(
                    "Port %d is taken (%s): serving the sample site on %s instead; a re-run with SIMHASH_DIR "
                    "then sees its URLs as other pages", SAMPLE_SITE_PORT, exc, url,
                )
            self.logger.info("Serving the bundled sample site at %s", url)
        self.scheduled.add(url)
        yield scrapy.Request(url, callback=self.parse)

    def parse(self, response: Response) -> Any:
        if not isinstance(response, HtmlResponse):
            return  # feeds, robots, images: nothing to follow, nothing to record
        meta = response.meta
        fp = meta.get("simhash")
        yield {
            "url": response.url,
            "status": response.status,
            "title": (response.css("title::text").get() or "").strip(),
            "depth": meta.get("depth", 0),
            "simhash": f"{fp:016x}" if isinstance(fp, int) else None,
            "duplicate_of": meta.get("simhash_duplicate_of"),
            "distance": meta.get("simhash_distance"),
            "flags": list(response.flags),
        }
        for link in self.link_extractor.extract_links(response):
            if link.url in self.scheduled or not self._on_site(link.url):
                continue
            if len(self.scheduled) >= self.max_pages:
                if not self._limit_logged:
                    self._limit_logged = True
                    self.logger.info("max_pages=%d reached: not following more links", self.max_pages)
                return
            self.scheduled.add(link.url)
            yield response.follow(link, callback=self.parse)

    def _on_site(self, url: str) -> bool:
        host = (urlparse(url).hostname or "").lower()
        return any(host == domain or host.endswith("." + domain) for domain in self.allowed_domains)

    def closed(self, reason: str) -> None:
        if self.sample_site is not None:
            self.sample_site.stop()
