"""``scrapy simhash report``: export the clusters of a saved crawl, without crawling.

Sources:

* a store written by a crawl with ``JOBDIR`` or ``SIMHASH_DIR`` (the folder,
  searched two levels deep for store files, or the store file itself), read
  and checked with ``simhash_scrapy.core.store.store.read_store`` (a corrupt store
  is an error naming the file and the record);
* a Redis key (``--redis URL --key PREFIX``, or ``--spider NAME`` to expand
  ``SIMHASH_REDIS_KEY``), read with the Redis backend's read-only ``attach``
  and ``members`` (a crawl keeps its key only with ``SIMHASH_REDIS_PERSIST``).

The clusters are built with ``report.build_clusters`` and written in the
report formats of the crawl (JSON Lines, CSV, HTML).
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


from ._common import EXIT_USAGE, CommandError, output_format, write_clusters

__all__ = ["run_report", "find_store_files", "store_members"]


def _is_store(path: Path) -> bool:
    from ..core.store.store import is_store_file

    return is_store_file(path)


def find_store_files(folder: Path, depth: int = 2) -> list[Path]:
    """Store files (recognised by their magic bytes) in ``folder`` and up to ``depth`` levels below."""
    found: list[Path] = []
    level = [folder]
    for _ in range(depth + 1):
        below: list[Path] = []
        for directory in level:
            try:
                entries = sorted(directory.iterdir())
            except OSError:
                continue
            for entry in entries:
                if entry.is_dir():
                    below.append(entry)
                elif entry.is_file() and not entry.name.endswith(".previous") and _is_store(entry):
                    found.append(entry)
        level = below
    return found


def store_members(contents: Any) -> list[Any]:
    """Every record of ``contents`` (a checked ``StoreContents``) as ``ClusterMember`` objects, in entry order."""
    from ..backends.persistent import members_of

    return members_of(contents)


def _settings_store(settings: Any, spider: str | None) -> str:
    """The store this project's settings point at (``JOBDIR``, or ``SIMHASH_DIR`` with ``--spider``)."""
    from ..backends.persistent import store_path
    from ._common import load_config

    config = load_config(settings)  # as every tool reads them: SIMHASH_ENABLED = False does not stop it
    if not config.persistent:
        raise CommandError(
            "report needs a STORE (JOBDIR, SIMHASH_DIR or a store file) or --redis URL "
            "(this project's settings set neither JOBDIR nor SIMHASH_DIR)",
            EXIT_USAGE,
        )
    if config.store_dir is not None and not spider:
        raise CommandError("SIMHASH_DIR keeps one store per spider: name it with --spider NAME", EXIT_USAGE)
    return str(store_path(config, spider or "", createdir=False))


def _from_store(source: str, spider: str | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from ..core.store.store import StoreError, read_store

    path = Path(source)
    if not path.exists():
        raise CommandError(f"no such file or folder: {source}")
    if path.is_dir():
        stores = find_store_files(path)
        if spider and len(stores) > 1:
            stores = [s for s in stores if s.stem == spider] or stores
        if not stores:
            raise CommandError(
                f"no simhash store in {source}: a crawl writes one when it runs with JOBDIR or SIMHASH_DIR"
            )
        if len(stores) > 1:
            names = ", ".join(str(s) for s in stores[:6]) + (" ..." if len(stores) > 6 else "")
            raise CommandError(f"{source} holds {len(stores)} stores; name one (or use --spider): {names}")
        path = stores[0]
    elif not _is_store(path):
        raise CommandError(f"{source} is not a simhash store file")
    try:
        contents = read_store(path)
    except StoreError as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None
    # Every record: run_report counts them (report_summary), as the crawl does.
    members = store_members(contents)
    from ..core.report.changes import LAST_CRAWL_EXTRA

    summary: dict[str, Any] = {
        "source": str(path), "rules_blob": _store_rules(contents), "last_crawl_blob": contents.extra.get(LAST_CRAWL_EXTRA),
    }  # fmt: skip
    if contents.config is not None:
        summary["max_distance"] = contents.config.max_distance
        summary["features"] = contents.config.features
        summary["text mode"] = contents.config.text_mode
    return members, summary


def _rules(data: bytes | None, settings: Any) -> list[dict[str, Any]]:
    """The learned URL rules of a saved crawl (``SIMHASH_URL_RULES``), for the report summary."""
    from ..core.urlrules.urlrules import UrlRuleLearner
    from ._common import load_config

    if not data:
        return []
    config = load_config(settings)
    learner = UrlRuleLearner(config.url_rules_min_support, config.url_rules_min_precision)
    try:
        learner.merge(data)
    except ValueError as exc:
        sys.stderr.write(f"report: ignoring the saved URL rules: {exc}\n")
        return []
    return learner.report()


def _store_rules(contents: Any) -> bytes | None:
    """The URL rules a crawl saved in its store (the backend's extras), if any."""
    from ..core import defaults

    return contents.extra.get(defaults.URL_RULES_EXTRA)


def _from_redis(url: str, key: str | None, spider: str | None, settings: Any) -> tuple[list[Any], dict[str, Any]]:

    from ._common import load_config

    if not key and not spider:
        raise CommandError("--redis needs --key PREFIX (e.g. myspider:simhash) or --spider NAME", EXIT_USAGE)
    try:
        from ..backends.redis import RedisBackend, RedisConfig
        from ..backends.redis.layout import layout_max_distance
    except ImportError as exc:
        raise CommandError(f"the Redis backend cannot be loaded ({exc}): pip install 'simhash-scrapy[redis]'") from None
    overrides = settings.copy()
    if url:
        overrides.set("SIMHASH_REDIS_URL", url, priority="cmdline")
    if key:
        overrides.set("SIMHASH_REDIS_KEY", key.replace("%", "%%"), priority="cmdline")
    try:
        redis_settings = RedisConfig.from_settings(overrides)
    except ValueError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
    config = load_config(settings)
    if config.backend == "redis-global":
        return _from_global(config, redis_settings, spider)
    backend = RedisBackend(config, redis_settings)

    from ..core import defaults

    from ..core.report.changes import LAST_CRAWL_EXTRA

    async def read() -> tuple[list[Any], bool, bytes | None, bytes | None]:
        try:
            await backend.attach(spider or "")  # reads the key's layout (backend.stored_layout)
            exists = await backend.has_data()
            rules = await backend.load_extra(defaults.URL_RULES_EXTRA)
            last = await backend.load_extra(LAST_CRAWL_EXTRA)
            return (await backend.read_members() if exists else []), exists, rules, last
        finally:
            await backend.close()

    members, exists, rules, last = _read_redis(read, redis_settings)
    if not exists:
        raise CommandError(
            f"Redis at {redis_settings.describe()} has no simhash data under {backend.prefix!r} "
            f"(a crawl keeps it only with SIMHASH_REDIS_PERSIST = True)"
        )
    # Every recorded page: run_report counts them (report_summary).  The report's k is the one the
    # key's layout records (the crawls that wrote it used it), else these settings' k.
    recorded = layout_max_distance(backend.stored_layout) if backend.stored_layout else None
    k = config.max_distance if recorded is None else recorded
    source = f"{redis_settings.describe()} key {backend.prefix}"
    return members, {"source": source, "rules_blob": rules, "last_crawl_blob": last, "max_distance": k}


def _read_redis(read: Any, redis_settings: Any) -> Any:
    """Runs ``read()`` (a coroutine function); any error is a one-line ``CommandError``, secrets redacted."""
    import asyncio

    from ..backends import BackendError
    from ..core.redact import redact

    try:
        return asyncio.run(read())
    except BackendError as exc:
        raise CommandError(redact(str(exc), redis_settings.secrets)) from None
    except Exception as exc:  # noqa: BLE001 - any client error is a one-line message, not a traceback
        error = redact(str(exc), redis_settings.secrets)
        raise CommandError(f"cannot read Redis at {redis_settings.describe()}: {type(exc).__name__}: {error}") from None


def _from_global(config: Any, redis_settings: Any, spider: str | None) -> tuple[list[Any], dict[str, Any]]:
    """``--redis`` with ``SIMHASH_BACKEND = "redis-global"``: every scope the key's registry names, read from every
    node of the cluster."""
    from ..backends.redis.cluster_backend import GlobalRedisBackend
    from ..backends.redis.layout import layout_max_distance

    backend = GlobalRedisBackend(config, redis_settings)

    async def read() -> tuple[list[Any], list[str], str | None]:
        try:
            scopes = await backend.attach(spider or "")
            layout = await backend.stored_layout()
            return (await backend.read_members() if scopes else []), scopes, layout
        finally:
            await backend.close()

    members, scopes, layout = _read_redis(read, redis_settings)
    if not scopes:
        raise CommandError(
            f"Redis at {redis_settings.describe()} has no global index (SIMHASH_BACKEND='redis-global') under "
            f"{backend.prefix!r}: no scope names in {backend.prefix + ':{s}'!r} (a crawl with this version writes them "
            f"before its first check of a scope; check SIMHASH_REDIS_KEY / --key and SIMHASH_BACKEND)"
        )
    recorded = layout_max_distance(layout) if layout else None
    k = config.max_distance if recorded is None else recorded
    source = f"{redis_settings.describe()} key {backend.prefix} (redis-global)"
    return members, {"source": source, "rules_blob": None, "last_crawl_blob": None, "max_distance": k}


def run_report(opts: Any, settings: Any, stdout: Any = None) -> int:
    from ..core.report.report import build_changes, build_clusters, describe_report, report_summary

    stdout = stdout or sys.stdout
    fmt = output_format(opts.format, opts.output)
    if opts.redis is not None and opts.input:
        raise CommandError("give either a STORE or --redis, not both", EXIT_USAGE)
    if opts.redis is not None:
        members, found = _from_redis(opts.redis, opts.key, opts.spider, settings)
    else:
        members, found = _from_store(opts.input or _settings_store(settings, opts.spider), opts.spider)
    if getattr(opts, "changes", False):
        from .changes import write_changes

        return write_changes(members, found, fmt, opts.output, stdout)
    found.pop("last_crawl_blob", None)
    rules = _rules(found.pop("rules_blob", None), settings)
    if rules:
        found["rules"] = rules
    with_text = fmt == "html" and not opts.no_texts
    from ..core import defaults
    from ._common import load_config

    # SIMHASH_REPRESENTATIVE of the project's settings (or -s) chooses each cluster's representative.
    representative = load_config(settings).representative if settings is not None else defaults.REPRESENTATIVE
    clusters = build_clusters(
        members, include_text=with_text, max_distance=found.get("max_distance"), representative=representative
    )
    changes = build_changes(members)
    summary = report_summary(
        members,
        clusters,
        title="Near-duplicate clusters",
        max_distance=found.get("max_distance"),
        source=found["source"],
        generated=datetime.now(tz=timezone.utc),
    )
    # Both sources list every recorded page, so the counts are report_summary's;
    # a source adds what it knows beyond them (its configuration).
    summary.update(found)
    where = write_clusters(clusters, fmt, opts.output, summary, stdout, changes=changes)
    sys.stderr.write(f"report: {summary['source']} has {describe_report(summary)}; {fmt} written to {where}\n")
    if rules:
        trusted = sum(1 for rule in rules if rule["trusted"])
        sys.stderr.write(f"report: {len(rules)} learned URL rules ({trusted} trusted)"
                         + (" (JSON Lines records \"type\": \"url_rule\")" if fmt == "jsonl" else "") + "\n")
    return 0
