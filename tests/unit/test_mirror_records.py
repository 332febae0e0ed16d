"""The Redis mirror's extras records read in C (``_speedups.extras_records``) and in Python (``_records_python``):
the same columns, the same errors, on real records, every truncation and random bytes."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from simhash_scrapy.backends.redis.layout import NO_POSITION
from simhash_scrapy.backends.redis.mirror import _records_python, read_record, record_of
from simhash_scrapy.core import _native
from simhash_scrapy.core.cluster.containment import Sketch
from simhash_scrapy.core.records import PageRecord

extras_records = getattr(_native.speedups, "extras_records", None)
needs_c = pytest.mark.skipif(extras_records is None, reason="the C helpers are not built")
HOSTS = ["www.example.com", "blog.example.org", "b\u00fccher.example", "\u4f8b\u3048.jp", ""]


def _record(rng: random.Random) -> tuple[bytes, tuple]:
    """One page's record (``record_of``) and the fields it holds."""
    also = rng.getrandbits(64) if rng.random() < 0.5 else None
    second = rng.getrandbits(64) if rng.random() < 0.7 else None
    sketch = None
    if rng.random() < 0.8:
        sketch = Sketch(tuple(sorted(rng.getrandbits(64) for _ in range(rng.choice([0, 1, 5, 32, 300])))),
                        rng.randrange(1 << 32))  # fmt: skip
    host = rng.choice(HOSTS)
    address = rng.choice([None, "", "example.com/a/b", "\u00e9t\u00e9.fr/x", "\ud800bad"])
    record = PageRecord(url="https://x/", fingerprint=1, scope="s", also=also, second=second, sketch=sketch)
    return record_of(record, host, address), (also, second, sketch, host or None, address)


def _stream(rng: random.Random, count: int) -> bytes:
    out = []
    for _ in range(count):
        data, _ = _record(rng)
        pos = NO_POSITION if rng.random() < 0.3 else rng.randrange(1 << 31)
        out.append(struct.pack(">IH", pos, len(data)) + data)
    return b"".join(out)


def _outcome(reader, data: bytes, start: int) -> object:
    names: dict[str, str] = {}
    try:
        columns = reader(data, start, names)
    except (ValueError, UnicodeDecodeError) as exc:
        return type(exc)
    hosts = columns[6]
    assert all(host is None or names[host] is host for host in hosts)  # one object a name
    return columns


def test_read_record_gives_record_ofs_fields_back() -> None:
    rng = random.Random(3)
    for _ in range(300):
        data, (also, second, sketch, host, address) = _record(rng)
        got = read_record(data)
        kept = None if sketch is None else Sketch(sketch.hashes[:255], sketch.sentences)
        encoded = b"" if address is None else address.encode("utf-8", "surrogatepass")
        assert got == (also, second, kept, host, address if encoded and sketch is not None else None)  # (with a sketch)


def test_python_columns_count_every_record_and_keep_the_canonical_ones() -> None:
    rng = random.Random(5)
    records = [_record(rng) for _ in range(50)]
    positions = [NO_POSITION if n % 3 == 0 else n for n in range(50)]
    data = b"".join(struct.pack(">IH", pos, len(d)) + d for pos, (d, _) in zip(positions, records))
    used, kept, alsos, seconds, sentences, packed, hosts, addresses, counted = _records_python(data, 0, None)
    assert used == len(data)
    assert kept == [pos for pos in positions if pos != NO_POSITION]
    fields = [f for pos, (_, f) in zip(positions, records) if pos != NO_POSITION]
    assert alsos == [f[0] for f in fields] and seconds == [f[1] for f in fields]
    assert hosts == [f[3] for f in fields]
    assert addresses == [f[4] if f[4] and f[2] is not None else None for f in fields]
    assert sentences == [-1 if f[2] is None else f[2].sentences for f in fields]
    every = [h for _, f in records if f[2] is not None for h in f[2].hashes[:255]]
    assert np.frombuffer(counted, dtype=np.uint64).tolist() == every
    assert packed[0] is None or len(packed[0]) % 8 == 0


@needs_c
def test_c_and_python_read_the_same_columns_at_every_cut_and_start() -> None:
    rng = random.Random(7)
    data = _stream(rng, 40)
    for end in range(0, len(data) + 1, 7):
        for start in (0, 6, 31):
            assert _outcome(extras_records, data[:end], start) == _outcome(_records_python, data[:end], start)
    assert _outcome(extras_records, data, 0)[0] == len(data)


@needs_c
def test_c_and_python_agree_on_random_and_damaged_bytes() -> None:
    rng = random.Random(11)
    good = _stream(rng, 30)
    seen = set()
    for trial in range(3000):
        if trial % 2:
            data = bytearray(good)
            for _ in range(rng.randrange(1, 6)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            data = bytes(data)
        else:
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 80)))
        c, python = _outcome(extras_records, data, 0), _outcome(_records_python, data, 0)
        assert c == python
        seen.add(c if isinstance(c, type) else "columns")
    assert seen == {ValueError, UnicodeDecodeError, "columns"}  # (every way was tried)


@needs_c
def test_c_refuses_a_negative_start_and_names_that_are_not_a_dict() -> None:
    with pytest.raises(ValueError):
        extras_records(b"", -1, None)
    with pytest.raises(TypeError):
        extras_records(b"", 0, [])
