"""``scrapy simhash dedup``: find near-duplicates among pages on disk, without crawling.

Input: a folder of HTML files, or a JSON Lines file of crawled items (Scrapy
feed export output; ``.gz`` and a JSON array feed are read too) whose text or
HTML is in one field.  Pages are fingerprinted in worker processes with the
project's ``SIMHASH_*`` settings (``core.analysis``, as the crawl does:
short pages get exact digests), then the crawl's clustering rule
(``core.detector.decide``, with each page's URL and the crawl's scope:
``core.detector.crawl_scope``) runs over them in input order, so the report
is the one a crawl of the same pages in the same order writes.

Why one module of ~480 lines: it is one command whose parts (input sources,
the two-pass worker pool, the report) only make sense together, and the
input readers are used by nothing else.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Generator, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..config import SimhashConfig
from ..core.cluster.viewidentity import AddressIdentities
from ..core.detector import Detector, Page, crawl_scope, decide
from ..core.records import record_scope
from ..core.skip import item_is_html, too_large
from ..core.wording import plural
from ._common import EXIT_USAGE, CommandError, Progress, load_config, output_format, progress_wanted, write_clusters

__all__ = ["run_dedup", "DEFAULT_FIELDS", "HTML_SUFFIXES"]

#: Item fields tried, in this order, when neither --field nor SIMHASH_ITEM_FIELD names one.
DEFAULT_FIELDS = ("html", "body", "text", "content")
HTML_SUFFIXES = (".html", ".htm", ".xhtml", ".shtml")
_FILES_PER_TASK = 32
_LINES_PER_TASK = 128
# Below this many pages, worker processes cost more than they save.
_INLINE_LIMIT = 400


# ----------------------------------------------------------------- clustering
# ---------------------------------------------------------------------- input
class _Source:
    """Pages of one input, read as raw payloads in a stable order (for both passes)."""

    kind = ""  # "files" or "lines"
    description = ""

    def count(self) -> int:
        return 0

    def payloads(self) -> Iterator[tuple[int, Any]]:
        raise NotImplementedError


class _Folder(_Source):
    kind = "files"

    def __init__(self, root: Path, suffixes: tuple[str, ...], base_url: str | None) -> None:
        self.root = root
        self.base_url = base_url
        self.files = sorted(
            path for path in root.rglob("*") if path.suffix.lower() in suffixes and path.is_file()
        )
        self.description = f"{plural(len(self.files), 'file')} in {root}"

    def count(self) -> int:
        return len(self.files)

    def url(self, position: int) -> str:
        path = self.files[position]
        if self.base_url:
            return self.base_url.rstrip("/") + "/" + path.relative_to(self.root).as_posix()
        return path.resolve().as_uri()

    def payloads(self) -> Iterator[tuple[int, Any]]:
        """``(position, (path, URL))``: the worker reads the file and gives the page's URL its identity signals
        (the product option it names, as in the crawl)."""
        for position, path in enumerate(self.files):
            yield position, (str(path), self.url(position))


def _open_binary(path: Path) -> BinaryIO:
    handle = open(path, "rb")  # noqa: SIM115 - returned to the caller
    if handle.read(2) == b"\x1f\x8b":
        handle.close()
        return gzip.open(path, "rb")  # type: ignore[return-value]
    handle.seek(0)
    return handle


class _ItemsFile(_Source):
    kind = "lines"

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            with _open_binary(path) as handle:
                head = handle.read(4096).lstrip()
        except (OSError, EOFError) as exc:
            raise CommandError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
        self.array = head.startswith(b"[")
        if head[:1] not in (b"{", b"[", b""):
            raise CommandError(
                f"{path} is neither JSON Lines nor a JSON array of items (it starts with {head[:20]!r}); "
                "dedup reads a folder of HTML files or a JSON Lines feed"
            )
        self.description = str(path)
        self._count: int | None = None

    def count(self) -> int:
        if self._count is None:
            if self.array or self.path.suffix == ".gz":
                self._count = 0  # unknown without parsing
            else:
                with open(self.path, "rb") as handle:
                    self._count = sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 22), b""))
        return self._count

    def payloads(self) -> Iterator[tuple[int, Any]]:
        if self.array:
            try:
                with _open_binary(self.path) as handle:
                    items = json.load(handle)
            except (ValueError, OSError, EOFError) as exc:
                raise CommandError(f"{self.path}: not a valid JSON array of items ({exc})") from None
            if not isinstance(items, list):
                raise CommandError(f"{self.path}: a JSON feed must be an array of items")
            for position, item in enumerate(items):
                yield position, json.dumps(item).encode("utf-8")
            return
        position = 0
        try:
            with _open_binary(self.path) as handle:
                for line in handle:
                    if line.strip():
                        yield position, line
                        position += 1
        except (OSError, EOFError) as exc:
            raise CommandError(f"cannot read {self.path}: {getattr(exc, 'strerror', None) or exc}") from None


# -------------------------------------------------------------------- workers
# A result per page: (fingerprint or None, skip reason or None, url, referer, depth) in pass 1,
# (text or None,) in pass 2.


def _item_value(line: bytes, field: str, url_field: str) -> tuple[Any, str | None, Any, Any, str | None]:
    try:
        item = json.loads(line)
    except ValueError:
        return None, None, None, None, "bad_json"
    if not isinstance(item, dict):
        return None, None, None, None, "bad_json"
    url = item.get(url_field)
    referer = item.get("referer")
    depth = item.get("depth")
    value = item.get(field)
    if not isinstance(value, str) or not value.strip():
        return None, url, referer, depth, "no_field"
    return value, url, referer, depth, None


def _scope_digests(value: Any, config: SimhashConfig, url: str | None = None) -> tuple[str | None, str | None]:
    """The digests of a page's protected text (``SIMHASH_DISTINCT_SELECTORS``, ``core.cluster.distinct``) and of the
    identity it declares (``SIMHASH_IDENTITY_SIGNALS``, ``core.cluster.identity``; ``url``: the page's address, for
    the product options it names): the crawl's scope (``core.detector.crawl_scope``, in input order)."""
    from ..core.detector import page_digests

    return page_digests(config, url, value if isinstance(value, bytes) else str(value))


def _work(task: tuple[str, str, list[Any], SimhashConfig, str, str, str]) -> list[tuple[Any, ...]]:
    from ..core.analysis import analyse_html, analyse_text
    from ..core.extract.text import extract_text

    kind, mode, payloads, config, field, url_field, fmt = task
    out: list[tuple[Any, ...]] = []
    for payload in payloads:
        url = referer = depth = None
        reason: str | None = None
        value: Any = None
        is_html = True
        if kind == "files":
            path, url = payload
            try:
                size = os.path.getsize(path)
                if too_large(size, config.max_bytes):
                    reason = "too_large"
                else:
                    with open(path, "rb") as handle:
                        value = handle.read()
            except OSError:
                reason = "unreadable"
        else:
            value, url, referer, depth, reason = _item_value(payload, field, url_field)
            if reason is None and too_large(len(value), config.max_bytes):
                reason = "too_large"
            is_html = reason is None and item_is_html(value, fmt)
        if mode == "text":
            if reason is not None:
                out.append((None,))
            elif is_html:
                out.append((extract_text(value, main_content=config.main_content),))
            else:
                out.append((value,))
            continue
        keys: tuple[int, ...] = ()
        fingerprint, exact, digests = None, False, None
        extra: tuple[Any, ...] = (None, None, None)
        if reason is None:
            # A page gets steps 5-7 as in a crawl; an item, as in the item pipeline, steps 1-4.
            options = config.analysis if kind == "files" else replace(
                config.analysis, keep_source=False, second=False, sketch=False
            )  # fmt: skip
            answer = analyse_html(value, None, options) if is_html else analyse_text(value, options)
            fingerprint, exact, reason, keys = answer.fingerprint, answer.exact, answer.skip_reason, answer.edit_keys
            extra = (answer.source, answer.second, answer.sketch)
            # An item keeps its item scope, as in the item pipeline: no protected text, no declared identity.
            if fingerprint is not None and kind == "files" and (config.distinct is not None or config.identity_signals):
                digests = _scope_digests(value, config, url=url)
        out.append((fingerprint, reason, url, referer, depth, exact, keys, digests, *extra))
    return out


def _run_tasks(
    source: _Source, mode: str, wanted: set[int] | None, params: tuple[SimhashConfig, str, str, str], jobs: int,
    progress: Progress | None,
) -> Iterator[tuple[int, tuple[Any, ...]]]:
    """``(position, result)`` for every page (or every page in ``wanted``), in input order."""
    per_task = _FILES_PER_TASK if source.kind == "files" else _LINES_PER_TASK

    def tasks() -> Iterator[tuple[list[int], tuple[Any, ...]]]:
        positions: list[int] = []
        batch: list[Any] = []
        for position, payload in source.payloads():
            if wanted is not None and position not in wanted:
                continue
            positions.append(position)
            batch.append(payload)
            if len(batch) == per_task:
                yield positions, (source.kind, mode, batch, *params)
                positions, batch = [], []
        if batch:
            yield positions, (source.kind, mode, batch, *params)

    done = 0
    if jobs <= 1:
        for positions, task in tasks():
            yield from zip(positions, _work(task))
            done += len(positions)
            if progress:
                progress.update(done)
        return
    # A bounded window of tasks in flight: memory stays flat on inputs of any size.
    pool = _start_pool(jobs)
    try:
        pending: deque[tuple[list[int], Future[list[tuple[Any, ...]]]]] = deque()
        for positions, task in tasks():
            pending.append((positions, pool.submit(_work, task)))
            while len(pending) >= 4 * jobs:
                done += yield from _drain(pending.popleft())
                if progress:
                    progress.update(done)
        while pending:
            done += yield from _drain(pending.popleft())
            if progress:
                progress.update(done)
    except BaseException:
        # Ctrl-C or an error: do not wait for the queued tasks.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the main process (which stops them): no traceback from each worker."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start_pool(jobs: int) -> ProcessPoolExecutor:
    """``jobs`` worker processes, started with Ctrl-C ignored (a Ctrl-C during their start-up would
    print a traceback per worker); the main process handles Ctrl-C and stops them."""
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"), initializer=_ignore_sigint)
    if threading.current_thread() is not threading.main_thread():
        return pool
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited by the new processes
    try:
        for future in [pool.submit(_ignore_sigint) for _ in range(jobs)]:
            future.result()
    finally:
        signal.signal(signal.SIGINT, previous)
    return pool


def _drain(entry: tuple[list[int], Future[list[tuple[Any, ...]]]]) -> Generator[tuple[int, tuple[Any, ...]], None, int]:
    positions, future = entry
    yield from zip(positions, future.result())
    return len(positions)


# ------------------------------------------------------------------- command
def _pick_field(source: _ItemsFile, explicit: str | None, config: SimhashConfig) -> str:
    if explicit:
        return explicit
    if config.item_field:
        return config.item_field
    for _, line in source.payloads():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            for name in DEFAULT_FIELDS:
                if isinstance(item.get(name), str):
                    return name
            raise CommandError(
                f"{source.path}: items have none of the fields {', '.join(DEFAULT_FIELDS)}; "
                f"name the field with --field (fields of the first item: {', '.join(map(str, list(item)[:12]))})",
            )
        break
    raise CommandError(f"{source.path}: no JSON item found")


def _unique_urls(urls: list[str]) -> list[str]:
    """Several items of one page share its URL: the 2nd, 3rd... get ``#item-2``, ``#item-3``..."""
    seen: Counter[str] = Counter()
    out = []
    for url in urls:
        seen[url] += 1
        if seen[url] > 1:
            url = f"{url}{'-' if '#' in url else '#'}item-{seen[url]}"
        out.append(url)
    return out


def _cpus() -> int:
    """CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass
class _Pages:
    """Pass 1's answer: the fingerprinted pages (position i of each list is page i) and the skipped ones."""

    kept: list[int] = field(default_factory=list)  # input positions of fingerprinted pages
    fingerprints: list[int] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    referers: list[Any] = field(default_factory=list)
    depths: list[Any] = field(default_factory=list)
    exact_flags: list[bool] = field(default_factory=list)
    edit_keys: list[tuple[int, ...]] = field(default_factory=list)
    # The digests of the protected text (SIMHASH_DISTINCT_SELECTORS) and the declared identity (SIMHASH_IDENTITY_SIGNALS).
    digests: list[tuple[str | None, str | None] | None] = field(default_factory=list)
    # Steps 5-7: the template-free fingerprints (learned in input order as the pages come; the text is
    # not kept), the second simhashes and the sentence sketches, for the rule (core.detector).
    also: list[int | None] = field(default_factory=list)
    seconds: list[int | None] = field(default_factory=list)
    sketches: list[Any] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    read: int = 0


def _check_base_url(base_url: str) -> None:
    """``--base-url`` must be an absolute URL with a host (each file's URL is built on it); the error shows it
    without its password (``core.redact``)."""
    from urllib.parse import urlsplit

    from ..core.redact import redact, secrets_in

    try:
        parts = urlsplit(base_url)
        host = parts.hostname
    except ValueError:
        host = None
    if not host:
        shown = redact(base_url, secrets_in(base_url))
        raise CommandError(f"--base-url must be an absolute URL with a host (https://shop.example/), got {shown!r}", EXIT_USAGE)


def _open_source(opts: Any, config: SimhashConfig) -> tuple[_Source, str, str]:
    """The input (a folder of HTML files or an items feed), its text field and its URL field."""
    path = Path(opts.input)
    if not path.exists():
        raise CommandError(f"no such file or folder: {opts.input}")
    if path.is_dir():
        if opts.base_url:
            _check_base_url(opts.base_url)
        suffixes = tuple(s if s.startswith(".") else "." + s for s in (opts.suffix or HTML_SUFFIXES))
        folder = _Folder(path, tuple(s.lower() for s in suffixes), opts.base_url)
        if not folder.count():
            raise CommandError(f"no HTML files ({', '.join('*' + s for s in suffixes)}) in {path}")
        return folder, "", ""
    if path.suffix.lower() in (".csv", ".xml"):
        raise CommandError(f"{path}: dedup reads JSON Lines (or a JSON array) feeds, not {path.suffix[1:].upper()}")
    items = _ItemsFile(path)
    return items, _pick_field(items, opts.field, config), opts.url_field or config.item_url_field


def _fingerprint_pages(
    source: _Source, params: tuple[Any, ...], jobs: int, progress: Progress, config: SimhashConfig
) -> _Pages:
    """Pass 1: every page's fingerprint (or its skip reason), URL, referer and depth, in input order;
    and what steps 5-7 use (the template-free fingerprint, learned here, the second simhash, the sketch)."""
    pages = _Pages()
    learner = Detector.from_config(config)
    for position, (fingerprint, reason, url, referer, depth, exact, keys, digest, text, second, sketch) in _run_tasks(
        source, "fingerprint", None, params, jobs, progress
    ):
        pages.read += 1
        if fingerprint is None:
            pages.skipped[reason or "error"] += 1
            continue
        host = source.url(position) if source.kind == "files" else url  # type: ignore[attr-defined]
        pages.also.append(learner.template_free(Page("", "", fingerprint, host or "", exact, source=text)))
        pages.seconds.append(second)
        pages.sketches.append(sketch)
        pages.kept.append(position)
        pages.fingerprints.append(fingerprint)
        pages.exact_flags.append(exact)
        pages.edit_keys.append(keys)
        pages.digests.append(digest)
        if source.kind == "files":
            url = source.url(position)  # type: ignore[attr-defined]
        elif not isinstance(url, str) or not url:
            url = f"item-{position + 1}"
        pages.urls.append(url)
        pages.referers.append(referer if isinstance(referer, str) else None)
        pages.depths.append(depth if isinstance(depth, int) and not isinstance(depth, bool) else None)
    progress.finish()
    return pages


def _check_pages(pages: _Pages, source: _Source, field: str) -> None:
    """A clear error when the input held no page, or none could be fingerprinted."""
    if pages.read == 0:
        raise CommandError(f"{source.description}: no page or item found")
    if not pages.kept:
        details = ", ".join(f"{reason}: {count:,}" for reason, count in pages.skipped.most_common())
        hint = f" (field {field!r})" if field else ""
        raise CommandError(f"none of the {plural(pages.read, 'page')} of {source.description} could be fingerprinted{hint}: {details}")


def _cluster_pages(
    pages: _Pages, config: SimhashConfig, items: bool = False
) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray]:
    """The crawl's rule (``core.detector.decide``, steps 1-7), page by page in input order, each page in the crawl's
    scope (``core.detector.crawl_scope``: a print view takes the identity its address's pages declared; not
    ``items``, which declare none) and at its URL (step 7's views of one address): each page's canonical page and
    distance, its scope (``core.records.record_scope``: an item's is its item scope, as the item pipeline
    records it), and whether it is in a cluster."""
    addresses = AddressIdentities() if config.identity_signals and not items else None
    scope_names = [
        crawl_scope(record_scope(config.scope, url, items=items), url, *(digests or (None, None)), addresses)[0]
        for url, digests in zip(pages.urls, pages.digests)
    ]  # fmt: skip
    n = len(pages.urls)
    canonical = np.full(n, -1, dtype=np.int64)
    distance = np.full(n, -1, dtype=np.int64)
    checked = (
        Page(scope, str(i), fp, url, exact, keys, None, None, also, second, sketch)
        for i, (scope, url, fp, exact, keys, also, second, sketch) in enumerate(zip(
            scope_names, pages.urls, pages.fingerprints, pages.exact_flags, pages.edit_keys, pages.also,
            pages.seconds, pages.sketches,
        ))
    )  # fmt: skip
    # Template-free fingerprints were learned in pass 1 (``also``): the detector learns no template here.
    for decision in decide(checked, Detector(config.max_distance, config.blocks, templates=False)):
        if decision.canonical is not None and decision.distance is not None:
            canonical[decision.position] = decision.canonical
            distance[decision.position] = decision.distance
    in_cluster = np.zeros(n, dtype=bool)
    in_cluster[canonical[canonical >= 0]] = True
    in_cluster[canonical >= 0] = True
    return canonical, distance, scope_names, in_cluster


def _members(
    pages: _Pages, canonical: np.ndarray, distance: np.ndarray, scope_names: list[str], in_cluster: np.ndarray,
    texts: dict[int, str | None],
) -> list[dict[str, Any]]:
    """The report's members: every page in a cluster, as the crawl's report records it."""
    members = []
    canonical_list = canonical.tolist()
    urls = pages.urls
    for i in np.flatnonzero(in_cluster).tolist():
        c = canonical_list[i]
        members.append(
            {
                "url": urls[i],
                "fingerprint": pages.fingerprints[i],
                "scope": scope_names[i],
                "canonical_url": None if c < 0 else urls[c],
                "distance": None if c < 0 else int(distance[i]),
                "exact": pages.exact_flags[i],
                "referer": pages.referers[i],
                "depth": pages.depths[i],
                "text": texts.get(pages.kept[i]),
            }
        )
    return members


def run_dedup(opts: Any, settings: Any, stdout: Any = None, stderr: Any = None) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    started = time.monotonic()
    config = load_config(settings)
    fmt = output_format(opts.format, opts.output)
    jobs = opts.jobs if opts.jobs is not None else _cpus()
    if jobs < 1:
        raise CommandError(f"--jobs must be at least 1, got {jobs}", EXIT_USAGE)
    source, field, url_field = _open_source(opts, config)
    item_format = config.item_format if opts.field_format is None else opts.field_format
    params = (config, field, url_field, item_format)
    show = progress_wanted(opts.progress)

    # Pass 1: fingerprints.
    total = source.count()
    # Small inputs run in this process unless --jobs asks for workers.
    inline = jobs == 1 or (opts.jobs is None and 0 < total < _INLINE_LIMIT)
    pages = _fingerprint_pages(
        source, params, 1 if inline else jobs, Progress("fingerprinting", total, "pages", show, stderr), config
    )
    fingerprint_seconds = time.monotonic() - started
    _check_pages(pages, source, field)
    pages.urls = _unique_urls(pages.urls)

    # Clusters: the crawl's rule (core.cluster.clustering), page by page in input order.
    cluster_started = time.monotonic()
    canonical, distance, scope_names, in_cluster = _cluster_pages(pages, config, items=source.kind == "lines")
    cluster_seconds = time.monotonic() - cluster_started

    texts: dict[int, str | None] = {}
    with_text = fmt == "html" and not opts.no_texts
    if with_text and in_cluster.any():
        wanted = {pages.kept[i] for i in np.flatnonzero(in_cluster).tolist()}
        progress = Progress("reading texts", len(wanted), "pages", show, stderr)
        for position, (text,) in _run_tasks(
            source, "text", wanted, params, 1 if inline or (opts.jobs is None and len(wanted) < _INLINE_LIMIT) else jobs,
            progress,
        ):
            texts[position] = text
        progress.finish()

    from ..core.report.report import build_clusters, describe_report, report_summary

    urls, skipped = pages.urls, pages.skipped
    clusters = build_clusters(
        _members(pages, canonical, distance, scope_names, in_cluster, texts),
        include_text=with_text, max_distance=config.max_distance, representative=config.representative,
    )
    summary = report_summary(
        [{"url": urls[i], "canonical_url": None if c < 0 else urls[c]} for i, c in enumerate(canonical.tolist())],
        clusters,
        title=f"Near-duplicates in {source.description}",
        max_distance=config.max_distance,
        source=str(Path(opts.input)),
    )
    summary.update({"text mode": config.text_mode, "features": config.features.signature(), "skipped": sum(skipped.values())})
    where = write_clusters(clusters, fmt, opts.output, summary, stdout)
    elapsed = time.monotonic() - started
    skipped_text = ""
    if skipped:
        skipped_text = " (" + ", ".join(f"{reason}: {count:,}" for reason, count in skipped.most_common()) + ")"
    field_text = f", field {field!r}" if field else ""
    lines = [
        f"dedup: {plural(pages.read, 'page')} read{field_text}, {len(pages.kept):,} fingerprinted, {sum(skipped.values()):,} skipped{skipped_text}",
        f"dedup: {describe_report(summary)} "
        f"(SIMHASH_MAX_DISTANCE={config.max_distance}, text mode {config.text_mode})",
        f"dedup: {elapsed:.1f} s ({len(pages.kept) / max(fingerprint_seconds, 1e-9):,.0f} pages/s fingerprinting with "
        f"{1 if inline else jobs} process{'es' if not inline and jobs > 1 else ''}, clustering {cluster_seconds:.2f} s); "
        f"{fmt} report written to {where}",
    ]
    if not opts.quiet:
        stderr.write("\n".join(lines) + "\n")
    return 0
