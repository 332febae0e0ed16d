"""Decoding: any page's bytes as the UTF-8 bytes lxml parses, and the codec they are read with.

No Scrapy import here: this module is part of the algorithm core.

Decoding never raises: a byte-order mark (UTF-8, UTF-16, UTF-32), else the declared encoding
(the argument), else UTF-16/32 when the NULs in the first bytes show it (no BOM needed), else the
page's XML declaration or ``<meta charset>`` is used when Python knows it (a BOM wins over a
declaration, as in browsers and Scrapy; UTF-16/32 named in a declaration readable as ASCII means
UTF-8, WHATWG's prescan rule), invalid bytes become U+FFFD, undeclared non-UTF-8 bytes are read
as windows-1252 (the HTML default).  NUL becomes U+FFFD before parsing (the HTML rule), so a NUL
in a tag, a comment or a script does not stop the parse; other C0 control characters separate
words like spaces.  Bytes that are not text at all (more than 8% control bytes in the first
KiB: images, archives) give no text, unless they start as markup.  Every scan of the bytes runs
in linear time on any input.  lxml always receives UTF-8 bytes (``to_utf8``), so an
``<?xml ... encoding=...?>`` declaration cannot make it refuse the input.

``text`` parses what ``to_utf8`` gives; ``shared_parse`` compares ``source_codec`` with the codec
Scrapy decoded a response with.
"""

from __future__ import annotations

import codecs
import re

from .. import _native

__all__ = ["to_utf8", "source_codec", "looks_binary", "charset_of"]

# Encoding declarations looked for in the first bytes of a document: where a tag starts, then
# the key inside that tag, then its value (each step a plain search or a match anchored at a
# literal, so the scan is linear: a flood of "<meta" without ">" costs one pass, not one per tag).
_DECLARATION_START = re.compile(rb"<\?xml|<meta")
_DECLARATION_VALUE = re.compile(rb"""\s*=\s*["']?\s*([a-z0-9._:-]+)""")
_SNIFF_BYTES = 4096
# UTF-32 marks first: FF FE 00 00 also starts with UTF-16-LE's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"),
)  # fmt: skip
_BOM_OF = {name: bom for bom, name in _BOMS}


def _known_codec(name: str | None) -> str | None:
    if not name:
        return None
    try:
        codec = codecs.lookup(name.strip().lower())
    except (LookupError, ValueError):
        return None
    # Pages that declare latin-1 / ascii are read as windows-1252, as browsers do.
    if codec.name in ("latin-1", "iso8859-1", "ascii"):
        return "cp1252"
    return codec.name


# WHATWG's "binary data bytes" (NUL included).
_BINARY_BYTES = bytes(c for c in range(32) if c not in (9, 10, 12, 13, 27))
_BINARY_SNIFF = 1024
_BINARY_SHARE = 0.08
# Bytes that start as markup ("<" then a letter, "!", "?" or "/", after whitespace or NULs) are
# HTML whatever else they hold: a browser shows such a page, NULs and control bytes as U+FFFD.
_MARKUP_START = re.compile(rb"[\t\n\f\r \x00]*<[A-Za-z!?/]")


def looks_binary(data: bytes, codec: str | None = None) -> bool:
    """True for bytes that are not text: images, archives, PDFs with binary streams...

    More than 8% (and more than 8) control bytes (NUL included) in the first KiB, unless the
    bytes start as markup or the page is UTF-16/32 (declared or sniffed: NULs are normal there).
    """
    if codec and codec.startswith(("utf-16", "utf-32")):
        return False
    head = data[:_BINARY_SNIFF]
    if not head:
        return False
    controls = len(head) - len(head.translate(None, _BINARY_BYTES))
    return controls > 8 and controls > _BINARY_SHARE * len(head) and _MARKUP_START.match(data) is None


def _declared_codec(data: bytes) -> str | None:
    """The encoding an ``<?xml ... encoding=...?>`` or ``<meta ... charset=...>`` in the first
    ``_SNIFF_BYTES`` names, when Python knows it.  UTF-16/32 named there means UTF-8: a page
    whose declaration reads as ASCII is not in UTF-16/32 (the WHATWG prescan rule)."""
    head = data[:_SNIFF_BYTES].lower()
    pos = 0
    while True:
        start = _DECLARATION_START.search(head, pos)
        if start is None:
            return None
        end = head.find(b">", start.end())
        stop = len(head) if end < 0 else end
        key = b"encoding" if start.group() == b"<?xml" else b"charset"
        found = head.find(key, start.end(), stop)
        while found >= 0:
            value = _DECLARATION_VALUE.match(head, found + len(key), stop)
            if value is not None:
                codec = _known_codec(value.group(1).decode("ascii"))
                if codec is not None and codec.startswith(("utf-16", "utf-32")):
                    return "utf-8"
                return codec
            found = head.find(key, found + len(key), stop)
        if end < 0:
            return None
        pos = end


# UTF-16/32 without a byte-order mark are read from where the NULs fall in the first code units
# that are not NUL themselves: ASCII-range text in UTF-16-LE has its NUL in the second byte of
# (nearly) every unit, in UTF-32-LE in the last three, etc.
_WIDE_SNIFF = 512
_WIDE_MIN_UNITS = 4
_WIDE_SHARE = 0.5  # at least this share of the units must show the pattern...
_WIDE_OTHER = 0.05  # ... and at most this share the other byte order's


def _wide_codec(data: bytes) -> str | None:
    """``utf-32-le``/``-be`` or ``utf-16-le``/``-be`` when the NULs in the first bytes say so, else None."""
    n = min(len(data), _WIDE_SNIFF) // 4 * 4
    if n < 2 * _WIDE_MIN_UNITS or data.find(0, 0, n) < 0:
        return None
    quads = [data[i : i + 4] for i in range(0, n, 4)]
    quads = [q for q in quads if q != b"\0\0\0\0"]
    if len(quads) >= _WIDE_MIN_UNITS:
        little = sum(1 for q in quads if q[0] and not q[2] and not q[3])
        big = sum(1 for q in quads if q[3] and not q[0] and not q[1])
        if little >= (1 - _WIDE_OTHER) * len(quads):
            return "utf-32-le"
        if big >= (1 - _WIDE_OTHER) * len(quads):
            return "utf-32-be"
    pairs = [data[i : i + 2] for i in range(0, n, 2)]
    pairs = [p for p in pairs if p != b"\0\0"]
    if len(pairs) < _WIDE_MIN_UNITS:
        return None
    little = sum(1 for p in pairs if p[0] and not p[1])
    big = sum(1 for p in pairs if p[1] and not p[0])
    if little >= _WIDE_SHARE * len(pairs) and big <= _WIDE_OTHER * len(pairs):
        return "utf-16-le"
    if big >= _WIDE_SHARE * len(pairs) and little <= _WIDE_OTHER * len(pairs):
        return "utf-16-be"
    return None


def _bom_codec(data: bytes) -> str | None:
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name
    return None


def _choose_codec(raw: bytes, encoding: str | None) -> str | None:
    """A BOM, else ``encoding``, else UTF-16/32 sniffed from the NULs, else the page's own
    declaration; ``None`` when none says (the caller then tries UTF-8).  ``utf-16``/``utf-32``
    without a BOM take the byte order the NULs show, else little-endian (as WHATWG's "UTF-16")."""
    codec = _bom_codec(raw) or _known_codec(encoding)
    if codec is None:
        return _wide_codec(raw) or _declared_codec(raw)
    if codec in ("utf-16", "utf-32"):
        sniffed = _wide_codec(raw)
        return sniffed if sniffed is not None and sniffed.startswith(codec) else codec + "-le"
    return codec


def _is_utf8(raw: bytes) -> bool:
    """Whether ``raw`` is well-formed UTF-8 (the C check builds no str; both give the same answer)."""
    if _native.speedups is not None:
        utf8: bool = _native.speedups.is_utf8(raw)
        return utf8
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def source_codec(raw: bytes, encoding: str | None = None) -> str:
    """The codec ``to_utf8`` reads ``raw`` with: a BOM, else ``encoding``, else UTF-16/32 sniffed
    from the NULs, else the page's own declaration, else UTF-8 when the bytes are valid UTF-8 and
    windows-1252 when not."""
    codec = _choose_codec(raw, encoding)
    if codec is None:
        return "utf-8" if _is_utf8(raw) else "cp1252"
    return codec


_REPLACEMENT = "\ufffd".encode("utf-8")


def to_utf8(html: str | bytes, encoding: str | None = None) -> bytes:
    """``html`` as valid UTF-8 bytes, NULs made U+FFFD (see the module docstring for the rules)."""
    if isinstance(html, str):
        data = html.encode("utf-8", "replace")
    elif isinstance(html, (bytes, bytearray, memoryview)):
        raw = bytes(html)
        codec = _choose_codec(raw, encoding)
        if looks_binary(raw, codec):
            return b""
        if codec in (None, "utf-8"):
            if _is_utf8(raw):
                data = raw
            else:
                fallback = "utf-8" if codec else "cp1252"
                data = raw.decode(fallback, "replace").encode("utf-8")
        else:
            if _bom_codec(raw) == codec:
                raw = raw[len(_BOM_OF[codec]) :]
            data = raw.decode(codec, "replace").encode("utf-8", "replace")
        if data.startswith(codecs.BOM_UTF8):
            data = data[3:]
    else:
        raise TypeError(f"html must be str or bytes, got {type(html).__name__}")
    # NUL is a parse error that browsers read as U+FFFD (libxml2 too, in text): made so here, a NUL
    # inside a tag, a comment or a script is read the same way, and parsing goes on.  Other C0
    # control characters stay: libxml2 keeps them as text, the tokeniser treats them as separators
    # and extract_text turns them into spaces.
    if b"\x00" in data:
        data = data.replace(b"\x00", _REPLACEMENT)
    return data


_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([^"';,\s]+)""", re.IGNORECASE)


def charset_of(content_type: str | bytes | None) -> str | None:
    """The ``charset`` label of an HTTP ``Content-Type`` value, as given (``None`` if absent)."""
    if content_type is None:
        return None
    if isinstance(content_type, bytes):
        content_type = content_type.decode("latin-1")
    match = _CHARSET.search(content_type)
    return match.group(1) if match else None
