"""Tree edits that can be undone: removing an element while keeping its tail text.

The crawl fingerprints Scrapy's own parse of a page (``response.selector``)
in place, so every removal made on it must be undone afterwards: inside an
``UndoableDrops()`` block each ``drop_element`` is journalled, and ``undo()``
puts the tree back byte for byte.  Both visible-text cleaning (``text``) and
main-content extraction (``boilerplate``) remove elements through here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from lxml import etree

from .. import deadline

__all__ = ["drop_element", "drop_elements", "set_tail", "xml_safe", "UndoableDrops", "NotUndoable", "CONTROL_CHARS"]

CONTROL_CHARS = dict.fromkeys((c for c in range(32) if c not in (9, 10, 13)), " ")


def xml_safe(text: str) -> str:
    """``text`` with the C0 control characters lxml refuses in assigned text made spaces."""
    return text.translate(CONTROL_CHARS) if not text.isprintable() else text


_local = threading.local()


def drop_element(element: etree._Element) -> None:
    """Remove ``element`` and its subtree but keep its tail text (see ``drop_elements``)."""
    drop_elements((element,))


def drop_elements(elements: Iterable[etree._Element]) -> None:
    """Remove each of ``elements`` and its subtree but keep its tail text.

    The tails moved to one neighbour (many removed siblings in a row) are
    joined once, at the end: time and memory linear in the page, however
    many elements are removed.  Inside ``UndoableDrops()`` every removal is
    recorded so it can be undone; a neighbour's text is saved once, the
    first time a tail is moved to it.
    """
    journal: _Journal | None = getattr(_local, "journal", None)
    pending: dict[tuple[etree._Element, bool], list[str]] = {}
    try:
        for count, element in enumerate(elements, 1):
            _drop(element, journal, pending)
            if not count % 4096:
                deadline.check()  # (a page past its CPU time is cut: core.deadline)
    finally:
        for (anchor, is_tail), pieces in pending.items():
            _set_text(anchor, is_tail, "".join(pieces))


def _drop(element: etree._Element, journal: _Journal | None, pending: dict[tuple[etree._Element, bool], list[str]]) -> None:
    parent = element.getparent()
    if parent is None:
        return
    own = pending.pop((element, True), None)
    if own is not None:  # tails moved to this element earlier in the batch: they leave with it
        element.tail = "".join(own)
    tail = element.tail
    previous = element.getprevious()
    anchor, is_tail = (previous, True) if previous is not None else (parent, False)
    pieces = pending.get((anchor, is_tail)) if tail else None
    if journal is not None:
        before: object = _UNCHANGED  # no tail to move, or the neighbour's text is saved already
        if tail:
            if _has_controls(tail):
                raise NotUndoable  # lxml could not set such text back
            if (anchor, is_tail) not in journal.saved:
                before = _get_text(anchor, is_tail)  # (untouched so far: nothing pending)
                if before and _has_controls(before):
                    raise NotUndoable
                journal.saved.add((anchor, is_tail))
        journal.entries.append((element, parent, previous, before, is_tail))
    if tail:
        if pieces is None:
            pieces = pending[(anchor, is_tail)] = [xml_safe(_get_text(anchor, is_tail) or "")]
        pieces.append(xml_safe(tail))
    parent.remove(element)  # the removed element keeps its tail


def set_tail(element: etree._Element, tail: str) -> None:
    """Give ``element`` the tail text ``tail`` (journalled as a removal is: ``undo()`` puts the old tail back)."""
    journal: _Journal | None = getattr(_local, "journal", None)
    if journal is not None:
        before = element.tail
        if before and _has_controls(before):
            raise NotUndoable
        journal.entries.append((None, element, None, before, True))
    element.tail = xml_safe(tail)


def _get_text(anchor: etree._Element, is_tail: bool) -> str | None:
    text: str | None = anchor.tail if is_tail else anchor.text
    return text


def _set_text(anchor: etree._Element, is_tail: bool, text: str) -> None:
    if is_tail:
        anchor.tail = text
    else:
        anchor.text = text


_UNCHANGED = object()


class NotUndoable(Exception):
    """A removal whose text lxml could not restore (C0 control characters)."""


def _has_controls(text: str) -> bool:
    return not text.isprintable() and text.translate(CONTROL_CHARS) != text


class _Journal:
    def __init__(self) -> None:
        self.entries: list[tuple[Any, ...]] = []
        self.saved: set[tuple[etree._Element, bool]] = set()


class UndoableDrops:
    """Record every ``drop_element`` in the block; ``undo()`` puts the tree back as it was.

    Undoing walks the journal backwards: each element goes back right after
    the neighbour it was removed after (or first in its parent), each
    neighbour whose text took tails gets its first saved text back, and each
    tail ``set_tail`` changed gets its old text back.
    """

    def __enter__(self) -> UndoableDrops:
        self.journal = _Journal()
        _local.journal = self.journal
        return self

    def __exit__(self, *exc: object) -> None:
        _local.journal = None

    def undo(self) -> None:
        for element, parent, previous, before, is_tail in reversed(self.journal.entries):
            if element is None:  # a tail set (``set_tail``): ``parent`` is the element whose tail it was
                parent.tail = before
                continue
            if before is not _UNCHANGED:
                _set_text(previous if is_tail else parent, is_tail, before)
            if previous is not None:
                previous.addnext(element)  # after the neighbour's tail text, as it was
            else:
                parent.insert(0, element)  # after the parent's text
        self.journal = _Journal()
