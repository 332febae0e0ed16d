"""``scrapy simhash report``: export the clusters of a saved crawl, without crawling.

Sources:

* a store written by a crawl with ``JOBDIR`` or ``SIMHASH_DIR`` (the folder,
  searched two levels deep for store files, or the store file itself), read
  with ``simhash_scrapy.store.read_store``;
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

import numpy as np

from ._common import EXIT_USAGE, CommandError, output_format, write_clusters

__all__ = ["run_report", "find_store_files", "store_members"]

_STORE_MAGIC = b"SIMHSTOR"


def _is_store(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(_STORE_MAGIC)) == _STORE_MAGIC
    except OSError:
        return False


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


def store_members(contents: Any) -> list[dict[str, Any]]:
    """The members of ``contents`` (a ``StoreContents``) that belong to a cluster, in record order."""
    canonical = contents.canonical
    in_cluster = np.zeros(len(contents), dtype=bool)
    in_cluster[canonical[canonical >= 0]] = True
    in_cluster[canonical >= 0] = True
    rows = np.flatnonzero(in_cluster).tolist()
    members = []
    for row in rows:
        c = int(canonical[row])
        depth = int(contents.depth[row])
        members.append(
            {
                "url": contents.url(row),
                "fingerprint": int(contents.fingerprints[row]),
                "scope": contents.scope(row),
                "canonical_url": None if c < 0 else contents.url(c),
                "distance": None if c < 0 else int(contents.distance[row]),
                "referer": contents.referer(row),
                "depth": None if depth < 0 else depth,
                "text": contents.text(row),
            }
        )
    return members


def _settings_store(settings: Any, spider: str | None) -> str:
    """The store this project's settings point at (``JOBDIR``, or ``SIMHASH_DIR`` with ``--spider``)."""
    from ..backends.persistent import store_path
    from ..config import SimhashConfig

    try:
        config = SimhashConfig.from_settings(settings)
    except ValueError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
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
    from ..core.store import StoreError, read_store

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
    near = int((contents.canonical >= 0).sum())
    summary: dict[str, Any] = {
        "pages": len(contents),
        "near_duplicates": near,
        "unique": len(contents) - near,
        "source": str(path),
    }
    if contents.config is not None:
        summary["max_distance"] = contents.config.max_distance
        summary["features"] = contents.config.features
        summary["text mode"] = contents.config.text_mode
    return store_members(contents), summary


def _from_redis(url: str, key: str | None, spider: str | None, settings: Any) -> tuple[list[Any], dict[str, Any]]:
    import asyncio

    from ..backends import BackendError
    from ._common import load_config

    if not key and not spider:
        raise CommandError("--redis needs --key PREFIX (e.g. myspider:simhash) or --spider NAME", EXIT_USAGE)
    try:
        from ..backends.redis import RedisBackend, RedisSettings
    except ImportError as exc:
        raise CommandError(f"the Redis backend cannot be loaded ({exc}): pip install 'simhash-scrapy[redis]'") from None
    overrides = settings.copy()
    if url:
        overrides.set("SIMHASH_REDIS_URL", url, priority="cmdline")
    if key:
        overrides.set("SIMHASH_REDIS_KEY", key.replace("%", "%%"), priority="cmdline")
    try:
        redis_settings = RedisSettings(overrides)
    except ValueError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
    backend = RedisBackend(load_config(settings), redis_settings)

    async def read() -> tuple[list[Any], bool]:
        try:
            await backend.attach(spider or "")
            exists = await backend.has_data()
            return (await backend.members() if exists else []), exists
        finally:
            await backend.close()

    try:
        members, exists = asyncio.run(read())
    except BackendError as exc:
        raise CommandError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - any client error is a one-line message, not a traceback
        raise CommandError(f"cannot read Redis at {redis_settings.describe()}: {type(exc).__name__}: {exc}") from None
    if not exists:
        raise CommandError(
            f"Redis at {redis_settings.describe()} has no simhash data under {backend.prefix!r} "
            f"(a crawl keeps it only with SIMHASH_REDIS_PERSIST = True)"
        )
    near = sum(1 for m in members if m.canonical_url is not None)
    summary = {
        "pages": len(members),
        "near_duplicates": near,
        "unique": len(members) - near,
        "source": f"{redis_settings.describe()} key {backend.prefix}",
    }
    return members, summary


def run_report(opts: Any, settings: Any, stdout: Any = None) -> int:
    from ..core.report import build_clusters

    stdout = stdout or sys.stdout
    fmt = output_format(opts.format, opts.output)
    if opts.redis is not None and opts.input:
        raise CommandError("give either a STORE or --redis, not both", EXIT_USAGE)
    if opts.redis is not None:
        members, summary = _from_redis(opts.redis, opts.key, opts.spider, settings)
    else:
        members, summary = _from_store(opts.input or _settings_store(settings, opts.spider), opts.spider)
    with_text = fmt == "html" and not opts.no_texts
    clusters = build_clusters(members, include_text=with_text)
    summary["clusters"] = len(clusters)
    summary["title"] = "Near-duplicate clusters"
    summary["generated"] = datetime.now(tz=timezone.utc).replace(microsecond=0).isoformat()
    where = write_clusters(clusters, fmt, opts.output, summary, stdout)
    sys.stderr.write(
        f"report: {summary['pages']:,} pages, {summary['near_duplicates']:,} near-duplicates in "
        f"{len(clusters):,} clusters from {summary['source']}; {fmt} written to {where}\n"
    )
    return 0
