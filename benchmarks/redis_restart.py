"""A real crawl whose Redis is killed and restarted: what the log says, how many pages went unchecked.

    python benchmarks/redis_restart.py                 # 80 pages, Redis (AOF, appendfsync always) down for 2 s
    python benchmarks/redis_restart.py --outage 5 --heartbeat 0.5

Serves the test site of ``tests/`` (``/a<i>`` articles, ``/b<i>`` copies) on
loopback, crawls it with ``tests/crawl_project`` and ``SIMHASH_BACKEND =
"redis"``, kills redis-server (SIGKILL) after 8 pages reached the spider,
starts it again ``--outage`` seconds after the first Redis error, then prints
the backend's log lines, the stats, and how many pages recorded before the
kill are still in Redis.  The same steps, with assertions, are
``tests/integration/test_redis_backend.py::test_redis_killed_and_restarted_during_a_crawl``.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from conftest import Site  # noqa: E402
from redis_server import RedisServer  # noqa: E402
from test_persistence import PROJECT, crawl_command, crawl_env, make_site, parse_stats, reached  # noqa: E402

from simhash_scrapy.backends.redis import read_members  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=40, help="articles (the site has twice as many pages)")
    parser.add_argument("--outage", type=float, default=2.0, help="seconds between the first error and the restart")
    parser.add_argument("--heartbeat", type=float, default=1.0, help="SIMHASH_REDIS_HEARTBEAT")
    args = parser.parse_args()
    site = Site(make_site(args.pages))
    server = RedisServer(tempfile.mkdtemp(prefix="simhash-restart-"), appendonly=True).start()
    paths = [f"/a{i}" for i in range(args.pages)] + [f"/b{i}" for i in range(args.pages)]
    crawl = crawl_command(
        "-a", f"base={site.base}", "-a", "paths=" + ",".join(paths), "-s", "SIMHASH_BACKEND=redis",
        "-s", f"SIMHASH_REDIS_URL={server.url}", "-s", "SIMHASH_REDIS_PERSIST=True", "-s", "DOWNLOAD_DELAY=0.1",
        "-s", f"SIMHASH_REDIS_HEARTBEAT={args.heartbeat}",
    )
    proc = subprocess.Popen(crawl, cwd=PROJECT, env=crawl_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines: list[str] = []
    killed_after: list[str] = []
    killed = restarted = 0.0
    try:
        for line in proc.stderr:
            lines.append(line)
            if not killed_after and "Reached the spider" in line and len(reached("".join(lines))) == 8:
                killed_after = reached("".join(lines))
                server.stop()
                killed = time.monotonic()
            if killed_after and "Redis error" in line:
                time.sleep(args.outage)
                server.start()
                restarted = time.monotonic()
                break
        log = "".join(lines) + proc.communicate(timeout=600)[1]
        members = asyncio.run(read_members({"REDIS_URL": server.url}, "pages"))
    finally:
        if proc.poll() is None:
            proc.kill()
        server.stop()
        site.close()
    print(f"Redis down from the kill until it answered again: {restarted - killed:.2f} s")
    for line in log.splitlines():
        if "simhash_scrapy.backends.redis" in line:
            print(line)
    stats = parse_stats(log)
    for name in sorted(stats):
        if name.startswith("simhash/") and not name.startswith("simhash/distance"):
            print(f"{name}: {stats[name]}")
    recorded = {m.url for m in members}
    print(f"pages recorded before the kill: {len(killed_after)}, still in Redis after the restart: "
          f"{len(recorded & set(killed_after))}; pages in Redis: {len(recorded)} "
          f"(= fingerprinted {stats['simhash/fingerprinted']} - unchecked {stats.get('simhash/unchecked', 0)})")


if __name__ == "__main__":
    main()
