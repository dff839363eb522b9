"""producers: the event contract, the append side of the log, its archive, and the importers
of history from elsewhere (``importers``: imported on first use of their names, so the agent's
process does not load them).

Imports none of memstream's other packages.
"""

from typing import TYPE_CHECKING

from memstream.core import lazy_exports
from memstream.producers.acl import ROLES as ACL_ROLES
from memstream.producers.acl import role_rules as acl_role_rules
from memstream.producers.acl import role_user as acl_role_user
from memstream.producers.archive import (
    Archive,
    ArchiveBusy,
    ArchiveError,
    ArchiveGap,
    ArchiveSegment,
    CorruptSegment,
    GroupBehind,
    archive,
    entry_id_of,
    erase,
    history,
)
from memstream.producers.connect import LogLocator, event_log, redis_client, shipping_timeout, slot_primary_url, tls_kwargs
from memstream.producers.door import Admitted, admit, clip_event
from memstream.producers.door import append as append_through_door
from memstream.producers.events import (
    EVENT_TYPES,
    DelegationCompleted,
    Event,
    MemoryAction,
    MemoryForgotten,
    MemoryRemembered,
    MemoryTarget,
    MemoryWritten,
    Scope,
    SessionEnded,
    SessionSwitched,
    SwitchReason,
    ToolCall,
    TurnAuthor,
    TurnRecorded,
    decode,
    encode,
    to_builtins,
    utcnow,
)
from memstream.producers.record import Record
from memstream.producers.redact import redact_event
from memstream.producers.report import (
    BUCKETS_NS,
    HOOKS,
    MAX_REPORT_BYTES,
    PREFETCH_OUTCOMES,
    ROW,
    AgentReport,
    Figures,
    Prefetch,
    Reporter,
    ReportError,
    Tally,
    decode_report,
    encode_report,
    pack_row,
    unpack_row,
)
from memstream.producers.shipper import Shipper
from memstream.producers.spool import Segment, Spool, erase_records, spool_usage
from memstream.producers.stream import (
    MAX_ENTRY_ID,
    EntryFields,
    EventLog,
    NotReplicated,
    after,
    parse_entry_id,
    xrange_entry,
)
from memstream.producers.tenants import (
    TenantError,
    TenantRegistry,
    tenant_space,
    verify,
)
from memstream.producers.tls import tls_hint
from memstream.producers.transcript import BRIEF_CHARS, message_text, tool_calls_of
from memstream.producers.writer import Writer

if TYPE_CHECKING:
    from memstream.producers.importers import (
        HERMES_SCHEMA_SQL,
        HERMES_SCHEMA_VERSION,
        HERMES_SCHEMA_VERSIONS,
        STATE_DB,
        HermesHistory,
        ImportFileError,
        append_events,
        existing_ids,
        new_events,
        read_hermes,
        read_jsonl,
    )

__all__ = [
    "ACL_ROLES",
    "Admitted",
    "admit",
    "append_through_door",
    "clip_event",
    "acl_role_rules",
    "acl_role_user",
    "BUCKETS_NS",
    "HOOKS",
    "MAX_REPORT_BYTES",
    "PREFETCH_OUTCOMES",
    "ROW",
    "AgentReport",
    "Figures",
    "Prefetch",
    "Reporter",
    "ReportError",
    "Tally",
    "decode_report",
    "encode_report",
    "pack_row",
    "unpack_row",
    "archive",
    "erase",
    "erase_records",
    "Archive",
    "ArchiveBusy",
    "ArchiveError",
    "ArchiveGap",
    "ArchiveSegment",
    "CorruptSegment",
    "append_events",
    "BRIEF_CHARS",
    "decode",
    "DelegationCompleted",
    "encode",
    "EntryFields",
    "Event",
    "event_log",
    "existing_ids",
    "EVENT_TYPES",
    "EventLog",
    "GroupBehind",
    "history",
    "HERMES_SCHEMA_SQL",
    "HERMES_SCHEMA_VERSION",
    "HERMES_SCHEMA_VERSIONS",
    "HermesHistory",
    "ImportFileError",
    "LogLocator",
    "MemoryAction",
    "MemoryForgotten",
    "MemoryRemembered",
    "MemoryTarget",
    "MemoryWritten",
    "message_text",
    "new_events",
    "NotReplicated",
    "parse_entry_id",
    "after",
    "MAX_ENTRY_ID",
    "entry_id_of",
    "Record",
    "redact_event",
    "read_hermes",
    "read_jsonl",
    "redis_client",
    "slot_primary_url",
    "tls_hint",
    "tls_kwargs",
    "Scope",
    "Segment",
    "SessionEnded",
    "SessionSwitched",
    "Shipper",
    "shipping_timeout",
    "Spool",
    "spool_usage",
    "STATE_DB",
    "SwitchReason",
    "tenant_space",
    "TenantError",
    "TenantRegistry",
    "to_builtins",
    "tool_calls_of",
    "ToolCall",
    "TurnAuthor",
    "TurnRecorded",
    "utcnow",
    "verify",
    "Writer",
    "xrange_entry",
]

_LAZY = {
    name: "memstream.producers.importers"
    for name in (
        "append_events",
        "existing_ids",
        "HERMES_SCHEMA_SQL",
        "HERMES_SCHEMA_VERSION",
        "HERMES_SCHEMA_VERSIONS",
        "HermesHistory",
        "ImportFileError",
        "new_events",
        "read_hermes",
        "read_jsonl",
        "STATE_DB",
    )
}

__getattr__ = lazy_exports(__name__, _LAZY)
