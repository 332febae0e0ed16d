"""What a package index page shows works there (issue 39): project URLs, absolute README links, declared imports."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

from simhash_scrapy.core.settings.didyoumean import DOCS_URL

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
#: Markdown links and images (inline form), and HTML src/href attributes.
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|(?:src|href)=\"([^\"]+)\"")


def readme_links() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold no links
    return [a or b for a, b in LINK.findall(text)]


def test_project_urls() -> None:
    urls = PROJECT["urls"]
    assert set(urls) >= {"Homepage", "Documentation", "Changelog", "Issues"}
    assert all(u.startswith("https://") and "example" not in u and "TODO" not in u for u in urls.values())
    assert urls["Documentation"] == DOCS_URL and urls["Changelog"].startswith(DOCS_URL)
    assert urls["Issues"].startswith(urls["Homepage"])


def test_every_readme_link_is_absolute_or_an_anchor() -> None:
    """A package index shows the README without the repository: a relative link or image breaks there."""
    links = readme_links()
    assert len(links) > 20
    assert [link for link in links if not link.startswith(("https://", "http://", "#"))] == []
    # links into the docs site name pages it builds
    for link in links:
        if link.startswith(DOCS_URL):
            page = link[len(DOCS_URL) :].split("#", 1)[0] or "index.html"
            assert page.endswith(".html") and (ROOT / "docs" / (page[:-5] + ".md")).is_file(), link
        elif "raw.githubusercontent.com" in link:
            assert (ROOT / link.split("/main/", 1)[1]).is_file(), link
    # anchors name headings of the README
    headings = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-")
                for h in re.findall(r"^#+ (.+)$", (ROOT / "README.md").read_text(encoding="utf-8"), re.M)}
    assert [link for link in links if link.startswith("#") and link[1:] not in headings] == []


def test_the_third_party_modules_the_package_imports_are_declared() -> None:
    """Every module the package imports from outside the standard library is a declared dependency
    (``parsel`` and ``cssselect`` arrived through Scrapy only)."""
    declared = {re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].lower().replace("-", "_")
                for d in PROJECT["dependencies"] + PROJECT["optional-dependencies"]["redis"]
                + PROJECT["optional-dependencies"]["hiredis"]}
    imported = set()
    for path in (ROOT / "simhash_scrapy").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = {m for m in imported if m not in sys.stdlib_module_names and m != "simhash_scrapy"}
    assert third_party - declared == set(), "imported but not declared in pyproject.toml"
