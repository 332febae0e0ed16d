"""The store's cost of saving what clustering steps 5-7 learn (store format 6), beside another tree's.

    python benchmarks/detector_store.py                               # 20,000 pages, against /work/main
    python benchmarks/detector_store.py --pages 50000 --other-python /path/to/venv/bin/python

What it does, in one run, for this tree and for the tree of ``--other-python`` (a Python whose
``simhash_scrapy`` is another revision, e.g. main's before format 6), each in a subprocess of its own:

1. Checks ``--pages`` pages through ``PersistentBackend`` (``SIMHASH_DIR``), as a crawl gives them:
   30% within 0..5 bits of an earlier page, each with text lines (a host's box of 4 lines and its own
   2), a second simhash and a sentence sketch of 4..32 hashes; a flush every 200 pages (the default
   one-second interval at 200 pages/s), then the close.  On a tree without ``PageRecord.source`` the
   template-free fingerprint is computed by ``HostTemplates`` beside the backend, as that tree's crawl
   state does, so both trees do the same work but the saving.
2. Opens the store again in a fresh process (what a resumed crawl does) and closes it.

Prints CPU seconds (``time.process_time``) of the checks (with their flushes and the close), of the
open, the store's size in bytes per page, and the ratios this tree / the other.  Timings on a busy
machine are noisy: compare the CPU ratios of one run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = textwrap.dedent(
    r'''
    import dataclasses, json, random, sys, time
    from pathlib import Path
    from simhash_scrapy.backends.base import PageRecord
    from simhash_scrapy.backends.persistent import PersistentBackend
    from simhash_scrapy.config import SimhashConfig
    from simhash_scrapy.core.cluster.containment import Sketch
    from simhash_scrapy.core.cluster.sitetemplate import HostTemplates, host_of

    folder, pages, phase = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    has_source = "source" in {f.name for f in dataclasses.fields(PageRecord)}

    def drive(coro):
        try:
            coro.send(None)
        except StopIteration as stop:
            return stop.value
        raise RuntimeError("waited")

    def records():
        rng = random.Random(7)
        fps = []
        for i in range(pages):
            if fps and rng.random() < 0.3:
                fp = rng.choice(fps)
                for bit in rng.sample(range(64), rng.randint(0, 5)):
                    fp ^= 1 << bit
            else:
                fp = rng.getrandbits(64)
            fps.append(fp)
            box = "\n".join(f"Most read today {n}: story {rng.randrange(40)} of section {i % 7}" for n in range(4))
            text = f"{box}\nArticle {i} begins here with its own words and more\nArticle {i} ends here, words again"
            hashes = sorted({rng.getrandbits(64) for _ in range(rng.randrange(4, 33))})
            yield (f"https://site{i % 20}.example/a/{i}", fp, text, rng.getrandbits(64), Sketch(tuple(hashes), len(hashes)))

    config = SimhashConfig(store_dir=str(folder), flush_interval=3600.0)
    backend = PersistentBackend(config)
    started = time.process_time()
    drive(backend.open("spider"))
    opened = time.process_time() - started
    if phase == "write":
        learner = None if has_source else HostTemplates(config.features, config.min_tokens)
        started = time.process_time()
        for n, (url, fp, text, second, sketch) in enumerate(records(), start=1):
            extra = {"source": text} if has_source else {"also": learner.check(host_of(url), fp, text)}
            backend.check_now(PageRecord(url, fp, "spider", identity=url, second=second, sketch=sketch, **extra))
            if n % 200 == 0:
                backend._flush()
        drive(backend.close())
        print(json.dumps({"checks_cpu": time.process_time() - started}))
    else:
        drive(backend.close())
        size = sum(p.stat().st_size for p in folder.iterdir() if p.name.startswith("spider.store"))
        print(json.dumps({"open_cpu": opened, "bytes_per_page": size / pages}))
    '''
)


def run(python: str, pages: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="detector-store-") as tmp:
        out: dict[str, float] = {}
        for phase in ("write", "open"):
            proc = subprocess.run([python, "-c", _CHILD, tmp, str(pages), phase], capture_output=True, text=True,
                                  cwd=tmp, check=False)  # fmt: skip
            if proc.returncode != 0:
                raise SystemExit(f"{python} {phase} failed:\n{proc.stderr[-3000:]}")
            out.update(json.loads(proc.stdout.strip().splitlines()[-1]))
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--other-python", default="/work/venv-main/bin/python",
                        help="a Python whose simhash_scrapy is the revision to compare with")
    parser.add_argument("--reps", type=int, default=1)
    args = parser.parse_args()
    rows = []
    for _ in range(args.reps):
        rows.append((run(sys.executable, args.pages), run(args.other_python, args.pages)))
    for this, other in rows:
        print(f"{args.pages:,} pages           this tree   other   ratio")
        for key, label in (("checks_cpu", "checks CPU s"), ("open_cpu", "open CPU s"), ("bytes_per_page", "bytes a page")):
            print(f"  {label:<16} {this[key]:>9.3f} {other[key]:>7.3f}   {this[key] / other[key]:.2f}x")


if __name__ == "__main__":
    main()
