"""service: ``memstream up``, the embedded Valkey and the projection workers and query
server (the projections without vectors in a supervised child process, ``sidecar``);
``--detach`` and ``memstream down``; the Prometheus metrics of the
service and of every worker, and the dashboard served beside them (``metrics``,
``dashboard``, ``http``: imported on first use)."""

from typing import TYPE_CHECKING

from memstream.core import lazy_exports
from memstream.service.service import AlreadyRunning, Service, Stopped, detach, stop_service
from memstream.service.sidecar import Sidecar, SidecarDrain
from memstream.service.valkey import ValkeyProcess, binary_path, free_port

if TYPE_CHECKING:
    from memstream.service.metrics import Metrics, start_metrics

__all__ = [
    "AlreadyRunning",
    "binary_path",
    "detach",
    "free_port",
    "Metrics",
    "Service",
    "Sidecar",
    "SidecarDrain",
    "start_metrics",
    "stop_service",
    "Stopped",
    "ValkeyProcess",
]

_LAZY = {"Metrics": "memstream.service.metrics", "start_metrics": "memstream.service.metrics"}

__getattr__ = lazy_exports(__name__, _LAZY)
