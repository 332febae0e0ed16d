"""``scrapy simhash dedup`` on 100,000 pages: how long does an offline dedup take?

    python benchmarks/dedup_100k.py                  # 100,000 pages (about 2 GB of JSON Lines in a temp folder)
    python benchmarks/dedup_100k.py --pages 20000    # a smaller run
    python benchmarks/dedup_100k.py --compare-weighting sublinear   # and what each weighting clusters

Builds a JSON Lines feed of crawled items (``{"url", "html"}``), as a Scrapy
feed export would write it, then runs the real command in a subprocess::

    python -m scrapy.cmdline simhash dedup items.jsonl --field html -o clusters.jsonl

Pages: a documentation-site template (head with inline CSS and JavaScript,
header, 40-link navigation, sidebar, footer; about 20 KB of HTML) around two
sections of real text and markup from Debian's Python documentation (package
python3-doc; without it, windows of ``pydoc_data`` topics as paragraphs).  80%
are distinct pages, 20% near-duplicates of an earlier page of the kinds
crawlers meet: a session/timestamp line, an inserted advert, one word edited,
the printer-friendly template.  The script reports the wall time, the pages per
second, the CPU time of the command and its worker processes, the all-pairs
search time and how many planted near-duplicates were found in the cluster of
the page they copy.  Baseline, in the same run and in CPU time (the load of a
shared machine stretches wall times, much less CPU times): reading the same
items and parsing their HTML with bare lxml, on 2,000 of them.  What else was clustered: a
seeded sample of 400 member pairs that no variant planted, by the Jaccard of their main texts.
Results:
benchmarks/results/dedup_100k.json.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import platform
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
DOCS = Path("/usr/share/doc/python3-dev/html")

_HEAD = (
    "<style>" + "".join(f".c{i}{{margin:{i}px;padding:{i % 7}px;color:#{i:06x}}}" for i in range(400)) + "</style>"
    "<script>" + "".join(f"function f{i}(a){{return a*{i}+{i % 13};}}" for i in range(300)) + "</script>"
)


def sections() -> list[str]:
    """Real HTML fragments: the doc sections of 60 to 1,500 words, else paragraphs of pydoc_data topics."""
    found: list[str] = []
    if DOCS.is_dir():
        from lxml import html as lxml_html

        for name in sorted({os.path.realpath(p) for p in DOCS.rglob("*.html")}):
            root = lxml_html.fromstring(Path(name).read_bytes())
            for section in root.xpath("//section | //div[contains(concat(' ', @class, ' '), ' section ')]"):
                words = len(section.text_content().split())
                if 60 <= words <= 1500:
                    found.append(lxml_html.tostring(section, encoding="unicode"))
    if found:
        return found
    import pydoc_data.topics as topics

    words = " ".join(topics.topics[name] for name in sorted(topics.topics)).split()
    return [f"<p>{html.escape(' '.join(words[i : i + 250]))}</p>" for i in range(0, len(words) - 250, 125)]


def page(title: str, body: str, nav: str, printer: bool = False) -> str:
    if printer:
        return f"<!DOCTYPE html><html><head><title>{title} (print)</title></head><body><h1>{title}</h1>{body}</body></html>"
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>{_HEAD}</head><body>'
        f'<div class="header"><a href="/">Docs home</a> | <a href="/search">Search</a> | <a href="/about">About</a></div>'
        f'<nav class="sidebar"><h3>Navigation</h3><ul>{nav}</ul></nav>'
        f'<main><article><h1>{title}</h1>{body}</article></main>'
        f'<aside class="related"><h3>Popular</h3><ul>{nav[:2000]}</ul></aside>'
        f'<footer class="footer">&copy; Copyright the authors. Built with a static site generator.</footer>'
        f"</body></html>"
    )


def build(path: Path, count: int, seed: int = 1) -> dict[str, int]:
    rng = random.Random(seed)
    pool = sections()
    nav = "".join(f'<li><a href="/page/{i}.html">Topic number {i}</a></li>' for i in range(40))
    bases: list[tuple[str, str]] = []
    planted: dict[str, int] = {}
    with open(path, "w", encoding="utf-8") as out:
        for i in range(count):
            if i < 20 or rng.random() < 0.8:
                title = f"Page {i}"
                body = pool[rng.randrange(len(pool))] + pool[rng.randrange(len(pool))]
                bases.append((title, body))
                document = page(title, body, nav)
                url = f"https://docs.example/page/{i}.html"
            else:
                title, body = bases[rng.randrange(len(bases))]
                kind = rng.choice(("session", "advert", "edit", "print"))
                planted[kind] = planted.get(kind, 0) + 1
                if kind == "session":
                    body = body + f"<p>Session {rng.getrandbits(40):010x} rendered at {rng.randrange(24):02d}:{rng.randrange(60):02d}</p>"
                elif kind == "advert":
                    body = "<p>Advertisement: try our hosted documentation search, free for 30 days.</p>" + body
                elif kind == "edit":
                    body = re.sub(r"\b(the|a|is|of)\b", "THE", body, count=1)
                document = page(title, body, nav, printer=kind == "print")
                url = f"https://docs.example/page/{title.split()[-1]}.html?variant={kind}&v={i}"
            out.write(json.dumps({"url": url, "html": document}) + "\n")
    planted["distinct pages"] = len(bases)
    return planted


def planted_found(clusters: Path) -> dict[str, int]:
    """Per kind, the planted near-duplicates reported in the same cluster as the page they copy."""
    cluster_of: dict[str, int] = {}
    with open(clusters, encoding="utf-8") as handle:
        for line in handle:
            cluster = json.loads(line)
            if cluster.get("type", "cluster") != "cluster":  # the summary line
                continue
            for member in cluster["members"]:
                cluster_of[member["url"]] = cluster["cluster_id"]
    found: dict[str, int] = {}
    for url, cid in cluster_of.items():
        match = re.fullmatch(r"(https://docs\.example/page/\d+\.html)\?variant=(\w+)&v=\d+", url)
        if match and cluster_of.get(match.group(1)) == cid:
            found[match.group(2)] = found.get(match.group(2), 0) + 1
    return found


def bare_parse_cpu(feed: Path, count: int) -> float:
    """CPU seconds per item to read it and parse its HTML with bare lxml (the baseline)."""
    from lxml import html as lxml_html

    start = time.process_time()
    with open(feed, "rb") as handle:
        for _ in range(count):
            lxml_html.document_fromstring(json.loads(handle.readline())["html"]).text_content()
    return (time.process_time() - start) / count


def unplanted_jaccard(clusters: Path, feed: Path, sample: int = 400, seed: int = 1) -> dict[str, int]:
    """What else was clustered: a seeded sample of the (canonical, member) pairs of the cluster
    report that no variant planted, by the word-3-shingle Jaccard of the main texts simhash-scrapy
    extracts (the quality set's bands: >= 0.9 duplicates, [0.5, 0.9) gray, < 0.5 different pages;
    its truth takes the text from the template's own container instead).  Only pairs with the
    canonical page are seen: two members of one cluster may be farther apart."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "quality"))
    import common  # noqa: PLC0415  (numpy; only this check needs it)

    from simhash_scrapy.core.extract.text import extract_text_bytes  # noqa: PLC0415

    pairs = []
    with open(clusters, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if record.get("type") != "cluster" or "?variant=" in record["canonical"]:
                continue
            pairs += [(record["canonical"], m["url"]) for m in record["members"]
                      if m["url"] != record["canonical"] and "?variant=" not in m["url"]]  # fmt: skip
    chosen = random.Random(seed).sample(pairs, min(sample, len(pairs)))
    wanted = {url for pair in chosen for url in pair}
    texts = {}
    with open(feed, encoding="utf-8") as handle:
        for line in handle:
            item = json.loads(line)
            if item["url"] in wanted:
                texts[item["url"]] = extract_text_bytes(item["html"].encode(), main_content=True).decode()
    bands = {"pairs": len(pairs), "sampled": len(chosen), ">= 0.9": 0, "0.5-0.9": 0, "< 0.5": 0}
    for a, b in chosen:
        j = common.jaccard(common.shingles(texts[a]), common.shingles(texts[b]))
        bands[">= 0.9" if j >= 0.9 else "0.5-0.9" if j >= 0.5 else "< 0.5"] += 1
    return bands


def near_duplicates(log: str) -> int:
    """The near-duplicate count of the command's summary line."""
    return int(re.search(r"([\d,]+) near-duplicates", log).group(1).replace(",", ""))  # type: ignore[union-attr]


def run(feed: Path, out: Path, extra: list[str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (the command and its worker processes) and the command's summary."""
    command = [sys.executable, "-m", "scrapy.cmdline", "simhash", "dedup", str(feed), "--field", "html", "-o", str(out), *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"dedup failed ({proc.returncode}): {proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu, proc.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=None, help="-j for the main run (default: one per CPU)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the feed here (default: a temp folder)")
    parser.add_argument("--compare-weighting", default=None, metavar="W",
                        help="also run dedup with SIMHASH_WEIGHTING=W and compare what else each clusters")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="simhash-dedup-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    feed = workdir / f"items-{args.pages}.jsonl"
    try:
        start = time.perf_counter()
        if not feed.exists():
            planted = build(feed, args.pages)
            (workdir / f"planted-{args.pages}.json").write_text(json.dumps(planted))
        planted = json.loads((workdir / f"planted-{args.pages}.json").read_text())
        size = feed.stat().st_size
        print(f"feed: {args.pages:,} pages, {size / 1e9:.2f} GB ({size / args.pages / 1e3:.1f} KB per item) "
              f"built in {time.perf_counter() - start:.0f} s; planted near-duplicates: {planted}")  # fmt: skip
        print(f"machine: {os.cpu_count()} CPUs, Python {platform.python_version()}")

        jobs = ["-j", str(args.jobs)] if args.jobs else []
        seconds, cpu, log = run(feed, workdir / "clusters.jsonl", jobs)
        print(log.strip())
        near = near_duplicates(log)
        found = planted_found(workdir / "clusters.jsonl")
        search = float(re.search(r"clustering ([\d.]+) s", log).group(1))  # type: ignore[union-attr]
        variants = sum(v for k, v in planted.items() if k != "distinct pages")

        # Baseline in the same run, in CPU time (which the load of a shared machine does not change much):
        # reading the same items and parsing their HTML with bare lxml (json.loads + lxml.html + text_content).
        sample_count = min(args.pages, 2_000)
        bare = bare_parse_cpu(feed, sample_count)
        per_page = cpu / args.pages
        workers = args.jobs or os.cpu_count() or 1
        result = {
            "pages": args.pages,
            "feed_bytes": size,
            "wall_seconds": seconds,
            "pages_per_second": args.pages / seconds,
            "cpu_seconds": cpu,
            "cpu_ms_per_page": 1000 * per_page,
            "bare_parse_cpu_ms_per_page": 1000 * bare,
            "ratio_to_bare_parse": per_page / bare,
            "all_pairs_seconds": search,
            "near_duplicates_found": near,
            "planted_variants": variants,
            "planted": planted,
            "planted_found": found,
            "workers": workers,
            "cpus": os.cpu_count(),
        }
        print(
            f"\n| pages | feed | wall time | pages/s | CPU time (all processes) | CPU per page | bare lxml parse per page "
            f"(baseline) | ratio | clustering | near-duplicates found (planted) |\n"
            f"|---|---|---|---|---|---|---|---|---|---|\n"
            f"| {args.pages:,} | {size / 1e9:.2f} GB | {seconds / 60:.1f} min ({seconds:.0f} s) | {args.pages / seconds:,.0f} | "
            f"{cpu / 60:.1f} min | {1000 * per_page:.2f} ms | {1000 * bare:.2f} ms | {per_page / bare:.2f}x | "
            f"{search:.2f} s | {near:,} ({variants:,}) |"
        )
        print(f"\nWith {workers} worker processes that get whole CPUs, the wall time is about CPU time / {workers} "
              f"= {cpu / workers:.0f} s ({cpu / workers / 60:.1f} min); the measured wall time is longer when other "
              "processes share the CPUs.")
        kinds = [k for k in planted if k != "distinct pages"]
        print("planted near-duplicates found in the cluster of the page they copy: " + ", ".join(
            f"{k} {found.get(k, 0):,}/{planted[k]:,}" for k in kinds
        ))  # fmt: skip
        runs = [("defaults", workdir / "clusters.jsonl", near, found)]
        if args.compare_weighting:
            other = workdir / f"clusters-{args.compare_weighting}.jsonl"
            _, _, other_log = run(feed, other, [*jobs, "-s", f"SIMHASH_WEIGHTING={args.compare_weighting}"])
            runs.append((f"SIMHASH_WEIGHTING={args.compare_weighting}", other, near_duplicates(other_log),
                         planted_found(other)))
        print("\nWhat else was clustered: member pairs no variant planted, a sample of 400 by the Jaccard of their"
              " main texts (>= 0.9 duplicates, 0.5-0.9 gray, < 0.5 different pages):\n")
        print("| run | near-duplicates found | planted variants found | unplanted member pairs | sample: >= 0.9 | 0.5-0.9 | < 0.5 |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        result["unplanted"] = {}
        for name, clusters, near_count, found_count in runs:
            bands = unplanted_jaccard(clusters, feed)
            result["unplanted"][name] = dict(bands, near_duplicates=near_count, planted_found=found_count)
            print(f"| {name} | {near_count:,} | {sum(found_count.values()):,} | {bands['pairs']:,} | "
                  f"{bands['>= 0.9']} | {bands['0.5-0.9']} | {bands['< 0.5']} |")
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "dedup_100k.json").write_text(json.dumps(result, indent=2))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
