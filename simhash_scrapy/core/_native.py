"""The optional compiled helpers, two modules that load and fall back each on its own.

- ``speedups`` (``_speedups.c``): the tokeniser's hashes (``features``), the
  UTF-8 check (``text``), the index's query loop (``index``) and the global
  Redis index's bucket filter and records (``backends.redis.cluster_layout``),
  payloads (``backends.redis.layout``) and command routing
  (``backends.redis.node_link``).  Python's headers only: nothing in it
  depends on lxml.
- ``walker`` (``extract/_walker.c``): the walks over lxml's trees, visible text
  (``text``) and main content (``boilerplate``).  It reads lxml's trees
  through lxml's public C API (its generated headers, whose
  ``import_lxml__etree()`` checks every function's signature), so it must run
  with the lxml (and libxml2) it was compiled against: it records both
  versions, and ``_load_walker`` compares them with the running ones.

Each is the C module, or None when it was not built (no C compiler at install
time), is turned off with ``SIMHASH_SCRAPY_PURE_PYTHON=1`` (silently, both),
or (the walker only) was built against another lxml than the one running.
Every such fallback is logged once at import, naming the helpers it turns off
(a log record, not a Python warning: it must not turn into an error under
``-W error``); an lxml mismatch turns off the walker alone.  Both paths give
the same results; the tests compare them.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import Iterator
from typing import Any

__all__ = ["speedups", "walker", "speedups_enabled", "walker_enabled", "switched", "build_mismatch"]

logger = logging.getLogger(__name__)

#: What each compiled module does (the log messages name it).
SPEEDUPS_ROLE = ("tokeniser, UTF-8 check, index queries and the global Redis index's bucket filter, routing, "
                 "records and payloads")
WALKER_ROLE = "lxml tree walks (visible text, main content)"


def build_mismatch(module: Any) -> str | None:
    """Why the compiled walker ``module`` must not run with the lxml imported now, or None when it may."""
    import lxml
    from lxml import etree

    running_lxml = lxml.__version__
    running_libxml = ".".join(map(str, etree.LIBXML_COMPILED_VERSION))
    built_lxml = getattr(module, "BUILT_LXML_VERSION", None)
    built_libxml = getattr(module, "BUILT_LIBXML_VERSION", None)
    if (built_lxml, built_libxml) == (running_lxml, running_libxml):
        return None
    return (
        f"simhash_scrapy's C {WALKER_ROLE} were built against lxml {built_lxml} (libxml2 {built_libxml}) "
        f"but lxml {running_lxml} (libxml2 {running_libxml}) is running: the tree walks use the pure-Python "
        f"path (same results, slower), the other C helpers ({SPEEDUPS_ROLE}) are not affected; "
        "reinstall simhash-scrapy to rebuild them"
    )


def not_built(roles: list[str]) -> str:
    """The one message when compiled helpers were not built (logged once, at import)."""
    what = "" if len(roles) == 2 else f" for the {roles[0]}"
    return (
        f"simhash_scrapy's C helpers{what} are not built (no C compiler when simhash-scrapy was installed): "
        "using the pure-Python path (same results, slower); to build them, install a C compiler and "
        "Python's headers and reinstall simhash-scrapy; SIMHASH_SCRAPY_PURE_PYTHON=1 chooses the "
        "pure-Python path without this message"
    )


#: The message when neither module was built (the usual install without a C compiler).
NOT_BUILT = not_built([SPEEDUPS_ROLE, WALKER_ROLE])


def _import(name: str) -> Any:
    """The compiled module ``name``, or None when it was not built (ModuleNotFoundError for it)."""
    full = f"{__package__}.{name}"
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError as exc:
        if exc.name != full:
            raise
        return None


def _pure_python_chosen() -> bool:
    return os.environ.get("SIMHASH_SCRAPY_PURE_PYTHON", "") not in ("", "0")


def _load_walker(not_built_roles: list[str] | None = None) -> Any:
    """The walker when it was built and may run with the lxml imported now, else None: logged once, unless it
    was not built (then its role is added to ``not_built_roles``, for ``_load``'s one message)."""
    try:
        module = _import("extract._walker")
    except ImportError as exc:  # built, but lxml's C API differs from the one it was compiled against
        logger.warning(
            "simhash_scrapy's C %s cannot load (%s): the tree walks use the pure-Python path, "
            "the other C helpers (%s) are not affected", WALKER_ROLE, exc, SPEEDUPS_ROLE,
        )  # fmt: skip
        return None
    if module is None:
        if not_built_roles is not None:
            not_built_roles.append(WALKER_ROLE)
        return None
    problem = build_mismatch(module)
    if problem is not None:
        logger.warning("%s", problem)
        return None
    return module


def _load() -> tuple[Any, Any]:
    """(speedups, walker) as this process may use them; each None when not built, not usable or turned off."""
    if _pure_python_chosen():
        return None, None
    speedups = _import("_speedups")
    missing = [] if speedups is not None else [SPEEDUPS_ROLE]
    walker = _load_walker(missing)
    if missing:  # not built at all (a walker built but refused was said above)
        logger.warning("%s", not_built(missing))
    return speedups, walker


#: The compiled modules as loaded at import (None when not built, not usable or turned off).
_SPEEDUPS_BUILT, _WALKER_BUILT = _load()
speedups = _SPEEDUPS_BUILT
walker = _WALKER_BUILT


def speedups_enabled() -> bool:
    """Whether all the compiled helpers (both modules) are in use."""
    return speedups is not None and walker is not None


def walker_enabled() -> bool:
    """Whether the compiled lxml walker is in use."""
    return walker is not None


@contextlib.contextmanager
def switched(enabled: bool) -> Iterator[bool]:
    """Within the block, use the C helpers (those loaded) or the pure-Python path; yields whether C is used.

    For tests and benchmarks that compare the two paths.  ``text``,
    ``boilerplate``, ``features`` and ``index`` read ``_native.speedups`` /
    ``_native.walker`` at each call, so switching is two assignments here: this
    module imports none of them.
    """
    global speedups, walker
    saved = speedups, walker
    speedups, walker = (_SPEEDUPS_BUILT, _WALKER_BUILT) if enabled else (None, None)
    try:
        yield speedups is not None or walker is not None
    finally:
        speedups, walker = saved
