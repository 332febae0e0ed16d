"""Copy a small, fixed subset of the built evaluation set into ``benchmarks/quality/sample/``.

    python benchmarks/quality/make_sample.py
    python benchmarks/quality/make_sample.py --wide    # from the wide set's tuning half -> sample_wide/

The sample (about 20 pages: one group of each constructed category, a pair of
releases, hard negatives and empty pages, with the truth restricted to them)
is committed for ``tests/unit/test_quality_small.py``.  Pages come from the Python
3.11 documentation (PSF License) and the LLVM 14/15 documentation (Apache 2.0
with LLVM exceptions), as shipped by Debian.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

OUT = common.HERE / "sample"
OUT_WIDE = common.HERE / "sample_wide"


def pick(evalset: common.EvalSet) -> list[int]:
    pages = evalset.pages
    by_id = evalset.by_id()
    size = {p.id: len(evalset.html(p)) for p in pages}
    chosen: list[int] = []

    def smallest_group(category: str) -> None:
        groups: dict[str, list[int]] = {}
        for p in pages:
            if p.group and p.group.startswith(category + ":"):
                groups.setdefault(p.group, []).append(p.id)
        best = min(sorted(groups.values()), key=lambda ids: sum(size[i] for i in ids))
        chosen.extend(best)

    for category in ("template", "tracking", "print", "edit"):
        smallest_group(category)
    words = {p.id: p.words for p in pages}
    release = sorted(
        (key for key, cat in evalset.positive.items() if cat == "release" and min(words[key[0]], words[key[1]]) >= 150),
        key=lambda k: size[k[0]] + size[k[1]],
    )
    chosen.extend(release[0])
    hn = sorted(evalset.hn_template, key=lambda i: size[i])[:4]
    chosen.extend(hn)
    title = min(evalset.hn_title, key=lambda k: size[k[0]] + size[k[1]])
    chosen.extend(title)
    hosts: dict[str, int] = {}
    for i in sorted(evalset.empty, key=lambda i: size[i]):
        hosts.setdefault(by_id[i].host, i)  # the smallest empty page of each host
    chosen.extend(sorted(hosts.values()))
    return list(dict.fromkeys(chosen))


def pick_wide(evalset: common.EvalSet) -> list[int]:
    """The smallest group of each kind, a container-less DocBook group, a release pair, hard negatives."""
    pages = evalset.pages
    size = {p.id: len(evalset.html(p)) for p in pages}
    groups: dict[str, list[int]] = {}
    for p in pages:
        if p.group and not p.group.startswith("hn_"):
            groups.setdefault(p.group, []).append(p.id)
    chosen: list[int] = []
    for kind in ("template", "tracking", "print_links", "print_plain", "edit", "short"):
        # the soft-404 shells of the Python docs' chrome (the groff chrome keeps its title and TOC)
        prefix = "short:soft404:sphinx-python:" if kind == "short" else kind + ":"
        candidates = [ids for g, ids in groups.items() if g.startswith(prefix)]
        chosen.extend(min(sorted(candidates), key=lambda ids: sum(size[i] for i in ids)))
    docbook = [ids for g, ids in groups.items() if all(evalset.by_id()[i].family == "docbook" for i in ids)
               and g.startswith("print_links:")]  # fmt: skip
    chosen.extend(min(sorted(docbook), key=lambda ids: sum(size[i] for i in ids)))
    words = {p.id: p.words for p in pages}
    release = sorted(
        (key for key, cat in evalset.positive.items() if cat == "release" and min(words[key[0]], words[key[1]]) >= 150),
        key=lambda k: size[k[0]] + size[k[1]],
    )
    chosen.extend(release[0])
    chosen.extend(sorted(evalset.hn_template, key=lambda i: size[i])[:4])
    chosen.extend(min(evalset.hn_title, key=lambda k: size[k[0]] + size[k[1]]))
    chosen.extend(sorted(evalset.empty, key=lambda i: size[i])[:2])
    return list(dict.fromkeys(chosen))


def main() -> None:
    wide = "--wide" in sys.argv[1:]
    out = OUT_WIDE if wide else OUT
    evalset = common.load_set(common.DEFAULT_DATA / "wide", "tune") if wide else common.load_set()
    ids = pick_wide(evalset) if wide else pick(evalset)
    keep = set(ids)
    renumber = {old: new for new, old in enumerate(ids)}
    if out.exists():
        shutil.rmtree(out)
    (out / "pages").mkdir(parents=True)
    by_id = evalset.by_id()
    with open(out / "manifest.jsonl", "w") as fh:
        for old in ids:
            page = by_id[old]
            new = renumber[old]
            file = f"pages/{new:05d}.html"
            shutil.copyfile(evalset.root / page.file, out / file)
            record = dict(page.__dict__, id=new, file=file, order=new)
            fh.write(json.dumps(record) + "\n")
    truth = json.loads((evalset.root / "truth.json").read_text())
    both = lambda a, b: a in keep and b in keep  # noqa: E731
    sample_truth = dict(
        positive=[[renumber[a], renumber[b], c] for a, b, c in truth["positive"] if both(a, b)],
        gray=[[renumber[a], renumber[b], j] for a, b, j in truth["gray"] if both(a, b)],
        hn_template=[renumber[i] for i in truth["hn_template"] if i in keep],
        hn_title=[[renumber[a], renumber[b]] for a, b in truth["hn_title"] if both(a, b)],
        empty=[renumber[i] for i in truth["empty"] if i in keep],
        info=dict(truth["info"], pages=len(ids), sample_of=len(evalset.pages)),
    )
    (out / "truth.json").write_text(json.dumps(sample_truth, indent=0))
    total = sum((out / f"pages/{renumber[i]:05d}.html").stat().st_size for i in ids)
    print(f"{len(ids)} pages ({total // 1024} KB), {len(sample_truth['positive'])} duplicate pairs -> {out}")


if __name__ == "__main__":
    main()
