"""Counts in words people read (reports, logs, command output): "1 page", "2 pages".  Pure Python.

One rule for every message, so no "1 pages were crawled before" is left
behind: ``plural(n, "page")``; irregular words give their plural
(``plural(n, "process", "processes")``); ``were(n)`` agrees the verb.
"""

from __future__ import annotations

__all__ = ["plural", "were"]


def plural(count: int, word: str, words: str | None = None) -> str:
    """``count`` with thousands separators and ``word`` in agreement: ``"1 page"``, ``"1,200 pages"``."""
    return f"{count:,} {word}" if count == 1 else f"{count:,} {words or word + 's'}"


def were(count: int) -> str:
    """``"was"`` for one, ``"were"`` otherwise."""
    return "was" if count == 1 else "were"
