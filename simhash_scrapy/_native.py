"""The optional compiled helpers (``_speedups.c``), shared by ``text`` and ``features``.

``speedups`` is the C module, or None when it was not built (no C compiler at
install time) or is turned off with ``SIMHASH_SCRAPY_PURE_PYTHON=1``.  Both
paths give the same results; the tests compare them.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["speedups", "speedups_enabled"]


def _load() -> Any:
    if os.environ.get("SIMHASH_SCRAPY_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from . import _speedups
    except ImportError:
        return None
    return _speedups


speedups = _load()


def speedups_enabled() -> bool:
    """Whether the compiled helpers are in use."""
    return speedups is not None
