"""service: ``memstream up``, the embedded Valkey and the projection workers and query
server in one process; ``--detach`` and ``memstream down``."""

from memstream.service.service import AlreadyRunning, Service, detach, stop_service
from memstream.service.valkey import ValkeyProcess, free_port

__all__ = [
    "AlreadyRunning",
    "detach",
    "free_port",
    "Service",
    "stop_service",
    "ValkeyProcess",
]
