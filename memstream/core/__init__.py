"""core: the facts every layer shares, and nothing else: settings, ids, owner-only files,
the run file, how bytes from Redis become text, the Redis keys (``keys``), the errors and
whether retrying helps (``errors``), logging set-up, memory given back to the system (``memory``).
Imports no other memstream package."""

from memstream.core import argtypes, keys, observe, threads
from memstream.core.backoff import backoff_delay
from memstream.core.cluster_url import cluster_prefix, is_cluster_url, parse_cluster_url
from memstream.core.codec import COUNT_MAX, as_str, count, counts, lossless, shown
from memstream.core.errors import (
    MemstreamError,
    PermanentError,
    TransientError,
    is_transient,
)
from memstream.core.files import (
    PRIVATE_UMASK,
    fsync_dir,
    open_private,
    private_dir,
    tighten,
    write_private,
)
from memstream.core.ids import MAX_ID_BYTES, derived_event_id, new_event_id
from memstream.core.lazy import lazy_exports
from memstream.core.logs import configure, configure_in_host, logs_json
from memstream.core.memory import release_file_pages, release_freed_heap
from memstream.core.runfile import (
    STARTING,
    last_error_line,
    pid_alive,
    process_start,
    read_run_file,
    say_ready,
    start_service,
    starting_service,
    stop_process,
    stop_processes,
    take_ready_fd,
)
from memstream.core.sentinel_url import SentinelURL, is_sentinel_url, parse_sentinel_url
from memstream.core.settings import LATE_RERANK_MODES, LOCAL_EMBEDDERS, OPTIONS, Settings, config_file_for, mask_url, usable_cpus

__all__ = [
    "argtypes",
    "as_str",
    "count",
    "counts",
    "COUNT_MAX",
    "cluster_prefix",
    "is_cluster_url",
    "parse_cluster_url",
    "backoff_delay",
    "config_file_for",
    "configure",
    "release_file_pages",
    "release_freed_heap",
    "derived_event_id",
    "is_transient",
    "is_sentinel_url",
    "keys",
    "lazy_exports",
    "configure_in_host",
    "logs_json",
    "fsync_dir",
    "lossless",
    "mask_url",
    "MemstreamError",
    "new_event_id",
    "MAX_ID_BYTES",
    "observe",
    "open_private",
    "LATE_RERANK_MODES",
    "LOCAL_EMBEDDERS",
    "OPTIONS",
    "parse_sentinel_url",
    "PermanentError",
    "pid_alive",
    "private_dir",
    "process_start",
    "PRIVATE_UMASK",
    "read_run_file",
    "STARTING",
    "starting_service",
    "Settings",
    "SentinelURL",
    "shown",
    "start_service",
    "stop_process",
    "stop_processes",
    "last_error_line",
    "say_ready",
    "take_ready_fd",
    "tighten",
    "TransientError",
    "threads",
    "usable_cpus",
    "write_private",
]
