"""The Redis backend against a real redis-server (Debian's ``redis-server``).

Without redis-server these tests skip (saying how to install it); with
``CI=true`` they fail instead.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from conftest import RecordingSpider, run_crawl
from redis_server import RedisCluster, RedisServer, free_port
from scrapy.utils.test import get_crawler
from twisted.internet.defer import Deferred

from simhash_scrapy.backends import UNCHECKED, Outcome, BackendError, PageRecord, Verdict, create_backend
from simhash_scrapy.backends.memory import MemoryBackend
from simhash_scrapy.backends.redis import RedisBackend, RedisSettings, bucket_fields, layout_string, read_members
from simhash_scrapy.config import SimhashConfig
from simhash_scrapy.core.fingerprint import hamming_distance
from simhash_scrapy.core.report import build_clusters

from test_persistence import (  # noqa: E402  (tests/ is on sys.path)
    PROJECT,
    crawl_command,
    crawl_env,
    flip,
    make_site,
    page_sequence,
    parse_stats,
    reached,
    read_report,
)

pytest_plugins = ["conftest_redis"]


def async_test(func: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., Deferred]:
    """Run an asyncio test coroutine on the reactor's event loop (pytest-twisted waits for the Deferred)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Deferred:
        return Deferred.fromFuture(asyncio.ensure_future(func(*args, **kwargs)))

    return wrapper


class Stats:
    def __init__(self) -> None:
        self.values: Counter[str] = Counter()

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self.values[key] += count


def make_backend(server: RedisServer | None, config: SimhashConfig | None = None, **settings: Any) -> RedisBackend:
    values: dict[str, Any] = {"SIMHASH_REDIS_URL": server.url} if server is not None else {}
    values.update(settings)
    return RedisBackend(config or SimhashConfig(), RedisSettings(values), Stats())


# ------------------------------------------------------------- no server needed
def test_missing_redis_server_skips_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    import redis_server as module

    monkeypatch.setattr(module.shutil, "which", lambda name: None)
    monkeypatch.setattr(module.os.path, "exists", lambda path: False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install redis-server"):
        module.require_redis_server()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="apt-get install redis-server"):
        module.require_redis_server()


def test_near_fingerprints_share_a_bucket_field() -> None:
    rng = random.Random(3)
    for k, blocks in [(3, 4), (3, 6), (4, 5), (0, 1), (2, 8)]:
        for _ in range(300):
            fp = rng.getrandbits(64)
            other = flip(fp, rng.randint(0, k), rng)
            assert set(bucket_fields(fp, k, blocks)) & set(bucket_fields(other, k, blocks))


def test_settings_follow_scrapy_redis() -> None:
    s = RedisSettings({"REDIS_HOST": "redis.internal", "REDIS_PORT": "6380"})
    assert (s.url, s.host, s.port) == (None, "redis.internal", 6380)
    assert not s.persist and not s.flush_on_start and s.fail_open and s.ttl == 0
    assert s.key("myspider") == "myspider:simhash"
    s = RedisSettings({"REDIS_URL": "redis://a:1/2", "REDIS_HOST": "ignored"})
    assert s.url == "redis://a:1/2"
    s = RedisSettings({"SIMHASH_REDIS_URL": "redis://b:2/0", "REDIS_URL": "redis://a:1/2"})
    assert s.url == "redis://b:2/0"
    s = RedisSettings({"SCHEDULER_PERSIST": True, "SCHEDULER_FLUSH_ON_START": "1"})
    assert s.persist and s.flush_on_start
    s = RedisSettings({"SCHEDULER_PERSIST": True, "SIMHASH_REDIS_PERSIST": False})
    assert not s.persist
    assert RedisSettings({"SIMHASH_REDIS_KEY": "{%(spider)s}:dedup"}).key("x") == "{x}:dedup"
    assert RedisSettings({"SIMHASH_REDIS_URL": "redis://u:secret@h:1/0"}).describe() == "redis://u:***@h:1/0"
    for name, value in [
        ("SIMHASH_REDIS_TTL", "-1"), ("SIMHASH_REDIS_TTL", "soon"), ("SIMHASH_REDIS_FAIL_OPEN", "maybe"),
        ("REDIS_PORT", "http"), ("REDIS_PARAMS", "[1]"), ("SIMHASH_REDIS_KEY", "%(nope)s"),
    ]:
        with pytest.raises(ValueError, match=name):
            RedisSettings({name: value})


def test_scrapy_redis_params_do_not_warn() -> None:
    # scrapy-redis' defaults include retry_on_timeout, which redis-py 6+ deprecates (a warning = failure here).
    params = {"socket_timeout": 30, "socket_connect_timeout": 30, "retry_on_timeout": True, "encoding": "utf-8"}
    client = RedisSettings({"REDIS_PARAMS": params, "REDIS_URL": "redis://127.0.0.1:1"}).client()
    assert client.get_connection_kwargs()["socket_timeout"] == 30


def test_cluster_needs_a_hash_tag() -> None:
    backend = make_backend(None, SIMHASH_REDIS_CLUSTER=True)
    with pytest.raises(BackendError, match="hash tag"):
        backend._use_key("myspider")
    backend = make_backend(None, SIMHASH_REDIS_CLUSTER=True, SIMHASH_REDIS_KEY="{%(spider)s}:simhash")
    backend._use_key("myspider")
    assert backend._keys[0] == "{myspider}:simhash:meta"


def test_backend_selection() -> None:
    crawler = get_crawler(settings_dict={"SIMHASH_REDIS_URL": "redis://127.0.0.1:1"})
    assert type(create_backend(crawler, SimhashConfig(backend="redis"))) is RedisBackend


@async_test
async def test_unreachable_redis_stops_at_start() -> None:
    backend = make_backend(None, SIMHASH_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(BackendError, match=r"Cannot reach Redis at redis://127\.0\.0\.1:\d+/0 ") as info:
        await backend.open("spider")
    assert "start Redis, or fix SIMHASH_REDIS_URL / REDIS_URL" in str(info.value)


# ------------------------------------------------------------------ real Redis
@pytest.mark.parametrize(("k", "blocks", "seed"), [(3, None, 1), (3, None, 2), (3, 6, 3), (4, 5, 4), (0, None, 5), (6, 8, 6)])
@async_test
async def test_same_decisions_as_the_in_process_backend(redis_server: RedisServer, k: int, blocks: int | None, seed: int) -> None:
    config = SimhashConfig(max_distance=k, blocks=blocks)
    pages = page_sequence(seed, 1200, scopes=("a.example", "b.example", "ü.example"))
    memory = MemoryBackend(config)
    redis = make_backend(redis_server, config)
    await redis.open("spider")
    for record, index in pages:
        assert await redis.check(record, index) == memory.check_now(record, index), record
    assert await redis.members() == await memory.members()
    assert await redis.index_size() == await memory.index_size()
    assert redis.stats.values["simhash/backend_errors"] == 0
    await redis.close()


@async_test
async def test_concurrent_near_duplicates_make_exactly_one_canonical(redis_server: RedisServer) -> None:
    rng = random.Random(11)
    workers = [make_backend(redis_server) for _ in range(3)]
    for worker in workers:
        await worker.open("spider")
    bases = [rng.getrandbits(64) for _ in range(20)]
    records = []
    for c, base in enumerate(bases):
        for v in range(15):  # every variant within 1 of its base: all within k of each other
            records.append(PageRecord(f"https://e/{c}/{v}", flip(base, rng.randint(0, 1), rng), "spider"))
    rng.shuffle(records)
    verdicts = await asyncio.gather(*(workers[i % 3].check(r) for i, r in enumerate(records)))
    canonical_urls = [r.url for r, v in zip(records, verdicts) if v.canonical_url is None]
    assert sorted(u.split("/")[3] for u in canonical_urls) == sorted(str(c) for c in range(20))
    for record, verdict in zip(records, verdicts):
        if verdict.canonical_url is not None:
            assert verdict.canonical_url.split("/")[3] == record.url.split("/")[3]
    assert await workers[0].index_size() == 20
    members = await workers[1].members()
    assert len(members) == 300
    assert sum(m.indexed for m in members) == 20
    for worker in workers:
        await worker.close()


@pytest_twisted.ensureDeferred
async def test_usable_from_a_twisted_driven_coroutine(redis_server: RedisServer) -> None:
    # Deferred.fromCoroutine cannot await asyncio futures: the backend bridges them.
    backend = make_backend(redis_server, SCHEDULER_PERSIST=True)
    await backend.open("s")
    assert (await backend.check(PageRecord("https://e/1", 1, "s"))).canonical_url is None
    assert await backend.check(PageRecord("https://e/2", 3, "s")) == Verdict(Outcome.NEAR_DUPLICATE, "https://e/1", 1, 1, "https://e/1")
    assert len(await backend.members()) == 2 and await backend.index_size() == 1
    await backend.close()


@async_test
async def test_any_text_round_trips(redis_server: RedisServer) -> None:
    backend = make_backend(redis_server)
    await backend.open("s")
    record = PageRecord("https://e/ü?q=\u2603", 7, "s", referer="https://e/\ud800", depth=0,
                        text="zero-width \u200b, lone surrogate \udcff, emoji \U0001f600, comma, quote \"")
    await backend.check(record)
    (member,) = await backend.members()
    assert (member.url, member.referer, member.text, member.depth) == (record.url, record.referer, record.text, 0)
    await backend.close()


@async_test
async def test_key_layout_is_as_documented(redis_server: RedisServer) -> None:
    config = SimhashConfig(max_distance=3, blocks=4)
    backend = make_backend(redis_server, config)
    await backend.open("myspider")
    await backend.check(PageRecord("https://e/1", 0x0123456789ABCDEF, "myspider", referer="https://e/", depth=1))
    v = await backend.check(PageRecord("https://e/2", 0x0123456789ABCDEE, "myspider"))
    assert v == Verdict(Outcome.NEAR_DUPLICATE, "https://e/1", 1, 0x0123456789ABCDEF, "https://e/1")
    client = redis_server.client()
    keys = sorted(k.decode() for k in client.keys("*"))
    assert keys == [
        "myspider:simhash:canon", "myspider:simhash:index:myspider", "myspider:simhash:meta",
        "myspider:simhash:pages", "myspider:simhash:scopes", "myspider:simhash:workers",
    ]
    meta = client.hgetall("myspider:simhash:meta")
    assert meta[b"layout"].decode() == layout_string(config)
    assert meta[b"canonicals"] == b"1"
    pages = client.lrange("myspider:simhash:pages", 0, -1)
    assert pages[0].decode() == '-1,-1,1,0123456789abcdef,["https://e/1", "myspider", "https://e/", 1, null]'
    assert pages[1].decode().startswith("0,1,0,0123456789abcdee,")
    assert client.hgetall("myspider:simhash:canon") == {b"0": b"https://e/1"}
    index = client.hgetall("myspider:simhash:index:myspider")
    assert sorted(index) == sorted(bucket_fields(0x0123456789ABCDEF, 3, 4))
    assert set(index.values()) == {bytes.fromhex("0123456789abcdef") + (0).to_bytes(4, "big")}
    client.close()
    await backend.close()


@async_test
async def test_persist_and_flush_like_scrapy_redis(redis_server: RedisServer) -> None:
    client = redis_server.client()
    # Default (no SCHEDULER_PERSIST): the state is deleted when the crawl ends.
    backend = make_backend(redis_server)
    await backend.open("s")
    await backend.check(PageRecord("https://e/1", 1, "s"))
    await backend.close()
    assert client.keys("*") == []
    # SCHEDULER_PERSIST = True keeps it; the next crawl starts with it (simhash/initial).
    for _ in range(2):
        backend = make_backend(redis_server, SCHEDULER_PERSIST=True)
        await backend.open("s")
        await backend.check(PageRecord(f"https://e/{backend.initial}", 1 << backend.initial * 8, "s"))
        await backend.close()
    assert backend.initial == 1
    assert client.llen("s:simhash:pages") == 2
    # Flush on start deletes it, unless another worker is running.
    other = make_backend(redis_server, SCHEDULER_PERSIST=True)
    await other.open("s")
    flusher = make_backend(redis_server, SCHEDULER_PERSIST=True, SCHEDULER_FLUSH_ON_START=True)
    await flusher.open("s")
    assert flusher.initial == 2 and client.llen("s:simhash:pages") == 2
    await flusher.close()
    await other.close()
    flusher = make_backend(redis_server, SIMHASH_REDIS_PERSIST=True, SIMHASH_REDIS_FLUSH_ON_START=True)
    await flusher.open("s")
    assert flusher.initial == 0 and client.llen("s:simhash:pages") == 0
    await flusher.close()
    # Several workers without persistence: the last one to close deletes the state.
    a, b = make_backend(redis_server), make_backend(redis_server)
    await a.open("t")
    await b.open("t")
    await a.check(PageRecord("https://e/1", 1, "t"))
    await a.close()
    assert client.llen("t:simhash:pages") == 1
    await b.close()
    assert client.keys("t:*") == []
    client.close()


@async_test
async def test_ttl(redis_server: RedisServer) -> None:
    backend = make_backend(redis_server, SIMHASH_REDIS_TTL=3600, SIMHASH_REDIS_PERSIST=True)
    await backend.open("s")
    await backend.check(PageRecord("https://e/1", 1, "s"))
    client = redis_server.client()
    for key in client.keys("s:simhash:*"):
        assert 3_500_000 < client.pttl(key) <= 3_600_000, key
    await backend.close()
    client.close()


@async_test
async def test_other_settings_are_refused(redis_server: RedisServer) -> None:
    base = {"max_distance": 3, "blocks": None, "weighting": "tf", "word_ngram": 1, "text_mode": "main"}
    first = make_backend(redis_server, SimhashConfig(**base), SCHEDULER_PERSIST=True)
    await first.open("s")
    await first.check(PageRecord("https://e/1", 1, "s"))
    for change, setting in [
        ({"max_distance": 4}, "SIMHASH_MAX_DISTANCE"),
        ({"blocks": 6}, "SIMHASH_BLOCKS"),
        ({"word_ngram": 2}, "SIMHASH_WORD_NGRAM"),
        ({"text_mode": "visible"}, "SIMHASH_TEXT_MODE"),
    ]:
        with pytest.raises(BackendError, match=setting):
            await make_backend(redis_server, SimhashConfig(**{**base, **change})).open("s")
    await first.close()


@async_test
async def test_any_worker_can_export_the_clusters(redis_server: RedisServer) -> None:
    writer = make_backend(redis_server, SCHEDULER_PERSIST=True)
    await writer.open("s")
    for record, index in page_sequence(4, 100):
        await writer.check(record, index)
    expected = await writer.members()
    await writer.close()
    reader = make_backend(redis_server)
    await reader.attach("s")
    assert await reader.members() == expected
    assert build_clusters(await reader.members())
    await reader.close()
    assert await read_members({"REDIS_URL": redis_server.url}, "s") == expected
    assert redis_server.client().llen("s:simhash:pages") == 100  # attach() never flushes


@pytest.mark.parametrize("fail_open", [True, False])
@async_test
async def test_redis_errors_mid_crawl(tmp_path: Path, fail_open: bool) -> None:
    server = RedisServer(tmp_path / "redis", appendonly=True).start()
    try:
        backend = make_backend(server, SIMHASH_REDIS_FAIL_OPEN=fail_open, SCHEDULER_PERSIST=True)
        await backend.open("s")
        assert (await backend.check(PageRecord("https://e/1", 1, "s"))).canonical_url is None
        server.stop()  # SIGKILL
        if fail_open:
            assert await backend.check(PageRecord("https://e/2", 1, "s")) == UNCHECKED
        else:
            with pytest.raises(BackendError, match="fail-closed"):
                await backend.check(PageRecord("https://e/2", 1, "s"))
        assert backend.stats.values["simhash/backend_errors"] == 1
        server.start()
        verdict = None
        for attempt in range(100):  # the backend waits a little before trying a dead server again
            try:
                verdict = await backend.check(PageRecord("https://e/3", 1, "s"))
            except BackendError:
                verdict = None
            if backend.stats.values["simhash/backend_errors"] == attempt + 1:
                break
            await asyncio.sleep(0.05)
        # Written before the kill, kept by the append-only file: page 1 is still the canonical page.
        assert verdict == Verdict(Outcome.NEAR_DUPLICATE, "https://e/1", 0, 1, "https://e/1")
        await backend.close()
    finally:
        server.stop()


@async_test
async def test_redis_cluster_with_a_hash_tag(redis_cluster: RedisCluster) -> None:
    config = SimhashConfig()
    settings = {"SIMHASH_REDIS_CLUSTER": True, "SIMHASH_REDIS_KEY": "{%(spider)s}:simhash"}
    backend = make_backend(None, config, SIMHASH_REDIS_URL=redis_cluster.url, **settings)
    await backend.open("myspider")
    memory = MemoryBackend(config)
    for record, index in page_sequence(8, 400, scopes=("a.example", "b.example")):
        assert await backend.check(record, index) == memory.check_now(record, index)
    assert await backend.members() == await memory.members()
    client = redis_cluster.client()
    assert client.llen("{myspider}:simhash:pages") == 400
    await backend.close()  # not persistent: every key of the spider is deleted, index keys included
    for key in ("pages", "meta", "canon", "scopes", "index:a.example", "index:b.example", "workers"):
        assert client.exists(f"{{myspider}}:simhash:{key}") == 0
    client.close()


# -------------------------------------------------------------- real crawls
def redis_pages(server: RedisServer, key: str = "pages:simhash") -> list[dict[str, Any]]:
    client = server.client()
    try:
        rows = client.lrange(f"{key}:pages", 0, -1)
    finally:
        client.close()
    out = []
    for raw in rows:
        canon, distance, indexed, fp, payload = raw.decode().split(",", 4)
        url = json.loads(payload)[0]
        out.append({"url": url, "canonical": int(canon), "distance": int(distance), "indexed": indexed == "1"})
    return out


class KillRedisMiddleware:
    """Kills the Redis server just before the ``kill_after``-th response reaches SimhashMiddleware.

    Its ``process_response`` runs before SimhashMiddleware's (priority 545 > 540:
    responses go through downloader middlewares in descending priority).
    """

    def __init__(self, crawler: Any) -> None:
        self.pid: int = crawler.settings.getint("TEST_REDIS_PID")
        self.kill_after: int = crawler.settings.getint("TEST_KILL_AFTER")
        self.responses = 0

    @classmethod
    def from_crawler(cls, crawler: Any) -> KillRedisMiddleware:
        return cls(crawler)

    def process_response(self, request: Any, response: Any, spider: Any = None) -> Any:
        self.responses += 1
        if self.responses == self.kill_after:
            os.kill(self.pid, signal.SIGKILL)
            while True:  # wait until it is gone (it is our child: reap it)
                try:
                    if os.waitpid(self.pid, os.WNOHANG)[0]:
                        break
                except ChildProcessError:
                    break
                time.sleep(0.01)
        return response


@pytest.mark.parametrize("fail_open", [True, False])
@pytest_twisted.ensureDeferred
async def test_in_process_crawl_when_redis_dies(serve: Any, tmp_path: Path, fail_open: bool) -> None:
    server = RedisServer(tmp_path / "redis").start()
    count = 10
    site = serve(make_site(count))
    urls = [site.url(f"/a{i}") for i in range(count)] + [site.url(f"/b{i}") for i in range(count)]
    try:
        crawler = await run_crawl(
            RecordingSpider,
            {"ADDONS": {"simhash_scrapy.Addon": 0}, "SIMHASH_BACKEND": "redis", "SIMHASH_REDIS_URL": server.url,
             "SIMHASH_REDIS_FAIL_OPEN": fail_open, "TEST_REDIS_PID": server.process.pid, "TEST_KILL_AFTER": 5,
             "DOWNLOADER_MIDDLEWARES": {f"{__name__}.KillRedisMiddleware": 545}},
            start_urls=urls,
        )
    finally:
        server.stop()
    stats = crawler.stats.get_stats()
    assert stats["simhash/backend_errors"] >= 1
    if fail_open:
        # Fail-open: the crawl goes on; every page after the kill passes unchecked.
        assert stats["finish_reason"] == "finished"
        assert len(crawler.spider.seen) == 2 * count
        assert stats["simhash/backend_errors"] == 2 * count - 4
        assert stats["simhash/fingerprinted"] == 2 * count
        # Pages nobody checked are counted as such, never as unique.
        assert stats["simhash/unchecked"] == 2 * count - 4
        assert stats.get("simhash/unique", 0) + stats.get("simhash/near_duplicates", 0) == 4
    else:
        # Fail-closed: the crawl stops instead of letting unchecked pages through.
        assert stats["finish_reason"] == "simhash_backend_error"
        assert 1 <= stats["simhash/backend_errors"] <= 2
        assert stats["simhash/fingerprinted"] <= 6
        assert stats["simhash/skipped/backend_error"] == stats["simhash/backend_errors"]
        assert "simhash/unchecked" not in stats
        # Only pages that were checked reached the spider.
        assert len(crawler.spider.seen) <= stats["simhash/fingerprinted"]


def test_two_workers_share_one_index(serve: Any, redis_server: RedisServer, tmp_path: Path) -> None:
    count = 12
    site = serve(make_site(2 * count))
    # Every original /a<i> is in one half, its edited copy /b<i> in the other.
    halves = [
        [f"/a{i}" for i in range(count)] + [f"/b{i}" for i in range(count, 2 * count)],
        [f"/a{i}" for i in range(count, 2 * count)] + [f"/b{i}" for i in range(count)],
    ]
    procs = []
    for n, paths in enumerate(halves):
        args = [
            "-a", f"base={site.base}", "-a", "paths=" + ",".join(paths),
            "-s", "SIMHASH_BACKEND=redis", "-s", f"REDIS_URL={redis_server.url}",
            "-s", "SCHEDULER_PERSIST=True", "-s", "DOWNLOAD_DELAY=0.1",
            "-s", f"SIMHASH_REPORT_URI={tmp_path}/report-{n}.jsonl",
        ]
        procs.append(subprocess.Popen(crawl_command(*args), cwd=PROJECT, env=crawl_env(),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    logs = [p.communicate(timeout=300)[1] for p in procs]
    for proc, log in zip(procs, logs):
        assert proc.returncode == 0, log[-3000:]
    stats = [parse_stats(log) for log in logs]
    for s in stats:
        assert s["finish_reason"] == "finished" and "simhash/backend_errors" not in s
        assert s["simhash/fingerprinted"] == 2 * count
    # Every duplicate crosses the halves: together the workers find all of them, once.
    assert sum(s.get("simhash/near_duplicates", 0) for s in stats) == 2 * count
    assert sum(s.get("simhash/unique", 0) for s in stats) == 2 * count
    reached_urls = reached(logs[0]) + reached(logs[1])
    assert len(reached_urls) == 2 * count
    # Exactly one page of each pair reached a spider: the one checked first.
    assert sorted(re.sub(r".*/[ab]", "", u) for u in reached_urls) == sorted(str(i) for i in range(2 * count))
    # The shared record in Redis, and the report of the worker that closed last, have all pairs.
    pages = redis_pages(redis_server)
    assert len(pages) == 4 * count
    pairs = {frozenset((p["url"], pages[p["canonical"]]["url"])) for p in pages if p["canonical"] >= 0}
    assert pairs == {frozenset((site.url(f"/a{i}"), site.url(f"/b{i}"))) for i in range(2 * count)}
    reports = [read_report(tmp_path / f"report-{n}.jsonl") for n in range(2)]
    full = max(reports, key=len)
    assert len(full) == 2 * count
    assert {frozenset(m["url"] for m in c["members"]) for c in full} == pairs
    assert all(c["size"] == 2 and c["members"][0]["url"] == c["canonical"] for c in full)


def test_redis_killed_and_restarted_during_a_crawl(serve: Any, persistent_redis_server: RedisServer, tmp_path: Path) -> None:
    server = persistent_redis_server
    count = 20
    site = serve(make_site(count))
    paths = [f"/a{i}" for i in range(count)] + [f"/b{i}" for i in range(count)]
    args = [
        "-a", f"base={site.base}", "-a", "paths=" + ",".join(paths),
        "-s", "SIMHASH_BACKEND=redis", "-s", f"SIMHASH_REDIS_URL={server.url}",
        "-s", "SIMHASH_REDIS_PERSIST=True", "-s", "DOWNLOAD_DELAY=0.2",
    ]
    proc = subprocess.Popen(crawl_command(*args), cwd=PROJECT, env=crawl_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    assert proc.stderr is not None
    try:
        killed_after: list[str] = []
        for line in proc.stderr:
            lines.append(line)
            if "Reached the spider" in line and len(reached("".join(lines))) == 8:
                killed_after = reached("".join(lines))
                server.stop()  # SIGKILL, mid-crawl
            if killed_after and "Redis error" in line:
                time.sleep(0.6)  # a few pages go through unchecked
                server.start()
                break
        rest = proc.communicate(timeout=300)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    log = "".join(lines) + rest
    assert proc.returncode == 0, log[-3000:]
    stats = parse_stats(log)
    assert stats["finish_reason"] == "finished"
    errors = stats["simhash/backend_errors"]
    assert errors >= 1
    assert stats["simhash/fingerprinted"] == 2 * count
    # Nothing recorded before the kill was lost, and every page checked afterwards is there too.
    pages = redis_pages(server)
    recorded = [p["url"] for p in pages]
    assert set(killed_after) <= set(recorded)
    assert len(recorded) == 2 * count - errors
    # Copies checked after the restart were still recognised as duplicates of pre-kill originals.
    canonical_urls = {pages[p["canonical"]]["url"] for p in pages if p["canonical"] >= 0}
    assert canonical_urls & set(killed_after)
