"""The detector tests' page sets (``sample_pages``), shared by the e2e parity test and the store's
integration test (a faster layer never imports an e2e test module: tests/unit/test_architecture.py)."""

from __future__ import annotations

import json
from pathlib import Path

SETS = Path(__file__).resolve().parents[1] / "benchmarks" / "quality"


def steps_pages() -> list[tuple[str, bytes]]:
    """Pages that steps 5-7 match (the template, second-simhash and containment crawl tests' sites), one
    host each."""
    import test_containment_crawl
    import test_template_crawl

    sites = {
        "tmpl.test": test_template_crawl.site_pages(),
        "edits.test": test_template_crawl.edit_pages(),
        "contain.test": test_containment_crawl.site_pages(),
    }
    return [(f"http://{host}{path}", body.encode()) for host, table in sites.items() for path, body in table.items()]


def shop_pages() -> list[tuple[str, bytes]]:
    """The shop crawl test's pages: products declaring their identity, variants named by their address,
    tracking copies, soft-404 shells (identity signals decide their scopes)."""
    import test_shop_crawl

    table = {**test_shop_crawl.shop_pages(), **test_shop_crawl.variant_pages()}
    return [(f"http://shop.test{path}", body.encode()) for path, body in table.items()]


def sample_pages(name: str) -> list[tuple[str, bytes]]:
    """The set's pages, ``(url, body)``, in its crawl order (``"steps"``: ``steps_pages``; ``"shop"``:
    ``shop_pages``)."""
    if name == "steps":
        return steps_pages()
    if name == "shop":
        return shop_pages()
    root = SETS / name
    rows = [json.loads(line) for line in (root / "manifest.jsonl").read_text().splitlines() if line.strip()]
    rows.sort(key=lambda row: row["order"])
    return [(row["url"], (root / row["file"]).read_bytes()) for row in rows]


def clusters(*pair_sets: set[tuple[str, str]]) -> dict[str, str]:
    """Each page's cluster (a representative page) in the union of the pairs' clusters."""
    parent: dict[str, str] = {}

    def find(url: str) -> str:
        while parent.get(url, url) != url:
            url = parent[url]
        return url

    for pairs in pair_sets:
        for a, b in pairs:
            parent[find(a)] = find(b)
    return {url: find(url) for url in parent}
