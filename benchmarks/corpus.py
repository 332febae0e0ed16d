"""Real, human-written pages for the benchmarks (no generated filler text).

Preferred: Debian's Python documentation (``apt-get install python3-doc``):
real HTML pages of ~45-90 KB from /usr/share/doc/python3*/html.  Fallback, on
any machine: the same documentation's text that ships with CPython
(``pydoc_data.topics``), wrapped in a documentation-site template.
"""

from __future__ import annotations

import glob
import html
from pathlib import Path

DOC_GLOBS = ("/usr/share/doc/python3*/html/library/*.html", "/usr/share/doc/python3*/html/reference/*.html")

_TEMPLATE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<link rel="stylesheet" href="/static/site.css"><script src="/static/site.js"></script></head>
<body><div class="header"><a href="/">Docs home</a> | <a href="/search">Search</a> | <a href="/about">About</a></div>
<div class="sidebar"><h3>Navigation</h3><ul>{nav}</ul></div>
<div class="document"><div class="body" role="main"><h1>{title}</h1>{body}</div></div>
<div class="footer">&copy; Copyright the authors. Built with a static site generator.</div></body></html>"""


def html_pages(limit: int | None = None) -> tuple[str, list[bytes]]:
    """(source description, list of HTML pages as bytes)."""
    files: list[str] = []
    seen: set[str] = set()
    for pattern in DOC_GLOBS:
        for name in sorted(glob.glob(pattern)):
            real = str(Path(name).resolve())  # python3/, python3-dev/... are links to one folder
            if real not in seen and Path(real).stat().st_size > 10_000:
                seen.add(real)
                files.append(real)
    if files:
        pages = [Path(f).read_bytes() for f in files[:limit]]
        return f"Debian python3-doc HTML ({len(pages)} pages)", pages
    import pydoc_data.topics as topics

    names = sorted(topics.topics)
    nav = "".join(f'<li><a href="/{n}.html">{html.escape(n)}</a></li>' for n in names[:40])
    pages = []
    for name in names[:limit]:
        paragraphs = "".join(f"<p>{html.escape(p)}</p>" for p in topics.topics[name].split("\n\n") if p.strip())
        pages.append(_TEMPLATE.format(title=html.escape(name), nav=nav, body=paragraphs).encode("utf-8"))
    return f"pydoc_data topics in a doc template ({len(pages)} pages)", pages


def texts(limit: int | None = None) -> tuple[str, list[str]]:
    """Plain English texts (the visible text of the pages above)."""
    from simhash_scrapy import extract_text

    source, pages = html_pages(limit)
    return source, [extract_text(p) for p in pages]
