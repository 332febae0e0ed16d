"""Fixtures with a real redis-server (load with ``pytest_plugins = ["conftest_redis"]``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis_server import RedisCluster, RedisServer, module_args


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A fresh redis-server on a free loopback port, without persistence; killed after the test."""
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def persistent_redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server with ``appendonly yes`` / ``appendfsync always``: a kill loses nothing written."""
    server = RedisServer(tmp_path_factory.mktemp("redis-aof"), appendonly=True).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """A three-node Redis Cluster on loopback ports (redis-server + redis-cli --cluster create)."""
    cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster")).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def module_redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """``redis_server`` with the package's ``simhash`` Redis module loaded."""
    server = RedisServer(tmp_path_factory.mktemp("redis-module"), extra_args=module_args()).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def module_redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """``redis_cluster`` with the package's ``simhash`` Redis module loaded on every node."""
    cluster = RedisCluster(tmp_path_factory.mktemp("redis-cluster-module"), extra_args=module_args()).start()
    try:
        yield cluster
    finally:
        cluster.stop()
