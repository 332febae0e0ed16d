"""Core engine speed: text -> fingerprint, HTML -> fingerprint, and the index.

    python benchmarks/core.py            # full run (about 3-5 minutes)
    python benchmarks/core.py --quick    # smaller index sizes
    python benchmarks/core.py --index-only / --html-only / --text-only   # one section
    python benchmarks/core.py --answers OUT.jsonl [--answer-dirs DIR ...]   # every page's answer
    python benchmarks/core.py --compare A.jsonl B.jsonl    # two such files: pages compared, differences

Every figure is compared in the same run with a baseline:
- the `simhash` package from PyPI (the most used Python simhash), for text
  throughput and for its SimhashIndex;
- a plain numpy simhash of words (`numpy_reference`), for text throughput;
- bare `lxml.html` parsing plus `text_content()`, for HTML pages;
- a brute-force numpy popcount scan, for index queries.
Times are CPU time of this process (``time.process_time``), so other
processes on a shared machine disturb them less than wall time.
Results are printed as markdown and written to benchmarks/results/core.json.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import platform
import re
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

import simhash_scrapy  # noqa: E402
from simhash_scrapy import BlockPermutedIndex, FeatureConfig, extract_text, fingerprint, fingerprint_html  # noqa: E402
from simhash_scrapy.core.analysis import analyse_html  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from bs4_reference import extract_text_bs4  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
COMPILED = simhash_scrapy.core._native.speedups_enabled()


def pure_python() -> contextlib.AbstractContextManager:
    """Within the block, the pure-Python/numpy path (as without the C helpers, or SIMHASH_SCRAPY_PURE_PYTHON=1)."""
    return simhash_scrapy.core._native.switched(False)


def paths() -> list[tuple[str, contextlib.AbstractContextManager]]:
    """(label, context) for the C helpers (when built) and the pure-Python path."""
    out: list[tuple[str, contextlib.AbstractContextManager]] = []
    if COMPILED:
        out.append(("", contextlib.nullcontext()))
    out.append((", pure Python", pure_python()))
    return out


def best_of(repeats: int, func) -> float:
    """Best CPU time of `repeats` runs (least disturbed by other processes on a shared machine).

    Every timed path here runs on the calling thread (numpy and the C helpers
    start no threads), so the process's CPU time is the work's own time.
    """
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.process_time()
        func()
        times.append(time.process_time() - start)
    return min(times)


def pypi_simhash():
    """The PyPI `simhash` package, with a one-line fix so it runs on numpy 2.

    simhash 2.1.2 multiplies a uint8 bit array by the feature weight, which
    numpy 2 refuses for weights > 255 (OverflowError); widening the array first
    is the fix.  Its algorithm and speed are otherwise untouched.
    """
    import simhash

    class Simhash(simhash.Simhash):
        @staticmethod
        def _bitarray_from_bytes(b):
            return np.unpackbits(np.frombuffer(b, dtype=">B")).astype(np.int64)

    return simhash, Simhash


_REFERENCE_WORD = re.compile(r"\w+")


def numpy_reference(text: str) -> int:
    """A plain numpy simhash of the same kind of features: the speed reference of issue #25.

    Words by ``re`` (``\\w+`` of the lowercased text), counted by ``Counter``,
    weighted 1 + log(tf), each hashed by Python's own ``hash()`` (the fastest
    64-bit hash Python code has; per-process seeded, so a speed reference only),
    and the 64 bit votes as one numpy matrix product. It is written to be as
    fast as such code gets: tokenising and counting alone run only ~10% faster
    than the whole of it, so a slower reference would flatter us.
    """
    counts = Counter(_REFERENCE_WORD.findall(text.lower()))
    if not counts:
        return 0
    hashes = np.fromiter((hash(word) & 0xFFFF_FFFF_FFFF_FFFF for word in counts), dtype=np.uint64, count=len(counts))
    weights = 1.0 + np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))
    bits = np.unpackbits(hashes.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    votes = weights @ (bits.astype(np.float64) * 2.0 - 1.0)
    return int(np.packbits(votes > 0, bitorder="little").view(np.uint64)[0])


def bench_text(texts: list[str], repeats: int) -> list[dict]:
    simhash_module, PySimhash = pypi_simhash()
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    rows = []
    configs = {
        "simhash-scrapy, default features (words, log tf)": FeatureConfig(),
        "simhash-scrapy, word 3-shingles": FeatureConfig(word_ngram=3),
        "simhash-scrapy, char 4-grams (PyPI simhash's features)": FeatureConfig(char_ngram=4),
    }
    for suffix, context in paths():
        with context:
            for name, config in configs.items():
                seconds = best_of(repeats, lambda: [fingerprint(t, config) for t in texts])
                rows.append({"what": name + suffix, "MB/s": megabytes / seconds})
    seconds = best_of(repeats, lambda: [numpy_reference(t) for t in texts])
    reference = megabytes / seconds
    rows.append({"what": "numpy reference (re words, Counter, log tf, hash(), numpy vote)", "MB/s": reference})
    seconds = best_of(1, lambda: [PySimhash(t) for t in texts])
    baseline = megabytes / seconds
    rows.append({"what": f"PyPI simhash {simhash_module.__version__ if hasattr(simhash_module, '__version__') else '2.1.2'} (char 4-grams, md5)", "MB/s": baseline})
    for row in rows:
        row["vs numpy reference"] = row["MB/s"] / reference
        row["vs PyPI simhash"] = row["MB/s"] / baseline
    return rows


def _crawl_defaults(pages: list[bytes]) -> list:
    from simhash_scrapy.core.analysis import AnalysisOptions
    from simhash_scrapy.core.cluster.sitetemplate import HostTemplates

    options = AnalysisOptions(keep_source=True, second=True)
    learner = HostTemplates()
    out = []
    for page in pages:
        answer = analyse_html(page, options=options)
        if answer.fingerprint is not None and not answer.exact and answer.source is not None:
            learner.check("one.example", answer.fingerprint, answer.source)
        out.append(answer)
    return out


def bench_html(pages: list[bytes], repeats: int) -> list[dict]:
    import lxml.html

    def baseline_run():
        return [lxml.html.fromstring(p).text_content() for p in pages]

    measured: dict[str, list[float]] = {}
    runs: dict[str, Any] = {"bare lxml.html parse + text_content() (baseline)": (contextlib.nullcontext, baseline_run)}
    for suffix, _ in paths():
        make_context = pure_python if suffix else contextlib.nullcontext
        for name, main in (("fingerprint_html, visible text", False), ("fingerprint_html, main content", True)):
            runs[name + suffix] = (make_context, lambda main=main: [fingerprint_html(p, main_content=main) for p in pages])
        runs["extract_text (lxml path), visible text" + suffix] = (make_context, lambda: [extract_text(p) for p in pages])
    # The crawl's answer (``analyse_html`` at the defaults): also the one-edit keys of pages of 30..63 tokens.
    runs["analyse_html, main content (the crawl's path, with one-edit keys)"] = (
        contextlib.nullcontext, lambda: [analyse_html(p) for p in pages],
    )  # fmt: skip
    # ... with what a crawl adds at the defaults (SIMHASH_SECOND_SIMHASH, SIMHASH_TEMPLATES): the second
    # simhash and host-template learning, every page taken as one host's (the most learning work).
    runs["analyse_html + second simhash + host templates (the crawl's defaults)"] = (
        contextlib.nullcontext, lambda: _crawl_defaults(pages),
    )  # fmt: skip
    # Interleaved rounds, best of each: a slow spell of the machine hits every row alike.
    for _ in range(repeats):
        for name, (make_context, run) in runs.items():
            with make_context():
                measured.setdefault(name, []).append(best_of(1, run))
    rows = [{"what": name, "pages/s": len(pages) / min(times)} for name, times in measured.items()]
    some = pages[:60]
    seconds = best_of(1, lambda: [extract_text_bs4(p) for p in some])
    rows.append({"what": "extract_text_bs4 (BeautifulSoup reference, 60 pages)", "pages/s": len(some) / seconds})
    baseline = rows[0]["pages/s"]
    for row in rows:
        row["vs lxml"] = row["pages/s"] / baseline
    return rows


def answer_pages(dirs: list[str]) -> list[tuple[str, bytes]]:
    """(name, bytes) of every page ``--answers`` fingerprints: the whole HTML corpus, the hostile
    pages of ``hostile.py`` (1,000 and 3,000 repeats of their unit), the tests' HTML fixtures and
    the ``*.html`` files under ``dirs`` (e.g. the quality sets' ``pages`` folders)."""
    import hostile

    _, pages = corpus.html_pages(None)
    out = [(f"corpus/{i}", page) for i, page in enumerate(pages)]
    for n in (1_000, 3_000):
        out += [(f"hostile/{n}/{kind}", page) for kind, page in hostile.kinds(n).items()]
    root = Path(__file__).resolve().parents[1]
    for folder in [root / "tests" / "fixtures", *map(Path, dirs)]:
        out += [(str(f), f.read_bytes()) for f in sorted(folder.rglob("*.html"))]
    return out


def answers(out_path: str, dirs: list[str]) -> None:
    """Write every page's answers (one JSON line a page): ``analyse_html`` at the defaults (main
    content) and for visible text, ``analyse_tree`` on Scrapy's kind of parse (the crawl's shared
    parse, its removals undone) and the SHA-256 of ``extract_text`` in main-content mode.  For
    checking that a speed-up changes no answer: run it on two versions of the code (C helpers and
    ``SIMHASH_SCRAPY_PURE_PYTHON=1``) and ``--compare`` the files."""
    import hashlib

    from lxml import etree

    from simhash_scrapy.core.analysis import AnalysisOptions, analyse_tree

    keep = AnalysisOptions(keep_text=True)
    visible = AnalysisOptions(main_content=False)
    parser = etree.HTMLParser(huge_tree=True)  # parsel's parser for Scrapy's selectors

    def digest(text: str | None) -> str | None:
        return None if text is None else hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def plain(answer) -> list:
        return [answer.fingerprint, answer.exact, answer.skip_reason, digest(answer.text), list(answer.edit_keys),
                answer.digest]

    with open(out_path, "w") as handle:
        for name, page in answer_pages(dirs):
            root = etree.fromstring(page, parser) if page.strip() else None
            before = etree.tostring(root) if root is not None else None
            tree = plain(analyse_tree(root, page, keep))
            if root is not None and etree.tostring(root) != before:
                raise AssertionError(f"{name}: analyse_tree changed the tree")
            record = {"page": name, "html": plain(analyse_html(page)), "visible": plain(analyse_html(page, options=visible)),
                      "tree": tree, "text": digest(extract_text(page, main_content=True))}
            handle.write(json.dumps(record) + "\n")


def compare(first: str, second: str) -> int:
    """Print how many pages two ``--answers`` files hold and every page whose answers differ."""
    with open(first) as a, open(second) as b:
        left, right = [json.loads(line) for line in a], [json.loads(line) for line in b]
    if [r["page"] for r in left] != [r["page"] for r in right]:
        print("the files hold different pages")
        return 1
    differ = [x["page"] for x, y in zip(left, right) if x != y]
    for page in differ:
        print("differs:", page)
    print(f"{len(left)} pages compared (4 answers each), {len(differ)} differ")
    return 1 if differ else 0


def random_fingerprints(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**64, n, dtype=np.uint64, endpoint=False)


def bench_index(n: int, queries: int, k: int, blocks: int | None = None) -> dict:
    fps = random_fingerprints(n, 1)
    # Half the queries are planted near stored fingerprints, so matches are real.
    rng = np.random.default_rng(2)
    near = fps[rng.integers(0, n, queries // 2)].copy()
    for _ in range(k):
        near ^= np.left_shift(np.uint64(1), rng.integers(0, 64, len(near)).astype(np.uint64))
    query_fps = np.concatenate([near, random_fingerprints(queries - len(near), 3)])

    gc.collect()
    index = BlockPermutedIndex(max_distance=k, blocks=blocks)
    start = time.process_time()
    for chunk in range(0, n, 100_000):
        index.add_many(range(chunk, min(n, chunk + 100_000)), fps[chunk : chunk + 100_000])
    index.query_many_arrays(fps[:1])  # merge the tail before measuring memory
    build = time.process_time() - start
    # The index's arrays (its big ones live in memory maps, which tracemalloc does not see).
    grown = index.nbytes()

    singles = [int(q) for q in query_fps[:20_000]]
    seconds = best_of(3, lambda: [index.query(q) for q in singles])
    single_qps = len(singles) / seconds
    seconds = best_of(3, lambda: index.query_many_arrays(query_fps))
    batch_qps = len(query_fps) / seconds
    with pure_python():
        seconds = best_of(3, lambda: [index.query(q) for q in singles[:5_000]])
        single_qps_pure = 5_000 / seconds
        seconds = best_of(3, lambda: index.query_many_arrays(query_fps))
        batch_qps_pure = len(query_fps) / seconds

    # One-at-a-time adds on top (the crawl's query_and_add path).
    extra = [int(q) for q in random_fingerprints(20_000, 4)]
    start = time.process_time()
    for i, fp in enumerate(extra):
        index.query_and_add(n + i, fp)
    qa_per_s = len(extra) / (time.process_time() - start)

    # Baseline: brute-force numpy scan, checked to give the same answers.
    brute_queries = query_fps[:200]
    start = time.process_time()
    brute = [np.flatnonzero(np.bitwise_count(fps ^ q) <= k) for q in brute_queries]
    brute_qps = len(brute_queries) / (time.process_time() - start)
    for q, expected in zip(brute_queries, brute):
        got = sorted(m.key for m in index.query(int(q)) if m.key < n)
        assert got == expected.tolist(), "index disagrees with brute force"
    return {
        "stored": n,
        "k": k,
        "blocks": index.blocks,
        "tables": index.table_count,
        "build_s": build,
        "bytes_per_fp": grown / n,
        "single_qps": single_qps,
        "batch_qps": batch_qps,
        "single_qps_pure": single_qps_pure,
        "batch_qps_pure": batch_qps_pure,
        "query_and_add_per_s": qa_per_s,
        "brute_force_qps": brute_qps,
    }


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc)."""
    import os

    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def add_rss_child(k: int, blocks: int | None, n: int) -> dict:
    """In a fresh process: RSS growth over ``n`` one-at-a-time ``add`` calls (the crawl's path), int keys."""
    fps = [int(fp) for fp in random_fingerprints(n, 5)]
    index = BlockPermutedIndex(max_distance=k, blocks=blocks)
    gc.collect()
    before = rss_bytes()
    start = time.process_time()
    for i, fp in enumerate(fps):
        index.add(i, fp)
    seconds = time.process_time() - start
    gc.collect()
    grown = rss_bytes() - before
    return {"stored": n, "k": k, "blocks": index.blocks, "tables": index.table_count,
            "rss_bytes_per_fp": grown / n, "nbytes_per_fp": index.nbytes() / n, "adds_per_s": n / seconds}


def bench_add_rss(k: int, blocks: int | None, n: int) -> dict:
    """``add_rss_child`` in a fresh interpreter, so other benchmarks' memory does not blur the figure."""
    return in_child(f"add_rss_child({k}, {blocks}, {n})")


def bench_pypi_index(n: int, queries: int, k: int) -> dict:
    simhash_module, PySimhash = pypi_simhash()
    import logging

    logging.getLogger("simhash").setLevel(logging.ERROR)
    fps = random_fingerprints(n, 1)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    start = time.process_time()
    index = simhash_module.SimhashIndex([], k=k)
    for i, fp in enumerate(fps.tolist()):
        index.add(str(i), PySimhash(fp))
    build = time.process_time() - start
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    probes = [PySimhash(int(q)) for q in fps[:queries]]
    start = time.process_time()
    for probe in probes:
        index.get_near_dups(probe)
    qps = len(probes) / (time.process_time() - start)
    return {"stored": n, "k": k, "build_s": build, "bytes_per_fp": grown / n, "single_qps": qps}


def peak_rss_bytes() -> int:
    """The process's peak resident set size so far (Linux /proc: VmHWM)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def bench_10m_child(k: int) -> dict:
    """In a fresh process: 10M fingerprints by add_many; RSS held and peak (growth over the start)."""
    n = 10_000_000
    gc.collect()
    before = rss_bytes()
    index = BlockPermutedIndex(max_distance=k)
    for chunk in range(0, n, 1_000_000):
        index.add_many(range(chunk, chunk + 1_000_000), random_fingerprints(1_000_000, 100 + chunk))
    index.query_many_arrays(np.zeros(1, dtype=np.uint64))
    gc.collect()
    grown = rss_bytes() - before
    peak = peak_rss_bytes() - before
    probes = [int(q) for q in random_fingerprints(5_000, 7)]
    start = time.process_time()
    for q in probes:
        index.query(q)
    return {"stored": n, "k": k, "blocks": index.blocks, "MB": grown / 1e6, "peak_MB": peak / 1e6,
            "single_qps": len(probes) / (time.process_time() - start)}


def in_child(call: str) -> dict:
    """``call`` (an expression on this module) in a fresh interpreter: memory figures of its own."""
    import subprocess

    code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); import core; "
            f"print(json.dumps(core.{call}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(rows: list[dict]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        cells = [f"{v:,.2f}" if isinstance(v, float) else (f"{v:,}" if isinstance(v, int) else str(v)) for v in row.values()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100k index instead of 1M, no 10M run")
    parser.add_argument("--pages", type=int, default=300, help="HTML pages to use (default 300)")
    parser.add_argument("--index-only", action="store_true", help="only the index figures (no text, no HTML)")
    parser.add_argument("--html-only", action="store_true", help="only the HTML page -> fingerprint figures")
    parser.add_argument("--text-only", action="store_true", help="only the text -> fingerprint figures")
    parser.add_argument("--answers", metavar="OUT", help="write every page's answers to OUT (JSON lines) and stop")
    parser.add_argument("--answer-dirs", nargs="*", default=[], metavar="DIR", help="with --answers: more pages")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two --answers files and stop")
    args = parser.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    if args.answers:
        answers(args.answers, args.answer_dirs)
        return
    n = 100_000 if args.quick else 1_000_000

    source, pages = corpus.html_pages(args.pages)
    _, texts = corpus.texts(args.pages)
    print(f"# simhash-scrapy {simhash_scrapy.__version__} core benchmark")
    print(f"C helpers (_speedups): {'built, used unless a row says pure Python' if COMPILED else 'not built: pure Python'}")
    print(f"Python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}; corpus: {source}, "
          f"{sum(map(len, pages)) / len(pages) / 1000:.0f} KB per page on average, "
          f"{sum(len(t.encode()) for t in texts) / 1e6:.1f} MB of text; one core.\n")
    results: dict = {"corpus": source}

    if not (args.index_only or args.html_only):
        rows = bench_text(texts, repeats=3)
        results["text"] = rows
        print("## Text -> fingerprint\n\n" + table(rows) + "\n")

    if args.text_only:
        return
    if not args.index_only:
        rows = bench_html(pages, repeats=5)
        results["html"] = rows
        print("## HTML page -> fingerprint\n\n" + table(rows) + "\n")
    if args.html_only:
        return

    ours = bench_index(n, 100_000, 3)
    ours_b5 = bench_index(n, 100_000, 3, blocks=5)  # more blocks: more tables, shorter buckets
    ours_k4 = bench_index(n, 100_000, 4)  # the plugin's default k, default layout (B=3)
    ours_k4_b5 = bench_index(n, 100_000, 4, blocks=5)  # k=4 with k + 1 blocks (the default before B=3)
    pypi = bench_pypi_index(n, 2_000, 3)
    results["index"] = {"simhash_scrapy": ours, "simhash_scrapy_b5": ours_b5, "simhash_scrapy_k4": ours_k4,
                        "simhash_scrapy_k4_b5": ours_k4_b5, "pypi_simhash": pypi}
    compiled = " (C query loop)" if COMPILED else ""

    def row(label: str, r: dict, pure: bool = False) -> dict:
        return {"index": label, "k": r["k"], "stored": r["stored"], "bytes/fp": r["bytes_per_fp"],
                "build s": r["build_s"], "single queries/s": r["single_qps_pure" if pure else "single_qps"],
                "batch queries/s": r["batch_qps_pure" if pure else "batch_qps"]}

    rows = [
        row(f"simhash-scrapy BlockPermutedIndex (B={ours['blocks']}, {ours['tables']} tables){compiled}", ours),
        row(f"same, B=5 ({ours_b5['tables']} tables){compiled}", ours_b5),
        row(f"same, k=4 (B={ours_k4['blocks']}, {ours_k4['tables']} tables, keys within 1 bit: the plugin's "
            f"default){compiled}", ours_k4),
        row(f"same, k=4, B=5 ({ours_k4_b5['tables']} tables: k + 1 blocks){compiled}", ours_k4_b5),
    ]
    if COMPILED:
        rows.append(row(f"simhash-scrapy B={ours['blocks']}, pure numpy", ours, pure=True))
        rows.append(row(f"simhash-scrapy k=4, B={ours_k4['blocks']}, pure numpy", ours_k4, pure=True))
    rows += [
        {"index": "PyPI simhash SimhashIndex", "k": pypi["k"], "stored": pypi["stored"],
         "bytes/fp": pypi["bytes_per_fp"], "build s": pypi["build_s"], "single queries/s": pypi["single_qps"],
         "batch queries/s": "-"},
        {"index": "brute-force numpy popcount scan", "k": 3, "stored": ours["stored"], "bytes/fp": 8.0,
         "build s": 0.0, "single queries/s": ours["brute_force_qps"], "batch queries/s": "-"},
    ]
    print("## Index\n\n" + table(rows))
    print(f"\nk=4 default layout against k=3 in this run: {ours_k4['single_qps'] / ours['single_qps']:.2f}x single, "
          f"{ours_k4['batch_qps'] / ours['batch_qps']:.2f}x batch queries/s; against k=4 with B=5: "
          f"{ours_k4['single_qps'] / ours_k4_b5['single_qps']:.2f}x single, "
          f"{ours_k4['batch_qps'] / ours_k4_b5['batch_qps']:.2f}x batch.")
    adds = [bench_add_rss(k, blocks, n) for k, blocks in ((3, None), (4, None), (4, 5))]
    results["add_rss"] = adds
    print(f"\n### One-at-a-time add: memory\n\n{n:,} `add` calls (int keys) in a fresh process; RSS growth "
          "(/proc/self/statm) over them, and the index's own arrays (`nbytes()`, with spare room):\n")
    print(table([{"layout": f"k={a['k']}, B={a['blocks']} ({a['tables']} tables)", "stored": a["stored"],
                  "RSS growth bytes/fp": a["rss_bytes_per_fp"], "arrays bytes/fp": a["nbytes_per_fp"],
                  "adds/s": a["adds_per_s"]} for a in adds]))
    print(f"\nquery_and_add (the crawl path) on top of {n:,}: {ours['query_and_add_per_s']:,.0f}/s at k=3, "
          f"{ours_k4['query_and_add_per_s']:,.0f}/s at k=4 (B={ours_k4['blocks']}). "
          f"Single queries: {ours['single_qps'] / pypi['single_qps']:.1f}x PyPI simhash, "
          f"{ours['single_qps'] / ours['brute_force_qps']:.0f}x brute force; "
          f"memory {pypi['bytes_per_fp'] / ours['bytes_per_fp']:.0f}x smaller than PyPI simhash.\n")
    if not args.quick:
        big = in_child("bench_10m_child(3)")
        results["index_10m"] = big
        print(f"10,000,000 fingerprints (k=3, fresh process): {big['MB']:,.0f} MB RSS held "
              f"({big['peak_MB']:,.0f} MB peak RSS while building), "
              f"{big['single_qps']:,.0f} single queries/s.\n")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "core.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
