"""The ``simhash`` Redis module (``simhash_module.c``): where it was built, for ``redis-server --loadmodule``.

``python -m simhash_scrapy.backends.redis.module`` prints its path.  It is built with the package's C helpers
(``setup.py``; optional: without a C compiler there is none, and ``redis-global`` checks with scripts).  It is a
shared object for redis-server, not a Python module: never imported.
"""

from __future__ import annotations

import importlib.machinery
from pathlib import Path

__all__ = ["NAME", "path"]

#: The built object's name, less the platform's extension suffix.
NAME = "_simhash_redis"


def path() -> Path | None:
    """The built module (the first of this platform's extension suffixes found beside this file), or None."""
    here = Path(__file__).resolve().parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = here / (NAME + suffix)
        if candidate.is_file():
            return candidate
    return None
