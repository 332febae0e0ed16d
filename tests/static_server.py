"""A static file server in a subprocess (``python -m http.server``), which answers conditional
requests (``If-Modified-Since``) from the files' modification times."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path


class Server:
    """``python -m http.server`` serving ``root`` in a subprocess (``tests/e2e/test_conditional.py``,
    ``benchmarks/recrawl.py``);
    with ``log``, its access log goes there and ``statuses()`` reads it."""

    def __init__(self, root: Path, log: Path | None = None) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.log = log
        self._log = open(log, "ab") if log is not None else None  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(root)],
            stdout=subprocess.DEVNULL, stderr=self._log or subprocess.DEVNULL,
        )  # fmt: skip
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("http.server did not start") from None
                time.sleep(0.05)

    def statuses(self) -> list[tuple[str, int]]:
        """``(path, status)`` of every request logged so far (needs ``log``)."""
        assert self.log is not None and self._log is not None
        self._log.flush()
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return [(path, int(status)) for path, status in re.findall(r'"GET (\S+) HTTP/[\d.]+" (\d{3})', text)]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        if self._log is not None:
            self._log.close()
