"""Cluster reports: which pages are near-duplicates of which, written when the spider closes.

A *cluster* is a canonical page and every page recorded as its near-duplicate
(each member is within ``SIMHASH_MAX_DISTANCE`` of the canonical page).  The
canonical page is the first page of the cluster that was crawled; it comes
first in ``members``.  Only clusters of two or more pages are reported.

``build_clusters(members)`` turns backend members into cluster dicts::

    {"cluster_id": 1, "canonical": "https://…/a", "size": 3, "scope": "myspider",
     "members": [{"url": "https://…/a", "fingerprint": "0f3a…", "distance": 0,
                  "referer": None, "depth": 0}, …]}

Formats: ``jsonl`` (one cluster per line), ``csv`` (one member per row) and
``html`` (``simhash_scrapy.core.html_report.render_html``).

The report path is feed-style: ``%(name)s`` (spider name), ``%(time)s``
(UTC start time, ``:`` replaced by ``-``) and any other spider attribute
expand.  Expanded values cannot add folders (``/`` and ``\\`` become ``_``,
``.``/``..`` become ``_``), and the final path must lie inside the folder the
URI names before its first placeholder, so a report is never written
outside it.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from .fingerprint import hamming_distance

__all__ = [
    "build_clusters",
    "expand_report_path",
    "report_params",
    "render_report",
    "write_report",
    "check_format_available",
    "CSV_COLUMNS",
]

#: CSV columns, one row per cluster member.
CSV_COLUMNS = ("cluster_id", "cluster_size", "scope", "canonical", "url", "fingerprint", "distance", "referer", "depth")

# Printf-style placeholders as feed URIs use them (``%(name)s``); any other ``%`` is literal.
_PLACEHOLDER = re.compile(r"%\(([^)]+)\)[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[diouxXeEfFgGcrsa]")


# --------------------------------------------------------------------- clusters
def _get(member: Any, name: str) -> Any:
    if isinstance(member, Mapping):
        return member.get(name)
    return getattr(member, name, None)


def build_clusters(members: Iterable[Any], include_text: bool = True) -> list[dict[str, Any]]:
    """Group recorded pages into clusters (canonical member first), largest cluster first.

    ``members`` are ``ClusterMember`` objects (or mappings with the same keys)
    in the order they were crawled.  A member whose ``canonical_url`` is
    ``None`` is a canonical page; the others belong to the cluster of the
    canonical page with that URL in the same scope.  Clusters of one page are
    left out.  Ties in size keep crawl order; ``cluster_id`` counts from 1.
    ``include_text`` keeps the members' ``text`` (for the HTML diff) when
    they have one.
    """
    groups: dict[tuple[str, str], list[Any]] = {}
    for member in members:
        url = _get(member, "url")
        canonical = _get(member, "canonical_url")
        key = (_get(member, "scope") or "", canonical if canonical is not None else url)
        group = groups.setdefault(key, [])
        if canonical is None and group and _get(group[0], "canonical_url") is not None:
            group.insert(0, member)  # the canonical page was recorded after a member (restored state)
        else:
            group.append(member)

    ordered = sorted((g for g in groups.items() if len(g[1]) > 1), key=lambda g: -len(g[1]))
    clusters = []
    for cluster_id, ((scope, canonical_url), group) in enumerate(ordered, start=1):
        head = group[0]
        head_fp = _get(head, "fingerprint") if _get(head, "canonical_url") is None else None
        rows = []
        for member in group:
            fp = int(_get(member, "fingerprint"))
            distance = _get(member, "distance")
            if distance is None:
                distance = hamming_distance(fp, head_fp) if head_fp is not None else 0
            depth = _get(member, "depth")
            row: dict[str, Any] = {
                "url": _get(member, "url"),
                "fingerprint": f"{fp:016x}",
                "distance": int(distance),
                "referer": _get(member, "referer"),
                "depth": None if depth is None else int(depth),
            }
            text = _get(member, "text")
            if include_text and text is not None:
                row["text"] = text
            rows.append(row)
        clusters.append(
            {
                "cluster_id": cluster_id,
                "canonical": canonical_url,
                "size": len(rows),
                "scope": scope,
                "members": rows,
            }
        )
    return clusters


def count_clusters(members: Iterable[Any]) -> int:
    """Number of clusters of two or more pages (the same count ``build_clusters`` gives)."""
    sizes = Counter(
        (_get(m, "scope") or "", _get(m, "canonical_url") if _get(m, "canonical_url") is not None else _get(m, "url"))
        for m in members
    )
    return sum(1 for size in sizes.values() if size > 1)


def report_summary(
    members: Iterable[Any],
    clusters: list[dict[str, Any]],
    title: str,
    max_distance: int,
    source: str,
    generated: datetime | None = None,
) -> dict[str, Any]:
    """The summary every report carries, counted from the whole record (pages, not items).

    The one place it is computed: the crawl, ``scrapy simhash report`` and
    ``scrapy simhash dedup`` all call this.
    """
    pages = [m for m in members if not (_get(m, "scope") or "").startswith("item:")]
    duplicates = sum(1 for m in pages if _get(m, "canonical_url") is not None)
    outcomes = Counter(str(_get(m, "outcome") or "") for m in pages)
    return {
        "title": title,
        "pages": len(pages),
        "unique": len(pages) - duplicates,
        "near_duplicates": duplicates,
        "unchanged": outcomes.get("unchanged", 0),
        "changed": outcomes.get("changed", 0),
        "clusters": len(clusters),
        "max_distance": max_distance,
        "generated": (generated or datetime.now(tz=timezone.utc)).replace(microsecond=0).isoformat(),
        "source": source,
    }


# -------------------------------------------------------------------- rendering
def check_format_available(report_format: str) -> None:
    """Raise ``ValueError`` naming ``SIMHASH_REPORT_FORMAT`` if ``report_format`` cannot be written here."""
    if report_format != "html":
        return
    try:
        from .html_report import render_html  # noqa: F401
    except ImportError as exc:
        raise ValueError(
            "SIMHASH_REPORT_FORMAT='html' needs simhash_scrapy.core.html_report.render_html, which cannot be "
            f"imported ({exc}); use 'jsonl' or 'csv'"
        ) from exc


def _jsonl(clusters: list[dict[str, Any]]) -> str:
    lines = []
    for cluster in clusters:
        members = [{k: v for k, v in m.items() if k != "text"} for m in cluster["members"]]
        lines.append(json.dumps({**cluster, "members": members}, ensure_ascii=False))
    return "".join(line + "\n" for line in lines)


def _csv(clusters: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for cluster in clusters:
        for member in cluster["members"]:
            writer.writerow(
                [
                    cluster["cluster_id"],
                    cluster["size"],
                    cluster.get("scope", ""),
                    cluster["canonical"],
                    member["url"],
                    member["fingerprint"],
                    member["distance"],
                    "" if member["referer"] is None else member["referer"],
                    "" if member["depth"] is None else member["depth"],
                ]
            )
    return out.getvalue()


def render_report(clusters: list[dict[str, Any]], report_format: str, summary: Mapping[str, Any] | None = None) -> str:
    """The report document for ``clusters`` in ``report_format`` (``jsonl``, ``csv`` or ``html``)."""
    if report_format == "jsonl":
        return _jsonl(clusters)
    if report_format == "csv":
        return _csv(clusters)
    if report_format == "html":
        from .html_report import render_html

        return render_html(clusters, dict(summary or {}))
    raise ValueError(f"SIMHASH_REPORT_FORMAT must be one of 'jsonl', 'csv', 'html', got {report_format!r}")


def write_report(
    path: str | os.PathLike[str],
    clusters: list[dict[str, Any]],
    report_format: str,
    summary: Mapping[str, Any] | None = None,
) -> Path:
    """Write the report atomically (a temporary file in the same folder, then a rename)."""
    target = Path(path)
    document = render_report(clusters, report_format, summary)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        # mkstemp creates 0600; a report is an ordinary file (0666 less the umask).
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(document)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target


# ------------------------------------------------------------------------ paths
def report_params(spider: Any, now: datetime | None = None) -> Callable[[str], Any]:
    """A lookup for feed-style placeholders: ``name``, ``time`` and the spider's attributes."""
    now = now or datetime.now(tz=timezone.utc)
    fixed = {
        "name": getattr(spider, "name", None),
        "time": now.replace(microsecond=0).isoformat().replace(":", "-"),
    }

    def lookup(key: str) -> Any:
        if key in fixed and fixed[key] is not None:
            return fixed[key]
        try:
            return getattr(spider, key)
        except AttributeError:
            raise KeyError(key) from None

    return lookup


def _safe_value(value: str) -> str:
    value = value.replace("\x00", "")
    for sep in {"/", "\\", os.sep, os.altsep or "/"}:
        value = value.replace(sep, "_")
    if value in ("", ".", ".."):
        value = "_"
    return value


def _template_path(uri: str) -> str:
    parsed = urlparse(uri)
    if parsed.scheme.lower() == "file":
        # file:///abs/path or file://localhost/abs/path; percent-escapes are decoded
        # but a placeholder's "%(" is kept (unquote leaves "%(" alone).
        return unquote(parsed.path)
    return uri


def expand_report_path(uri: str, params: Callable[[str], Any] | Mapping[str, Any], cwd: str | os.PathLike[str] | None = None) -> Path:
    """The report file for ``uri`` (``SIMHASH_REPORT_URI``), its placeholders expanded.

    Raises ``ValueError`` naming ``SIMHASH_REPORT_URI`` for an unknown
    placeholder or a path that would leave the folder the URI names.
    """
    lookup = params if callable(params) else params.__getitem__
    template = _template_path(uri)
    parts: list[str] = []
    last = 0
    first_placeholder: int | None = None
    for match in _PLACEHOLDER.finditer(template):
        if first_placeholder is None:
            first_placeholder = match.start()
        key = match.group(1)
        try:
            value = lookup(key)
        except KeyError:
            raise ValueError(
                f"SIMHASH_REPORT_URI={uri!r} uses %({key})s, but the spider has no attribute {key!r} "
                f"(placeholders: %(name)s, %(time)s or a spider attribute)"
            ) from None
        try:
            text = match.group(0) % {key: value}
        except (TypeError, ValueError) as exc:
            raise ValueError(f"SIMHASH_REPORT_URI={uri!r}: cannot format {match.group(0)} with {value!r}: {exc}") from None
        parts.append(template[last : match.start()])
        parts.append(_safe_value(text))
        last = match.end()
    parts.append(template[last:])
    expanded = "".join(parts)

    static = template if first_placeholder is None else template[:first_placeholder]
    cut = max(static.rfind("/"), static.rfind("\\"), static.rfind(os.sep))
    base_text = static[: cut + 1] if cut >= 0 else ""
    root = Path(cwd) if cwd is not None else Path.cwd()
    base = (root / base_text).resolve() if base_text else root.resolve()
    target = (root / expanded).resolve()
    if target == base or base not in target.parents:
        raise ValueError(
            f"SIMHASH_REPORT_URI={uri!r} expands to {expanded!r}, which is not a file inside {str(base)!r}; "
            f"the report must stay in the folder the URI names"
        )
    return target
