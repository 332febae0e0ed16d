"""The optional compiled helpers (``_speedups.c``), shared by ``text`` and ``features``.

``speedups`` is the C module, or None when it was not built (no C compiler at
install time) or is turned off with ``SIMHASH_SCRAPY_PURE_PYTHON=1``.  Both
paths give the same results; the tests compare them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

__all__ = ["speedups", "speedups_enabled", "switched"]


def _load() -> Any:
    if os.environ.get("SIMHASH_SCRAPY_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from . import _speedups
    except ImportError:
        return None
    return _speedups


#: The compiled module as loaded at import (None when not built or turned off).
_BUILT = _load()
speedups = _BUILT


def speedups_enabled() -> bool:
    """Whether the compiled helpers are in use."""
    return speedups is not None


@contextlib.contextmanager
def switched(enabled: bool) -> Iterator[bool]:
    """Within the block, use the C helpers (when built) or the pure-Python path; yields whether C is used.

    For tests and benchmarks that compare the two paths.  ``text``,
    ``features`` and ``index`` read ``_native.speedups`` at each call, so
    switching is one assignment here: this module imports none of them.
    """
    global speedups
    saved = speedups
    speedups = _BUILT if enabled else None
    try:
        yield speedups is not None
    finally:
        speedups = saved
