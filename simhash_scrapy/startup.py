"""First-run checks: mistakes that would otherwise be silent, named once at start-up.

``DedupState`` calls ``warn_at_startup`` when it is made (the first of our
components built by the crawler), and ``check_report_folder`` when the spider
opens.  Each warning is one log line at WARNING naming the setting, what goes
wrong and the line to change (docs: ``getting-started.md``, "First-run warnings"):

* an unknown ``SIMHASH_*`` name, with the closest known one (the settings table, ``core.settings.settings``);
* a half-configured plugin: the spider middleware or the pipeline without the
  downloader middleware that fingerprints pages;
* the downloader middleware at a priority where it sees responses before
  Scrapy's middlewares that change them (decompression, meta refresh, retries,
  redirects);
* ``SIMHASH_REDIS_PERSIST`` kept while scrapy-redis' scheduler deletes its
  queue and dupefilter (``SCHEDULER_PERSIST`` off).

The components are told by their class paths, not imported: this module sits
below them (pyproject, import-linter layers).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.utils.misc import load_object

from .core.redact import LOG_REDACTION
from .core.settings.didyoumean import SETTINGS_REFERENCE_URL
from .core.settings.settings import unknown_settings

if TYPE_CHECKING:
    from .config import SimhashConfig

__all__ = ["warn_at_startup", "startup_warnings", "check_report_folder"]

logger = logging.getLogger(__name__)
logger.addFilter(LOG_REDACTION)  # no password of a page URL in a log line (core.redact)

_DOWNLOADER = "simhash_scrapy.middleware.SimhashMiddleware"
_SPIDER = "simhash_scrapy.spidermw.SimhashSpiderMiddleware"
_PIPELINE = "simhash_scrapy.pipeline.SimhashPipeline"
#: What the downloader middleware must stay below (``middleware.MIDDLEWARE_PRIORITY`` is 540).
_ADD_DOWNLOADER = 'DOWNLOADER_MIDDLEWARES = {"simhash_scrapy.SimhashMiddleware": 540}'
_ADD_ADDON = 'ADDONS = {"simhash_scrapy.Addon": 0}'

#: Scrapy's downloader middlewares that change or replace a response, and what the
#: fingerprinting middleware gets wrong when it sees the response before them.
_BEFORE = (
    ("scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware", "COMPRESSION_ENABLED",
     "bodies still compressed (gzip, br, ...), which cannot be fingerprinted"),
    ("scrapy.downloadermiddlewares.redirect.RedirectMiddleware", "REDIRECT_ENABLED",
     "3xx responses before they are followed (counted as simhash/skipped/status)"),
    ("scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware", "METAREFRESH_ENABLED",
     "meta-refresh pages before they are followed (a dropped one is never followed)"),
    ("scrapy.downloadermiddlewares.retry.RetryMiddleware", "RETRY_ENABLED",
     "responses that are then retried"),
)


def _path(cls: Any) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _priorities(settings: Any, name: str) -> dict[str, int]:
    """``{class path: priority}`` of each enabled component of ``name`` (and of the classes it derives from)."""
    found: dict[str, int] = {}
    try:
        components = dict(settings.getwithbase(name))
    except (AttributeError, TypeError, ValueError):
        return found
    for key, priority in components.items():
        if priority is None:
            continue
        try:
            cls = key if isinstance(key, type) else load_object(key)
        except Exception:  # noqa: BLE001 - a broken entry is Scrapy's to report
            continue
        for base in getattr(cls, "__mro__", (cls,)):
            if isinstance(base, type) and base is not object:
                found.setdefault(_path(base), int(priority))
    return found


def _component_warnings(settings: Any, config: SimhashConfig | None) -> list[str]:
    downloader = _priorities(settings, "DOWNLOADER_MIDDLEWARES")
    spider = _priorities(settings, "SPIDER_MIDDLEWARES")
    pipelines = _priorities(settings, "ITEM_PIPELINES")
    found: list[str] = []
    priority = downloader.get(_DOWNLOADER)
    if priority is None:
        fix = f"add {_ADD_DOWNLOADER} to settings.py, or enable the add-on instead of single components: {_ADD_ADDON}"
        if _SPIDER in spider:
            found.append(
                "SimhashSpiderMiddleware is enabled (SPIDER_MIDDLEWARES) without SimhashMiddleware in "
                "DOWNLOADER_MIDDLEWARES, which fingerprints the pages: no page is checked and the spider "
                f"middleware has nothing to act on; {fix}"
            )
        if _PIPELINE in pipelines and (config is None or config.item_field is None):
            found.append(
                "SimhashPipeline is enabled (ITEM_PIPELINES) without SimhashMiddleware in DOWNLOADER_MIDDLEWARES, "
                "which fingerprints the pages, and without SIMHASH_ITEM_FIELD, which the pipeline fingerprints: "
                f"nothing is checked; {fix} (or set SIMHASH_ITEM_FIELD to check items only)"
            )
        return found
    late = []
    for path, enabled, what in _BEFORE:
        theirs = downloader.get(path)
        if theirs is not None and priority >= theirs and settings.getbool(enabled, True):
            late.append((theirs, f"{path.rpartition('.')[2]} ({theirs}: it would see {what})"))
    if late:
        found.append(
            f"SimhashMiddleware is at priority {priority} in DOWNLOADER_MIDDLEWARES, not below "
            f"{'; '.join(text for _, text in late)}. Scrapy calls process_response from the highest priority "
            f"down, so give it a priority below {min(theirs for theirs, _ in late)}, e.g. {_ADD_DOWNLOADER}"
        )
    return found


def _uses_scrapy_redis_scheduler(settings: Any) -> bool:
    scheduler = settings.get("SCHEDULER")
    if scheduler is None:
        return False
    if isinstance(scheduler, str):
        return scheduler.startswith("scrapy_redis.")
    return any(_path(base).startswith("scrapy_redis.") for base in getattr(scheduler, "__mro__", ()))


def _persist_warning(settings: Any, config: SimhashConfig | None) -> str | None:
    if config is None or config.backend != "redis" or not config.redis.persist:
        return None
    if not _uses_scrapy_redis_scheduler(settings) or settings.getbool("SCHEDULER_PERSIST", False):
        return None
    return (
        "SIMHASH_REDIS_PERSIST is on but scrapy-redis' SCHEDULER_PERSIST is off: when a worker closes, "
        "scrapy-redis deletes its request queue and dupefilter while simhash-scrapy keeps its record, so the next "
        "worker or crawl downloads those pages again only to find them recorded (unchanged or near-duplicates). "
        "Set SCHEDULER_PERSIST = True as well, or leave SIMHASH_REDIS_PERSIST unset (it follows SCHEDULER_PERSIST)"
    )


def startup_warnings(settings: Any, config: SimhashConfig | None) -> list[str]:
    """The first-run warnings for these settings (``config``: the parsed ones, ``None`` when they had an error)."""
    found = []
    try:
        names = list(settings)
    except TypeError:
        names = []
    for name, close in unknown_settings(names):
        hint = f"did you mean {close}?" if close else f"the known settings are in the settings reference, {SETTINGS_REFERENCE_URL}"
        found.append(f"unknown setting {name} (simhash-scrapy reads no such setting; it is ignored): {hint}")
    found.extend(_component_warnings(settings, config))
    persist = _persist_warning(settings, config)
    if persist is not None:
        found.append(persist)
    return found


def warn_at_startup(settings: Any, config: SimhashConfig | None) -> list[str]:
    """Log each of ``startup_warnings`` at WARNING (one line each) and return them."""
    found = startup_warnings(settings, config)
    for message in found:
        logger.warning("simhash-scrapy: %(warning)s", {"warning": message})
    return found


def check_report_folder(path: Path, name: str = "SIMHASH_REPORT_URI") -> None:
    """Raise ``ValueError`` naming ``name`` when the report cannot be written into ``path``'s folder.

    Checked when the spider opens (the folder is made then), so a report
    folder that cannot be made is an error at the start, not a lost report at
    the end.
    """
    folder = path.parent
    if path.is_dir():
        raise ValueError(f"{name}: cannot write the report {path}: it is a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"{name}: cannot make the report's folder {folder}: {exc.strerror or exc}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{name}: cannot write the report {path}: its folder {folder} is not writable")
