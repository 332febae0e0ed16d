"""Whether Scrapy's own parse of a response can stand in for ours (the crawl's shared parse).

No Scrapy import here: this module is part of the algorithm core.

The crawl reads the visible text from ``response.selector.root`` (``text.text_of_parsed``) instead of
parsing the page again, but only when that tree gives exactly the text ``text.extract_text`` gives
the raw bytes: the same codec as ``decode.source_codec`` (or an ASCII page read by two codecs that
read ASCII alike), no NUL characters, and no element deep enough that libxml2 may have stopped
building the tree.
"""

from __future__ import annotations

import codecs
import functools
from typing import Any

from lxml import etree

from .. import _native
from .decode import looks_binary, source_codec

__all__ = ["shared_parse_usable", "deeper_than", "SHARED_PARSE_MAX_DEPTH"]

#: Elements this deep mean a parse may have stopped at libxml2's depth limit (2048 levels),
#: dropping the rest of the page: such a tree is not used (the page is parsed again, see below).
SHARED_PARSE_MAX_DEPTH = 1024


@functools.lru_cache(maxsize=4)
def _depth_probe(depth: int) -> etree.XPath:
    return etree.XPath("boolean(/" + "/".join(["*"] * depth) + ")")


def deeper_than(root: etree._Element, depth: int) -> bool:
    """Whether the document of ``root`` has elements ``depth`` levels deep (one XPath walk, in C)."""
    if _native.walker is not None:
        return _native.walker.deeper_than(root, depth)  # type: ignore[no-any-return]  # (stops early)
    return bool(_depth_probe(depth)(root))


def _codec_name(name: str) -> str | None:
    try:
        return codecs.lookup(name).name
    except (LookupError, ValueError):
        return None


@functools.lru_cache(maxsize=64)
def _ascii_compatible(codec: str | None) -> bool:
    """Whether ``codec`` reads ASCII bytes as ASCII (then any such codec gives an ASCII page the same text)."""
    ascii_bytes = bytes(range(128))
    try:
        return codec is not None and ascii_bytes.decode(codec) == ascii_bytes.decode("ascii")
    except (LookupError, UnicodeDecodeError):
        return False


def shared_parse_usable(
    root: Any, raw: bytes, declared: str | None, decoded_with: str, text: str, depth_checked: int | None = None
) -> bool:
    """Whether a tree someone else parsed gives exactly ``extract_text(raw, declared)``'s text.

    For Scrapy's ``response.selector.root`` (parsel): ``decoded_with`` is
    ``response.encoding``, ``text`` is ``response.text`` and ``declared``
    the HTTP charset.  Not when ``to_utf8`` would decode the bytes otherwise
    (another codec, an ambiguous one, or binary bytes, which give no text), when the text holds
    NUL characters (parsel deletes them; here they separate words) or when the
    tree reaches ``SHARED_PARSE_MAX_DEPTH`` (libxml2 may have stopped
    building it).  The caller then fingerprints ``raw`` itself.  ``depth_checked``: the caller
    found no element that deep (``deeper_than``), so a smaller depth spares the depth walk.
    """
    codec = source_codec(raw, declared)
    if looks_binary(raw, codec) or codec in ("utf-16", "utf-32"):
        return False  # (UTF-16/32 without a BOM or an endianness: decoders disagree on the byte order)
    used = _codec_name(decoded_with)  # the codec really used (no windows-1252 for "ascii" here)
    if used != codec and not (raw.isascii() and _ascii_compatible(codec) and _ascii_compatible(used)):
        return False
    # (UTF-8 decodes to U+0000 from a NUL byte only: the bytes are searched then, one memchr, not the str)
    if (b"\x00" in raw) if used == "utf-8" else ("\x00" in text):
        return False
    return (depth_checked is not None and depth_checked <= SHARED_PARSE_MAX_DEPTH) or not deeper_than(
        root, SHARED_PARSE_MAX_DEPTH
    )

