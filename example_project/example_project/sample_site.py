"""Serve the bundled sample site (``../sample_site``) on 127.0.0.1, on a free port.

The pages, the URL -> file routes and the ground truth are static files made by
``sample_site/build.py``.  Every URL, query string included, maps to one file,
so ``/articles/try.html?utm_source=mastodon&utm_medium=social`` is a real page
of its own (same article, another timestamp, another ad), exactly as a
crawler meets it.  Unknown URLs get a 404 page.

    >>> site = SampleSite()
    >>> base_url = site.start()      # "http://127.0.0.1:<port>/"
    >>> site.stop()

Also runnable on its own, to look at the site in a browser::

    python -m example_project.sample_site [--port 8000]
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["SITE_DIR", "SampleSite", "load_ground_truth"]

SITE_DIR = Path(__file__).resolve().parent.parent / "sample_site"

_NOT_FOUND = (
    b"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Not found</title></head>"
    b"<body><h1>Not found</h1><p>There is no page at this address.</p></body></html>"
)


def load_ground_truth(site_dir: Path = SITE_DIR) -> dict[str, Any]:
    """The sample site's ground truth: ``groups`` of near-duplicate URLs and each page's ``role``."""
    return json.loads((site_dir / "ground_truth.json").read_text(encoding="utf-8"))


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (http.server naming)
        self._respond(with_body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._respond(with_body=False)

    def _respond(self, with_body: bool) -> None:
        route = self.server.routes.get(self.path)
        if route is None:
            status, body, ctype = 404, _NOT_FOUND, "text/html; charset=utf-8"
        else:
            status, body, ctype = 200, self.server.pages[route["file"]], route["content_type"]
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # Scrapy logs every request already.


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    routes: dict[str, dict[str, str]]
    pages: dict[str, bytes]


class SampleSite:
    """The sample site, served from a daemon thread until ``stop()``."""

    def __init__(self, site_dir: Path = SITE_DIR, host: str = "127.0.0.1", port: int = 0) -> None:
        self.site_dir = Path(site_dir)
        self.host = host
        self.port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the sample site is not running; call start() first")
        return f"http://{self.host}:{self._server.server_address[1]}/"

    def start(self) -> str:
        """Load the pages, start serving, return the base URL (``http://127.0.0.1:<port>/``)."""
        if self._server is not None:
            return self.base_url
        routes = json.loads((self.site_dir / "routes.json").read_text(encoding="utf-8"))
        pages = {route["file"]: (self.site_dir / "pages" / route["file"]).read_bytes() for route in routes.values()}
        server = _Server((self.host, self.port), _Handler)
        server.routes, server.pages = routes, pages
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="sample-site", daemon=True)
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None


if __name__ == "__main__":  # pragma: no cover
    import argparse
    import time

    parser = argparse.ArgumentParser(description="Serve the simhash-scrapy example's sample site.")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    site = SampleSite(port=args.port)
    print(f"Serving {site.start()} (Ctrl-C stops)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        site.stop()
