"""A self-contained HTML page for a person to read a cluster report.

``render_html(clusters, summary, changes=...)`` returns one HTML document: no
external script, style, font or image, so it opens offline and can be attached
to a ticket.  What it shows:

* a summary (pages, unique pages, near-duplicates, clusters, the largest
  cluster; unchanged and changed pages after a re-crawl) and a histogram of the
  members' distances to their canonical page, rendered as static HTML
  (readable without JavaScript);
* the pages that changed since the last crawl (URL, old and new fingerprint,
  distance), as a static table, when ``changes`` lists any;
* the clusters, largest first, 100 per page with a URL filter; each cluster is
  a ``<details>`` element whose member table is built when it is opened
  (each member's distance and the rule that matched it, ``Rule.describe``);
* a side-by-side text diff (line diff, changed words highlighted) of the
  canonical page and a chosen member, computed in the browser only when asked
  for.  Member texts are stored once per distinct text, compressed with zlib
  in chunks of about 1 MB that the browser inflates on demand
  (``DecompressionStream``), so near-duplicate texts cost little space.

The markup, style and script are package data (``templates/report.html``,
``report.css``, ``report.js``); the page is filled with ``string.Template``
(``${name}`` placeholders; every value is escaped here before it goes in).
The diff runs in the browser on purpose: a cluster of thousands of members
would need thousands of diffs computed (and stored) in advance, while a reader
opens a few.

``clusters`` are the JSON Lines report's cluster dicts (canonical member
first); ``summary`` may give ``pages`` (distinct pages recorded: a page
fetched twice counts once), ``near_duplicates``, ``unique``, ``unchanged``,
``edited``, ``changed``, ``previous_crawl`` (``False``: the cards say "fetched again", not "since
last crawl"), ``clusters``,
``max_distance``, ``title``, ``generated`` and ``source``; missing counts are
derived from the clusters.  Other scalar summary values are listed under "Run".
``changes`` are ``core.report.report.build_changes`` dicts.
"""

from __future__ import annotations

import base64
import html
import json
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from ..wording import plural, were
from ..cluster.clustering import Rule
from ..cluster.representative import Reason

__all__ = ["render_html", "report_numbers"]

#: Member texts longer than this are cut in the report (the diff says so).
MAX_TEXT_CHARS = 50_000
#: Uncompressed size of one text chunk (the browser inflates one chunk at a time).
_CHUNK_CHARS = 1 << 20
#: Changed pages listed in the page (the JSONL and CSV reports list them all).
MAX_CHANGED_ROWS = 10_000
_KNOWN_SUMMARY_KEYS = (
    "pages", "unique", "near_duplicates", "unchanged", "edited", "changed", "previous_crawl", "clusters", "max_distance",
    "title", "generated", "source",
)  # fmt: skip


@cache
def _template_file(name: str) -> str:
    """A file of ``templates/`` (package data), read once."""
    return resources.files(__package__).joinpath("templates").joinpath(name).read_text(encoding="utf-8")


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _fingerprint_hex(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:016x}"
    return "" if value is None else str(value)


def _cluster_size(cluster: Mapping[str, Any]) -> int:
    size = _int_or_none(cluster.get("size"))
    return size if size is not None else len(cluster.get("members") or ())


def report_numbers(clusters: Iterable[Mapping[str, Any]], summary: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The numbers the page shows: pages, unique, near_duplicates, clusters, largest, histogram.

    ``histogram`` maps a distance to the number of non-canonical members at that
    distance from their canonical page.  Counts given in ``summary`` win over
    the ones derived from the clusters (a crawl knows pages that are in no cluster).
    """
    summary = summary or {}
    clusters = list(clusters)
    near = sum(max(_cluster_size(c) - 1, 0) for c in clusters)
    in_clusters = sum(_cluster_size(c) for c in clusters)
    histogram: Counter[int] = Counter()
    for cluster in clusters:
        for member in list(cluster.get("members") or ())[1:]:
            distance = _int_or_none(member.get("distance"))
            if distance is not None:
                histogram[distance] += 1
    pages = _int_or_none(summary.get("pages"))
    pages = in_clusters if pages is None else pages
    near_given = _int_or_none(summary.get("near_duplicates"))
    near = near if near_given is None else near_given
    unique = _int_or_none(summary.get("unique"))
    count = _int_or_none(summary.get("clusters"))
    return {
        "pages": pages,
        "unique": pages - near if unique is None else unique,
        "near_duplicates": near,
        "clusters": len(clusters) if count is None else count,
        "largest": max((_cluster_size(c) for c in clusters), default=0),
        "pages_in_clusters": in_clusters,
        "histogram": dict(sorted(histogram.items())),
    }


class _TextStore:
    """Distinct member texts, packed into zlib-compressed, base64-encoded chunks."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.chunks: list[str] = []
        self.raw_chars = 0
        self._texts: list[str] = []
        self._ids: dict[str, int] = {}
        self._size = 0

    def add(self, text: str) -> list[int]:
        if len(text) > self.max_chars:
            text = text[: self.max_chars] + f"\n[... text cut at {self.max_chars:,} characters in this report]"
        index = self._ids.get(text)
        if index is None:
            if self._size + len(text) > _CHUNK_CHARS and self._texts:
                self._flush()
            index = self._ids[text] = len(self._texts)
            self._texts.append(text)
            self._size += len(text)
            self.raw_chars += len(text)
        return [len(self.chunks), index]

    def _flush(self) -> None:
        payload = json.dumps(self._texts, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self.chunks.append(base64.b64encode(zlib.compress(payload, 6)).decode("ascii"))
        self._texts, self._ids, self._size = [], {}, 0

    def finish(self) -> list[str]:
        if self._texts:
            self._flush()
        return self.chunks


def _script_json(value: Any) -> str:
    # "<" never appears in JSON outside strings, so escaping it everywhere is safe
    # and keeps "</script>" and "<!--" out of the script element.
    return (
        json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        .replace("<", "\\u003c")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _rule_text(rule: Any, max_distance: int | None) -> str | None:
    """The member's rule as people read it (``Rule.describe``), ``None`` for the canonical page or unknown."""
    try:
        return Rule(rule).describe(None, max_distance)
    except ValueError:
        return None


_REASONS = frozenset(r.value for r in Reason)


def _compact_clusters(
    clusters: list[Mapping[str, Any]], texts: _TextStore, max_distance: int | None = None
) -> tuple[list[list[Any]], int]:
    rows = []
    with_text = 0
    for cluster in clusters:
        k = _int_or_none(cluster.get("max_distance"))
        k = max_distance if k is None else k
        members = []
        for member in cluster.get("members") or ():
            text = member.get("text")
            ref = None
            if isinstance(text, str):
                ref = texts.add(text)
                with_text += 1
            members.append(
                [
                    str(member.get("url", "")),
                    _fingerprint_hex(member.get("fingerprint")),
                    _int_or_none(member.get("distance")),
                    member.get("referer") if isinstance(member.get("referer"), str) else None,
                    _int_or_none(member.get("depth")),
                    ref,
                    _rule_text(member.get("rule"), k),
                ]
            )
        canonical = cluster.get("canonical")
        if canonical is None and members:
            canonical = members[0][0]
        representative = cluster.get("representative")
        reason = cluster.get("representative_reason")
        label = Reason(reason).label if reason in _REASONS else (str(reason) if reason else "")
        rows.append(
            [cluster.get("cluster_id"), str(canonical or ""), _cluster_size(cluster), members,
             str(representative or canonical or ""), label, k]
        )
    return rows, with_text


def _link(url: str) -> str:
    """An ``<a>`` for http(s) URLs only (the script's rule: a ``file:`` URL an item names is not made a
    link to a local file), else the escaped text."""
    text = html.escape(url)
    if url.lower().startswith(("http:", "https:")):
        return f'<a href="{text}" rel="noopener noreferrer" target="_blank">{text}</a>'
    return text


def rules_html(rules: Iterable[dict[str, Any]] | None) -> str:
    """An HTML section listing the rules of a report summary (empty when there are none)."""
    rows = list(rules or ())
    if not rows:
        return ""
    esc = html.escape
    body = "".join(
        f'<tr data-trusted="{str(bool(r.get("trusted"))).lower()}"><td>{esc(str(r.get("host", "")))}</td>'
        f'<td><code>{esc(str(r.get("rule", "")))}</code></td><td>{"yes" if r.get("trusted") else "no"}</td>'
        f'<td class="count">{int(r.get("support", 0)):,}</td><td class="count">{int(r.get("counter", 0)):,}</td>'
        f'<td class="count">{100 * float(r.get("precision", 0)):.1f}%</td>'
        f'<td class="count">{100 * float(r.get("lower_bound", 0)):.1f}%</td>'
        f'<td class="count">{int(r.get("skipped", 0)):,}</td></tr>'
        for r in rows
    )
    return (
        '<section id="url-rules"><h2>Learned URL rules</h2>'
        '<p class="muted">Rewrites learned from the duplicates found (support: confirmations; counter: URLs the '
        "rule would rewrite whose content differed; lower bound: 95% Wilson bound on the precision).</p>"
        '<table class="histogram"><thead><tr><th>host</th><th>rule</th><th>trusted</th><th>support</th>'
        "<th>counter</th><th>precision</th><th>lower bound</th><th>skipped</th></tr></thead>"
        f"<tbody>{body}</tbody></table></section>"
    )


def _changes_html(changes: list[Mapping[str, Any]], max_distance: int | None) -> str:
    """The "changed since the last crawl" section (empty when nothing changed)."""
    if not changes:
        return ""
    rows = "".join(
        f'<tr class="changed-page"><td class="url">{_link(str(c.get("url", "")))}</td>'
        f'<td class="mono">{html.escape(_fingerprint_hex(c.get("previous_fingerprint")))}</td>'
        f'<td class="mono">{html.escape(_fingerprint_hex(c.get("fingerprint")))}</td>'
        f'<td class="distance">{"" if _int_or_none(c.get("distance")) is None else c["distance"]}</td></tr>'
        for c in changes[:MAX_CHANGED_ROWS]
    )
    more = len(changes) - MAX_CHANGED_ROWS
    beyond = f" more than {max_distance}" if max_distance is not None else ""
    note = (
        f'<p class="muted">The first {MAX_CHANGED_ROWS:,} of {len(changes):,} changed pages; '
        "the JSON Lines and CSV reports list them all.</p>"
        if more > 0
        else ""
    )
    return (
        '<section id="changed-section">\n<h2>Changed since the last crawl</h2>\n'
        f"<p>{plural(len(changes), 'page')} {were(len(changes))} crawled before and "
        f"{'its' if len(changes) == 1 else 'their'} text moved{beyond} bits away from "
        "the version recorded then (distance between the old and the new fingerprint).</p>\n"
        '<table class="members changed"><thead><tr><th>URL</th><th>old fingerprint</th><th>new fingerprint</th>'
        f"<th>distance</th></tr></thead><tbody>{rows}</tbody></table>\n{note}</section>\n"
    )


#: Headings of the lists of the latest crawl's pages (``core.report.changes``; changed pages have the section above).
_PAGE_LISTS = (("new", "New since the last crawl"), ("edited", "Edited since the last crawl"),
               ("gone", "Gone since the last crawl (404 or 410)"), ("unchanged", "Unchanged since the last crawl"))  # fmt: skip


def _pages_html(pages: list[Mapping[str, Any]]) -> str:
    """The lists of the latest crawl's new, edited, gone and unchanged pages (URLs; empty for a first crawl)."""
    parts = []
    for kind, heading in _PAGE_LISTS:
        urls = [str(p.get("url", "")) for p in pages if p.get("change") == kind]
        if not urls:
            continue
        items = "".join(f'<li class="url">{_link(url)}</li>' for url in urls[:MAX_CHANGED_ROWS])
        more = f'<p class="muted">The first {MAX_CHANGED_ROWS:,} of {len(urls):,}.</p>' if len(urls) > MAX_CHANGED_ROWS else ""
        opened = "" if kind == "unchanged" else " open"
        parts.append(f'<details class="page-list {kind}"{opened}><summary>{heading}: {len(urls):,}</summary>'
                     f"<ul>{items}</ul>{more}</details>\n")  # fmt: skip
    if not parts:
        return ""
    return '<section id="pages-section">\n' + "".join(parts) + "</section>\n"


def render_html(
    clusters: Iterable[Mapping[str, Any]],
    summary: Mapping[str, Any] | None = None,
    *,
    changes: Iterable[Mapping[str, Any]] = (),
    pages: Iterable[Mapping[str, Any]] = (),
    max_text_chars: int = MAX_TEXT_CHARS,
    page_size: int = 100,
) -> str:
    """One self-contained HTML document showing ``clusters`` and ``changes`` (see the module docstring)."""
    summary = dict(summary or {})
    changes = list(changes)
    ordered = sorted(clusters, key=_cluster_size, reverse=True)  # stable: ties keep report order
    numbers = report_numbers(ordered, summary)
    texts = _TextStore(max_text_chars)
    rows, with_text = _compact_clusters(ordered, texts, _int_or_none(summary.get("max_distance")))
    chunks = texts.finish()
    title = str(summary.get("title") or "Near-duplicate clusters")
    data = {"clusters": rows, "page_size": max(1, int(page_size)), "text_chunks": len(chunks)}

    esc = html.escape
    stat_rows = [
        ("pages", "Distinct pages", numbers["pages"]),
        ("unique", "Unique pages", numbers["unique"]),
        ("near_duplicates", "Near-duplicates", numbers["near_duplicates"]),
        ("clusters", "Clusters", numbers["clusters"]),
        ("largest", "Largest cluster", numbers["largest"]),
    ]
    # A re-crawl's answers: shown when the record has any.  A first crawl that fetched pages twice
    # says nothing "since the last crawl" (previous_crawl False): they were "fetched again".
    unchanged = _int_or_none(summary.get("unchanged")) or 0
    edited = _int_or_none(summary.get("edited")) or 0
    changed = _int_or_none(summary.get("changed"))
    changed = len(changes) if changed is None else changed
    if unchanged or edited or changed:
        recrawl = summary.get("previous_crawl", True) is not False
        cards = [
            ("unchanged", "Unchanged since last crawl" if recrawl else "Fetched again, unchanged", unchanged),
            ("edited", "Edited since last crawl (within k)" if recrawl else "Fetched again, edited", edited),
            ("changed", "Changed since last crawl" if recrawl else "Fetched again, changed", changed),
        ]
        stat_rows[2:2] = [card for card in cards if card[0] != "edited" or edited]
    max_distance = _int_or_none(summary.get("max_distance"))
    if max_distance is not None:
        stat_rows.append(("max_distance", "max_distance (k)", max_distance))
    share = numbers["near_duplicates"] / numbers["pages"] if numbers["pages"] else 0.0
    stats_html = "".join(
        f'<div class="stat"><dt>{esc(label)}</dt><dd data-stat="{key}">{value:,}</dd></div>'
        for key, label, value in stat_rows
    )
    histogram = numbers["histogram"]
    peak = max(histogram.values(), default=0)
    if histogram:
        bars = "".join(
            f'<tr data-distance="{d}"><th>{d}</th><td class="count">{n:,}</td>'
            f'<td class="barcell"><div class="bar" style="width:{max(1.0, 100.0 * n / peak):.1f}%"></div></td></tr>'
            for d, n in histogram.items()
        )
        histogram_html = (
            '<table class="histogram" id="histogram"><thead><tr><th>distance</th><th>members</th><th></th></tr>'
            f"</thead><tbody>{bars}</tbody></table>"
        )
    else:
        histogram_html = '<p class="muted" id="histogram">No near-duplicates: nothing to plot.</p>'
    extra = [
        (key, value)
        for key, value in summary.items()
        if key not in _KNOWN_SUMMARY_KEYS and isinstance(value, (str, int, float)) and not isinstance(value, bool)
    ]
    for key in ("source", "generated"):
        if summary.get(key):
            extra.insert(0, (key, summary[key]))
    run_html = (
        '<dl class="run">' + "".join(f"<dt>{esc(str(k))}</dt><dd>{esc(str(v))}</dd>" for k, v in extra) + "</dl>"
        if extra
        else ""
    )
    if with_text:
        text_note = (
            f"Page texts are included for {plural(with_text, 'member')} ({texts.raw_chars:,} characters, "
            "compressed): open a cluster to see a side-by-side diff of the canonical page and a member."
        )
    else:
        text_note = "This report was written without page texts, so no text diff can be shown."
    text_scripts = "".join(
        f'<script type="text/plain" id="simhash-text-{i}">{chunk}</script>\n' for i, chunk in enumerate(chunks)
    )
    # substitute (not safe_substitute): a placeholder missing here is a bug, not a page with "${x}" in it.
    return Template(_template_file("report.html")).substitute(
        title=esc(title),
        style=_template_file("report.css"),
        stats=stats_html,
        share=f"{100.0 * share:.1f}",
        in_clusters=f"{numbers['pages_in_clusters']:,}",
        histogram=histogram_html,
        run=run_html + rules_html(summary.get("rules")),
        text_note=esc(text_note),
        changed=_changes_html(changes, max_distance) + _pages_html(list(pages)),
        has_text="true" if with_text else "false",
        data=_script_json(data),
        texts=text_scripts,
        script=_template_file("report.js"),
    )
