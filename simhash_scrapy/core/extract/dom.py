"""Tree edits that can be undone: removing an element while keeping its tail text.

The crawl fingerprints Scrapy's own parse of a page (``response.selector``)
in place, so every removal made on it must be undone afterwards: inside an
``UndoableDrops()`` block each ``drop_element`` is journalled, and ``undo()``
puts the tree back byte for byte.  Both visible-text cleaning (``text``) and
main-content extraction (``boilerplate``) remove elements through here.
"""

from __future__ import annotations

import threading
from typing import Any

from lxml import etree

__all__ = ["drop_element", "xml_safe", "UndoableDrops", "NotUndoable", "CONTROL_CHARS"]

CONTROL_CHARS = dict.fromkeys((c for c in range(32) if c not in (9, 10, 13)), " ")


def xml_safe(text: str) -> str:
    """``text`` with the C0 control characters lxml refuses in assigned text made spaces."""
    return text.translate(CONTROL_CHARS) if not text.isprintable() else text


_local = threading.local()


def drop_element(element: etree._Element) -> None:
    """Remove ``element`` and its subtree but keep its tail text.

    Inside ``UndoableDrops()`` every removal is recorded so it can be undone.
    """
    parent = element.getparent()
    if parent is None:
        return
    journal = getattr(_local, "journal", None)
    tail = element.tail
    previous = element.getprevious()
    if journal is not None:
        if tail:
            before = previous.tail if previous is not None else parent.text
            if _has_controls(tail) or (before and _has_controls(before)):
                raise NotUndoable  # lxml could not set such text back
        else:
            before = _UNCHANGED  # no tail to move: the neighbour's text is not touched, nor restored
        journal.append((element, parent, parent.index(element), previous, before))
    if tail:
        if previous is not None:
            previous.tail = xml_safe((previous.tail or "") + tail)
        else:
            parent.text = xml_safe((parent.text or "") + tail)
    parent.remove(element)  # the removed element keeps its tail


_UNCHANGED = object()


class NotUndoable(Exception):
    """A removal whose text lxml could not restore (C0 control characters)."""


def _has_controls(text: str) -> bool:
    return not text.isprintable() and text.translate(CONTROL_CHARS) != text


class UndoableDrops:
    """Record every ``drop_element`` in the block; ``undo()`` puts the tree back as it was."""

    def __enter__(self) -> UndoableDrops:
        self.journal: list[tuple[Any, ...]] = []
        _local.journal = self.journal
        return self

    def __exit__(self, *exc: object) -> None:
        _local.journal = None

    def undo(self) -> None:
        for element, parent, index, previous, before in reversed(self.journal):
            if before is not _UNCHANGED:
                if previous is not None:
                    previous.tail = before
                else:
                    parent.text = before
            parent.insert(index, element)
        self.journal = []
