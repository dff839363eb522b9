"""producers: the event contract, the append side of the log, and its archive.

Imports none of memstream's other packages.
"""

from memstream.producers.archive import (
    Archive,
    ArchiveBusy,
    ArchiveError,
    ArchiveGap,
    ArchiveSegment,
    CorruptSegment,
    GroupBehind,
    archive,
    history,
    point_id,
)
from memstream.producers.connect import LogLocator, event_log, redis_client
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
    TurnRecorded,
    decode,
    encode,
    to_builtins,
    utcnow,
)
from memstream.producers.shipper import Shipper
from memstream.producers.spool import Segment, Spool, spool_usage
from memstream.producers.stream import EntryFields, EventLog, Record, parse_entry_id, xrange_entry
from memstream.producers.tenants import (
    TenantError,
    TenantRegistry,
    tenant_space,
    verify,
)
from memstream.producers.writer import Writer

__all__ = [
    "archive",
    "Archive",
    "ArchiveBusy",
    "ArchiveError",
    "ArchiveGap",
    "ArchiveSegment",
    "CorruptSegment",
    "decode",
    "DelegationCompleted",
    "encode",
    "EntryFields",
    "Event",
    "event_log",
    "EVENT_TYPES",
    "EventLog",
    "GroupBehind",
    "history",
    "LogLocator",
    "MemoryAction",
    "MemoryForgotten",
    "MemoryRemembered",
    "MemoryTarget",
    "MemoryWritten",
    "parse_entry_id",
    "point_id",
    "Record",
    "redis_client",
    "Scope",
    "Segment",
    "SessionEnded",
    "SessionSwitched",
    "Shipper",
    "Spool",
    "spool_usage",
    "SwitchReason",
    "tenant_space",
    "TenantError",
    "TenantRegistry",
    "to_builtins",
    "ToolCall",
    "TurnRecorded",
    "utcnow",
    "verify",
    "Writer",
    "xrange_entry",
]
