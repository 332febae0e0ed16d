"""A real, throw-away ``redis-server`` for tests (Debian package ``redis-server``).

``RedisServer(tmp_path).start()`` runs ``redis-server`` on a free loopback
port with its files in ``tmp_path`` (``--save "" --appendonly no`` unless
``appendonly=True``).  ``stop()`` kills it (SIGKILL by default, like a crash),
``start()`` again restarts it on the same port and directory.

``require_redis_server()`` returns the binary's path; without one it fails the
test when ``CI=true`` and skips it otherwise, saying how to install it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

INSTALL_HINT = "redis-server is not installed: sudo apt-get install redis-server (Debian/Ubuntu)"


def require_redis_server() -> str:
    path = shutil.which("redis-server") or ("/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server") else None)
    if path is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{INSTALL_HINT} (CI=true: a real Redis is required)")
        pytest.skip(INSTALL_HINT)
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _ephemeral_low() -> int:
    """The first port the kernel hands out to outgoing connections (Linux: ``ip_local_port_range``)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def server_port(bus: bool = False) -> int:
    """A free port for a redis-server (``bus``: p + 10000 free too, a cluster node's bus port), below the kernel's
    ephemeral range: a port found free there could be taken by any outgoing connection before the server binds it
    (a server that then fails to start: "Address already in use", ``port_taken``)."""
    import random

    rng = random.Random()
    gap = 10000 if bus else 0
    top = max(10001, min(65535 - gap, _ephemeral_low() - 1 - gap))
    for _ in range(1000):
        port = rng.randint(10000, top)
        if _bindable(port) and (not bus or _bindable(port + gap)):
            return port
    raise RuntimeError("no free port for a redis-server" + (" and its cluster bus" if bus else ""))


def port_taken(log: str) -> bool:
    """Whether a redis-server's log says it could not bind a port (its own, or a cluster node's bus port): taken
    between the check and the bind; the caller starts it again on another port."""
    return "bind: Address already in use" in log


def module_args() -> tuple[str, ...]:
    """``--loadmodule`` of the package's ``simhash`` Redis module; without one built, the test fails where the C
    helpers must build (``SIMHASH_REQUIRE_SPEEDUPS=1``, CI) and is skipped otherwise."""
    from simhash_scrapy.backends.redis.module import path

    built = path()
    if built is None:
        message = "the simhash Redis module was not built (no C compiler at install)"
        if os.environ.get("SIMHASH_REQUIRE_SPEEDUPS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return ("--loadmodule", str(built))


class _PortTaken(RuntimeError):
    """redis-server exited at start: its port was taken between the check and its bind."""


class RedisServer:
    def __init__(self, directory: str | os.PathLike[str], appendonly: bool = False, port: int | None = None,
                 password: str | None = None, extra_args: tuple[str, ...] = ()) -> None:
        self.binary = require_redis_server()
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.appendonly = appendonly
        self.port = port or server_port()
        self._port_chosen = port is None  # (a port taken before the server binds it: another one, at start)
        #: ``--requirepass`` (the default user's password); ``command``/``client`` log in with it.
        self.password = password
        self.extra_args = extra_args
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> RedisServer:
        for attempt in range(3):
            try:
                return self._start(timeout)
            except _PortTaken:
                if attempt == 2 or not self._port_chosen:
                    raise
                self.port = server_port()
        raise AssertionError("unreachable")

    def _start(self, timeout: float) -> RedisServer:
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.dir),
            "--save", "",
            "--daemonize", "no",
            "--logfile", str(self.dir / "redis.log"),
        ]
        if self.appendonly:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        if self.password is not None:
            args += ["--requirepass", self.password]
        args += list(self.extra_args)
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                log = (self.dir / "redis.log").read_text(errors="replace")[-2000:] if (self.dir / "redis.log").exists() else ""
                failure = _PortTaken if port_taken(log) else RuntimeError
                raise failure(f"redis-server exited with {self.process.returncode}: {log}")
            if self.ping():
                return self
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port} within {timeout} s")

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:
            return False

    def stop(self, kill: bool = True) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def command(self, *args: str | bytes | int) -> object:
        """Run one command with a synchronous client (for assertions)."""
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password)
        try:
            return client.execute_command(*args)
        finally:
            client.close()

    def client(self):  # type: ignore[no-untyped-def]
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password)


class RedisCluster:
    """Three ``redis-server --cluster-enabled yes`` primaries joined with ``redis-cli --cluster create``."""

    def __init__(self, directory: str | os.PathLike[str], nodes: int = 3, extra_args: tuple[str, ...] = ()) -> None:
        self.binary = require_redis_server()
        self.extra_args = extra_args  # (every node's, e.g. ``module_args()``)
        self.cli = shutil.which("redis-cli") or "/usr/bin/redis-cli"
        self.dir = Path(directory)
        self.ports = [server_port(bus=True) for _ in range(nodes)]
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}"

    def _node(self, port: int) -> subprocess.Popen[bytes]:
        node_dir = self.dir / str(port)
        node_dir.mkdir(parents=True, exist_ok=True)
        return subprocess.Popen(
            [self.binary, "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
             "--cluster-config-file", str(node_dir / "nodes.conf"), "--dir", str(node_dir),
             "--save", "", "--appendonly", "no", "--logfile", str(node_dir / "redis.log"), *self.extra_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )

    def restart_node(self, n: int, timeout: float = 30.0) -> None:
        """Kill node ``n`` (SIGKILL) and start it again, empty (no persistence), with its cluster
        config (nodes.conf): it takes back its slots; waits for cluster_state:ok."""
        process = self.processes[n]
        process.kill()
        process.wait(timeout=20)
        self.processes[n] = self._node(self.ports[n])
        if not self._wait_ok(time.monotonic() + timeout):
            raise RuntimeError(f"cluster node {self.ports[n]} did not come back")

    def _wait_ok(self, deadline: float) -> bool:
        """Wait until EVERY node says cluster_state:ok (one node's view is not enough: a client
        sent to a node still converging gets CLUSTERDOWN)."""
        while time.monotonic() < deadline:
            if all(
                "cluster_state:ok" in subprocess.run([self.cli, "-p", str(port), "cluster", "info"],
                                                     capture_output=True, text=True, timeout=10).stdout
                for port in self.ports
            ):
                return True
            time.sleep(0.05)
        return False

    def start(self, timeout: float = 30.0) -> RedisCluster:
        for attempt in range(3):  # (a port taken between its check and the node's bind: new ports, again)
            self.processes = [self._node(port) for port in self.ports]
            deadline = time.monotonic() + timeout
            failed = self._wait_started(deadline)
            if failed is None:
                break
            self.stop()
            log = self.dir / str(failed) / "redis.log"
            reason = log.read_text(errors="replace")[-1000:] if log.exists() else "no log"
            if attempt == 2 or not port_taken(reason):
                raise RuntimeError(f"cluster node {failed} did not start: {reason}")
            self.ports = [server_port(bus=True) for _ in self.ports]
        subprocess.run(
            [self.cli, "--cluster", "create", *[f"127.0.0.1:{p}" for p in self.ports],
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout,
        )
        if self._wait_ok(deadline):
            return self
        self.stop()
        raise RuntimeError("the Redis cluster did not reach cluster_state:ok")

    def _wait_started(self, deadline: float) -> int | None:
        """Wait until every node answers; the port of one that exited or stayed silent past ``deadline``, else None."""
        for port, process in zip(self.ports, self.processes):
            while not RedisServer.ping(_PortOnly(port)):  # type: ignore[arg-type]
                if process.poll() is not None or time.monotonic() > deadline:
                    return port
                time.sleep(0.05)
        return None

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=20)
        self.processes = []

    def client(self):  # type: ignore[no-untyped-def]
        from redis.cluster import RedisCluster as SyncCluster

        return SyncCluster(host="127.0.0.1", port=self.ports[0])


class _PortOnly:
    def __init__(self, port: int) -> None:
        self.port = port
