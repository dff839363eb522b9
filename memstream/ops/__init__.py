"""ops: what the ``memstream`` commands do, as functions over the settings that return plain
data (``doctor``, ``stats``, ``search``, the read-your-writes wait of ``add --sync``, the
dead letters, the archive, tenants, workers, the service, ``import`` and ``top``). A
failure the user can act on is a ``CommandError`` whose message says what to do. Nothing
here prints or reads the environment: the command line (``memstream.cli``) parses, calls
and prints.

Light to import: the stores, the workers and the query server are imported by the
operations that use them, when they run.
"""

from memstream.ops.acl import acl_recipe
from memstream.ops.add import add_logged, add_spooled, memory_event, source_text
from memstream.ops.archive import archive, verify_archive
from memstream.ops.connect import connect
from memstream.ops.dlq import dead_letters, settle
from memstream.ops.doctor import doctor
from memstream.ops.errors import CommandError
from memstream.ops.export import Undecodable, export
from memstream.ops.forget import Selector, forget
from memstream.ops.imports import import_hermes, import_jsonl
from memstream.ops.replay import (
    activate_version,
    cancel_replay,
    drop_version,
    projection_versions,
    replay_status,
    start_replay,
    wait_replay,
)
from memstream.ops.search import search
from memstream.ops.service import start_foreground, stop_service, up_detached
from memstream.ops.stats import stats, tier_stats
from memstream.ops.sync import wait_projected
from memstream.ops.tenants import add_tenant, remove_tenant, tenants, update_tenants
from memstream.ops.top import dashboard_url, fetch_summary
from memstream.ops.worker import check_worker, start_worker, worker_projections

__all__ = [
    "acl_recipe",
    "activate_version",
    "cancel_replay",
    "drop_version",
    "projection_versions",
    "replay_status",
    "start_replay",
    "wait_replay",
    "add_logged",
    "add_spooled",
    "add_tenant",
    "archive",
    "check_worker",
    "CommandError",
    "connect",
    "dashboard_url",
    "dead_letters",
    "doctor",
    "export",
    "fetch_summary",
    "forget",
    "import_hermes",
    "import_jsonl",
    "memory_event",
    "remove_tenant",
    "search",
    "Selector",
    "settle",
    "source_text",
    "start_foreground",
    "start_worker",
    "worker_projections",
    "stats",
    "tier_stats",
    "stop_service",
    "tenants",
    "update_tenants",
    "Undecodable",
    "up_detached",
    "verify_archive",
    "wait_projected",
]
