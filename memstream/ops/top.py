"""``memstream top``: the dashboard's numbers for a terminal. They are the ``/api/summary``
of a running process's dashboard (``memstream.service.dashboard``): the service's, whose
run file names where it serves its metrics, or any service's or worker's at ``--url``.
Nothing here computes a figure: the summary is returned as the process served it."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from memstream.core import Settings, read_run_file
from memstream.ops.errors import CommandError

__all__ = ["dashboard_url", "fetch_summary"]

SUMMARY = "/api/summary"


def _base(url: str) -> str:
    """``http://HOST:PORT`` of a dashboard named by ``url``: a base URL, a ``/metrics`` or
    ``/api/summary`` URL, or a bare ``HOST:PORT``."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CommandError(
            f"--url {url!r}: give http://HOST:PORT, the address a service or worker serves its "
            "metrics on (MEMSTREAM_METRICS_ADDR)"
        )
    path = parts.path.rstrip("/")
    for tail in (SUMMARY, "/metrics"):
        if path.endswith(tail):
            path = path[: -len(tail)]
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def dashboard_url(settings: Settings, url: str | None = None) -> str:
    """The base URL of the dashboard to read: ``url`` when given, else the running
    service's (from its run file). ``CommandError`` when neither names one."""
    if url:
        return _base(url)
    info = read_run_file(settings.run_file)
    if not info:
        raise CommandError(
            f"no memstream service is running here (no live run file at {settings.run_file}); "
            "start one with `memstream up`, or give --url http://HOST:PORT of a service or worker"
        )
    if not info.get("metrics"):
        raise CommandError(
            f"the service (pid {info.get('pid')}) serves no metrics (MEMSTREAM_METRICS_ADDR empty or "
            "taken when it started); give --url http://HOST:PORT of a worker, or restart it with an "
            "address"
        )
    return _base(str(info["metrics"]))


def fetch_summary(base: str, timeout: float = 5.0) -> dict[str, Any]:
    """The dashboard's summary at ``base`` (JSON as served). ``CommandError`` when nothing
    answers there, or something other than a memstream dashboard does."""
    url = base + SUMMARY
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers={"Accept": "application/json"}), timeout=timeout
        ) as reply:
            body = reply.read(64 << 20)
    except urllib.error.HTTPError as exc:
        raise CommandError(f"{url} answered HTTP {exc.code}: not a memstream dashboard") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CommandError(f"nothing serves at {base} ({reason}); is the service or worker running?") from None
    try:
        summary = json.loads(body)
    except ValueError:
        summary = None
    if not isinstance(summary, dict) or "sampled_at" not in summary:
        raise CommandError(f"{url} did not answer with a memstream summary")
    return summary
