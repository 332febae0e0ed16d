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


speedups = _load()


def speedups_enabled() -> bool:
    """Whether the compiled helpers are in use."""
    return speedups is not None


@contextlib.contextmanager
def switched(enabled: bool) -> Iterator[bool]:
    """Within the block, use the C helpers (when built) or the pure-Python path; yields whether C is used.

    For tests and benchmarks that compare the two paths.  The modules that use
    the helpers keep them in a module-level ``_fast``; this is the one place
    that lists those modules.
    """
    from . import features, index, text

    modules = (text, features, index)
    saved = [module._fast for module in modules]
    use = speedups if enabled else None
    for module in modules:
        module._fast = use
    try:
        yield use is not None
    finally:
        for module, fast in zip(modules, saved):
            module._fast = fast
