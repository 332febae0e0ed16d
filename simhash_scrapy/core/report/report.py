"""Cluster reports: which pages are near-duplicates of which, and which changed since the last crawl.

A *cluster* is a canonical page and every page recorded as its near-duplicate
(each member is within the maximum distance k of the canonical page).  The
canonical page is the first page of the cluster that was crawled; it comes
first in ``members``.  Only clusters of two or more pages are reported.

``build_clusters(members)`` turns backend members into cluster dicts::

    {"cluster_id": 1, "canonical": "https://…/a?utm_source=x", "representative": "https://…/a",
     "representative_reason": "rel_canonical", "size": 3, "scope": "myspider", "max_distance": 4,
     "members": [{"url": "https://…/a?utm_source=x", "fingerprint": "0f3a…", "distance": 0,
                  "referer": None, "depth": 0, "rule": None, "canonical_link": "https://…/a"}, …]}

``canonical`` is the matching anchor (the first page crawled, whose
fingerprint the index holds); ``representative`` the member a person would
keep and ``representative_reason`` why (``core.cluster.representative``: a
``rel_canonical`` target, ``no_query``, ``not_variant``, ``first_crawled``,
``shortest``); ``canonical_link`` the rel=canonical URL a member names.

``rule`` names what made a member a near-duplicate of the canonical page
(``core.cluster.clustering.Rule``: ``"simhash"`` within k, ``"exact"`` short page,
``"one_edit"``, whose distance is more than k); ``None`` for the canonical
page.  ``max_distance`` is the k the rule used (``None`` when the caller did
not say).

``build_changes(members)`` lists the pages of a re-crawl whose latest check
was ``changed`` (crawled before, and their content moved more than k)::

    {"url": "https://…/b", "scope": "myspider", "fingerprint": "77a0…",
     "previous_fingerprint": "37a0…", "distance": 9}

(``distance`` is ``None`` for a short page matched by its exact digest, or a
page that switched between the exact and the simhash kind.)

Formats (``render_report`` / ``write_report``):

* ``jsonl``: one JSON object per line; ``"type": "cluster"`` lines (the
  dicts above) first, then one ``"type": "changed"`` line per changed page,
  then (with a summary) one ``"type": "summary"`` line with its counts, so a
  report of a crawl without clusters is never empty.
  Readers of older reports: a line without ``type`` is a cluster.  Every
  character a line splitter may break on (``str.splitlines``: U+2028,
  U+2029, U+0085 and the C0 separators) is written as a ``\\u`` escape, so
  any splitter reads one record a line (``json.loads`` restores them).
* ``csv``: one row per cluster member (``CSV_COLUMNS``); every text cell a
  spreadsheet would read as a formula is neutralised (``csv_cell``, OWASP's
  rule: a leading ``'``); the changed pages go
  to a second CSV file beside it, ``<name>.changed.csv`` (``CHANGED_COLUMNS``),
  written only when a page changed (a first crawl has none); a report written
  without changed pages removes that file if an earlier run left one, so it
  never describes another run.
* ``html``: ``simhash_scrapy.core.report.html_report.render_html`` (a section lists
  the changed pages).

No password reaches a report: every text of a report record but a page's ``text`` is written as
``shown`` gives it (``core.redact``: the password of ``https://user:pw@host/a`` masked, the user name
kept), in every format; the clusters themselves are built from the real URLs.

Where the report goes: ``core.report.report_path``.  Messages name the arguments
(``report_format``); the Scrapy glue passes its setting names instead
(``name=``).
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .changes import CHANGE_COLUMNS
from ..wording import plural
from ..cluster.clustering import rule_of
from ..files import write_atomic
from ..redact import may_hold_password, redact
from ..records import is_item_scope
from ..cluster.representative import Candidate, choose
from ..features.fingerprint import hamming_distance

__all__ = [
    "build_clusters",
    "build_changes",
    "count_clusters",
    "report_summary",
    "describe_report",
    "changes_path",
    "render_report",
    "render_changes_csv",
    "write_report",
    "check_format_available",
    "CSV_COLUMNS",
    "CHANGED_COLUMNS",
    "csv_cell",
    "line_safe",
    "shown",
]

#: CSV columns, one row per cluster member.
CSV_COLUMNS = (
    "cluster_id", "cluster_size", "scope", "canonical", "url", "fingerprint", "distance", "referer", "depth",
    "rule", "max_distance", "representative", "representative_reason", "canonical_link",
)  # fmt: skip
#: Columns of the changed-pages CSV (``<name>.changed.csv``), one row per changed page.
CHANGED_COLUMNS = ("scope", "url", "previous_fingerprint", "fingerprint", "distance")

#: A cell starting with one of these is a formula (or DDE call) in a spreadsheet (OWASP, "CSV Injection").
_FORMULA_START = frozenset("=+-@\t\r\n")
#: Characters a spreadsheet may skip before it looks for a formula start (OWASP: quotes and spaces).
_SKIPPED_LEAD = "'\" \t\r\n\x0b\x0c\xa0\u3000"
#: RFC 4180's line end.  With it the ``csv`` module quotes a cell holding a lone "\\r" too (with "\\n"
#: it does not, and a reader splits the row there).
_CSV_LINE_END = "\r\n"
#: What ``str.splitlines`` breaks a line on that ``json.dumps(ensure_ascii=False)`` leaves raw.
_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def csv_cell(value: Any) -> Any:
    """One CSV cell, safe to open in a spreadsheet (OWASP's rule against formula injection).

    A text that starts with ``=``, ``+``, ``-``, ``@``, a tab or a line break,
    also after leading spaces or quotes (``" =1+1"``, ``"'=1+1"``,
    ``'"=1+1'``), gets a single quote in front, so the spreadsheet shows it as
    text.  Other values (numbers, ``None``) are returned as they are; the
    ``csv`` module quotes separators, quotes and line breaks, so a cell never
    spills into the next one.  A reader who wants the original text removes
    the first ``'`` of a cell when the rest would be neutralised again.
    """
    if not isinstance(value, str) or not value:
        return value
    if value[0] in _FORMULA_START or value.lstrip(_SKIPPED_LEAD)[:1] in _FORMULA_START:
        return "'" + value
    return value


def line_safe(document: str) -> str:
    """A JSON Lines document whose records ``str.splitlines`` and every other line splitter keep whole.

    ``json.dumps(..., ensure_ascii=False)`` escapes the C0 characters (``\\n``,
    ``\\x0b``, ``\\x1c``...) but leaves U+0085, U+2028 and U+2029 raw; they
    can only occur inside JSON strings, where ``\\uXXXX`` means the same.
    """
    for raw, escaped in _LINE_BREAKS.items():
        if raw in document:
            document = document.replace(raw, escaped)
    return document



#: The fields of a report record written as they are: a page's text (``include_text``), not an address.
_AS_IS = frozenset({"text"})


def shown(value: Any) -> Any:
    """A report record (or a list of them) as it is written: every text without a password (``core.redact``:
    the password of ``https://user:pw@host/a`` masked, the user name kept), a page's ``text`` as it is.  The one rule
    for every format and every report (the crawl's, ``scrapy simhash dedup``'s and ``report``'s)."""
    if isinstance(value, Mapping):
        return {key: item if key in _AS_IS else shown(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shown(item) for item in value]
    if type(value) is tuple:
        return tuple(shown(item) for item in value)
    return redact(value) if isinstance(value, str) else value


def _written(render: Callable[..., str], *parts: Any) -> str:
    """``render(*parts)``, from the parts as ``shown`` gives them when the document may hold a password
    (``core.redact.may_hold_password``: rendered again, rarely; a document without an ``@`` or the word
    ``password`` holds none, and its records are written as they are, at no cost).  For the formats whose
    document holds every text of its records as it is (JSON Lines and CSV: no page text, no URL encoded)."""
    document = render(*parts)
    return render(*(shown(part) for part in parts)) if may_hold_password(document) else document


# --------------------------------------------------------------------- clusters
def _get(member: Any, name: str) -> Any:
    if isinstance(member, Mapping):
        return member.get(name)
    return getattr(member, name, None)


def build_clusters(
    members: Iterable[Any], include_text: bool = True, max_distance: int | None = None, representative: str = "best"
) -> list[dict[str, Any]]:
    """Group recorded pages into clusters (canonical member first), largest cluster first.

    ``members`` are ``ClusterMember`` objects (or mappings with the same keys)
    in the order they were crawled.  A member whose ``canonical_url`` is
    ``None`` is a canonical page; the others belong to the cluster of the
    canonical page with that URL in the same scope.  Clusters of one page are
    left out.  Ties in size keep crawl order; ``cluster_id`` counts from 1.
    ``include_text`` keeps the members' ``text`` (for the HTML diff) when
    they have one.  ``max_distance`` is the crawl's k: each member's ``rule``
    follows from it (``core.cluster.clustering.rule_of``); without it a simhash
    member's rule is ``None`` (unknown), an exact one's ``"exact"``.
    ``representative`` is the policy (``core.cluster.representative.choose``) that
    names each cluster's ``representative`` and ``representative_reason``.
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

    if max_distance is not None:
        groups = _replace_stale(groups, max_distance)
    ordered = sorted((g for g in groups.items() if len(g[1]) > 1), key=lambda g: -len(g[1]))
    clusters = []
    for cluster_id, ((scope, canonical_url), group) in enumerate(ordered, start=1):
        head = group[0]
        head_fp = _get(head, "fingerprint") if _get(head, "canonical_url") is None else None
        rows = []
        for member in group:
            fp = int(_get(member, "fingerprint"))
            distance = _current_distance(member, head, head_fp)
            depth = _get(member, "depth")
            rule = None
            if _get(member, "canonical_url") is not None:
                exact = bool(_get(member, "exact"))
                if exact or max_distance is not None:
                    k = max_distance if max_distance is not None else 64
                    rule = rule_of(exact, int(distance), k, _get(member, "via")).value
            row: dict[str, Any] = {
                "url": _get(member, "url"),
                "fingerprint": f"{fp:016x}",
                "distance": int(distance),
                "referer": _get(member, "referer"),
                "depth": None if depth is None else int(depth),
                "rule": rule,
                "canonical_link": _get(member, "canonical_link"),
            }
            text = _get(member, "text")
            if include_text and text is not None:
                row["text"] = text
            rows.append(row)
        position, reason = choose(
            [Candidate(_get(m, "url"), _get(m, "canonical_link"), order) for order, m in enumerate(group)],
            representative,
        )
        clusters.append(
            {
                "cluster_id": cluster_id,
                "canonical": canonical_url,
                "representative": _get(group[position], "url"),
                "representative_reason": reason.value,
                "size": len(rows),
                "scope": scope,
                "max_distance": max_distance,
                "members": rows,
            }
        )
    return clusters


def _matched_old(member: Any, head: Any) -> bool:
    """Whether a member's recorded distance was measured to an older version of its canonical page: the page
    was re-crawled with other text (``previous_fingerprint``), and the distance is the member's to that version."""
    previous = _get(head, "previous_fingerprint")
    if previous is None or member is head or _get(member, "canonical_url") is None or _get(member, "via") is not None:
        return False
    if _get(member, "exact") or _get(head, "exact") or str(_get(head, "outcome") or "") not in ("changed", "edited"):
        return False
    recorded, fp = _get(member, "distance"), int(_get(member, "fingerprint"))
    return recorded is not None and int(recorded) == hamming_distance(fp, int(previous)) != hamming_distance(
        fp, int(_get(head, "fingerprint"))
    )


def _current_distance(member: Any, head: Any, head_fp: Any) -> int:
    """A member's distance to its cluster's canonical page as the recorded fingerprints say: the one recorded
    at its check, unless that was measured to an older version of the page (``_matched_old``)."""
    distance = _get(member, "distance")
    if distance is None:
        return hamming_distance(int(_get(member, "fingerprint")), int(head_fp)) if head_fp is not None else 0
    if head_fp is not None and _matched_old(member, head):
        return hamming_distance(int(_get(member, "fingerprint")), int(head_fp))
    return int(distance)


def _stale(member: Any, head: Any, k: int) -> bool:
    """Whether a member matched an older version of its canonical page that moved more than k away from it."""
    return _matched_old(member, head) and hamming_distance(
        int(_get(member, "fingerprint")), int(_get(head, "fingerprint"))
    ) > k


def _replace_stale(groups: dict[tuple[str, str], list[Any]], k: int) -> dict[tuple[str, str], list[Any]]:
    """The clusters with the members that matched an older version of their canonical page re-placed: each
    joins the first earlier re-placed member within k of it (which then anchors their cluster), else stands
    alone, as a fresh crawl would place them against each other."""
    out: dict[tuple[str, str], list[Any]] = {}
    for (scope, anchor), group in groups.items():
        head = group[0]
        kept = [m for m in group if not _stale(m, head, k)]
        out[(scope, anchor)] = kept
        anchors: list[Any] = []
        for member in (m for m in group if _stale(m, head, k)):
            fp = int(_get(member, "fingerprint"))
            home = next((a for a in anchors if hamming_distance(fp, int(_get(a, "fingerprint"))) <= k), None)
            if home is None:
                anchors.append(member)
                out[(scope, _get(member, "url"))] = [_replaced(member, None, None)]
            else:
                distance = hamming_distance(fp, int(_get(home, "fingerprint")))
                out[(scope, _get(home, "url"))].append(_replaced(member, _get(home, "url"), distance))
    return out


def _replaced(member: Any, canonical: str | None, distance: int | None) -> dict[str, Any]:
    """A member as a mapping, placed under ``canonical`` at ``distance`` (``None``: a canonical page)."""
    names = ("url", "fingerprint", "scope", "referer", "depth", "text", "exact", "canonical_link", "via")
    row = {name: _get(member, name) for name in names}
    row.update(canonical_url=canonical, distance=distance)
    return row


def build_changes(members: Iterable[Any], since: float | None = None) -> list[dict[str, Any]]:
    """The pages whose latest check was ``changed``, in crawl order (see the module docstring).

    Pages only: a changed item (scope ``item:…``) is not listed.  ``since``: only pages checked at or after
    that time (the latest crawl's start, ``core.report.changes.LastCrawl``).
    """
    changes = []
    for member in members:
        if str(_get(member, "outcome") or "") != "changed" or is_item_scope(_get(member, "scope")):
            continue
        if since is not None and float(_get(member, "last_seen") or 0.0) < since:
            continue
        fp = int(_get(member, "fingerprint"))
        previous = _get(member, "previous_fingerprint")
        distance = None
        if previous is not None and not _get(member, "exact"):
            distance = hamming_distance(fp, int(previous))
        changes.append(
            {
                "url": _get(member, "url"),
                "scope": _get(member, "scope") or "",
                "fingerprint": f"{fp:016x}",
                "previous_fingerprint": None if previous is None else f"{int(previous):016x}",
                "distance": distance,
            }
        )
    return changes


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
    max_distance: int | None,
    source: str,
    generated: datetime | None = None,
    previous_crawl: bool | None = None,
) -> dict[str, Any]:
    """The summary every report carries, counted from the whole record (pages, not items).

    The one place it is computed: the crawl, ``scrapy simhash report`` and
    ``scrapy simhash dedup`` all call this.  ``pages`` counts distinct pages
    (identities), not fetches.  ``previous_crawl``: whether the record held
    pages of an earlier crawl (``False``: the re-checks were pages fetched again
    within this crawl, and nothing is said "since the last crawl"; ``None``:
    unknown, left out).
    """
    # Items (scope "item:…") are not pages; nor are they listed as changed.
    pages = [m for m in members if not is_item_scope(_get(m, "scope"))]
    duplicates = sum(1 for m in pages if _get(m, "canonical_url") is not None)
    outcomes = Counter(str(_get(m, "outcome") or "") for m in pages)
    return {
        "title": title,
        "pages": len(pages),
        "unique": len(pages) - duplicates,
        "near_duplicates": duplicates,
        "unchanged": outcomes.get("unchanged", 0),
        "edited": outcomes.get("edited", 0),
        "changed": outcomes.get("changed", 0),
        **({} if previous_crawl is None else {"previous_crawl": previous_crawl}),
        "clusters": len(clusters),
        "max_distance": max_distance,
        "generated": (generated or datetime.now(tz=timezone.utc)).replace(microsecond=0).isoformat(),
        "source": source,
    }


def describe_report(summary: Mapping[str, Any]) -> str:
    """One line for logs and commands, from ``report_summary``'s counts.

    "12 pages: 10 unique, 2 near-duplicates in 1 cluster; since the last crawl: 3 changed, 1 edited,
    6 unchanged" (the last part only when a re-crawl found any, "edited" only when there are some; on a
    first crawl, pages fetched twice are "fetched again in this crawl").
    """
    keys = ("pages", "unique", "near_duplicates", "clusters", "changed", "edited", "unchanged")
    count = {key: int(summary.get(key) or 0) for key in keys}
    line = (
        f"{plural(count['pages'], 'page')}: {count['unique']:,} unique, "
        f"{plural(count['near_duplicates'], 'near-duplicate')} in {plural(count['clusters'], 'cluster')}"
    )
    if count["changed"] or count["edited"] or count["unchanged"]:
        since = "since the last crawl" if summary.get("previous_crawl", True) else "fetched again in this crawl"
        edited = f"{count['edited']:,} edited, " if count["edited"] else ""
        new = f"{int(summary.get('new') or 0):,} new, " if summary.get("new") else ""
        gone = f", {int(summary.get('gone') or 0):,} gone" if summary.get("gone") else ""
        line += f"; {since}: {new}{count['changed']:,} changed, {edited}{count['unchanged']:,} unchanged{gone}"
    return line


# -------------------------------------------------------------------- rendering
def check_format_available(report_format: str, *, name: str = "report_format") -> None:
    """Raise ``ValueError`` (naming ``name``) if ``report_format`` cannot be written here."""
    if report_format != "html":
        return
    try:
        from .html_report import render_html  # noqa: F401
    except ImportError as exc:
        raise ValueError(
            f"{name}='html' needs simhash_scrapy.core.report.html_report.render_html, which cannot be "
            f"imported ({exc}); use 'jsonl' or 'csv'"
        ) from exc


def _summary_jsonl(summary: Mapping[str, Any] | None) -> str:
    """The ``"type": "summary"`` line (the URL rules have lines of their own)."""
    if summary is None:
        return ""
    record = {key: value for key, value in summary.items() if key not in ("rules", "rules_blob", "type")}
    return json.dumps({"type": "summary", **record}, ensure_ascii=False, default=str) + "\n"


def _jsonl(clusters: list[dict[str, Any]], changes: list[dict[str, Any]], pages: Iterable[dict[str, Any]] = ()) -> str:
    lines = []
    for cluster in clusters:
        members = [{k: v for k, v in m.items() if k != "text"} for m in cluster["members"]]
        lines.append(json.dumps({"type": "cluster", **cluster, "members": members}, ensure_ascii=False))
    for change in changes:
        lines.append(json.dumps({"type": "changed", **change}, ensure_ascii=False))
    lines.extend(page_change_lines(pages, skip=("changed",) if changes else ()))
    return "".join(line + "\n" for line in lines)


def page_change_lines(pages: Iterable[dict[str, Any]], skip: tuple[str, ...] = ()) -> list[str]:
    """One ``"type": <change>`` JSON line per page of the latest crawl (``core.report.changes``), but kinds ``skip``."""
    return [_written(_change_line, page) for page in pages if page["change"] not in skip]


def _change_line(page: dict[str, Any]) -> str:
    return json.dumps({"type": page["change"], **{k: v for k, v in page.items() if k != "change"}}, ensure_ascii=False)


def page_changes_csv(pages: Iterable[dict[str, Any]]) -> str:
    """The CSV list of the latest crawl's pages (``core.report.changes.CHANGE_COLUMNS``)."""
    return _written(_rows_csv, list(pages), CHANGE_COLUMNS)


def page_changes_path(path: str | os.PathLike[str]) -> Path:
    """Where a CSV report's list of the latest crawl's pages goes: ``clusters.csv`` -> ``clusters.changes.csv``."""
    return _beside(path, "changes")


def rules_jsonl(rules: Iterable[dict[str, Any]] | None) -> str:
    """JSON Lines records (``"type": "url_rule"``) for the rules of a report summary."""
    return "".join(json.dumps({"type": "url_rule", **rule}, ensure_ascii=False) + "\n" for rule in rules or ())


def _rows_csv(rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> str:
    """A CSV document of ``rows``, one line each, ``columns`` in order (``None`` as an empty cell)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=_CSV_LINE_END)
    writer.writerow(columns)
    for row in rows:
        writer.writerow([csv_cell("" if row[column] is None else row[column]) for column in columns])
    return out.getvalue()


def _changes_csv(changes: list[dict[str, Any]]) -> str:
    return _written(_rows_csv, changes, CHANGED_COLUMNS)


def _beside(path: str | os.PathLike[str], tag: str) -> Path:
    """A CSV file beside the report ``path``: ``clusters.csv`` -> ``clusters.<tag>.csv``."""
    target = Path(path)
    suffix = target.suffix if target.suffix.lower() == ".csv" else ""
    stem = target.name[: len(target.name) - len(suffix)] if suffix else target.name
    return target.with_name(f"{stem}.{tag}{suffix or '.csv'}")


def changes_path(path: str | os.PathLike[str]) -> Path:
    """Where a CSV report's changed pages go: ``clusters.csv`` -> ``clusters.changed.csv``."""
    return _beside(path, "changed")


def _csv(clusters: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=_CSV_LINE_END)
    writer.writerow(CSV_COLUMNS)
    for cluster in clusters:
        for member in cluster["members"]:
            k = cluster.get("max_distance")
            cells = [
                cluster["cluster_id"],
                cluster["size"],
                cluster.get("scope", ""),
                cluster["canonical"],
                member["url"],
                member["fingerprint"],
                member["distance"],
                member["referer"],
                member["depth"],
                member.get("rule"),
                k,
                cluster.get("representative"),
                cluster.get("representative_reason"),
                member.get("canonical_link"),
            ]
            writer.writerow(["" if cell is None else csv_cell(cell) for cell in cells])
    return out.getvalue()


def render_report(
    clusters: list[dict[str, Any]],
    report_format: str,
    summary: Mapping[str, Any] | None = None,
    *,
    changes: Iterable[dict[str, Any]] = (),
    pages: Iterable[dict[str, Any]] = (),
) -> str:
    """The report document for ``clusters`` in ``report_format`` (``jsonl``, ``csv`` or ``html``).

    ``changes`` (``build_changes``) and ``pages`` (``core.report.changes.build_page_changes``: every page of the
    latest crawl, new, edited, unchanged or gone) are part of the JSON Lines and HTML
    documents; a CSV document holds the clusters only (``render_changes_csv``, ``page_changes_csv``).
    """
    changed, listed = list(changes), list(pages)
    if report_format == "jsonl":
        return _written(_jsonl_document, clusters, changed, listed, summary)
    if report_format == "csv":
        return _written(_csv, clusters)
    if report_format == "html":
        from .html_report import render_html

        # (every record as shown: the page texts of the diffs often hold an "@", and the page may embed its data)
        return render_html(shown(clusters), dict(shown(summary) or {}), changes=shown(changed), pages=shown(listed))
    raise ValueError(f"report_format must be one of 'jsonl', 'csv', 'html', got {report_format!r}")


def _jsonl_document(
    clusters: list[dict[str, Any]], changes: list[dict[str, Any]], pages: list[dict[str, Any]],
    summary: Mapping[str, Any] | None,
) -> str:
    return line_safe(_jsonl(clusters, changes, pages) + rules_jsonl((summary or {}).get("rules")) + _summary_jsonl(summary))


def render_changes_csv(changes: Iterable[dict[str, Any]]) -> str:
    """The changed-pages CSV document (``CHANGED_COLUMNS``) that goes beside a CSV report."""
    return _changes_csv(list(changes))


def write_report(
    path: str | os.PathLike[str],
    clusters: list[dict[str, Any]],
    report_format: str,
    summary: Mapping[str, Any] | None = None,
    *,
    changes: Iterable[dict[str, Any]] = (),
    pages: Iterable[dict[str, Any]] = (),
) -> Path:
    """Write the report atomically (``core.files``); a CSV report's changed pages go to ``changes_path(path)``,
    the list of the latest crawl's pages (``pages``) to ``page_changes_path(path)``."""
    target = Path(path)
    changes = list(changes)
    pages = list(pages)
    document = render_report(clusters, report_format, summary, changes=changes, pages=pages)
    target.parent.mkdir(parents=True, exist_ok=True)
    if report_format == "csv":
        for rows, where, render in ((changes, changes_path(target), _changes_csv),
                                    (pages, page_changes_path(target), page_changes_csv)):  # fmt: skip
            if rows:
                write_atomic(where, render(rows))
            else:
                where.unlink(missing_ok=True)  # left by an earlier run: it would describe that run
    write_atomic(target, document)
    return target
