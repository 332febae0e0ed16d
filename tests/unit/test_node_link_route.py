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
