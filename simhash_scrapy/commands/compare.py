"""``scrapy simhash compare``: why are these pages (not) near-duplicates?

Each page (a URL fetched with Scrapy and the project's settings, or a local
HTML file) is fingerprinted exactly as the crawl does it (``analyse_html`` with
the project's ``SimhashConfig``).  The command prints the fingerprints, the
distance matrix with similarities (1 - d/64), what a crawl that meets the
pages in this order decides, and for each page after the first, against its
canonical page (or, when it is unique, the nearest earlier page), the text
that differs and the features that weigh most in the differing bits.

Which features "weigh most": bit ``b`` of a fingerprint is the sign of
``sum(weight(f) * (+1 if bit b of hash(f) is set else -1))`` over the page's
features ``f``.  Between pages A and B a feature's weight changes by
``dw = w_B - w_A``; in a bit that flipped, it pushed towards the flip by
``dw * sign_b(f) * direction_b`` (direction +1 where B has the bit set).  The
features with the largest push summed over the differing bits are listed.

Why one module of ~450 lines: loading (fetch or file), the explanation and
the text/JSON output are one command's parts and used by nothing else.
"""

from __future__ import annotations

import difflib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import unquote, urlsplit

import numpy as np

from ..config import SimhashConfig
from ..core.cluster.clustering import Rule
from ..core.features.features import feature_hashes, token_hashes, tokenize
from ..core.features.fingerprint import hamming_distance
from ..core.redact import redact, secrets_in
from ..core.wording import plural
from ._common import EXIT_USAGE, CommandError, load_config

__all__ = ["run_compare", "explain_features", "feature_labels", "Page"]

_SKIP_TEXT = {
    "status": "HTTP status not in SIMHASH_HTTP_STATUSES",
    "content_type": "Content-Type not in SIMHASH_CONTENT_TYPES",
    "too_large": "larger than SIMHASH_MAX_BYTES",
    "empty": "no visible text",
}


@dataclass
class Page:
    """One compared page."""

    source: str  # what the user typed
    url: str  # final URL (after redirects) or file:// URI
    body: bytes = b""
    encoding: str | None = None
    status: int | None = None
    content_type: str | None = None
    fingerprint: int | None = None
    exact: bool = False  # a short page: fingerprint is its exact digest
    edit_keys: tuple[int, ...] = ()  # one-edit keys (a page of a few dozen tokens)
    skipped: str | None = None  # the crawl's skip reason
    protected: str | None = None  # digest of the protected text and declared identity (core.cluster.distinct, core.cluster.identity)
    digests: tuple[str | None, str | None] = (None, None)  # the two apart (core.detector.page_digests)
    text: str = ""
    tokens: int = 0
    weights: dict[int, float] = field(default_factory=dict)
    answer: Any = None  # the core.analysis answer (the rule's input: core.detector.page_of)


# ---------------------------------------------------------------- loading
def _is_url(arg: str) -> bool:
    return urlsplit(arg).scheme.lower() in ("http", "https")


def _read_file(arg: str) -> Page:
    path_text = unquote(urlsplit(arg).path) if arg.lower().startswith("file://") else arg
    path = Path(path_text)
    if not path.exists():
        hint = " (URLs need http:// or https://)" if "." in arg.split("/")[0] and not arg.startswith((".", "/")) else ""
        raise CommandError(f"no such file: {arg}{hint}")
    if path.is_dir():
        raise CommandError(f"{arg} is a folder; compare takes HTML files or URLs (dedup reads folders)")
    try:
        body = path.read_bytes()
    except OSError as exc:
        raise CommandError(f"cannot read {arg}: {exc.strerror or exc}") from None
    return Page(source=arg, url=path.resolve().as_uri(), body=body)


def _fetch(urls: list[str], settings: Any, process: Any = None) -> dict[str, Page | str]:
    """Fetch ``urls`` with Scrapy and the project's settings: URL -> Page, or an error message.

    ``process`` is the crawler process Scrapy already made for the command (Scrapy < 2.14 makes one
    for every command); otherwise one is made here.  The crawl log is quiet unless ``-L`` asks for
    it (see ``Command.process_options``): a failed fetch is reported in one line.
    """
    from scrapy import Request, Spider
    from scrapy.crawler import CrawlerProcess
    from scrapy.http import TextResponse

    results: dict[str, Page | str] = {}

    class FetchSpider(Spider):
        name = "simhash-compare"
        # The plugin must not drop the second page of the comparison (meta opts out too).
        custom_settings = {"SIMHASH_ENABLED": False, "TELNETCONSOLE_ENABLED": False}

        async def start(self) -> Any:
            for url in urls:
                yield Request(
                    url,
                    callback=self.fetched,
                    errback=self.failed,
                    dont_filter=True,
                    cb_kwargs={"source": url},
                    meta={"simhash_enabled": False, "handle_httpstatus_all": True, "source": url},
                )

        def fetched(self, response: Any, source: str) -> None:
            content_type = response.headers.get(b"Content-Type")
            results[source] = Page(
                source=source,
                url=response.url,
                body=response.body,
                encoding=response.encoding if isinstance(response, TextResponse) else None,
                status=response.status,
                content_type=content_type.decode("latin-1") if content_type else None,
            )

        def failed(self, failure: Any) -> None:
            source = failure.request.meta.get("source", failure.request.url)
            results[source] = failure.getErrorMessage() or failure.type.__name__

    if process is None:
        process = CrawlerProcess(settings)
    process.crawl(FetchSpider)
    process.start()
    return results


def _load_pages(args: list[str], settings: Any, process: Any = None) -> list[Page]:
    urls = [arg for arg in args if _is_url(arg)]
    for arg in args:
        scheme = urlsplit(arg).scheme.lower()
        if scheme and len(scheme) > 1 and scheme not in ("http", "https", "file"):
            raise CommandError(f"{arg}: compare takes http(s) URLs and local files, not {scheme}:", EXIT_USAGE)
    pages = {arg: _read_file(arg) for arg in args if not _is_url(arg)}
    if urls:
        fetched = _fetch(list(dict.fromkeys(urls)), settings, process)
        for url in urls:
            result = fetched.get(url, "no response")
            if isinstance(result, str):
                # (Scrapy's message may name the URL's user information without its scheme: core.redact's secrets)
                raise CommandError(redact(f"cannot fetch {url}: {result} (-L DEBUG shows the fetch log)", secrets_in(url)))
            pages[url] = result
    return [pages[arg] for arg in args]


# -------------------------------------------------------------- analysing
def _analyse(page: Page, config: SimhashConfig) -> None:
    from ..core.analysis import analyse_html
    from ..core.skip import media_type, skip_reason
    from ..core.extract.text import extract_text

    body = page.body if isinstance(page.body, bytes) else page.body.encode("utf-8")
    reason = skip_reason(
        page.status, media_type(page.content_type), body, config.http_statuses, config.content_types, config.max_bytes
    )
    if reason != "empty":  # an empty body is reported by the analysis below, as in the crawl
        page.skipped = reason
    answer = analyse_html(page.body, page.encoding, config.analysis)
    fingerprint, reason = answer.fingerprint, answer.skip_reason
    page.text = extract_text(page.body, encoding=page.encoding, main_content=config.main_content)
    if config.distinct is not None or config.identity_signals:
        from ..core.cluster.identity import combine_digests
        from ..core.detector import page_digests

        page.digests = page_digests(config, page.url, page.body, page.encoding)
        page.protected = combine_digests(page.digests)
    page.tokens = len(token_hashes(page.text, config.features.cjk_ngram))
    if fingerprint is None:
        page.skipped = page.skipped or reason
        return
    # Fingerprint also the pages the crawl would skip for status or type: the comparison is still useful.
    page.fingerprint = fingerprint
    page.answer = answer
    page.exact = answer.exact
    page.edit_keys = answer.edit_keys
    hashes, weights = feature_hashes(page.text, config.features)
    page.weights = dict(zip(hashes.tolist(), weights.tolist()))


def feature_labels(text: str, config: SimhashConfig) -> dict[int, str]:
    """Feature hash -> the text it stands for (a word, a word n-gram or a character n-gram)."""
    features = config.features
    tokens = tokenize(text, features.cjk_ngram)
    hashes = token_hashes(text, features.cjk_ngram)
    if len(tokens) != len(hashes):  # pragma: no cover - the tokeniser's two paths always agree
        return {}
    try:
        from ..core.features.features import _char_hashes, _shingle  # the core's own windows, so labels match hashes
    except ImportError:  # pragma: no cover
        return {}
    if features.char_ngram:
        normalised = " ".join(tokens)
        seq = _char_hashes(text, features.char_ngram, features.cjk_ngram).tolist()
        n = min(features.char_ngram, len(normalised))
        return {h: normalised[i : i + n] for i, h in enumerate(seq)}
    n = features.word_ngram
    seq = _shingle(hashes, n).tolist()
    n = min(n, len(tokens)) or 1
    return {h: " ".join(tokens[i : i + n]) for i, h in enumerate(seq)}


def explain_features(a: Page, b: Page, limit: int) -> list[dict[str, Any]]:
    """The features that push most towards the bits in which ``a`` and ``b`` differ (see the module docstring)."""
    assert a.fingerprint is not None and b.fingerprint is not None
    flipped = a.fingerprint ^ b.fingerprint
    if not flipped:
        return []
    keys = sorted(set(a.weights) | set(b.weights))
    hashes = np.array(keys, dtype=np.uint64)
    delta = np.array([b.weights.get(k, 0.0) - a.weights.get(k, 0.0) for k in keys])
    changed = delta != 0
    hashes, delta = hashes[changed], delta[changed]
    if not len(hashes):
        return []
    bits = [i for i in range(64) if flipped >> i & 1]
    signs = np.stack([((hashes >> np.uint64(i)) & np.uint64(1)).astype(np.float64) * 2 - 1 for i in bits], axis=1)
    direction = np.array([1.0 if b.fingerprint >> i & 1 else -1.0 for i in bits])
    per_bit = delta[:, None] * signs * direction[None, :]
    push = per_bit.sum(axis=1)
    order = np.argsort(-push, kind="stable")[:limit]
    rows = []
    for i in order.tolist():
        if push[i] <= 0:
            break
        h = int(hashes[i])
        rows.append(
            {
                "feature": h,
                "weight_a": a.weights.get(h, 0.0),
                "weight_b": b.weights.get(h, 0.0),
                "push": float(push[i]),
                "bits": [bit for bit, value in zip(bits, per_bit[i].tolist()) if value > 0],
            }
        )
    return rows


def _compared(config: SimhashConfig) -> str:
    """What ``compare`` compared, named as it is: the main content extracted, or the page's whole visible text."""
    if config.main_content:
        return ("the main-content texts (SIMHASH_TEXT_MODE=main: the text extracted as the article; the rest of "
                "the page, its navigation and dates outside the article, is not compared)")
    return "the visible texts (SIMHASH_TEXT_MODE=visible: all the text a reader sees)"


def _text_diff(a: str, b: str) -> tuple[list[str], list[str], list[str]]:
    """(removed lines, added lines, unified diff lines without headers)."""
    left, right = a.splitlines(), b.splitlines()
    removed, added, lines = [], [], []
    for line in difflib.unified_diff(left, right, lineterm="", n=1):
        if line.startswith(("---", "+++")):
            continue
        lines.append(line)
        if line.startswith("-"):
            removed.append(line[1:])
        elif line.startswith("+"):
            added.append(line[1:])
    return removed, added, lines


def _decisions(pages: list[Page], config: SimhashConfig) -> list[dict[str, Any]]:
    """What a crawl meeting the pages in this order decides for each one (``core.detector``: steps 1-7)."""
    from ..core.cluster.clustering import rule_of
    from ..core.cluster.viewidentity import AddressIdentities
    from ..core.detector import Detector, crawl_scope, decide, page_of
    from ..core.records import page_scope

    usable = [i for i, p in enumerate(pages) if p.fingerprint is not None and p.skipped is None]
    # The crawl's scopes, in order: a page declaring no identity takes its address's (a print view).
    addresses = AddressIdentities() if config.identity_signals else None
    rule_pages = [
        page_of(pages[i].answer, crawl_scope(page_scope(config.scope, pages[i].url), pages[i].url, *pages[i].digests,
                                             addresses)[0], str(i), pages[i].url)
        for i in usable
    ]  # fmt: skip
    detector = Detector.from_config(config)
    templates = detector.templates
    learned: dict[int, set[int]] = {}  # position -> the template lines of its host when it was checked

    def before(position: int, page: Any) -> None:
        if templates is not None:
            learned[position] = templates.template_lines(page.url)

    decisions: list[dict[str, Any]] = [{"page": i + 1, "decision": "skipped", "reason": p.skipped} for i, p in enumerate(pages)]
    for d in decide(rule_pages, detector, before):
        i = usable[d.position]
        if d.canonical is None:
            decisions[i] = {"page": i + 1, "decision": "unique"}
            continue
        rule = rule_of(pages[i].exact, d.distance, config.max_distance, d.via)
        c = usable[d.canonical]
        decisions[i] = {
            "page": i + 1,
            "decision": "near-duplicate",
            "canonical": c + 1,
            "distance": d.distance,
            # The rule that matched (core.cluster.clustering.Rule) and k; one_edit: farther than k (core.features.edits).
            "rule": rule.value,
            "max_distance": config.max_distance,
            "one_edit": rule is Rule.ONE_EDIT,
            "action": config.action,
        }
        if d.via is not None:  # found beyond the first simhash: "template", "second" or "containment" (steps 5-7)
            decisions[i]["via"] = d.via
            decisions[i]["evidence"] = evidence(d.via, pages[c], pages[i], learned.get(d.position, set()))
    return decisions


def evidence(via: str, canonical: Page, page: Page, learned: set[int], limit: int = 8) -> dict[str, Any]:
    """What steps 5-7 matched ``page`` to ``canonical`` by (``compare``'s explanation of the decision).

    ``template``: the lines the host's template held when ``page`` was checked (``learned``: their digests;
    left out of both texts) and the lines the two share beside them; ``second``: the distances of the second simhashes and of the first; ``containment``: the
    sentences both have (``core.cluster.containment``), how many each has.
    """
    from ..core.cluster.containment import sentence_texts
    from ..core.cluster.sitetemplate import line_hashes

    a, b = canonical.answer, page.answer
    if via == "second":
        return {"second_distance": hamming_distance(a.second, b.second), "first_distance": hamming_distance(a.fingerprint, b.fingerprint)}
    if via == "containment":
        mine, theirs = sentence_texts(page.text), sentence_texts(canonical.text)
        shared = [mine[h] for h in sorted(set(mine) & set(theirs))]
        return {"shared_sentences": len(shared), "sentences": [len(theirs), len(mine)], "examples": shared[:limit]}
    lines_a = {h: line for h, line in zip(line_hashes(canonical.text), _nonblank(canonical.text))}
    lines_b = {h: line for h, line in zip(line_hashes(page.text), _nonblank(page.text))}
    left_out = [line for h, line in {**lines_a, **lines_b}.items() if h in learned]
    shared = [lines_b[h] for h in lines_b if h in lines_a and h not in learned]
    return {"template_lines": len(left_out), "template_examples": left_out[:limit], "shared_lines": len(shared),
            "shared_examples": shared[:limit]}  # fmt: skip


def _nonblank(text: str) -> list[str]:
    return [line.strip() for line in text.split("\n") if line.strip()]


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else "..." + text[-(width - 3) :]


def _distance(a: Page, b: Page) -> int | None:
    """Hamming distance of two simhashes; for short pages 0 (same text) or None (never compared)."""
    if a.fingerprint is None or b.fingerprint is None:
        return None
    if a.exact or b.exact:
        return 0 if a.exact and b.exact and a.fingerprint == b.fingerprint else None
    return hamming_distance(a.fingerprint, b.fingerprint)


def _partner(j: int, matrix: list[list[int | None]], decisions: list[dict[str, Any]]) -> int | None:
    """The page that page ``j`` is explained against: its canonical page, else the nearest earlier page."""
    if decisions[j].get("decision") == "near-duplicate":
        return int(decisions[j]["canonical"]) - 1
    earlier = [(d, i) for i, d in enumerate(matrix[j][:j]) if d is not None]
    return min(earlier)[1] if earlier else None


def _num(value: float) -> str:
    """A weight as people read it: 3 (term counts), 2.61 (sublinear weights)."""
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"


def _lines(count: int) -> str:
    return plural(count, "line")


def _print_text(
    out: TextIO, pages: list[Page], config: SimhashConfig, matrix: list[list[int | None]],
    decisions: list[dict[str, Any]], pairs: list[dict[str, Any]], diff_lines: int,
) -> None:  # fmt: skip
    w = out.write
    w(
        f"simhash compare: SIMHASH_TEXT_MODE={config.text_mode}, features {config.features.signature()}, "
        f"SIMHASH_MAX_DISTANCE={config.max_distance}, SIMHASH_MIN_TOKENS={config.min_tokens}, "
        f"SIMHASH_ONE_EDIT_BELOW={config.one_edit_below}"
        + (f", SIMHASH_DISTINCT_SELECTORS={list(config.distinct_selectors)}" if config.distinct_selectors else "")
        + "\n\n"
    )
    _print_pages(out, pages, config)
    _print_matrix(out, matrix)
    _print_decisions(out, decisions, config)
    for pair in pairs:
        _print_pair(w, pair, pages, config, diff_lines)


def _print_pages(out: TextIO, pages: list[Page], config: SimhashConfig) -> None:
    """The pages' table: source, fingerprint, tokens, and why the crawl would skip or treat one apart."""
    w = out.write
    width = min(60, max(len(redact(p.source)) for p in pages))
    w(f"  #  {'page':<{width}}  fingerprint       tokens\n")
    for i, page in enumerate(pages, start=1):
        fp = f"{page.fingerprint:016x}" if page.fingerprint is not None else "-" * 16
        note = f"  (the crawl skips it: {_SKIP_TEXT.get(page.skipped, page.skipped)})" if page.skipped else ""
        if page.exact:
            note += "  (short page: fewer tokens than SIMHASH_MIN_TOKENS, compared by exact text)"
        if config.distinct is not None:
            note += f"  (protected text {page.protected})" if page.protected else "  (no protected text)"
        status = f" [HTTP {page.status}]" if page.status not in (None, 200) else ""
        w(f"{i:>3}  {_short(redact(page.source), width):<{width}}  {fp}  {page.tokens:>6}{status}{note}\n")


def _print_matrix(out: TextIO, matrix: list[list[int | None]]) -> None:
    """The distance of every pair, with its similarity."""
    w = out.write
    w("\ndistance d (similarity 1 - d/64)\n")
    cell = 13
    w("     " + "".join(f"{j:>{cell}}" for j in range(1, len(matrix) + 1)) + "\n")
    for i, row in enumerate(matrix, start=1):
        cells = []
        for j, d in enumerate(row, start=1):
            if i == j:
                cells.append(f"{'-':>{cell}}")
            elif d is None:
                cells.append(f"{'n/a':>{cell}}")
            else:
                cells.append(f"{f'{d} ({1 - d / 64:.3f})':>{cell}}")
        w(f"{i:>3}  " + "".join(cells) + "\n")


def _print_decisions(out: TextIO, decisions: list[dict[str, Any]], config: SimhashConfig) -> None:
    """What a crawl meeting the pages in this order decides for each."""
    w = out.write
    w(f"\nwhat a crawl meeting the pages in this order decides (SIMHASH_MAX_DISTANCE={config.max_distance}):\n")
    for decision in decisions:
        w(f"{decision['page']:>3}  {_decision_text(decision, config)}\n")


def _print_pair(
    w: Any, pair: dict[str, Any], pages: list[Page], config: SimhashConfig, diff_lines: int
) -> None:
    """One compared pair: distance, the text that differs (or what was compared and found the same), features."""
    a, b = pair["a"], pair["b"]
    w(f"\n--- page {a} against page {b}: distance {pair['distance']}, similarity {pair['similarity']:.3f}")
    w(f", differing bits {', '.join(map(str, pair['differing_bits'])) or 'none'}\n")
    removed, added = pair["removed"], pair["added"]
    if not removed and not added:
        same = pages[a - 1].text == pages[b - 1].text
        w(f"{_compared(config)} {'are identical' if same else 'differ only in spacing'}\n")
    else:
        w(
            f"text that differs ({_lines(len(removed))} only in page {a}, {_lines(len(added))} only in page {b}; "
            f"-: page {a}, +: page {b}):\n"
        )
        shown = pair["diff"][:diff_lines]
        for line in shown:
            w(f"  {line if len(line) <= 150 else line[:147] + '...'}\n")
        if len(pair["diff"]) > len(shown):
            w(f"  ... {len(pair['diff']) - len(shown)} more diff lines (--diff-lines)\n")
    if pair["features"]:
        w(f"features weighing most in the differing bits (weight in page {a} -> page {b}, push towards the flips):\n")
        for feature in pair["features"]:
            label = json.dumps(feature["label"], ensure_ascii=False)
            w(
                f"  {_short(label, 40):<40} {_num(feature['weight_a']):>6} -> {_num(feature['weight_b']):<6}"
                f" push {_num(feature['push']):>6}  bits {','.join(map(str, feature['bits']))}\n"
            )


def _decision_text(decision: dict[str, Any], config: SimhashConfig) -> str:
    """One page's decision as ``compare`` prints it (with the evidence of a step 5-7 match)."""
    if decision["decision"] == "unique":
        return "unique: becomes a canonical page"
    if decision["decision"] != "near-duplicate":
        return f"skipped ({_SKIP_TEXT.get(decision['reason'], decision['reason'])}): never compared"
    verb = "dropped" if config.action == "drop" else "flagged"
    rule = Rule(decision["rule"]).describe(decision["distance"], decision["max_distance"])
    text = f"near-duplicate of {decision['canonical']} ({rule}): {verb}"
    if decision.get("evidence"):
        text += "\n       " + _describe_evidence(decision["via"], decision["evidence"])
    return text


def _describe_evidence(via: str, found: dict[str, Any]) -> str:
    """One line (then examples) of what steps 5-7 matched by."""
    if via == "second":
        return (f"found by the second simhash: {found['second_distance']} bits apart (first simhashes "
                f"{found['first_distance']} apart)")  # fmt: skip
    if via == "containment":
        a, b = found["sentences"]
        lines = [f"found by sentence containment: {found['shared_sentences']} sentences shared ({a} and {b})"]
        lines += [f"  = {_short(s, 100)}" for s in found["examples"]]
        return "\n       ".join(lines)
    lines = [f"found without the host's template: {found['template_lines']} template lines left out, "
             f"{found['shared_lines']} other lines shared"]  # fmt: skip
    lines += [f"  - {_short(s, 100)}" for s in found["template_examples"][:3]]
    lines += [f"  = {_short(s, 100)}" for s in found["shared_examples"]]
    return "\n       ".join(lines)


def run_compare(opts: Any, settings: Any, stdout: TextIO | None = None, process: Any = None) -> int:
    out = stdout or sys.stdout
    config = load_config(settings)
    if opts.features < 0 or opts.diff_lines < 0:
        raise CommandError("--features and --diff-lines must be 0 or more", EXIT_USAGE)
    pages = _load_pages(opts.pages, settings, process)
    for page in pages:
        _analyse(page, config)
    n = len(pages)
    matrix: list[list[int | None]] = [[_distance(pages[i], pages[j]) for j in range(n)] for i in range(n)]
    decisions = _decisions(pages, config)
    pairs = []
    for j in range(1, n):
        partner = _partner(j, matrix, decisions)
        if partner is None:
            continue
        first, other = pages[partner], pages[j]
        assert first.fingerprint is not None and other.fingerprint is not None
        removed, added, diff = _text_diff(first.text, other.text)
        features = explain_features(first, other, opts.features)
        if features:
            labels = feature_labels(first.text, config)
            labels.update(feature_labels(other.text, config))
            for feature in features:
                feature["label"] = labels.get(feature["feature"], f"#{feature['feature']:016x}")
                feature["feature"] = f"{feature['feature']:016x}"
        d = matrix[partner][j]
        assert d is not None
        flipped = first.fingerprint ^ other.fingerprint
        pairs.append(
            {
                "a": partner + 1,
                "b": j + 1,
                "distance": d,
                "similarity": 1 - d / 64,
                "differing_bits": [i for i in range(64) if flipped >> i & 1],
                "removed": removed,
                "added": added,
                "diff": diff,
                "features": features,
            }
        )
    if opts.json:
        document = {
            "settings": {
                "SIMHASH_TEXT_MODE": config.text_mode,
                "features": config.features.signature(),
                "SIMHASH_MAX_DISTANCE": config.max_distance,
                "SIMHASH_MIN_TOKENS": config.min_tokens,
                "SIMHASH_ONE_EDIT_BELOW": config.one_edit_below,
                "SIMHASH_SCOPE": config.scope,
                "SIMHASH_DISTINCT_SELECTORS": list(config.distinct_selectors),
            },
            "pages": [
                {
                    "page": i + 1,
                    "source": redact(p.source),
                    "url": redact(p.url),
                    "status": p.status,
                    "fingerprint": None if p.fingerprint is None else f"{p.fingerprint:016x}",
                    "tokens": p.tokens,
                    "skipped": p.skipped,
                    "protected": p.protected,
                }
                for i, p in enumerate(pages)
            ],
            "distances": matrix,
            "similarities": [[None if d is None else 1 - d / 64 for d in row] for row in matrix],
            "decisions": decisions,
            "pairs": pairs,
        }
        json.dump(document, out, ensure_ascii=False, indent=2)
        out.write("\n")
    else:
        _print_text(out, pages, config, matrix, decisions, pairs, opts.diff_lines)
    out.flush()
    return 0
