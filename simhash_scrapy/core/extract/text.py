"""Visible text of an HTML page, with lxml.

No Scrapy import here: this module is part of the algorithm core.

What is dropped: ``script``, ``style``, ``noscript``, ``template``, ``head``,
``svg`` (and other non-rendered embeds), comments and processing
instructions, and every element hidden with the ``hidden`` attribute,
``aria-hidden="true"`` or an inline ``display:none`` / ``visibility:hidden``.
Block elements end a line, so ``<p>a</p><p>b</p>`` gives ``"a\\nb"``; any other
run of whitespace (source newlines included) becomes one space, and empty lines
are removed.

Markup nested deeper than libxml2 builds trees (2048 levels) is read with a plain tag stripper
instead.  Every scan of the bytes runs in linear time on any input (no backtracking regex reads
markup).

The bytes are decoded first (``decode.to_utf8``: BOMs, declarations, UTF-16/32 sniffing, NULs,
binary bytes), so lxml always receives UTF-8.  ``text_of_parsed`` gives the same text from a tree
someone else parsed (Scrapy's); ``shared_parse.shared_parse_usable`` says when that tree may be
used.  Tree edits live in ``dom``.  ``to_utf8``, ``source_codec``, ``charset_of``,
``shared_parse_usable`` and ``deeper_than`` are imported here too, for callers that import them
from this module.
"""

from __future__ import annotations

import copy
import html as html_lib
import re
import threading
from collections.abc import Iterator

from lxml import etree

from .. import _native
from .boilerplate import keep_main_content
from .decode import charset_of, source_codec, to_utf8
from .dom import CONTROL_CHARS, NotUndoable, UndoableDrops, drop_elements
from .shared_parse import deeper_than, shared_parse_usable

__all__ = [
    "extract_text", "extract_text_bytes", "parse_html", "to_utf8", "visible_text_of", "NOT_RENDERED_TAGS",
    "BLOCK_TAGS", "charset_of", "shared_parse_usable", "source_codec", "deeper_than",
]  # fmt: skip

NOT_RENDERED_TAGS = (
    "script", "style", "noscript", "template", "head", "svg", "math",
    "iframe", "object", "embed", "canvas", "audio", "video", "map", "datalist",
)  # fmt: skip

BLOCK_TAGS = (
    "address", "article", "aside", "blockquote", "body", "br", "caption", "center",
    "dd", "details", "dialog", "dir", "div", "dl", "dt", "fieldset", "figcaption",
    "figure", "footer", "form", "frameset", "h1", "h2", "h3", "h4", "h5", "h6",
    "header", "hgroup", "hr", "html", "legend", "li", "main", "menu", "nav", "ol",
    "option", "p", "pre", "section", "summary", "table", "tbody", "td", "tfoot",
    "th", "thead", "title", "tr", "ul",
)  # fmt: skip

_HIDDEN_STYLE = re.compile(r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*hidden)\b", re.IGNORECASE)
# One walk with a predicate finds the candidates (a union of ``//@x/..`` steps merged node sets
# in quadratic time); the Python check in remove_invisible decides.  Whole-tree XPath walks cost as
# much as parsing, so they only run when the raw bytes hint at hidden markup.
_HIDDEN_XPATH = etree.XPath("//*[@hidden or @aria-hidden or @style]")  # (a union merges node sets: quadratic)
# Bytes that may be (part of) whitespace to the str regex above: ASCII whitespace
# (\x1c-\x1f included, as str.isspace() says) and any non-ASCII byte (U+00A0,
# U+2003... are whitespace too).  Over-matching only costs a tree walk.
_SPACE_LIKE = rb"\s\x1c-\x1f\x80-\xff"
_DISPLAY_NONE = re.compile(rb"[%s]*:[%s]*none" % (_SPACE_LIKE, _SPACE_LIKE), re.IGNORECASE)
_BEFORE_HIDDEN = frozenset(re.findall(rb"[:%s]" % _SPACE_LIKE, bytes(range(256))))


class _InTag:
    """Whether positions, asked in increasing order, are inside a tag: the last "<" before them
    comes after the last ">".  Each byte is scanned once over all the questions (linear time)."""

    __slots__ = ("data", "scanned", "last_lt", "last_gt")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.scanned = 0
        self.last_lt = self.last_gt = -1

    def __call__(self, pos: int) -> bool:
        if pos > self.scanned:
            lt = self.data.rfind(b"<", self.scanned, pos)
            gt = self.data.rfind(b">", self.scanned, pos)
            if lt >= 0:
                self.last_lt = lt
            if gt >= 0:
                self.last_gt = gt
            self.scanned = pos
        return self.last_lt > self.last_gt


def _occurrences(data: bytes, word: bytes) -> Iterator[int]:
    """Positions of ``word`` in ``data``, in increasing order."""
    pos = data.find(word)
    while pos >= 0:
        yield pos
        pos = data.find(word, pos + len(word))


def _may_hide(data: bytes) -> bool:
    """Whether some tag in the page may carry hidden / aria-hidden / display:none / visibility:hidden.

    Checks each occurrence (plain byte searches, much faster than a regex
    alternation or lower-casing the page) and keeps only those inside a tag,
    so prose and ``type="hidden"`` inputs do not force a whole-tree search.
    "idden" / "isplay" also find "Hidden" and "Display" (mixed case is read as the
    lower or upper case word's tail).  Linear time: each pass asks ``_InTag`` in order.
    """
    for word in (b"idden", b"IDDEN"):
        in_tag = _InTag(data)
        for pos in _occurrences(data, word):
            before = data[pos - 2 : pos - 1]
            if (
                before in _BEFORE_HIDDEN
                or (before == b"-" and data[pos - 6 : pos - 1].lower() == b"aria-")
            ) and in_tag(pos):
                return True
    for word in (b"isplay", b"ISPLAY"):
        in_tag = _InTag(data)
        for pos in _occurrences(data, word):
            if _DISPLAY_NONE.match(data, pos + 6) and in_tag(pos):
                return True
    return False


# lxml refuses to *set* text holding C0 controls (libxml2 does keep them when parsing).
# lxml parsers must not be shared between threads.
_local = threading.local()


def _parser() -> etree.HTMLParser:
    parser = getattr(_local, "parser", None)
    if parser is None:
        # huge_tree lifts libxml2's limits on text node size (50 MB pages).
        parser = _local.parser = etree.HTMLParser(
            encoding="utf-8",
            remove_comments=True,
            remove_pis=True,
            huge_tree=True,
            no_network=True,
            collect_ids=False,  # no id hash table: faster, and ids are not needed
        )
    return parser


def _trie_pattern(words: list[str]) -> str:
    """A regex alternation of ``words`` branching one letter at a time (no word is tried in full)."""
    if words == [""]:
        return ""
    groups: dict[str, list[str]] = {}
    for word in sorted(words):
        groups.setdefault(word[:1], []).append(word[1:])
    branches = [first + _trie_pattern(rests) for first, rests in groups.items() if first]
    optional = "" in groups
    body = branches[0] if len(branches) == 1 and not optional else "(?:" + "|".join(branches) + ")"
    return body + "?" if optional else body


# The tag stripper for documents lxml cannot build.  Linear on any input: every search goes
# forward from where the last one stopped, an element or comment that never closes runs to the
# end of the document (as in a browser), and no regex can scan past the last ">".
_CRUDE_DROPPED = ("script", "style", "noscript", "template", "head", "svg", "math")
_CRUDE_OPEN = re.compile(rb"<(?:!--|(%s)(?=[\s/>]))" % _trie_pattern(list(_CRUDE_DROPPED)).encode("ascii"), re.IGNORECASE)
_CRUDE_CLOSE = {
    name.encode("ascii"): re.compile(rb"</%s[\s/>]" % name.encode("ascii"), re.IGNORECASE) for name in _CRUDE_DROPPED
}
_CRUDE_TAG_START = re.compile(rb"<[a-z/!?]", re.IGNORECASE)
# A run of block tags (and the whitespace between them) is one line break.
# (Each pattern starts with a literal "<" so the regex engine skips ahead to candidates.)
_CRUDE_BLOCK_TAG = rb"/?%s(?![a-z0-9:_-])[^>]*>\s*" % _trie_pattern(list(BLOCK_TAGS)).encode("ascii")
_CRUDE_BLOCK = re.compile(rb"<%s(?:<%s)*" % (_CRUDE_BLOCK_TAG, _CRUDE_BLOCK_TAG), re.IGNORECASE)
_CRUDE_TAG = re.compile(rb"<[a-z/!?][^>]*>(?:<[a-z/!?][^>]*>)*", re.IGNORECASE)


def _crude_text(data: bytes) -> str:
    """Tag stripper for documents lxml cannot build (nesting deeper than 2048 levels), in linear time.

    Comments and non-rendered elements (``_CRUDE_DROPPED``) are removed; one that never
    closes hides the rest of the page, except ``head`` (a browser closes it at the body).
    Block tags end a line, other tags go; a tag still open at the end of the page is dropped.
    """
    parts = []
    pos = 0
    while True:
        opening = _CRUDE_OPEN.search(data, pos)
        if opening is None:
            parts.append(data[pos:])
            break
        parts.append(data[pos : opening.start()])
        parts.append(b" ")
        name = opening.group(1)
        if name is None:  # a comment
            end = data.find(b"-->", opening.end())
            end = -1 if end < 0 else end + 3
        else:
            name = name.lower()
            closing = _CRUDE_CLOSE[name].search(data, opening.end())
            if closing is None and name == b"head":
                closing = opening  # only the tag goes
            end = -1 if closing is None else data.find(b">", closing.end() - 1)
            end = -1 if end < 0 else end + 1
        if end < 0:
            break  # never closed: the rest of the page is inside it
        pos = end
    text = b"".join(parts)
    # A tag open at the end of the page (no ">" after it) is not text.
    cut = _CRUDE_TAG_START.search(text, text.rfind(b">") + 1)
    if cut is not None:
        text = text[: cut.start()]
    text = _CRUDE_TAG.sub(b"", _CRUDE_BLOCK.sub(b"\n", text))
    return html_lib.unescape(text.decode("utf-8", "replace"))


class TooDeep(Exception):
    """libxml2 stopped building the tree at its depth limit (2048 levels)."""


class _Parsed:
    """A parsed page and hints from its raw bytes."""

    __slots__ = ("root", "data")

    def __init__(self, root: etree._Element, data: bytes) -> None:
        self.root = root
        self.data = data


def _parse(html: str | bytes, encoding: str | None) -> _Parsed | None:
    data = to_utf8(html, encoding)
    if not data.strip():
        return None
    root = _parse_bytes(data)
    return None if root is None else _Parsed(root, data)


def parse_html(html: str | bytes, encoding: str | None = None) -> etree._Element | None:
    """Parse ``html`` into an lxml tree; ``None`` when there is nothing to parse.

    Raises ``TooDeep`` when the markup nests deeper than libxml2 builds trees.
    """
    parsed = _parse(html, encoding)
    return None if parsed is None else parsed.root


def _parse_bytes(data: bytes) -> etree._Element | None:
    parser = _parser()
    try:
        root = etree.fromstring(data, parser)
    except (etree.ParserError, etree.XMLSyntaxError, ValueError):
        return None
    for error in parser.error_log:
        if error.type == etree.ErrorTypes.ERR_RESOURCE_LIMIT:
            raise TooDeep(data)
    return root


def hidden_style(style: str) -> bool:
    """Whether an inline ``style`` value hides its element (display:none / visibility:hidden)."""
    return _HIDDEN_STYLE.search(style) is not None


def aria_hidden(value: str) -> bool:
    """Whether an ``aria-hidden`` value hides its element."""
    return value.strip().lower() == "true"


def remove_invisible(root: etree._Element, data: bytes | None = None, strip: bool = True) -> None:
    """Remove non-rendered and hidden elements from the tree, in place.

    ``data`` (the page's UTF-8 bytes) lets the pure-Python path skip tree
    walks for markup the page does not contain.  ``strip=False``: the caller
    removed the non-rendered elements already.
    """
    if _native.walker is not None:
        # One C walk finds the outermost elements to remove (hidden ones included).
        drop_elements(_native.walker.invisible_elements(root))
        return
    if strip:
        # (Not etree.strip_elements: it leaves the tails as a run of text nodes, which lxml joins
        # again, in quadratic time, at every read of the text before them.)
        drop_elements(list(root.iter(*NOT_RENDERED_TAGS)))
    if data is not None and not _may_hide(data):
        return
    drop_elements(
        element
        for element in _HIDDEN_XPATH(root)
        if element.get("hidden") is not None
        or aria_hidden(element.get("aria-hidden") or "")
        or hidden_style(element.get("style") or "")
    )


def _normalise_lines(text: str) -> str:
    lines = (" ".join(line.split()) for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


# Block boundaries in extract_text are marked with a private-use character so
# that newlines in the source (rendered as spaces by browsers) are not mistaken
# for them; the fingerprint path marks them with a plain newline.
_BLOCK_MARK = "\ue000"
_SPACE_RUNS = re.compile(r"[\s\x00-\x1f]+")  # control characters render as nothing; keep words apart


def _text_stylesheet(marker: str) -> etree.XSLT:
    """XSLT that outputs the text of a tree with ``marker`` around every block element.

    libxslt does in one C pass what a Python loop over the block elements
    plus ``tostring(method="text")`` did in about twice the time.
    """
    marker_ref = "&#%d;" % ord(marker)
    blocks = "|".join(BLOCK_TAGS)
    return etree.XSLT(
        etree.XML(
            '<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">'
            '<xsl:output method="text" encoding="utf-8"/>'
            f'<xsl:template match="{blocks}"><xsl:text>{marker_ref}</xsl:text><xsl:apply-templates/>'
            f"<xsl:text>{marker_ref}</xsl:text></xsl:template>"
            "</xsl:stylesheet>"
        )
    )


def _stylesheet(name: str, marker: str) -> etree.XSLT:
    sheet = getattr(_local, name, None)
    if sheet is None:
        sheet = _text_stylesheet(marker)
        setattr(_local, name, sheet)
    return sheet


_STYLESHEET_NAMES = {_BLOCK_MARK: "display_text", "\n": "token_text"}
_MARKER_BYTES = {marker: marker.encode("utf-8") for marker in _STYLESHEET_NAMES}


def _text_bytes(tree: etree._Element, marker: str) -> bytes:
    """The text of ``tree`` with ``marker`` around every block element, as UTF-8 bytes.

    The C walk skips non-rendered and hidden elements itself; the XSLT
    stylesheet needs them removed from the tree first.
    """
    if _native.walker is not None:
        text: bytes = _native.walker.visible_text(tree, _MARKER_BYTES[marker])
    else:
        text = bytes(_stylesheet(_STYLESHEET_NAMES[marker], marker)(tree))
    # C0 controls as spaces, as ``dom.xml_safe`` leaves a moved tail: whether a control character
    # survives would otherwise depend on which parse built the tree (Scrapy's or ours) and on whether
    # an element next to it was removed, and the template learner reads these lines.
    return text.translate(_CONTROL_BYTES_AS_SPACES)


_CONTROL_BYTES_AS_SPACES = bytes(ord(CONTROL_CHARS.get(byte, chr(byte))) for byte in range(256))


def visible_text_of(root: etree._Element) -> str:
    """Text of a tree cleaned by ``remove_invisible``, one line per block (the C walk also takes it uncleaned)."""
    text = _text_bytes(root, _BLOCK_MARK).decode("utf-8")
    return _normalise_lines(_SPACE_RUNS.sub(" ", text).replace(_BLOCK_MARK, "\n"))


def _prepared(root: etree._Element, data: bytes | None, main_content: bool, strip: bool = True) -> etree._Element:
    """The subtree whose text is wanted, with what ``_text_bytes`` cannot skip removed (in place)."""
    if main_content:

        remove_invisible(root, data, strip=strip)  # the layout is judged on what is shown
        return keep_main_content(root, data)
    if _native.walker is None:
        remove_invisible(root, data, strip=strip)
    return root  # the C walk skips invisible elements: the tree is left as it is


def _cleaned_tree(html: str | bytes, encoding: str | None, main_content: bool) -> etree._Element | str | None:
    """The tree ready for ``_text_bytes``, or the text itself for documents lxml cannot build, or None."""
    try:
        parsed = _parse(html, encoding)
    except TooDeep as too_deep:
        return _normalise_lines(_crude_text(too_deep.args[0]))
    if parsed is None:
        return None
    return _prepared(parsed.root, parsed.data, main_content)


def extract_text(html: str | bytes, encoding: str | None = None, main_content: bool = False) -> str:
    """The visible text of ``html`` (or only its main content), lines separated by ``\\n``.

    Never raises on bad markup or bad bytes: a page with nothing visible gives ``""``.
    """
    tree = _cleaned_tree(html, encoding, main_content)
    if tree is None or isinstance(tree, str):
        return tree or ""
    return visible_text_of(tree)


def text_of_parsed(
    root: etree._Element, raw: bytes | None = None, main_content: bool = False, as_bytes: bool = False
) -> str | bytes:
    """The text ``extract_text`` (or ``extract_text_bytes``) gives, from a tree someone else parsed.

    For Scrapy's ``response.selector.root``: the spider's selectors reuse that
    parse, so fingerprinting does not parse the page a second time.  The tree
    is left exactly as it was: the C walk only reads it; otherwise it is
    cleaned in place and every removal is undone afterwards (cheaper than
    copying it: a copy costs half a parse).
    Not thread-safe for the same tree: nothing else may read it meanwhile.
    ``raw``, the page's bytes, only lets hidden-markup checks be skipped on
    pages that have none.
    """
    if root is None or not isinstance(root.tag, str):
        return b"" if as_bytes else ""
    if _native.walker is not None and not main_content:
        return _text_of_cleaned(root, raw, main_content, as_bytes, strip=False)
    try:
        with UndoableDrops() as drops:
            try:
                if _native.walker is None:
                    drop_elements(list(root.iter(*NOT_RENDERED_TAGS)))  # strip_elements would not be undoable
                return _text_of_cleaned(root, raw, main_content, as_bytes, strip=False)
            finally:
                drops.undo()
    except NotUndoable:
        # Rare (control characters next to a removed element): clean a copy instead.
        return _text_of_cleaned(copy.deepcopy(root), raw, main_content, as_bytes, strip=True)


def _text_of_cleaned(
    tree: etree._Element, raw: bytes | None, main_content: bool, as_bytes: bool, strip: bool
) -> str | bytes:
    tree = _prepared(tree, raw, main_content, strip=strip)
    if as_bytes:
        return _text_bytes(tree, "\n")
    return visible_text_of(tree)


def extract_text_bytes(html: str | bytes, encoding: str | None = None, main_content: bool = False) -> bytes:
    """The same words as ``extract_text`` as UTF-8 bytes, whitespace not normalised.

    The fingerprint path uses it: the tokeniser ignores whitespace and reads
    bytes, so decoding, re-encoding and line clean-up would be wasted work.
    """
    tree = _cleaned_tree(html, encoding, main_content)
    if tree is None or isinstance(tree, str):
        return (tree or "").encode("utf-8")
    return _text_bytes(tree, "\n")  # any whitespace separates tokens


#: The compiled walk when available (see ``_walker.c``); both paths give the same text.
if _native.walker is not None:
    _native.walker.configure(NOT_RENDERED_TAGS, BLOCK_TAGS, hidden_style, aria_hidden)
