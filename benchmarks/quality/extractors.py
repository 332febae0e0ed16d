"""Simhash over other extractors' main text, against the plugin's: extraction quality, detection, pages/s.

    python benchmarks/quality/extractors.py --data benchmarks/quality/data/realweb --half test
    python benchmarks/quality/extractors.py --data ... --half tune --only plugin,trafilatura --json out.json

For each extractor, every page of the set (or half) goes HTML -> text (timed: pages/s of that step
alone, one process, CPU time), then through the plugin's fingerprint at the defaults
(``score.default_setup()``: features, k, the short-page exact rule, the one-edit rule) and the
index, and is scored as ``score.py`` scores the plugin (library mode).  ``naive`` is whole-page
simhash (``score.NAIVE``, its own features); every other row uses the defaults' features, so the
rows differ by the text alone.

Extraction quality (sets with ``texts.jsonl``, the real-web set): the words (``common.words``) of
the extracted text against the truth main text of each original page with at least
``EMPTY_WORDS`` words, as multisets: mean precision / recall / F1 over pages, and how many pages
came out empty or under 30 tokens.

Extractors (each skipped, and said so, when not installed; none is a dependency of the package):

=============  ===========================================  ==============================================
name           package (``pip install ...``)                call
=============  ===========================================  ==============================================
plugin         simhash_scrapy                               ``extract_text_bytes(main_content=True)``
visible        simhash_scrapy                               ``extract_text_bytes(main_content=False)``
naive          simhash_scrapy                               visible text, ``score.NAIVE``
trafilatura    trafilatura                                  ``trafilatura.extract(html)`` (defaults)
readability    readability-lxml                             ``Document(html).summary()`` -> text
justext        justext                                      paragraphs not boilerplate (stoplist by <html
                                                            lang>, English when unknown)
html_text      html-text                                    ``html_text.extract_text`` (visible text)
resiliparse    resiliparse                                  ``extract_plain_text(main_content=True)``
=============  ===========================================  ==============================================
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import lxml.html

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import score  # noqa: E402

from simhash_scrapy.core.features.features import token_hashes  # noqa: E402
from simhash_scrapy.core.extract.text import extract_text_bytes  # noqa: E402

_LANG = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "pt": "Portuguese", "it": "Italian",
         "nl": "Dutch", "cs": "Czech", "hu": "Hungarian", "pl": "Polish", "ru": "Russian", "sv": "Swedish",
         "da": "Danish", "fi": "Finnish", "tr": "Turkish", "ar": "Arabic", "he": "Hebrew", "ko": "Korean"}  # fmt: skip


def _trafilatura() -> Callable[[bytes], str]:
    import trafilatura  # noqa: PLC0415

    return lambda html: trafilatura.extract(html.decode("utf-8", "replace")) or ""


def _readability() -> Callable[[bytes], str]:
    from readability import Document  # noqa: PLC0415

    def run(html: bytes) -> str:
        summary = Document(html.decode("utf-8", "replace")).summary(html_partial=True)
        return lxml.html.fragment_fromstring(summary, create_parent="div").text_content() if summary.strip() else ""

    return run


def _justext() -> Callable[[bytes], str]:
    import justext  # noqa: PLC0415

    stoplists = {}

    def run(html: bytes) -> str:
        m = re.search(rb"<html[^>]*\blang=[\"']?([a-zA-Z]{2})", html[:4096])
        name = _LANG.get(m.group(1).decode().lower() if m else "en", "English")
        if name not in stoplists:
            stoplists[name] = justext.get_stoplist(name)
        paragraphs = justext.justext(html, stoplists[name], encoding="utf-8")
        return "\n".join(p.text for p in paragraphs if not p.is_boilerplate)

    return run


def _html_text() -> Callable[[bytes], str]:
    import html_text  # noqa: PLC0415

    return lambda html: html_text.extract_text(html.decode("utf-8", "replace"))


def _resiliparse() -> Callable[[bytes], str]:
    from resiliparse.extract.html2text import extract_plain_text  # noqa: PLC0415
    from resiliparse.parse.html import HTMLTree  # noqa: PLC0415

    return lambda html: extract_plain_text(HTMLTree.parse_from_bytes(html, "utf-8"), main_content=True)


#: name -> (factory of the extraction function, pip package); "plugin"/"visible"/"naive" are built in.
EXTERNAL = {
    "trafilatura": (_trafilatura, "trafilatura"),
    "readability": (_readability, "readability-lxml"),
    "justext": (_justext, "justext"),
    "html_text": (_html_text, "html-text"),
    "resiliparse": (_resiliparse, "resiliparse"),
}
BUILTIN = {
    "plugin": lambda html: extract_text_bytes(html, main_content=True),
    "visible": lambda html: extract_text_bytes(html, main_content=False),
    "naive": lambda html: extract_text_bytes(html, main_content=False),
}
ALL = ("plugin", "naive", "visible", *EXTERNAL)


class ExtractedTexts(score.Texts):
    """``score.Texts`` whose every text mode is one extractor's output (so ``score.run_library`` uses it)."""

    def __init__(self, evalset: common.EvalSet, texts: dict[int, bytes]) -> None:
        super().__init__(evalset)
        self.texts = texts

    def get(self, mode: str) -> dict[int, bytes]:
        return self.texts


def extract_all(evalset: common.EvalSet, run: Callable[[bytes], str | bytes]) -> tuple[dict[int, bytes], float, int]:
    """page id -> text (UTF-8), CPU seconds of the extraction alone, and how many pages raised (-> empty)."""
    html = {p.id: evalset.html(p) for p in evalset.pages}
    out: dict[int, bytes] = {}
    errors = 0
    t0 = time.process_time()
    for pid, raw in html.items():
        try:
            text = run(raw)
        except Exception:  # noqa: BLE001 - an extractor failing on a page is counted, the page gets no text
            errors += 1
            text = ""
        out[pid] = text.encode("utf-8") if isinstance(text, str) else text
    return out, time.process_time() - t0, errors


def truth_texts(root: Path) -> dict[int, str]:
    path = root / "texts.jsonl"
    if not path.exists():
        return {}
    rows = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return {row["id"]: row["text"] for row in rows}


def extraction_quality(evalset: common.EvalSet, texts: dict[int, bytes], truth: dict[int, str]) -> dict:
    """Mean word-multiset precision / recall / F1 against the truth main text, over original pages."""
    ps, rs, fs = [], [], []
    per_page: list[tuple[float, float, float, int, str]] = []  # (F1, P, R, page id, url)
    by_collection: dict[str, list[float]] = collections.defaultdict(list)
    empty = tiny = 0
    for page in evalset.pages:
        if page.role != "original" or page.id not in truth:
            continue
        want = collections.Counter(common.words(truth[page.id]))
        if sum(want.values()) < common.EMPTY_WORDS:
            continue
        got_text = texts[page.id].decode("utf-8", "replace")
        got = collections.Counter(common.words(got_text))
        tokens = len(token_hashes(texts[page.id]))
        empty += tokens == 0
        tiny += 0 < tokens < 30
        both = sum((want & got).values())
        p = both / sum(got.values()) if got else 0.0
        r = both / sum(want.values())
        ps.append(p)
        rs.append(r)
        fs.append(2 * p * r / (p + r) if p + r else 0.0)
        by_collection[page.source.split(":")[0]].append(fs[-1])
        per_page.append((fs[-1], p, r, page.id, page.url))
    n = len(fs)
    mean = (lambda xs: sum(xs) / n) if n else (lambda xs: 0.0)
    return dict(pages=n, precision=mean(ps), recall=mean(rs), f1=mean(fs), empty=empty, under_30_tokens=tiny,
                by_collection={c: (len(v), sum(v) / len(v)) for c, v in sorted(by_collection.items())},
                worst=sorted(per_page)[:50])  # fmt: skip


def run_extractor(evalset: common.EvalSet, name: str, truth: dict[int, str]) -> dict | None:
    if name in BUILTIN:
        run = BUILTIN[name]
    else:
        factory, package = EXTERNAL[name]
        try:
            run = factory()
        except ImportError:
            print(f"{name}: not installed (pip install {package}); skipped", file=sys.stderr)
            return None
    texts, seconds, errors = extract_all(evalset, run)
    setup = score.NAIVE if name == "naive" else replace(score.default_setup(), name=name)
    result = score.run_library(evalset, setup, ExtractedTexts(evalset, texts))
    result.setup = replace(result.setup, name=name)
    quality = extraction_quality(evalset, texts, truth) if truth else {}
    return dict(name=name, result=result, seconds=seconds, pages_per_s=len(texts) / seconds if seconds else 0.0,
                errors=errors, quality=quality)  # fmt: skip


def tables(rows: list[dict]) -> str:
    results = [r["result"] for r in rows]
    out = ["| extractor | P | R | F1 | " + " | ".join(f"{c} R" for c in results[0].categories)
           + " | hard negatives flagged | pages/s (CPU) | text F1 vs truth | empty / <30 tokens |",
           "|---|---:|---:|---:|" + "---:|" * len(results[0].categories) + "---:|---:|---:|---:|"]  # fmt: skip
    for row in rows:
        r, q = row["result"], row["quality"]
        flagged, pairs = r.hard_total()
        cats = " | ".join(f"{r.categories[c].recall:.2f}" for c in results[0].categories)
        qual = f"{q['f1']:.3f}" if q else "-"
        emp = f"{q['empty']} / {q['under_30_tokens']}" if q else "-"
        out.append(f"| {row['name']} | {r.overall.precision:.3f} | {r.overall.recall:.3f} | {r.overall.f1:.3f} | {cats} | "
                   f"{flagged} / {pairs} | {row['pages_per_s']:.0f} | {qual} | {emp} |")  # fmt: skip
    collections_ = [c for c in rows[0]["quality"].get("by_collection", {})]
    if collections_:
        # the truth of readability's and newspaper's pages is located from those tools' expected output
        out += ["", "| text F1 vs truth, by collection (original pages) | "
                + " | ".join(f"{c} ({rows[0]['quality']['by_collection'][c][0]})" for c in collections_) + " |",
                "|---|" + "---:|" * len(collections_)]  # fmt: skip
        for row in rows:
            cells = " | ".join(f"{row['quality']['by_collection'].get(c, (0, 0.0))[1]:.3f}" for c in collections_)
            out.append(f"| {row['name']} | {cells} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=common.DEFAULT_DATA / "realweb")
    parser.add_argument("--half", choices=("tune", "test"))
    parser.add_argument("--only", help=f"comma-separated extractors (default: all of {', '.join(ALL)})")
    parser.add_argument("--json", type=Path, help="write the figures as JSON here")
    parser.add_argument("--worst", type=int, default=0, metavar="N",
                        help="list each extractor's N original pages of lowest text F1 against the truth")
    args = parser.parse_args(argv)
    evalset = common.load_set(args.data, args.half)
    common.CJK_CHARACTERS = bool(evalset.info.get("cjk_characters"))  # the set's own word rule
    truth = truth_texts(args.data)
    names = args.only.split(",") if args.only else list(ALL)
    unknown = [n for n in names if n not in ALL]
    if unknown:
        raise SystemExit(f"--only: unknown extractor(s) {unknown}; choose from {', '.join(ALL)}")
    print(f"set: {len(evalset.pages)} pages, {len(evalset.positive)} duplicate pairs, {args.data} {args.half or ''}",
          file=sys.stderr)  # fmt: skip
    rows = []
    for name in names:
        row = run_extractor(evalset, name, truth)
        if row is None:
            continue
        rows.append(row)
        print(f"{name:<12} {score.one_line(row['result'])}  {row['pages_per_s']:.0f} pages/s", file=sys.stderr, flush=True)
    if not rows:
        return 1
    print(tables(rows))
    for row in rows if args.worst else ():
        print(f"\n{row['name']}: the {args.worst} pages of lowest text F1 (F1 P R, page id, URL)")
        for f1, p, r, pid, url in row["quality"].get("worst", [])[: args.worst]:
            print(f"  {f1:.2f} {p:.2f} {r:.2f}  {pid}  {url}")
    if args.json:
        args.json.write_text(json.dumps([
            dict(name=r["name"], pages_per_s=r["pages_per_s"], cpu_seconds=r["seconds"], errors=r["errors"],
                 extraction=r["quality"], detection=r["result"].as_dict()) for r in rows
        ], indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
