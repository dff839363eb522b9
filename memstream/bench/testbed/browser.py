"""Headless Chromium driven over the DevTools protocol on a pipe: ``--remote-debugging-pipe``
reads commands on its fd 3 and writes replies and events on its fd 4, each a JSON message
ended by a NUL byte. No websocket and no dependency: what ``memstream bench dashboard`` and
the dashboard's browser test load the page with.

Guarantees: every wait is bounded (``BrowserError`` past it); ``close()`` (also on leaving
a ``with`` block) ends the browser and every process it started (its own process group),
waits (bounded) until they are gone, and removes its profile directory.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memstream.core import PermanentError

__all__ = ["BrowserError", "Chromium", "Tab", "find_chromium"]

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The Chromium (or Chrome) binary on the PATH, or None."""
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


# run in the child before the browser: the pipes onto fds 3 and 4, then the browser in its place
_ONTO_3_AND_4 = "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); os.execv(sys.argv[3], sys.argv[3:])"


def _above(fd: int, floor: int) -> int:
    """``fd`` moved to the lowest free number above ``floor`` (close-on-exec, as os.pipe makes them)."""
    if fd > floor:
        return fd
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor + 1)
    os.close(fd)
    return moved


class BrowserError(PermanentError, RuntimeError):
    """The browser did not start, answered an error, or did not answer in time."""


class Chromium:
    """``with Chromium() as browser: tab = browser.open(url)``: one headless browser whose
    windows are ``width`` x ``height`` CSS pixels."""

    def __init__(self, binary: str | None = None, *, width: int = 1400, height: int = 1000, timeout: float = 30.0) -> None:
        found = binary or find_chromium()
        if found is None:
            raise BrowserError("no chromium on the PATH (Debian: apt-get install chromium)")
        self.binary, self.width, self.height, self.timeout = found, width, height, timeout
        self._profile = Path(tempfile.mkdtemp(prefix="memstream-chromium-"))
        self._log = open(self._profile.parent / f"{self._profile.name}.log", "w+b")  # closed by close()
        commands, self._to = os.pipe()  # we write commands; the browser reads them on its fd 3
        self._from, replies = os.pipe()  # the browser writes replies on its fd 4; we read them
        commands, replies = _above(commands, 4), _above(replies, 4)  # never 3 or 4: moved there in the child
        flags = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--mute-audio",
            "--hide-scrollbars",
            "--remote-debugging-pipe",
            f"--user-data-dir={self._profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _ONTO_3_AND_4, str(commands), str(replies), self.binary, *flags],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                pass_fds=(commands, replies),
                start_new_session=True,
            )
        except OSError as exc:
            self._cleanup()
            raise BrowserError(f"cannot start {shlex.quote(self.binary)}: {exc}") from exc
        finally:
            os.close(commands)
            os.close(replies)
        self._buffer = b""
        self._next = 0
        self._closed = False

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """Send one command; its result (``BrowserError`` on an error reply or no reply in time)."""
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        try:
            os.write(self._to, json.dumps(message).encode() + b"\0")
        except OSError as exc:
            raise BrowserError(f"the browser is gone ({exc}); {self._tail()}") from exc
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message', reply['error'])}")
                result: dict[str, Any] = reply.get("result", {})
                return result

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"no reply from the browser in time; {self._tail()}")
            if select.select([self._from], [], [], min(left, 0.5))[0]:
                chunk = os.read(self._from, 1 << 20)
                if not chunk:
                    raise BrowserError(f"the browser closed its pipe; {self._tail()}")
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def _tail(self) -> str:
        try:
            self._log.seek(0)
            lines = [
                line for line in self._log.read().decode("utf-8", "replace").splitlines() if "dbus" not in line.lower()
            ]  # a container has no D-Bus: noise
            return "its last output: " + " | ".join(lines[-5:])
        except (OSError, ValueError):
            return "no output"

    def open(self, url: str = "about:blank") -> Tab:
        """A new tab (its own target and session) at ``url``."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        tab = Tab(self, target, session)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        if url != "about:blank":
            tab.navigate(url)
        return tab

    def close(self) -> None:
        """End the browser and its processes; remove its profile."""
        if self._closed:
            return
        self._closed = True
        try:
            self.call("Browser.close", timeout=5.0)
        except BrowserError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its renderers and helpers, in its own group
        except (ProcessLookupError, PermissionError):
            pass
        if self.proc.poll() is None:
            self.proc.wait(10)
        deadline = time.monotonic() + 10.0  # the helpers, orphaned, until their new parent collects them
        while time.monotonic() < deadline:
            try:
                os.killpg(self.proc.pid, 0)
            except (ProcessLookupError, PermissionError):
                break
            time.sleep(0.02)
        for fd in (self._to, self._from):
            try:
                os.close(fd)
            except OSError:
                pass
        self._cleanup()

    def _cleanup(self) -> None:
        self._log.close()
        Path(self._log.name).unlink(missing_ok=True)
        shutil.rmtree(self._profile, ignore_errors=True)


class Tab:
    """One page of a ``Chromium``."""

    def __init__(self, browser: Chromium, target: str, session: str) -> None:
        self.browser, self.target, self.session = browser, target, session

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None) -> dict[str, Any]:
        return self.browser.call(method, params, session=self.session, timeout=timeout)

    def navigate(self, url: str) -> None:
        reply = self.call("Page.navigate", {"url": url})
        if reply.get("errorText"):
            raise BrowserError(f"cannot load {url}: {reply['errorText']}")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise: its result)."""
        reply = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in reply:
            details = reply["exceptionDetails"]
            raise BrowserError(f"{expression[:80]}: {details.get('exception', {}).get('description') or details}")
        return reply.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 30.0, every: float = 0.02) -> Any:
        """The expression's first truthy value, polled every ``every`` s (one that throws, as
        it may while a page loads, counts as not yet); ``BrowserError`` past ``timeout``."""
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            try:
                found = self.evaluate(expression)
            except BrowserError as exc:
                found, last = None, f" (last: {exc})"
            if found:
                return found
            if time.monotonic() > deadline:
                raise BrowserError(f"{expression[:80]} was not true within {timeout} s{last}")
            time.sleep(every)

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        """A PNG of the page (the whole page's height when ``full_page``) written to ``path``."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params.update(
                captureBeyondViewport=True,
                clip={
                    "x": 0,
                    "y": 0,
                    "width": max(self.browser.width, int(size["width"])),
                    "height": max(self.browser.height, int(size["height"])),
                    "scale": 1,
                },
            )
        data = self.call("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        self.browser.call("Target.closeTarget", {"targetId": self.target})
