"""A tiny Chrome DevTools Protocol client for tests: Debian's chromium over --remote-debugging-pipe.

No third-party package and no browser download: the pipe transport is two
file descriptors (3: commands in, 4: replies out) carrying NUL-terminated JSON.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
INSTALL_HINT = "apt-get install -y chromium"


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class CDPError(RuntimeError):
    pass


class Chromium:
    """One headless chromium process with one page attached (flat session)."""

    def __init__(self, binary: str, width: int = 1280, height: int = 900, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="simhash-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        args = [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-dev-shm-usage",
            f"--user-data-dir={self.profile}",
            f"--window-size={width},{height}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        # A tiny trampoline puts our pipe ends on the fds chromium expects (3 and 4), then execs it.
        trampoline = (
            "import os, sys; r, w = int(sys.argv[1]), int(sys.argv[2]); "
            "os.dup2(r, 3); os.dup2(w, 4); os.execv(sys.argv[3], sys.argv[3:])"
        )
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", trampoline, str(to_browser_r), str(from_browser_w), *args],
            pass_fds=(to_browser_r, from_browser_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next_id = 0
        self._replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        self._event_cv = threading.Condition()
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            self.send("Page.enable")
            self.send("Runtime.enable")
            self.send("Network.enable")
            self.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            )
        except (CDPError, OSError) as exc:
            log = self.close()
            raise CDPError(f"chromium did not start ({exc}); its log ends with:\n{log[-3000:]}") from None

    # ------------------------------------------------------------ transport
    def _read_loop(self) -> None:
        buffer = b""
        while True:
            try:
                data = os.read(self._from_browser, 1 << 16)
            except OSError:
                data = b""
            if not data:
                with self._event_cv:
                    self.events.append({"method": "_closed"})
                    self._event_cv.notify_all()
                for waiter in list(self._replies.values()):
                    waiter.put({"error": {"message": "chromium closed the pipe"}})
                return
            buffer += data
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message:
                    waiter = self._replies.get(message["id"])
                    if waiter is not None:
                        waiter.put(message)
                else:
                    with self._event_cv:
                        self.events.append(message)
                        self._event_cv.notify_all()

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        with self._lock:
            self._next_id += 1
            ident = self._next_id
            waiter: queue.Queue[dict[str, Any]] = queue.Queue()
            self._replies[ident] = waiter
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        try:
            os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        except OSError as exc:
            self._replies.pop(ident, None)
            raise CDPError(f"cannot send {method}: chromium is gone ({exc})") from None
        try:
            reply = waiter.get(timeout=self.timeout)
        except queue.Empty:
            raise CDPError(f"no reply to {method} within {self.timeout}s") from None
        finally:
            self._replies.pop(ident, None)
        if "error" in reply:
            raise CDPError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A command to the attached page."""
        return self.call(method, params, session=self.session)

    def wait_event(self, method: str, since: int = 0) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        with self._event_cv:
            while True:
                for event in self.events[since:]:
                    if event.get("method") == method:
                        return event
                    if event.get("method") == "_closed":
                        raise CDPError("chromium exited")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CDPError(f"no {method} event within {self.timeout}s")
                self._event_cv.wait(left)

    # --------------------------------------------------------------- helpers
    def goto(self, url: str) -> None:
        mark = len(self.events)
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", since=mark)

    def evaluate(self, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise CDPError(f"JavaScript error: {details.get('exception', {}).get('description') or details}")
        return result["result"].get("value")

    def wait_for(self, expression: str) -> Any:
        """Evaluate ``expression`` until it is truthy; return its value."""
        deadline = time.monotonic() + self.timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise CDPError(f"still false after {self.timeout}s: {expression}")
            time.sleep(0.05)

    def click(self, selector: str) -> None:
        """A real mouse click in the middle of the first element matching ``selector``."""
        box = self.evaluate(
            "(() => { const e = document.querySelector(%s); if (!e) return null; e.scrollIntoView({block: 'center'});"
            " const r = e.getBoundingClientRect(); return [r.x + Math.min(r.width / 2, 40), r.y + r.height / 2]; })()"
            % json.dumps(selector)
        )
        if box is None:
            raise CDPError(f"nothing matches {selector!r}")
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def screenshot(self, path: Path, full_page: bool = True) -> None:
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page}
        data = self.send("Page.captureScreenshot", params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def close(self) -> str:
        """Stop chromium; returns what it wrote on standard error."""
        if self.proc.poll() is None:
            try:
                self.call("Browser.close")
            except CDPError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self.stderr.seek(0)
        log = self.stderr.read().decode("utf-8", "replace")
        self.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)
        return log
