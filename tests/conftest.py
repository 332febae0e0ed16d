"""Shared fixtures: a real local HTTP site and real Scrapy crawls of it.

* ``serve(pages)`` starts a ``ThreadingHTTPServer`` on 127.0.0.1 (a free
  port) in a thread and returns its base URL.  ``pages`` maps paths to
  ``Page`` objects (or str/bytes HTML), or is a folder whose files are served.
* ``run_crawl(spider_cls, settings, **spider_kwargs)`` runs one real crawl
  with ``CrawlerRunner`` inside the test's reactor (pytest-twisted,
  ``--reactor=asyncio``) and returns the finished crawler.
* ``RecordingSpider`` records every response that reaches it (URL, flags,
  simhash meta) and every failure its errback receives.
* ``article_html`` / ``article_words`` build realistic test pages.
"""

from __future__ import annotations

import functools
import itertools
import mimetypes
import random
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import scrapy
from scrapy.crawler import Crawler, CrawlerRunner

# ---------------------------------------------------------------------------- site


@dataclass
class Page:
    """One resource of the test site."""

    body: bytes | str = b""
    status: int = 200
    content_type: str | None = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)

    def payload(self) -> bytes:
        return self.body.encode("utf-8") if isinstance(self.body, str) else self.body


def _pages_from_folder(folder: Path) -> dict[str, Page]:
    pages = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            if ctype.startswith("text/"):
                ctype += "; charset=utf-8"
            rel = "/" + path.relative_to(folder).as_posix()
            pages[rel] = Page(path.read_bytes(), content_type=ctype)
            if rel.endswith("/index.html"):
                pages[rel[: -len("index.html")]] = pages[rel]
    return pages


class _Handler(BaseHTTPRequestHandler):
    pages: dict[str, Page] = {}
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        self.hits.append(self.path)
        page = self.pages.get(self.path) or self.pages.get(self.path.split("?", 1)[0])
        if page is None:
            page = Page("<html><body><p>Not found</p></body></html>", status=404)
        payload = page.payload()
        self.send_response(page.status)
        if page.content_type is not None:
            self.send_header("Content-Type", page.content_type)
        for name, value in page.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


class Site:
    """A running local site: ``url(path)`` and the paths requested so far (``hits``)."""

    def __init__(self, pages: Mapping[str, Page | str | bytes] | Path) -> None:
        if isinstance(pages, Path):
            table = _pages_from_folder(pages)
        else:
            table = {path: p if isinstance(p, Page) else Page(p) for path, p in pages.items()}
        handler = type("Handler", (_Handler,), {"pages": table, "hits": []})
        self.handler = handler
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        # ``shutdown`` waits for the serving loop to look at its flag, every ``poll_interval`` (0.5 s by default:
        # half a second of each test's teardown per site); a wake-up every 20 ms costs next to no CPU.
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                                       name="test-site", daemon=True)
        self.thread.start()

    def url(self, path: str = "/") -> str:
        return self.base + path

    @property
    def hits(self) -> list[str]:
        return self.handler.hits

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def serve() -> Iterator[Callable[..., Site]]:
    sites: list[Site] = []

    def start(pages: Mapping[str, Page | str | bytes] | Path) -> Site:
        site = Site(pages)
        sites.append(site)
        return site

    yield start
    for site in sites:
        site.close()


# --------------------------------------------------------------------------- pages

_SYLLABLES = (
    "ba be bi bo bu da de di do du fa fe fi fo fu ga ge gi go gu ka ke ki ko ku la le li lo lu "
    "ma me mi mo mu na ne ni no nu pa pe pi po pu ra re ri ro ru sa se si so su ta te ti to tu "
    "va ve vi vo vu za ze zi zo zu"
).split()
#: 5,000 distinct pseudo-words (two or three syllables), the same on every machine.
_VOCABULARY = sorted(
    {a + b for a in _SYLLABLES for b in _SYLLABLES} | {a + b + "n" for a in _SYLLABLES[:45] for b in _SYLLABLES}
)[:5000]


def article_words(seed: int, count: int = 600) -> list[str]:
    """``count`` words of deterministic, seed-specific prose-like text.

    Each seed has its own word frequencies (a Zipf-like draw over its own
    shuffle of a 5,000-word vocabulary), so two seeds give clearly different
    texts under any feature setting, while small edits of one text stay near.
    """
    vocabulary, state = _shuffled_vocabulary(seed)
    rng = random.Random()
    rng.setstate(state)
    return rng.choices(vocabulary, cum_weights=_ZIPF_CUM_WEIGHTS, k=count)


@functools.lru_cache(maxsize=256)  # (40 kB a seed)
def _shuffled_vocabulary(seed: int) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """``seed``'s shuffle of the vocabulary and its random stream's state after it: the words
    ``article_words`` draws are the same, and the shuffle (most of a call's time) is done once a seed."""
    rng = random.Random(seed)
    vocabulary = list(_VOCABULARY)
    rng.shuffle(vocabulary)
    return tuple(vocabulary), rng.getstate()


#: ``article_words``' rank weights 1/(rank+1), accumulated once (``random.choices`` accumulates the
#: same way from ``weights=``: the words drawn are the same, without 5,000 additions a call).
_ZIPF_CUM_WEIGHTS = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(_VOCABULARY))))


def article_html(
    title: str,
    words: list[str],
    extra: str = "",
    links: list[str] = (),  # type: ignore[assignment]
    template: str = "a",
) -> str:
    """A page with navigation, the article (paragraphs of ``words``), ``extra`` text and a footer."""
    paragraphs = "".join(
        f"<p>{' '.join(words[i : i + 40]).capitalize()}.</p>" for i in range(0, len(words), 40)
    )
    nav = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    if template == "a":
        return (
            f"<!doctype html><html><head><title>{title}</title></head><body>"
            f'<nav class="menu"><ul>{nav}</ul></nav>'
            f"<main><article><h1>{title}</h1>{paragraphs}<p>{extra}</p></article></main>"
            f'<footer class="footer"><p>Copyright Example News. All rights reserved.</p></footer>'
            f"</body></html>"
        )
    return (
        f"<!doctype html><html><head><title>{title}</title></head><body>"
        f'<div id="header"><ul>{nav}</ul></div>'
        f'<div class="content"><h2>{title}</h2>{paragraphs}<div>{extra}</div></div>'
        f'<div id="sidebar">Popular stories and more</div></body></html>'
    )


# -------------------------------------------------------------------------- crawls

#: Settings every test crawl uses (quiet, local, no robots.txt).
BASE_SETTINGS: dict[str, Any] = {
    "ROBOTSTXT_OBEY": False,
    "TELNETCONSOLE_ENABLED": False,
    "LOG_LEVEL": "INFO",
    "LOGSTATS_INTERVAL": 0,
    "CONCURRENT_REQUESTS": 1,
    "RETRY_ENABLED": False,
}


class RecordingSpider(scrapy.Spider):
    """Requests ``start_urls`` in order (follows links with ``follow=True``) and records what it gets."""

    name = "recording"

    def __init__(self, start_urls: list[str] = (), follow: bool = False, dont_filter: tuple[str, ...] = (),  # type: ignore[assignment]
                 meta: dict[str, dict[str, Any]] | None = None, items: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = list(start_urls)
        self.follow = follow
        self.dont_filter_urls = set(dont_filter)
        self.request_meta = meta or {}
        self.make_items = items
        self.seen: list[dict[str, Any]] = []
        self.failures: list[Any] = []

    def _request(self, url: str) -> scrapy.Request:
        return scrapy.Request(
            url,
            callback=self.parse,
            errback=self.errback,
            dont_filter=url in self.dont_filter_urls,
            meta=dict(self.request_meta.get(url, {})),
        )

    async def start(self):  # type: ignore[override]
        for url in self.start_urls:
            yield self._request(url)

    def parse(self, response: scrapy.http.Response, **kwargs: Any) -> Any:
        self.seen.append(
            {
                "url": response.url,
                "flags": list(response.flags),
                "simhash": response.meta.get("simhash"),
                "duplicate_of": response.meta.get("simhash_duplicate_of"),
                "distance": response.meta.get("simhash_distance"),
                "skipped": response.meta.get("simhash_skipped"),
                "rule": response.meta.get("simhash_rule"),
            }
        )
        if self.make_items and isinstance(response, scrapy.http.TextResponse):
            yield {"url": response.url, "html": response.text}
        if self.follow and isinstance(response, scrapy.http.TextResponse):
            for href in response.css("a::attr(href)").getall():
                yield self._request(response.urljoin(href))

    def errback(self, failure: Any) -> None:
        self.failures.append(failure)

    @property
    def seen_urls(self) -> list[str]:
        return [entry["url"] for entry in self.seen]


async def run_crawl(spider_cls: type[scrapy.Spider], settings: Mapping[str, Any] | None = None, **kwargs: Any) -> Crawler:
    """Run one real crawl to completion and return its crawler (``crawler.spider``, ``crawler.stats``)."""
    runner = CrawlerRunner({**BASE_SETTINGS, **(settings or {})})
    crawler = runner.create_crawler(spider_cls)
    # Tests run as Twisted coroutines (pytest_twisted.ensureDeferred): they await Deferreds.
    await runner.crawl(crawler, **kwargs)
    return crawler


def simhash_stats(crawler: Crawler) -> dict[str, Any]:
    """The ``simhash/*`` stats of a finished crawl."""
    return {k: v for k, v in crawler.stats.get_stats().items() if k.startswith("simhash/")}


# ---------------------------------------------------------------- implementations
@pytest.fixture(params=["compiled", "python"])
def implementation(request) -> Iterator[str]:
    """Run a test on the C helpers and again on the pure-Python path (the extension is optional).

    Hypothesis tests run once and draw the implementation per example
    (``simhash_scrapy.core._native.switched``): pytest-twisted cannot run a parametrized
    hypothesis test twice.
    """
    from simhash_scrapy.core import _native

    if getattr(request.function, "is_hypothesis_test", False):
        if request.param == "python":
            pytest.skip("a hypothesis test draws the implementation per example")
        yield "drawn"
        return
    if request.param == "compiled" and not _native.speedups_enabled():
        pytest.skip("the C extensions are not built")
    with _native.switched(request.param == "compiled"):
        yield request.param


# ---------------------------------------------------------------- layers and markers
#: The layer of a test is the folder its file is in (``pyproject.toml`` registers the markers).
LAYERS = ("unit", "integration", "e2e")
#: Fixtures that start a real redis-server (and, for ``cluster``, a three-node Redis Cluster).
REDIS_FIXTURES = frozenset({"redis_server", "persistent_redis_server", "redis_cluster", "locked_redis",
                            "module_redis_server", "module_redis_cluster"})
#: Fixtures that start a three-node Redis Cluster for each test.
CLUSTER_FIXTURES = frozenset({"redis_cluster", "module_redis_cluster"})
#: Fixtures that start a real headless Chromium.
BROWSER_FIXTURES = frozenset({"browser"})
#: What a unit test must not use: a crawl of the local site, a server or a browser.
NOT_UNIT = frozenset({"serve"}) | REDIS_FIXTURES | BROWSER_FIXTURES
_TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks each test with its layer (its folder) and with what it needs, from its fixtures:
    ``redis`` (a real redis-server; every test of a ``test_redis_*`` file), ``cluster``, ``browser``.
    ``slow``: every Redis Cluster test (three servers per test), every browser test (Chromium starts
    in seconds), and the tests marked so in their
    files, by measured duration (``pytest --durations``: 2 s or more on the loaded 2-core machine;
    an e2e test is not slow for being e2e).  A test file outside the layer folders, or a unit test
    that crawls or starts a server, is an error (``-m unit`` must stay fast and self-contained)."""
    for item in items:
        parts = item.path.resolve().relative_to(_TESTS).parts
        layer = parts[0] if len(parts) > 1 else None
        if layer not in LAYERS:
            raise pytest.UsageError(f"{item.nodeid}: a test file belongs in tests/unit, tests/integration or tests/e2e")
        item.add_marker(layer)
        fixtures = set(getattr(item, "fixturenames", ()))
        if layer == "unit" and fixtures & NOT_UNIT:
            raise pytest.UsageError(f"{item.nodeid}: a unit test uses {sorted(fixtures & NOT_UNIT)}; move it to tests/integration")
        if fixtures & REDIS_FIXTURES or item.path.name.startswith("test_redis_"):
            item.add_marker("redis")
        if fixtures & CLUSTER_FIXTURES:
            item.add_marker("cluster")
            item.add_marker("slow")
        if fixtures & BROWSER_FIXTURES:
            item.add_marker("browser")
            item.add_marker("slow")  # starting Chromium alone takes seconds
