"""Clustering steps 5-7 on the Redis backend (``backends.redis.mirror``): the same pages give the in-process
decisions with one worker, checked one by one or in batches, and with two workers only pairs of pages that
are duplicates in process (what differs is the order, and races cost a duplicate kept, never a page)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from redis_server import RedisServer

from simhash_scrapy.backends import PageRecord
from simhash_scrapy.backends.memory import MemoryBackend
from simhash_scrapy.config import SimhashConfig
from simhash_scrapy.core.analysis import analyse_html

from detector_helpers import clusters, sample_pages, steps_pages  # noqa: E402  (tests/ is on sys.path)
from loop_helpers import in_thread  # noqa: E402
from test_redis_backend import make_backend  # noqa: E402

pytest_plugins = ["conftest_redis"]


def records(config: SimhashConfig) -> list[PageRecord]:
    """The steps sites and the sample set analysed as a crawl with steps 5-7 analyses them, in order."""
    options = replace(config.analysis, keep_source=True, second=True, sketch=True)
    out = []
    for url, body in steps_pages() + sample_pages("sample"):
        a = analyse_html(body, None, options)
        if a.fingerprint is None:
            continue
        out.append(PageRecord(url, a.fingerprint, "spider", identity=url, exact=a.exact, edit_keys=a.edit_keys,
                              digest=a.digest, second=a.second, sketch=a.sketch, source=a.source))  # fmt: skip
    return out


def memory_pairs(config: SimhashConfig, pages: list[PageRecord]) -> tuple[set[tuple[str, str]], set[str]]:
    backend = MemoryBackend(config)
    verdicts = [backend.check_now(replace(page)) for page in pages]
    pairs = {(p.url, v.canonical_url) for p, v in zip(pages, verdicts) if v.canonical_url is not None}
    return pairs, {v.via for v in verdicts if v.via is not None}


async def redis_pairs(server: RedisServer, config: SimhashConfig, pages: list[PageRecord], workers: int = 1,
                      batched: bool = True, found: dict[str, str | None] | None = None,
                      ) -> tuple[set[tuple[str, str]], set[str], list[str]]:  # fmt: skip
    """The pairs ``workers`` Redis workers find, page i checked by worker i % workers (all in flight at once
    when ``batched``), the vias, and the order Redis checked the pages in (``found``: filled with each
    recorded page's ``via`` as Redis reports it, ``ClusterMember.via``)."""
    backends = [make_backend(server, config, SIMHASH_REDIS_PERSIST=True) for _ in range(workers)]
    for backend in backends:
        await backend.open("steps")
    try:
        if batched:
            verdicts = await asyncio.gather(*(backends[i % workers].check(replace(p)) for i, p in enumerate(pages)))
        else:
            verdicts = [await backends[i % workers].check(replace(p)) for i, p in enumerate(pages)]
        members = await backends[0].members()
        order = [member.url for member in members]
        if found is not None:
            found.update((member.url, member.via) for member in members)
    finally:
        for backend in backends:
            await backend.close()
    pairs = {(p.url, v.canonical_url) for p, v in zip(pages, verdicts) if v.canonical_url is not None}
    return pairs, {v.via for v in verdicts if v.via is not None}, order


@pytest.mark.parametrize("batched", [False, True])
def test_one_redis_worker_decides_steps_1_to_7_as_in_process(redis_server: RedisServer, batched: bool) -> None:
    config = SimhashConfig()
    pages = records(config)
    memory, memory_vias = memory_pairs(config, pages)
    found: dict[str, str | None] = {}
    redis, vias, _ = in_thread(redis_pairs(redis_server, config, pages, batched=batched, found=found))
    assert {"template", "second", "containment"} <= memory_vias
    assert redis == memory
    assert vias == memory_vias
    # The report names step 7 as in process (the record's D_CONTAINMENT), not the one-edit rule.
    memory_backend = MemoryBackend(config)
    contained = {p.url for p in pages if memory_backend.check_now(replace(p)).via == "containment"}
    assert contained and {url for url, via in found.items() if via == "containment"} == contained
    client = redis_server.client()
    try:
        assert client.strlen("steps:simhash:s:spider:extras") > 0 or any(client.scan_iter("*:extras"))
    finally:
        client.close()


def test_two_redis_workers_find_only_in_process_duplicates(redis_server: RedisServer) -> None:
    """Two workers on one Redis, pages taken in turn: every pair joins pages the in-process rule puts in one
    cluster, on the set's order or on the order Redis checked the pages in (races: the template learner of
    each worker saw other pages than one in-process crawl had at that point); few pairs are missed."""
    config = SimhashConfig()
    pages = records(config)
    redis, _, order = in_thread(redis_pairs(redis_server, config, pages, workers=2))
    by_url = {page.url: page for page in pages}
    same_order, _ = memory_pairs(config, [by_url[url] for url in order])
    cluster = clusters(same_order, memory_pairs(config, pages)[0])
    assert all(cluster.get(a, a) == cluster.get(b, b) for a, b in redis), redis - same_order
    assert len(redis) >= 2 * len(same_order) // 3  # races miss a few

async def crawls_in_turn(server: RedisServer, config: SimhashConfig, pages: list[PageRecord],
                         cuts: list[int], preload: bool = False) -> set[tuple[str, str]]:  # fmt: skip
    """The pages cut in parts at ``cuts``, each part checked by a new worker after the one before closed (a
    later crawl, or a worker joining): it learns from Redis what steps 5-7 learned before (``preload``: its
    mirror loaded by ``preload`` while its checks are already coming in)."""
    pairs = set()
    for a, b in zip([0, *cuts], [*cuts, len(pages)]):
        backend = make_backend(server, config, SIMHASH_REDIS_PERSIST=True)
        await backend.open("steps")
        try:
            checks = [backend.check(replace(p)) for p in pages[a:b]]
            if preload:
                checks.insert(0, backend.preload("spider"))
            verdicts = (await asyncio.gather(*checks))[1 if preload else 0 :]
        finally:
            await backend.close()
        pairs |= {(p.url, v.canonical_url) for p, v in zip(pages[a:b], verdicts) if v.canonical_url is not None}
    return pairs


@pytest.mark.parametrize(("chunks", "preload"), [(False, False), (True, False), (True, True)])
def test_a_worker_joining_later_learns_steps_5_to_7_from_redis(
    redis_server: RedisServer, chunks: bool, preload: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host templates learned, the canonical pages' extras and the sentence counts are in Redis: workers
    started one after the other decide the pages as one in-process crawl of them all (the cuts part a host's
    first articles from the next one, a story from its print view); ``chunks``: each loads its mirror a few
    hundred bytes of extras and 3 log entries at a time (records cut between reads); ``preload``: while its
    first checks wait for that load."""
    if chunks:
        from simhash_scrapy.backends.redis import backend as module

        monkeypatch.setattr(module, "MIRROR_CHUNK", 333)
        monkeypatch.setattr(module, "LOAD_CHUNK", 3)
    config = SimhashConfig()
    pages = records(config)
    urls = [page.url for page in pages]
    cuts = [urls.index("http://tmpl.test/story/3"), urls.index("http://contain.test/story/print")]
    memory, _ = memory_pairs(config, pages)
    assert ("http://tmpl.test/reader/3", "http://tmpl.test/story/3") in memory
    assert in_thread(crawls_in_turn(redis_server, config, pages, cuts, preload)) == memory


def view_records(config: SimhashConfig) -> list[PageRecord]:
    """A recipe page, its print view (the card alone, a quarter of the page) at its address, and another
    recipe's print view: step 7's other views (``core.cluster.views``)."""
    from test_views import sentences

    story, card = sentences(1, 60), sentences(5, 20)
    options = replace(config.analysis, keep_source=True, second=True, sketch=True)
    html = "<html><body><article>{}</article></body></html>".format
    bodies = [
        ("http://recipes.test/soup", html("".join(f"<p>{s}</p>" for s in story + card))),
        ("http://recipes.test/soup?print=1", html("".join(f"<p>{s}</p>" for s in card))),
        ("http://recipes.test/stew?print=1", html("".join(f"<p>{s}</p>" for s in sentences(3, 20)))),
    ]
    out = []
    for url, body in bodies:
        a = analyse_html(body.encode(), None, options)
        assert a.fingerprint is not None
        out.append(PageRecord(url, a.fingerprint, "spider", identity=url, exact=a.exact, edit_keys=a.edit_keys,
                              digest=a.digest, second=a.second, sketch=a.sketch, source=a.source))  # fmt: skip
    return out


def test_a_print_view_at_its_pages_address_joins_it_on_redis_as_in_process(redis_server: RedisServer) -> None:
    config = SimhashConfig()
    pages = view_records(config)
    memory, _ = memory_pairs(config, pages)
    redis, vias, _ = in_thread(redis_pairs(redis_server, config, pages, batched=False))
    # the soup's print view joins the soup (a quarter of it: below step 7's own half); the stew's stays apart
    assert memory == {("http://recipes.test/soup?print=1", "http://recipes.test/soup")}
    assert redis == memory and vias == {"containment"}


def test_the_mirror_gives_the_replicas_candidates(redis_server: RedisServer) -> None:
    """A worker's replica delegates its first-simhash index to the mirror (``Replica.delegate``): the mirror's
    candidates (``Mirror.hints`` with the replica's sync) are those of a replica holding its own index of the
    same log, for the pages checked (template-free rows and step-7 copies in the mirror's index too) and for
    pages near them."""
    import random

    from simhash_scrapy.backends.redis.replica import Replica

    config = SimhashConfig()
    pages = records(config)

    async def run() -> tuple[list[bytes], list[bytes], bool]:
        backend = make_backend(redis_server, config, SIMHASH_REDIS_PERSIST=True)
        await backend.open("steps")
        try:
            await asyncio.gather(*(backend.check(replace(p)) for p in pages))
            replica = backend._replicas["spider"]
            mirror = backend._mirror
            assert mirror is not None
            log = bytes(await backend.client.get(backend.keys.scope("spider").log))
            own = Replica(config.max_distance)
            own.apply(log, 0)
            assert own.sync == replica.sync
            rng = random.Random(3)
            simhash = [p for p in pages if not p.exact]
            probes = [replace(p, fingerprint=p.fingerprint ^ (1 << rng.randrange(64)) ^ (1 << rng.randrange(64)))
                      for p in simhash] + simhash  # fmt: skip
            found: dict[int, bytes] = {}
            mirror.hints("spider", [(p, None, None) for p in probes], (replica.sync, found))
            return own.candidates_many([p.fingerprint for p in probes]), [found[n] for n in range(len(probes))], \
                replica.delegated
        finally:
            await backend.close()

    expected, got, delegated = in_thread(run())
    assert delegated
    assert sum(len(c) > 0 for c in expected) >= len(expected) // 2
    assert [sorted(c[i : i + 9] for i in range(0, len(c), 9)) for c in got] == [
        sorted(c[i : i + 9] for i in range(0, len(c), 9)) for c in expected
    ]


def test_a_mirror_loaded_while_a_check_is_in_flight_misses_none_of_its_pages(redis_server: RedisServer) -> None:
    """The mirror of a scope is loaded (``preload``) while a check of that scope without steps 5-7 data is
    already on its way to Redis: the pages that check records reach the mirror too, so the replica that
    delegates its index to the mirror still finds them (a page within k of one is a duplicate, as in
    process)."""
    config = SimhashConfig()
    first = PageRecord("http://gap.test/a", 0x0123_4567_89AB_CDEF, "spider", identity="http://gap.test/a")
    near = PageRecord("http://gap.test/b", first.fingerprint ^ 0b101, "spider", identity="http://gap.test/b")

    async def run() -> tuple[str | None, bool]:
        backend = make_backend(redis_server, config, SIMHASH_REDIS_PERSIST=False)
        await backend.open("gap")
        try:
            call = backend._call_check

            async def check_after_a_load(keys: list[object], args: list[object]) -> object:
                backend._call_check = call  # type: ignore[method-assign]
                await backend._load_mirror("spider", backend.keys.scope("spider"))  # (a preload, meanwhile)
                return await call(keys, args)

            backend._call_check = check_after_a_load  # type: ignore[method-assign]
            await backend.check(replace(first))
            verdict = await backend.check(replace(near))
            return verdict.canonical_url, backend._replicas["spider"].delegated
        finally:
            await backend.close()

    assert MemoryBackend(config).check_now(replace(near)).canonical_url is None  # (alone: no duplicate)
    memory = MemoryBackend(config)
    memory.check_now(replace(first))
    assert memory.check_now(replace(near)).canonical_url == first.url
    assert in_thread(run()) == (first.url, True)
