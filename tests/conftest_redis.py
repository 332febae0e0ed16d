"""Fixtures with a real redis-server (load with ``pytest_plugins = ["conftest_redis"]``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

import pytest
from redis_server import RedisCluster, RedisServer, module_args

_Started = TypeVar("_Started", RedisServer, RedisCluster)


def _running(started: _Started) -> Iterator[_Started]:
    """``started`` for one test, killed after it however the test ends."""
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A fresh redis-server on a free loopback port, without persistence; killed after the test."""
    yield from _running(RedisServer(tmp_path_factory.mktemp("redis")).start())


@pytest.fixture
def persistent_redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server with ``appendonly yes`` / ``appendfsync always``: a kill loses nothing written."""
    yield from _running(RedisServer(tmp_path_factory.mktemp("redis-aof"), appendonly=True).start())


@pytest.fixture
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """A three-node Redis Cluster on loopback ports (redis-server + redis-cli --cluster create)."""
    yield from _running(RedisCluster(tmp_path_factory.mktemp("redis-cluster")).start())


@pytest.fixture
def module_redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """``redis_server`` with the package's ``simhash`` Redis module loaded."""
    yield from _running(RedisServer(tmp_path_factory.mktemp("redis-module"), extra_args=module_args()).start())


@pytest.fixture
def module_redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """``redis_cluster`` with the package's ``simhash`` Redis module loaded on every node."""
    yield from _running(RedisCluster(tmp_path_factory.mktemp("redis-cluster-module"), extra_args=module_args()).start())
