"""``memstream bench dashboard``: how long the dashboard takes from navigation to its first
full render in headless Chromium, with the service under traffic.

A real service (``memstream up`` in the background on a temporary ``MEMSTREAM_HOME``, the
hash embedder, metrics and dashboard on a free loopback port) takes turns appended through
the producers' ``Writer`` (``rate`` a second) and a search a second answered by its query
server (``Traffic``), for ``warmup`` seconds first so the charts have history. Then a
headless Chromium (``memstream.bench.testbed.Chromium``) loads ``/`` ``loads`` times, each in a new
tab with the cache off. A load's figure is the page's own marker (``body[data-rendered]``):
milliseconds from navigation start to the first full render (the summary fetched, every
chart and table drawn). Reported: the median, min and max of the loads after the first, the
first (a browser that has loaded nothing yet) apart, and the size of the summary a first
load fetches (its whole history).

``dashboard_bench`` returns a JSON-ready dict; ``format_dashboard`` renders it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstream.bench.command import BenchError, show
from memstream.bench.stats import machine as machine_info
from memstream.bench.testbed import BrowserError, Chromium, find_chromium
from memstream.core import Settings, argtypes, new_event_id, start_service
from memstream.producers import LogLocator, Scope, TurnRecorded, Writer, utcnow
from memstream.service import stop_service

__all__ = [
    "RENDERED",
    "SERVICE_ENV",
    "Traffic",
    "dashboard_bench",
    "format_dashboard",
    "load_page",
    "start",
    "add_arguments",
    "run",
]

RENDERED = "document.body && document.body.dataset.rendered"  # the page's first-full-render marker


class Traffic:
    """A thread that appends ``rate`` turns a second through the producers' ``Writer`` of
    ``settings`` and asks the query server one search a second (``searches``), until
    ``stop()``. ``appended`` counts the turns handed to the writer."""

    def __init__(self, settings: Settings, rate: float = 20.0, searches: bool = True) -> None:
        self.settings, self.rate, self.searches = settings, rate, searches
        self.writer = Writer(settings)
        self.writer.shipper.start()
        self.appended = 0
        self.answered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memstream-bench-traffic", daemon=True)

    def start(self) -> Traffic:
        self._thread.start()
        return self

    def turn(self) -> None:
        """Append one turn (its text made of ids and counts)."""
        i = self.appended
        self.writer.emit(
            TurnRecorded(
                id=new_event_id(),
                occurred_at=utcnow(),
                scope=Scope(tenant="bench", agent=f"agent-{i % 3}", session_id=f"s{i // 50}"),
                turn_index=i,
                user_text=f"Deploy {i} of service {i % 7} went out",
                assistant_text=f"Noted deploy {i}.",
            )
        )
        self.appended += 1

    def _run(self) -> None:
        from memstream.query import SearchRequest, ask

        locator = LogLocator(self.settings, autostart=False)
        started, next_search = time.monotonic(), time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self.rate) + 1
            while self.appended < due:
                self.turn()
            if self.searches and time.monotonic() >= next_search:
                next_search += 1.0
                try:
                    log = locator()
                    ask(
                        log.client,
                        log.prefix,
                        SearchRequest(query=f"deploy {self.appended % 7}", tenant="bench", agent="agent-0", scope="all"),
                        timeout=5.0,
                    )
                    self.answered += 1
                except Exception:  # noqa: BLE001  traffic, not the figure measured (a timeout, Redis away)
                    pass
            self._stop.wait(min(0.05, 1.0 / self.rate))
        locator.close()

    def stop(self, flush: float = 20.0) -> bool:
        """Stop appending; whether everything appended reached the log within ``flush`` s."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10.0)
        return self.writer.close(flush)


def load_page(tab: Any, url: str, timeout: float = 30.0) -> float:
    """Load ``url`` in ``tab``; the page's first-full-render marker (ms since navigation start)."""
    tab.navigate(url)
    return float(tab.wait_for(f"location.href === {json.dumps(url)} && {RENDERED}", timeout=timeout))


# the benchmark's service: the hash embedder, its own Valkey, metrics on a free loopback port
SERVICE_ENV = {
    "MEMSTREAM_EMBEDDER": "hash",
    "MEMSTREAM_AUTOSTART": "0",
    "MEMSTREAM_METRICS_ADDR": "127.0.0.1:0",
    "MEMSTREAM_REDIS_URL": "",
}


def start(home: Path) -> tuple[Settings, dict[str, Any]]:
    """A service on ``home`` in the background (``SERVICE_ENV``): the settings to reach it
    and its run file. The caller stops it (``memstream.service.stop_service``)."""
    settings = Settings.load(home=str(home), autostart=False, embedder="hash", redis_url="")
    info = start_service(settings, wait=120.0, env=SERVICE_ENV)
    if not info.get("metrics"):
        raise RuntimeError(f"the service did not serve its metrics; see {home / 'run' / 'service.log'}")
    return settings, info


def dashboard_bench(loads: int = 7, rate: float = 20.0, warmup: float = 20.0, chromium: str | None = None) -> dict[str, Any]:
    """Run the benchmark (see the module doc); JSON-ready results."""
    binary = chromium or find_chromium()
    if binary is None:
        raise RuntimeError("bench dashboard needs chromium (Debian: apt-get install chromium)")
    root = Path(tempfile.mkdtemp(prefix="memstream-bench-dashboard-"))
    settings: Settings | None = None
    result: dict[str, Any] = {
        "benchmark": "dashboard",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "loads": loads,
        "rate": rate,
        "warmup_s": warmup,
    }
    traffic: Traffic | None = None
    try:
        settings, info = start(root / "home")
        base = info["metrics"][: -len("/metrics")]
        traffic = Traffic(settings, rate=rate).start()
        time.sleep(warmup)
        with urllib.request.urlopen(base + "/api/summary", timeout=30) as reply:
            summary = reply.read()
        result["summary_bytes"] = len(summary)
        result["history_points"] = len(json.loads(summary)["history"]["t"])
        times: list[float] = []
        with Chromium(binary) as browser:
            result["browser"] = browser.call("Browser.getVersion").get("product", "")
            for i in range(loads):
                tab = browser.open()
                tab.call("Network.enable")
                tab.call("Network.setCacheDisabled", {"cacheDisabled": True})
                times.append(load_page(tab, f"{base}/?load={i}"))
                tab.close()
        result["first_ms"] = times[0]
        rest = times[1:] or times
        result["render_ms"] = {"median": statistics.median(rest), "min": min(rest), "max": max(rest), "all": times}
        result["turns_appended"] = traffic.appended
        result["searches_answered"] = traffic.answered
    finally:
        if traffic is not None:
            traffic.stop(5.0)
        if settings is not None:
            stop_service(settings)
        shutil.rmtree(root, ignore_errors=True)
    return result


def format_dashboard(result: dict[str, Any]) -> str:
    m, r = result["machine"], result["render_ms"]
    return "\n".join(
        [
            f"memstream bench dashboard — {result['date']}",
            f"machine: {m.get('cpus')} CPUs {m.get('cpu_model', '')}, Python {m.get('python')}; load average "
            f"{m.get('loadavg_at_start')} at start; {result.get('browser', 'chromium')} headless",
            f"the service under traffic: {result['rate']:g} turns/s through the producers' writer and a search a "
            f"second ({result['turns_appended']} turns, {result['searches_answered']} searches), "
            f"{result['warmup_s']:g} s before the first load",
            "",
            f"navigation start to first full render: median {r['median']:.0f} ms (min {r['min']:.0f}, max "
            f"{r['max']:.0f}) over {len(r['all']) - 1 if len(r['all']) > 1 else 1} loads, each in a new tab with the "
            f"cache off; the browser's first load {result['first_ms']:.0f} ms",
            f"a first load's /api/summary: {result['summary_bytes']} bytes, {result['history_points']} history points",
        ]
    )


# -- the command ---------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``memstream bench dashboard``'s arguments."""
    parser.add_argument(
        "--runs", type=argtypes.int_between(1, 1000), default=7, help="page loads in headless Chromium (default 7)"
    )
    parser.add_argument(
        "--minutes",
        type=argtypes.minutes,
        default=None,
        help="minutes of traffic before the first load, hence of history the page draws (default 1/3; 10 fills it)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark as the command line asked; print its table (or JSON)."""
    try:
        result = dashboard_bench(loads=args.runs, warmup=args.minutes * 60 if args.minutes else 20.0)
    except (BrowserError, RuntimeError) as exc:
        raise BenchError(str(exc)) from exc
    return show(args, result, format_dashboard(result))
