"""A self-contained HTML page for a person to read a cluster report.

``render_html(clusters, summary)`` returns one HTML document: no external
script, style, font or image, so it opens offline and can be attached to a
ticket.  What it shows:

* a summary (pages, unique pages, near-duplicates, clusters, the largest
  cluster) and a histogram of the members' distances to their canonical page,
  rendered as static HTML (readable without JavaScript);
* the clusters, largest first, 100 per page with a URL filter; each cluster is
  a ``<details>`` element whose member table is built when it is opened;
* a side-by-side text diff (line diff, changed words highlighted) of the
  canonical page and a chosen member, computed in the browser only when asked
  for.  Member texts are stored once per distinct text, compressed with zlib
  in chunks of about 1 MB that the browser inflates on demand
  (``DecompressionStream``), so near-duplicate texts cost little space.

``clusters`` are the JSON Lines report's cluster dicts (canonical member
first); ``summary`` may give ``pages`` (pages fingerprinted),
``near_duplicates``, ``unique``, ``clusters``, ``max_distance``, ``title``,
``generated`` and ``source``; missing counts are derived from the clusters.
Other scalar summary values are listed under "Run".
"""

from __future__ import annotations

import base64
import html
import json
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["render_html", "report_numbers"]

#: Member texts longer than this are cut in the report (the diff says so).
MAX_TEXT_CHARS = 50_000
#: Uncompressed size of one text chunk (the browser inflates one chunk at a time).
_CHUNK_CHARS = 1 << 20
_KNOWN_SUMMARY_KEYS = ("pages", "unique", "near_duplicates", "clusters", "max_distance", "title", "generated", "source")


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


def _compact_clusters(clusters: list[Mapping[str, Any]], texts: _TextStore) -> tuple[list[list[Any]], int]:
    rows = []
    with_text = 0
    for cluster in clusters:
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
                ]
            )
        canonical = cluster.get("canonical")
        if canonical is None and members:
            canonical = members[0][0]
        rows.append([cluster.get("cluster_id"), str(canonical or ""), _cluster_size(cluster), members])
    return rows, with_text


def render_html(
    clusters: Iterable[Mapping[str, Any]],
    summary: Mapping[str, Any] | None = None,
    *,
    max_text_chars: int = MAX_TEXT_CHARS,
    page_size: int = 100,
) -> str:
    """One self-contained HTML document showing ``clusters`` (see the module docstring)."""
    summary = dict(summary or {})
    ordered = sorted(clusters, key=_cluster_size, reverse=True)  # stable: ties keep report order
    numbers = report_numbers(ordered, summary)
    texts = _TextStore(max_text_chars)
    rows, with_text = _compact_clusters(ordered, texts)
    chunks = texts.finish()
    title = str(summary.get("title") or "Near-duplicate clusters")
    data = {"clusters": rows, "page_size": max(1, int(page_size)), "text_chunks": len(chunks)}

    esc = html.escape
    stat_rows = [
        ("pages", "Pages fingerprinted", numbers["pages"]),
        ("unique", "Unique pages", numbers["unique"]),
        ("near_duplicates", "Near-duplicates", numbers["near_duplicates"]),
        ("clusters", "Clusters", numbers["clusters"]),
        ("largest", "Largest cluster", numbers["largest"]),
    ]
    max_distance = _int_or_none(summary.get("max_distance"))
    if max_distance is not None:
        stat_rows.append(("max_distance", "Max distance k", max_distance))
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
            f"Page texts are included for {with_text:,} members ({texts.raw_chars:,} characters, "
            "compressed): open a cluster to see a side-by-side diff of the canonical page and a member."
        )
    else:
        text_note = "This report was written without page texts, so no text diff can be shown."
    text_scripts = "".join(
        f'<script type="text/plain" id="simhash-text-{i}">{chunk}</script>\n' for i, chunk in enumerate(chunks)
    )
    return _TEMPLATE.format(
        title=esc(title),
        style=_STYLE,
        stats=stats_html,
        share=f"{100.0 * share:.1f}",
        in_clusters=f"{numbers['pages_in_clusters']:,}",
        histogram=histogram_html,
        run=run_html,
        text_note=esc(text_note),
        has_text="true" if with_text else "false",
        data=_script_json(data),
        texts=text_scripts,
        script=_SCRIPT,
    )


_STYLE = """
:root{color-scheme:light dark;--fg:#1d2125;--muted:#5f6b76;--bg:#fff;--panel:#f4f6f8;--line:#d5dbe1;
--accent:#2a62b8;--del:#ffe1e1;--delw:#f5a3a3;--ins:#dcf5e1;--insw:#93d9a4;--bar:#4f83cc}
@media (prefers-color-scheme:dark){:root{--fg:#e3e6ea;--muted:#9aa5b1;--bg:#15181c;--panel:#1f242a;
--line:#343b44;--accent:#7fb0ff;--del:#4a2527;--delw:#7d3235;--ins:#1f3d28;--insw:#2f6b3f;--bar:#5b8fd6}}
*{box-sizing:border-box}
body{margin:0;padding:1.5rem 2rem;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:var(--fg);background:var(--bg)}
h1{font-size:1.5rem;margin:0 0 .25rem}h2{font-size:1.15rem;margin:1.5rem 0 .5rem}
a{color:var(--accent)}.muted{color:var(--muted)}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.88em}
.stats{display:flex;flex-wrap:wrap;gap:.75rem;margin:1rem 0;padding:0}
.stat{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:.5rem 1rem;min-width:9rem}
.stat dt{font-size:.8rem;color:var(--muted)}.stat dd{margin:0;font-size:1.5rem;font-weight:600}
.histogram{border-collapse:collapse;min-width:22rem}
.histogram th,.histogram td{padding:.1rem .5rem;text-align:right}
.histogram .barcell{width:16rem;text-align:left}.bar{height:.8rem;background:var(--bar);border-radius:2px}
.run{display:grid;grid-template-columns:max-content auto;gap:.1rem 1rem;margin:.5rem 0}
.run dt{color:var(--muted)}.run dd{margin:0}
.toolbar{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center;margin:.5rem 0}
.toolbar input{padding:.3rem .5rem;min-width:20rem;font:inherit}
button{font:inherit;padding:.2rem .6rem;cursor:pointer}
details.cluster{border:1px solid var(--line);border-radius:6px;margin:.35rem 0;background:var(--bg)}
details.cluster>summary{padding:.4rem .7rem;cursor:pointer;display:flex;gap:.8rem;align-items:baseline;
background:var(--panel);border-radius:6px}
details.cluster[open]>summary{border-bottom:1px solid var(--line);border-radius:6px 6px 0 0}
summary .size{font-weight:600;min-width:5.5rem}summary .cid{color:var(--muted);min-width:4rem}
summary .canon{overflow:hidden;text-overflow:ellipsis;white-space:nowrap;flex:1}
.body{padding:.5rem .7rem;overflow-x:auto}
table.members{border-collapse:collapse;width:100%}
table.members th,table.members td{border-bottom:1px solid var(--line);padding:.2rem .4rem;text-align:left;
vertical-align:top}
table.members td.url{word-break:break-all}table.members tr.chosen{background:var(--panel)}
.diff{margin-top:.6rem}
.diff h3{font-size:.95rem;margin:.3rem 0}
table.sbs{border-collapse:collapse;width:100%;table-layout:fixed}
table.sbs td{padding:0 .4rem;vertical-align:top;white-space:pre-wrap;word-break:break-word;
font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.82rem;border-left:1px solid var(--line)}
table.sbs td.n{width:3.5rem;text-align:right;color:var(--muted);border-left:0;user-select:none}
table.sbs col.n{width:3.5rem}
table.sbs td.del{background:var(--del)}table.sbs td.ins{background:var(--ins)}
table.sbs del{background:var(--delw);text-decoration:none}table.sbs ins{background:var(--insw);text-decoration:none}
table.sbs tr.skip td{text-align:center;color:var(--muted);cursor:pointer;background:var(--panel)}
.pager{display:flex;gap:.5rem;align-items:center}
"""

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="simhash-scrapy">
<title>{title}</title>
<style>{style}</style>
</head>
<body data-has-text="{has_text}">
<h1>{title}</h1>
<p class="muted">simhash-scrapy near-duplicate report. A cluster is a canonical page (the first of its pages
that was seen) and the pages whose fingerprints were found within the configured distance of it.</p>
<section id="summary">
<h2>Summary</h2>
<dl class="stats">{stats}</dl>
<p>Near-duplicates are <strong id="share">{share}%</strong> of the pages; {in_clusters} pages are in clusters.</p>
<h2>Distance to the canonical page</h2>
{histogram}
{run}
<p class="muted" id="text-note">{text_note}</p>
</section>
<section id="cluster-section">
<h2>Clusters, largest first</h2>
<noscript><p>The cluster list needs JavaScript. The data is in the JSON block of this file.</p></noscript>
<div class="toolbar">
<input type="search" id="filter" placeholder="Filter clusters by URL..." aria-label="Filter clusters by URL">
<span class="pager"><button type="button" id="prev">&larr; Previous</button>
<span id="range"></span><button type="button" id="next">Next &rarr;</button></span>
</div>
<div id="cluster-list"></div>
</section>
<script type="application/json" id="simhash-data">{data}</script>
{texts}<script>{script}</script>
</body>
</html>
"""

_SCRIPT = r"""
(function () {
"use strict";
var data = JSON.parse(document.getElementById("simhash-data").textContent);
var clusters = data.clusters, pageSize = data.page_size;
var listEl = document.getElementById("cluster-list");
var rangeEl = document.getElementById("range");
var prevBtn = document.getElementById("prev"), nextBtn = document.getElementById("next");
var filterEl = document.getElementById("filter");
var shown = clusters.map(function (_, i) { return i; });
var page = 0;
var fmt = new Intl.NumberFormat("en-US");
var MEMBERS = 500;

function el(tag, attrs, text) {
  var node = document.createElement(tag);
  if (attrs) for (var k in attrs) if (attrs[k] !== null && attrs[k] !== undefined) node.setAttribute(k, attrs[k]);
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}
function link(url) {
  if (/^(https?|file):/i.test(url)) {
    var a = el("a", {href: url, rel: "noopener noreferrer", target: "_blank"}, url);
    return a;
  }
  return el("span", null, url);
}

function render() {
  var pages = Math.max(1, Math.ceil(shown.length / pageSize));
  if (page >= pages) page = pages - 1;
  var start = page * pageSize, end = Math.min(shown.length, start + pageSize);
  var frag = document.createDocumentFragment();
  for (var i = start; i < end; i++) frag.appendChild(clusterNode(clusters[shown[i]]));
  listEl.textContent = "";
  listEl.appendChild(frag);
  rangeEl.textContent = shown.length ? "clusters " + fmt.format(start + 1) + "\u2013" + fmt.format(end) +
    " of " + fmt.format(shown.length) : "no cluster matches";
  prevBtn.disabled = page === 0;
  nextBtn.disabled = end >= shown.length;
}

function clusterNode(c) {
  var members = c[3], maxd = 0;
  for (var i = 1; i < members.length; i++) if (members[i][2] > maxd) maxd = members[i][2];
  var d = el("details", {"class": "cluster", "data-cluster-id": String(c[0]), "data-size": String(c[2])});
  var s = el("summary");
  s.appendChild(el("span", {"class": "size"}, fmt.format(c[2]) + " pages"));
  s.appendChild(el("span", {"class": "cid"}, "#" + c[0]));
  s.appendChild(el("span", {"class": "maxd muted"}, "max d " + maxd));
  s.appendChild(el("span", {"class": "canon mono", title: c[1]}, c[1]));
  d.appendChild(s);
  d.addEventListener("toggle", function () { if (d.open && !d.dataset.filled) fill(d, c); });
  return d;
}

function fill(d, c) {
  d.dataset.filled = "1";
  var body = el("div", {"class": "body"});
  var table = el("table", {"class": "members"});
  var head = el("tr");
  ["#", "URL", "distance", "fingerprint", "referer", "depth", ""].forEach(function (h) { head.appendChild(el("th", null, h)); });
  table.appendChild(el("thead")).appendChild(head);
  var tbody = table.appendChild(el("tbody"));
  var diffBox = el("div", {"class": "diff"});
  var firstButton = null;
  function addRow(m, i) {
    var tr = el("tr", {"class": "member", "data-distance": m[2] === null ? "" : String(m[2])});
    tr.appendChild(el("td", null, i === 0 ? "canonical" : String(i)));
    tr.appendChild(el("td", {"class": "url"})).appendChild(link(m[0]));
    tr.appendChild(el("td", {"class": "distance"}, m[2] === null ? "" : String(m[2])));
    tr.appendChild(el("td", {"class": "mono"}, m[1]));
    var ref = el("td", {"class": "url"});
    if (m[3]) ref.appendChild(link(m[3]));
    tr.appendChild(ref);
    tr.appendChild(el("td", null, m[4] === null ? "" : String(m[4])));
    var act = tr.appendChild(el("td"));
    if (i > 0 && c[3][0][5] && m[5]) {
      var b = act.appendChild(el("button", {type: "button", "class": "show-diff"}, "diff"));
      b.addEventListener("click", function () {
        Array.prototype.forEach.call(tbody.children, function (row) { row.classList.remove("chosen"); });
        tr.classList.add("chosen");
        showDiff(diffBox, c[3][0], m);
      });
      if (!firstButton) firstButton = b;
    }
    tbody.appendChild(tr);
  }
  // A template cluster can hold thousands of pages: the first MEMBERS rows, the rest on request.
  c[3].slice(0, MEMBERS).forEach(addRow);
  if (c[3].length > MEMBERS) {
    var more = el("tr", {"class": "more"});
    var button = more.appendChild(el("td", {colspan: "7"})).appendChild(
      el("button", {type: "button"}, "Show all " + fmt.format(c[3].length) + " members"));
    button.addEventListener("click", function () {
      tbody.removeChild(more);
      c[3].slice(MEMBERS).forEach(function (m, i) { addRow(m, i + MEMBERS); });
    });
    tbody.appendChild(more);
  }
  body.appendChild(table);
  if (!c[3][0][5] || !firstButton) {
    var why = document.body.dataset.hasText === "true" ? "No text is stored for the canonical page or its members."
      : "This report was written without page texts, so no text diff can be shown.";
    diffBox.appendChild(el("p", {"class": "muted no-text"}, why));
  }
  body.appendChild(diffBox);
  d.appendChild(body);
  if (firstButton) firstButton.click();
}

var chunkCache = {};
function chunk(i) {
  if (!chunkCache[i]) {
    if (typeof DecompressionStream === "undefined") {
      chunkCache[i] = Promise.reject(new Error("this browser cannot inflate the stored texts (DecompressionStream is missing)"));
    } else {
      var bin = atob(document.getElementById("simhash-text-" + i).textContent.trim());
      var bytes = new Uint8Array(bin.length);
      for (var j = 0; j < bin.length; j++) bytes[j] = bin.charCodeAt(j);
      var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
      chunkCache[i] = new Response(stream).text().then(JSON.parse);
    }
  }
  return chunkCache[i];
}
function text(ref) { return chunk(ref[0]).then(function (texts) { return texts[ref[1]]; }); }

function showDiff(box, canon, member) {
  box.textContent = "";
  box.appendChild(el("p", {"class": "muted"}, "Computing the diff..."));
  Promise.all([text(canon[5]), text(member[5])]).then(function (t) {
    box.textContent = "";
    box.appendChild(el("h3", null, "Canonical (left) against member (right), distance " + member[2]));
    box.appendChild(diffTable(t[0], t[1]));
  }, function (err) {
    box.textContent = "";
    box.appendChild(el("p", {"class": "muted"}, "No diff: " + err.message));
  });
}

// Myers' O((N+M)D) diff.  Returns [[op, i, j], ...] with op 0 = same, 1 = only in a, 2 = only in b,
// or null when more than maxD edits are needed.  Memory is O(D^2).
function diff(a, b, maxD) {
  var pre = 0, n = a.length, m = b.length;
  while (pre < n && pre < m && a[pre] === b[pre]) pre++;
  var suf = 0;
  while (suf < n - pre && suf < m - pre && a[n - 1 - suf] === b[m - 1 - suf]) suf++;
  var mid = core(a.slice(pre, n - suf), b.slice(pre, m - suf), maxD);
  if (mid === null) return null;
  var ops = [], k;
  for (k = 0; k < pre; k++) ops.push([0, k, k]);
  mid.forEach(function (op) { ops.push([op[0], op[1] < 0 ? -1 : op[1] + pre, op[2] < 0 ? -1 : op[2] + pre]); });
  for (k = suf; k > 0; k--) ops.push([0, n - k, m - k]);
  return ops;
}
function core(a, b, maxD) {
  var n = a.length, m = b.length, max = n + m, off = max + 1;
  if (max === 0) return [];
  var v = new Int32Array(2 * max + 3), trace = [], x, y, k, d, done = -1;
  for (d = 0; d <= max && done < 0; d++) {
    if (d > maxD) return null;
    trace.push(v.slice(off - d - 1, off + d + 2));
    for (k = -d; k <= d; k += 2) {
      x = (k === -d || (k !== d && v[off + k - 1] < v[off + k + 1])) ? v[off + k + 1] : v[off + k - 1] + 1;
      y = x - k;
      while (x < n && y < m && a[x] === b[y]) { x++; y++; }
      v[off + k] = x;
      if (x >= n && y >= m) { done = d; break; }
    }
  }
  var ops = [];
  x = n; y = m;
  for (d = done; d > 0; d--) {
    var snap = trace[d], base = d + 1;
    k = x - y;
    var pk = (k === -d || (k !== d && snap[base + k - 1] < snap[base + k + 1])) ? k + 1 : k - 1;
    var px = snap[base + pk], py = px - pk;
    while (x > px && y > py) { ops.push([0, x - 1, y - 1]); x--; y--; }
    if (x === px) ops.push([2, -1, y - 1]); else ops.push([1, x - 1, -1]);
    x = px; y = py;
  }
  while (x > 0 && y > 0) { ops.push([0, x - 1, y - 1]); x--; y--; }
  return ops.reverse();
}

function words(line) { return line.split(/(\s+)/).filter(function (w) { return w !== ""; }); }
function cell(cls, textValue, other) {
  var td = el("td", {"class": cls});
  if (other === undefined || textValue.length + other.length > 4000) { td.textContent = textValue; return td; }
  var a = words(textValue), b = words(other), ops = diff(a, b, 200);
  if (ops === null) { td.textContent = textValue; return td; }
  // Words of this side only (op 1) are marked; words only on the other side are not shown here.
  var run = "", mark = false;
  function flush(next) {
    if (run) td.appendChild(mark ? el(cls, null, run) : document.createTextNode(run));
    run = ""; mark = next;
  }
  ops.forEach(function (op) {
    if (op[0] === 2) return;
    if ((op[0] === 1) !== mark) flush(op[0] === 1);
    run += a[op[1]];
  });
  flush(false);
  return td;
}

function diffTable(left, right) {
  var a = left.split("\n"), b = right.split("\n");
  var table = el("table", {"class": "sbs"});
  var cg = table.appendChild(el("colgroup"));
  cg.appendChild(el("col", {"class": "n"})); cg.appendChild(el("col"));
  cg.appendChild(el("col", {"class": "n"})); cg.appendChild(el("col"));
  var tbody = table.appendChild(el("tbody"));
  var ops = diff(a, b, 3000);
  if (ops === null) {
    tbody.appendChild(skipRow("The texts differ in too many lines for a line diff; shown unaligned.", null));
    ops = [];
    for (var i = 0; i < Math.max(a.length, b.length); i++) ops.push([3, i < a.length ? i : -1, i < b.length ? i : -1]);
  }
  if (left === right) tbody.appendChild(skipRow("The visible texts are identical.", null));
  var rows = [], dels = [], ins = [];
  function flushHunk() {
    for (var r = 0; r < Math.max(dels.length, ins.length); r++) rows.push([1, r < dels.length ? dels[r] : -1, r < ins.length ? ins[r] : -1]);
    dels = []; ins = [];
  }
  ops.forEach(function (op) {
    if (op[0] === 0 || op[0] === 3) { flushHunk(); rows.push(op); }
    else if (op[0] === 1) dels.push(op[1]); else ins.push(op[2]);
  });
  flushHunk();
  var changed = rows.map(function (r) { return r[0] !== 0; });
  var CONTEXT = 3, i = 0;
  while (i < rows.length) {
    if (!changed[i]) {
      var j = i;
      while (j < rows.length && !changed[j]) j++;
      var keepHead = i === 0 ? 0 : CONTEXT, keepTail = j === rows.length ? 0 : CONTEXT;
      if (j - i > keepHead + keepTail + 1) {
        for (var h = i; h < i + keepHead; h++) tbody.appendChild(lineRow(rows[h], a, b));
        var hidden = rows.slice(i + keepHead, j - keepTail);
        tbody.appendChild(skipRow("\u22ef " + fmt.format(hidden.length) + " unchanged lines (click to show) \u22ef", hidden, a, b));
        for (h = j - keepTail; h < j; h++) tbody.appendChild(lineRow(rows[h], a, b));
      } else {
        for (h = i; h < j; h++) tbody.appendChild(lineRow(rows[h], a, b));
      }
      i = j;
    } else {
      tbody.appendChild(lineRow(rows[i], a, b));
      i++;
    }
  }
  return table;
}
function lineRow(r, a, b) {
  var tr = el("tr");
  var la = r[1] >= 0 ? a[r[1]] : null, lb = r[2] >= 0 ? b[r[2]] : null;
  var same = r[0] === 0 || (la !== null && la === lb);
  tr.appendChild(el("td", {"class": "n"}, la === null ? "" : String(r[1] + 1)));
  tr.appendChild(la === null ? el("td", {"class": "empty"}) : same ? el("td", null, la) : cell("del", la, lb === null ? undefined : lb));
  tr.appendChild(el("td", {"class": "n"}, lb === null ? "" : String(r[2] + 1)));
  tr.appendChild(lb === null ? el("td", {"class": "empty"}) : same ? el("td", null, lb) : cell("ins", lb, la === null ? undefined : la));
  if (!same) tr.className = "changed";
  return tr;
}
function skipRow(message, hidden, a, b) {
  var tr = el("tr", {"class": "skip"});
  tr.appendChild(el("td", {colspan: "4"}, message));
  if (hidden) tr.addEventListener("click", function () {
    var frag = document.createDocumentFragment();
    hidden.forEach(function (r) { frag.appendChild(lineRow(r, a, b)); });
    tr.parentNode.replaceChild(frag, tr);
  });
  return tr;
}

var timer = null;
filterEl.addEventListener("input", function () {
  clearTimeout(timer);
  timer = setTimeout(function () {
    var q = filterEl.value.trim().toLowerCase();
    shown = [];
    clusters.forEach(function (c, i) {
      if (!q || c[3].some(function (m) { return m[0].toLowerCase().indexOf(q) >= 0; })) shown.push(i);
    });
    page = 0;
    render();
  }, 150);
});
prevBtn.addEventListener("click", function () { if (page > 0) { page--; render(); } });
nextBtn.addEventListener("click", function () { page++; render(); });
render();
document.body.dataset.ready = "1";
})();
"""
