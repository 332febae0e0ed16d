"""Dedup backends: the interface (``base``), the in-process default (``memory``).

``SIMHASH_BACKEND`` selects one: ``"memory"`` (default; kept on disk by
``persistent`` when ``JOBDIR`` or ``SIMHASH_DIR`` is set), ``"redis"``
(``simhash_scrapy.backends.redis.RedisBackend``) or the import path of a
``DedupBackend`` subclass.  Importing this package needs no Scrapy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..core.settings.settings import BACKENDS  # SIMHASH_BACKEND's short names (the settings table)
from .base import UNCHECKED, BackendError, ClusterMember, DedupBackend, Outcome, PageRecord, Verdict

if TYPE_CHECKING:
    from ..core.settings.config import SimhashConfig

__all__ = [
    "BackendError",
    "ClusterMember",
    "DedupBackend",
    "Outcome",
    "PageRecord",
    "Verdict",
    "UNCHECKED",
    "BACKENDS",
    "backend_class",
    "create_backend",
]

_PERSISTENT = "simhash_scrapy.backends.persistent.PersistentBackend"


def _import(path: str) -> Any:
    module, _, name = path.rpartition(".")
    if not module:
        raise ValueError(f"{path!r} is not a full import path (module.Class)")
    return getattr(importlib.import_module(module), name)


def backend_class(config: SimhashConfig) -> type[DedupBackend]:
    """The backend class ``config`` selects (raises ``ValueError`` naming ``SIMHASH_BACKEND``)."""
    path = BACKENDS.get(config.backend, config.backend)
    if config.backend == "memory" and config.persistent:
        path = _PERSISTENT  # JOBDIR / SIMHASH_DIR: the in-process index, kept on disk
    try:
        cls = _import(path)
    except (ImportError, AttributeError, ValueError, TypeError) as exc:  # (TypeError: a relative path, "../x")
        hint = " (install the extra: pip install 'simhash-scrapy[redis]')" if config.backend == "redis" else ""
        raise ValueError(
            f"SIMHASH_BACKEND={config.backend!r}: cannot load {path!r}: {exc}{hint}; "
            f"use 'memory', 'redis', 'redis-global' or the import path of a DedupBackend subclass"
        ) from exc
    if not (isinstance(cls, type) and issubclass(cls, DedupBackend)):
        raise ValueError(
            f"SIMHASH_BACKEND={config.backend!r}: {path!r} is not a subclass of "
            f"simhash_scrapy.backends.DedupBackend"
        )
    return cls


def create_backend(crawler: Any, config: SimhashConfig) -> DedupBackend:
    """Build the backend ``config`` selects, through its ``from_crawler``.

    A ``ValueError`` (a setting's error, naming it) passes as it is; any other
    error becomes one naming ``SIMHASH_BACKEND`` (else the user would get a
    traceback from inside a custom backend).
    """
    cls = backend_class(config)
    try:
        return cls.from_crawler(crawler, config)
    except ValueError:
        raise
    except Exception as exc:
        raise ValueError(
            f"SIMHASH_BACKEND={config.backend!r}: {cls.__module__}.{cls.__qualname__}.from_crawler failed: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
