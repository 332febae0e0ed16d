"""A reference extractor for the tests: the same visible text as ``extract_text``, built with BeautifulSoup.

Slow (pure-Python parser) and independent of lxml: the tests compare the two
on real pages, and ``benchmarks/core.py`` times it.  BeautifulSoup is a test
dependency only.
"""

from __future__ import annotations

from simhash_scrapy.core.extract.text import BLOCK_TAGS, NOT_RENDERED_TAGS, aria_hidden, hidden_style, to_utf8
from simhash_scrapy.core.extract.text import _BLOCK_MARK, _SPACE_RUNS, _normalise_lines

__all__ = ["extract_text_bs4"]


def extract_text_bs4(html: str | bytes, encoding: str | None = None) -> str:
    """The same visible text as ``extract_text``, built with BeautifulSoup's ``html.parser``.

    A slow, independent reference implementation (pure-Python parser; 30-60x
    slower than the lxml path): the tests compare the two on real pages, and
    it is there for environments where lxml's parser is not wanted.  Same
    rules: decoding, dropped and hidden elements, one line per block.
    """
    from bs4 import BeautifulSoup, Comment

    data = to_utf8(html, encoding)
    if not data.strip():
        return ""
    soup = BeautifulSoup(data, "html.parser", from_encoding="utf-8")
    for element in soup.find_all(NOT_RENDERED_TAGS):
        element.decompose()
    for comment in soup.find_all(string=lambda node: isinstance(node, Comment)):
        comment.extract()
    for element in soup.find_all(True):
        if element.decomposed:
            continue
        attrs = element.attrs
        if (
            "hidden" in attrs
            or aria_hidden(str(attrs.get("aria-hidden", "")))
            or hidden_style(str(attrs.get("style", "")))
        ):
            element.decompose()
    for element in soup.find_all(BLOCK_TAGS):
        element.insert_before(_BLOCK_MARK)
        element.append(_BLOCK_MARK)
    text = soup.get_text()
    return _normalise_lines(_SPACE_RUNS.sub(" ", text).replace(_BLOCK_MARK, "\n"))
