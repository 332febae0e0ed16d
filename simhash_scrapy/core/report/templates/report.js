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
  if (/^https?:/i.test(url)) {  // (never file: or javascript: — a crawled URL must not open a local file)
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
  // "farthest": the largest distance of a member; max_distance is the k (as in the JSON Lines and CSV reports)
  s.appendChild(el("span", {"class": "maxd muted"}, "farthest d " + maxd +
    (c[6] === null || c[6] === undefined ? "" : " \u00b7 max_distance " + c[6])));
  s.appendChild(el("span", {"class": "canon mono", title: c[1]}, c[1]));
  // the page to keep, always with its URL beside its reason (the canonical page itself: "keep it")
  var rep = c[4] || c[1];
  s.appendChild(el("span", {"class": "rep mono", title: rep}, rep === c[1] ? "keep it" : "keep " + rep));
  if (c[5]) s.appendChild(el("span", {"class": "why muted"}, "(" + c[5] + ")"));
  d.appendChild(s);
  d.addEventListener("toggle", function () { if (d.open && !d.dataset.filled) fill(d, c); });
  return d;
}

function fill(d, c) {
  d.dataset.filled = "1";
  var body = el("div", {"class": "body"});
  var table = el("table", {"class": "members"});
  var head = el("tr");
  ["#", "URL", "distance", "rule", "fingerprint", "referer", "depth", ""].forEach(function (h) { head.appendChild(el("th", null, h)); });
  table.appendChild(el("thead")).appendChild(head);
  var tbody = table.appendChild(el("tbody"));
  var diffBox = el("div", {"class": "diff"});
  var firstButton = null;
  function addRow(m, i) {
    var tr = el("tr", {"class": "member", "data-distance": m[2] === null ? "" : String(m[2])});
    var role = i === 0 ? "canonical" : String(i);
    if (m[0] === c[4]) { role += " \u00b7 keep"; tr.classList.add("representative"); }
    tr.appendChild(el("td", null, role));
    tr.appendChild(el("td", {"class": "url"})).appendChild(link(m[0]));
    tr.appendChild(el("td", {"class": "distance"}, m[2] === null ? "" : String(m[2])));
    tr.appendChild(el("td", {"class": "rule"}, m[6] || ""));
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
    var button = more.appendChild(el("td", {colspan: "8"})).appendChild(
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
    box.appendChild(el("h3", null, "Canonical (left) against member (right), distance " + member[2] +
      (member[6] ? " (" + member[6] + ")" : "")));
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
