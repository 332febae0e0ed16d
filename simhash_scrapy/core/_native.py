"""The optional compiled helpers (``_speedups.c``), shared by ``text`` and ``features``.

``speedups`` is the C module, or None when it was not built (no C compiler at
install time: one logged warning, ``NOT_BUILT``), is turned off with
``SIMHASH_SCRAPY_PURE_PYTHON=1`` (silently), or was built against another lxml
than the one running (one logged warning).  Both paths give the same
results; the tests compare them.

The C module walks lxml's trees through lxml's public C API (its generated
headers, whose ``import_lxml__etree()`` checks every function's signature), so
it must run with the lxml (and libxml2) it was compiled against: it records
both versions, and ``_load`` compares them with the running ones.  On a
mismatch the pure-Python path runs and one warning is logged (a log record,
not a Python warning: it must not turn into an error under ``-W error``).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import Iterator
from typing import Any

__all__ = ["speedups", "speedups_enabled", "switched", "build_mismatch"]

logger = logging.getLogger(__name__)


def build_mismatch(module: Any) -> str | None:
    """Why the compiled ``module`` must not run with the lxml imported now, or None when it may."""
    import lxml
    from lxml import etree

    running_lxml = lxml.__version__
    running_libxml = ".".join(map(str, etree.LIBXML_COMPILED_VERSION))
    built_lxml = getattr(module, "BUILT_LXML_VERSION", None)
    built_libxml = getattr(module, "BUILT_LIBXML_VERSION", None)
    if (built_lxml, built_libxml) == (running_lxml, running_libxml):
        return None
    return (
        f"simhash_scrapy's C helpers were built against lxml {built_lxml} (libxml2 {built_libxml}) "
        f"but lxml {running_lxml} (libxml2 {running_libxml}) is running: using the pure-Python path "
        "(same results, slower); reinstall simhash-scrapy to rebuild them"
    )


#: The one message when the C helpers were not built (logged once, at import).
NOT_BUILT = (
    "simhash_scrapy's C helpers are not built (no C compiler when simhash-scrapy was installed): "
    "using the pure-Python path (same results, slower); to build them, install a C compiler and "
    "Python's headers and reinstall simhash-scrapy; SIMHASH_SCRAPY_PURE_PYTHON=1 chooses the "
    "pure-Python path without this message"
)


def _load() -> Any:
    if os.environ.get("SIMHASH_SCRAPY_PURE_PYTHON", "") not in ("", "0"):
        return None
    name = f"{__package__}._speedups"
    try:
        _speedups = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        # Not built (no C compiler when the package was installed): the pure path, said once.
        logger.warning("%s", NOT_BUILT)
        return None
    except ImportError as exc:  # built, but lxml's C API differs from the one it was compiled against
        logger.warning("simhash_scrapy's C helpers cannot load (%s): using the pure-Python path", exc)
        return None
    problem = build_mismatch(_speedups)
    if problem is not None:
        logger.warning("%s", problem)
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
