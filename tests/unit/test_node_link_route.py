"""``node_link``'s routing and packing of a batch: the C helpers (``_speedups.key_slot``, ``route_commands``) give
what the Python twins (redis-py's ``key_slot``, ``_route_python``) give, on random keys and commands.

Keys with and without hash tags (empty, unclosed, nested), non-ASCII and lone surrogates (slots only), bytes keys; arguments
of every type the backend sends (str, bytes, int, negative and past 64 bits); a slot table with slots no node
serves.  No Redis here: ``tests/integration/test_node_link.py`` sends the bytes to a real cluster.
"""

from __future__ import annotations

import random
from array import array
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from redis.crc import key_slot

from simhash_scrapy.backends.redis import node_link
from simhash_scrapy.backends.redis.node_link import _NO_NODE, _python_pack, _route_python, slot_of
from simhash_scrapy.core import _native

FAST = _native.speedups
compiled = pytest.mark.skipif(FAST is None, reason="the C extensions are not built")

PIECES = ["{", "}", "{}", "a", "é", "\ud800", "t0.3f", "{x}", "simhash:", "日本", "\x00"]


def random_key(rng: random.Random, surrogates: bool = True) -> str:
    # (hiredis' packer refuses lone surrogates, the Python packer and the C one pass them: the slots only)
    pieces = PIECES if surrogates else [piece for piece in PIECES if piece != "\ud800"]
    return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))


def random_arg(rng: random.Random) -> Any:
    kind = rng.randrange(4)
    if kind == 0:
        return random_key(rng, surrogates=False)
    if kind == 1:
        return rng.randbytes(rng.randint(0, 40))
    if kind == 2:
        return rng.randint(-(2**40), 2**40)
    return rng.choice([0, -1, 2**63 - 1, -(2**63), 2**70, -(2**70), "", b""])


def encoded(key: str | bytes) -> bytes:
    return key.encode("utf-8", "surrogatepass") if isinstance(key, str) else key


@compiled
def test_the_c_slot_is_redis_pys_on_random_keys() -> None:
    rng = random.Random(7)
    keys: list[str | bytes] = [random_key(rng) for _ in range(3000)]
    keys += [encoded(key) for key in keys[:500]] + ["", "{}", "{a", "a}{b}", "{{a}}", "x{}{y}"]
    for key in keys:
        assert FAST.key_slot(key) == key_slot(encoded(key)), key


@given(st.text(), st.booleans())
@settings(max_examples=300, deadline=None)
def test_slot_of_is_redis_pys(key: str, as_bytes: bool) -> None:
    data = key.encode("utf-8", "surrogatepass")
    assert slot_of(data if as_bytes else key) == key_slot(data)


def random_commands(rng: random.Random, count: int) -> list[tuple[Any, tuple[Any, ...]]]:
    commands = []
    for _ in range(count):
        key: Any = random_key(rng, surrogates=False)
        if rng.random() < 0.1:
            key = encoded(key)
        commands.append((key, (rng.choice(["GET", "EVALSHA", b"HSET"]), key,
                               *(random_arg(rng) for _ in range(rng.randint(0, 5))))))
    return commands


@compiled
@pytest.mark.parametrize("nodes", [1, 3, 7])
def test_route_commands_in_c_is_the_python_twin(nodes: int) -> None:
    rng = random.Random(nodes)
    table = array("H", [rng.randrange(nodes) for _ in range(16384)])
    for slot in rng.sample(range(16384), 2000):
        table[slot] = rng.choice([nodes, _NO_NODE])  # (no node serves it)
    for size in (0, 1, 5, 60, 400):
        commands = random_commands(rng, size)
        got = FAST.route_commands(commands, table, nodes)
        assert got == _route_python(commands, table, nodes)
        # every command once, in order within its node, packed as the Python packer packs it
        assert sorted(i for group in got if group is not None for i in group[0]) == list(range(size))
        for group in got:
            if group is not None:
                assert group[1] == b"".join(_python_pack(commands[i][1]) for i in group[0])


@compiled
def test_route_commands_refuses_what_it_cannot_send() -> None:
    table = array("H", [0]) * 16384
    with pytest.raises(TypeError, match="str, bytes or int"):
        FAST.route_commands([("k", ("SET", "k", 1.5))], table, 1)
    with pytest.raises(TypeError, match="a Redis key"):
        FAST.route_commands([(3, ("GET", "k"))], table, 1)
    with pytest.raises(TypeError, match="key, args tuple"):
        FAST.route_commands([("k", ["GET", "k"])], table, 1)
    with pytest.raises(ValueError, match="16384"):
        FAST.route_commands([], array("H", [0]) * 10, 1)


def test_without_the_c_helpers_route_commands_is_the_twin() -> None:
    rng = random.Random(3)
    table = array("H", [rng.randrange(3) for _ in range(16384)])
    commands = random_commands(rng, 50)
    with _native.switched(False):
        got = node_link.route_commands(commands, table, 3)
    assert got == _route_python(commands, table, 3)
    assert sum(len(group[0]) for group in got if group is not None) == 50


@compiled
def test_route_commands_refuses_numbers_that_are_not_ints() -> None:
    # A numpy integer (a seq taken from an array) exports its machine bytes as a buffer: packed as those 8 raw
    # bytes, it would be written to Redis silently wrong (hiredis' packer and redis-py refuse it).  Refused, as
    # any other object but str, bytes, bytearray, memoryview and int.
    np = pytest.importorskip("numpy")
    table = array("H", [0]) * 16384
    for value in (np.int64(5), np.uint32(7), np.float64(1.0), array("i", [1])):
        with pytest.raises(TypeError, match="str, bytes or int"):
            FAST.route_commands([("k", ("SET", "k", value))], table, 1)
    got = FAST.route_commands([("k", ("SET", "k", bytearray(b"ab"), memoryview(b"cd")))], table, 1)
    assert got[0][1] == _python_pack(("SET", "k", b"ab", b"cd"))


def packed_case(rng: random.Random) -> tuple[list[Any], int, list[Any], tuple[Any, ...]]:
    group = rng.randint(1, 5)
    per = [random_arg(rng) if rng.random() < 0.6 else tuple(random_arg(rng) for _ in range(rng.randint(0, 3)))
           for _ in range(rng.randint(0, 12))]  # (an argument, or a tuple of them)
    keys: list[Any] = [random_key(rng) for _ in range(len(per) * group)]
    keys = [encoded(key) if rng.random() < 0.1 else key for key in keys]
    tail = tuple(random_arg(rng) for _ in range(rng.randint(0, 3)))
    return keys, group, per, tail


@compiled
@pytest.mark.parametrize("seed", range(4))
def test_packed_calls_are_the_python_twins_and_packs_bytes(seed: int) -> None:
    # ``packed_calls``: each key's command as (its slot, the bytes ``pack`` makes of ``verb key *per tail``), in C
    # and in Python; with ``lengths``, each key's running total (a key met twice counts twice), with ``sent`` also
    # its last argument.
    rng = random.Random(seed)
    for _ in range(60):
        keys, group, per, tail = packed_case(rng)
        keys += keys[: group * 2]  # (keys met again: their lengths grow twice)
        per += per[:2]
        start = {key: rng.randrange(100) for key in keys[:3]}
        verb = rng.choice(["SIMHASH.NEAR", "SIMHASH.APPEND", "SET"])
        step = rng.choice([0, 8, 13])
        sent = rng.random() < 0.5
        fast: list[Any] = [("x", ("GET", "x"))]  # (appended after what is there)
        fast_lengths = dict(start)
        fast_expected = node_link.packed_calls(fast, verb, keys, group, per, tail, fast_lengths, step, sent)
        python: list[Any] = [("x", ("GET", "x"))]
        python_lengths = dict(start)
        with _native.switched(False):
            python_expected = node_link.packed_calls(python, verb, keys, group, per, tail, python_lengths, step,
                                                     sent)
        assert fast == python and fast_expected == python_expected and fast_lengths == python_lengths
        totals = dict(start)
        for i, key in enumerate(keys):
            args = per[i // group] if isinstance(per[i // group], tuple) else (per[i // group],)
            totals[key] = totals.get(key, 0) + step
            last = (totals[key],) if sent else ()
            assert fast[1 + i] == (key_slot(encoded(key)), _python_pack((verb, key, *args, *tail, *last)))
            assert fast_expected[i] == totals[key]
        assert fast_lengths == totals
        assert node_link.packed_calls([], verb, keys, group, per, tail) is None


@compiled
@pytest.mark.parametrize("nodes", [1, 3])
def test_route_commands_sends_packed_commands_as_they_are(nodes: int) -> None:
    # Packed commands among the others: routed by their slot, their bytes as they are, in C and in Python.
    rng = random.Random(nodes + 10)
    table = array("H", [rng.randrange(nodes) for _ in range(16384)])
    for slot in rng.sample(range(16384), 500):
        table[slot] = _NO_NODE
    commands = random_commands(rng, 40)
    keys, group, per, tail = packed_case(rng)
    node_link.packed_calls(commands, "SIMHASH.NEAR", keys, group, per, tail)
    commands += random_commands(rng, 10)
    got = FAST.route_commands(commands, table, nodes)
    assert got == _route_python(commands, table, nodes)
    for group_ in got:
        if group_ is not None:
            assert group_[1] == b"".join(
                body if isinstance(body, bytes) else _python_pack(body) for body in (commands[i][1] for i in group_[0]))


@compiled
def test_packed_commands_refuse_what_they_cannot_send() -> None:
    table = array("H", [0]) * 16384
    with pytest.raises(ValueError, match="from 0 to 16383"):
        FAST.route_commands([(16384, b"*1\r\n$4\r\nPING\r\n")], table, 1)
    with pytest.raises(ValueError, match="from 0 to 16383"):
        FAST.route_commands([(-1, b"*1\r\n$4\r\nPING\r\n")], table, 1)
    for switched in (True, False):
        with _native.switched(switched), pytest.raises(ValueError, match="group >= 1"):
            node_link.packed_calls([], "GET", ["a", "b", "c"], 2, [1])
        with _native.switched(switched), pytest.raises(ValueError, match="group >= 1"):
            node_link.packed_calls([], "GET", ["a"], 0, [])
    with pytest.raises(TypeError, match="str, bytes or int"):
        node_link.packed_calls([], "GET", ["a"], 1, [1.5])
    with pytest.raises(TypeError, match="a Redis key"):
        node_link.packed_calls([], "GET", [3], 1, [1])


@compiled
@pytest.mark.parametrize("seed", range(3))
def test_near_replies_in_c_are_the_python_reading(seed: int) -> None:
    # ``SIMHASH.NEAR``'s replies (a bucket's length, then the seqs near the fold) read in C and in Python: every
    # bucket's length, and each seq named with the fingerprints of the replies that name it, in order.
    from types import SimpleNamespace

    from simhash_scrapy.backends.redis.cluster_backend import GlobalRedisBackend

    rng = random.Random(seed)
    tables = rng.randint(1, 6)
    pages = [SimpleNamespace(record=SimpleNamespace(exact=rng.random() < 0.2, fingerprint=rng.getrandbits(64)))
             for _ in range(rng.randint(1, 40))]
    checked = [page for page in pages if not page.record.exact]
    fps = [page.record.fingerprint for page in checked]
    keys = [f"b{rng.randrange(30)}" for _ in range(len(checked) * tables)]  # (a bucket may come twice)
    start = rng.randrange(5)
    replies: list[Any] = [b"other"] * start + [
        [rng.randrange(1000), *(rng.choice([rng.randrange(40), rng.randrange(1 << 32)])
                                for _ in range(rng.choice([0, 0, 0, 1, 3])))] for _ in keys]  # (seqs named twice)
    found = []
    for switched in (True, False):
        batch = SimpleNamespace(near_keys=keys, pages=[SimpleNamespace(keys=SimpleNamespace(tables=[0] * tables),
                                                                       record=page.record) for page in pages],
                                lengths={})
        with _native.switched(switched):
            found.append((GlobalRedisBackend._near_found(batch, replies, start, fps), batch.lengths))
    assert found[0] == found[1]
    near, lengths = found[0]
    assert lengths == {key: reply[0] for key, reply in zip(keys, replies[start:])}
    expected: dict[int, list[int]] = {}
    for i, reply in enumerate(replies[start:]):
        for seq in reply[1:]:
            expected.setdefault(seq, []).append(checked[i // tables].record.fingerprint)
    assert list(near.items()) == list(expected.items())
    assert any(len(fps) > 1 for fps in near.values()) or seed != 0
    for switched in (True, False):
        with _native.switched(switched), pytest.raises(TypeError, match="not a list"):
            GlobalRedisBackend._near_found(batch, replies[:start] + [None] * len(keys), start, fps)


@compiled
def test_bucket_names_refuse_what_they_cannot_name() -> None:
    assert FAST.bucket_names("b", [(0, 0xFF), (8, 0xFF)], [0x1234]) == ["b.t0.34}", "b.t1.12}"]
    with pytest.raises(ValueError, match="32 bits at most"):
        FAST.bucket_names("b", [(0, 1 << 32)], [1])
    with pytest.raises(ValueError, match="from 0 to 63"):
        FAST.bucket_names("b", [(64, 1)], [1])
    with pytest.raises(ValueError, match="at most 64 tables"):
        FAST.bucket_names("b", [(0, 1)] * 65, [1])
    with pytest.raises(TypeError, match="shift, mask"):
        FAST.bucket_names("b", [(0,)], [1])
    with pytest.raises(OverflowError):
        FAST.bucket_names("b", [(0, 1)], [2**64])
    with pytest.raises(OverflowError):
        FAST.bucket_names("b", [(0, 1)], [-1])


class _Moved(node_link.ReplyError):
    """A subclass of the error type: an error reply all the same."""


@compiled
@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["ok", "int", "none", "list", "error", "sub"]), max_size=30), st.integers(0, 2**32))
def test_place_replies_is_its_python_twin(kinds: list[str], seed: int) -> None:
    rng = random.Random(seed)
    size = len(kinds) + rng.randint(0, 5)
    indexes = rng.sample(range(size), len(kinds))
    made = {"ok": lambda: b"OK", "int": lambda: rng.randint(-5, 5), "none": lambda: None, "list": lambda: [1, b"x"],
            "error": lambda: node_link.ReplyError("MOVED 1 h:1"), "sub": lambda: _Moved("ASK 2 h:2")}
    answer = [made[kind]() for kind in kinds]
    if answer and rng.random() < 0.3:  # a short answer: as zip, the positions it has
        answer = answer[: rng.randrange(len(answer))]
    c_replies, py_replies = ["old"] * size, ["old"] * size
    c_errors = FAST.place_replies(indexes, answer, c_replies, node_link.ReplyError)
    assert c_errors == node_link._place_python(indexes, answer, py_replies)
    assert c_replies == py_replies  # (the error replies are the same objects in both: equal by identity)
    assert [n for n, kind in enumerate(kinds[: len(answer)]) if kind in ("error", "sub")] == c_errors


@pytest.mark.parametrize("fast", [True, False])
def test_place_replies_refuses_a_position_out_of_range_and_places_nothing(fast: bool) -> None:
    if fast and FAST is None:
        pytest.skip("the C extensions are not built")
    with _native.switched(fast):
        replies = [None, None]
        with pytest.raises(IndexError, match="out of the replies' range"):
            node_link.place_replies([0, 2], [b"a", b"b"], replies)
        assert replies == [None, None]
        assert node_link.place_replies([1, 0], [b"a", node_link.ReplyError("x")], replies) == [1]
        assert replies[1] == b"a" and isinstance(replies[0], node_link.ReplyError)
    if fast:
        with pytest.raises(IndexError):
            FAST.place_replies([-1], [b"a"], [None], node_link.ReplyError)
        with pytest.raises(TypeError):
            FAST.place_replies(["0"], [b"a"], [None], node_link.ReplyError)
