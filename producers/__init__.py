"""producers: the event contract and the append side of the log.

Imports none of memstream's other packages.
"""

from producers.events import (
    EVENT_TYPES,
    SCHEMA_VERSION,
    DelegationCompleted,
    Event,
    MemoryForgotten,
    MemoryRemembered,
    MemoryWritten,
    Scope,
    SessionEnded,
    SessionSwitched,
    ToolCall,
    TurnRecorded,
    decode,
    encode,
    to_builtins,
    utcnow,
)
from producers.ids import event_id_time_ms, new_event_id
from producers.settings import OPTIONS, Settings
from producers.shipper import Shipper
from producers.spool import Spool, spool_usage
from producers.stream import EventLog, Record, shard_of
from producers.text import clean_text
from producers.writer import Writer
from producers.connect import LogLocator, read_run_file, redis_client

__all__ = [
    "EVENT_TYPES", "SCHEMA_VERSION", "DelegationCompleted", "Event", "MemoryForgotten",
    "MemoryRemembered", "MemoryWritten", "Scope", "SessionEnded", "SessionSwitched",
    "ToolCall", "TurnRecorded", "decode", "encode", "to_builtins", "utcnow",
    "event_id_time_ms", "new_event_id", "OPTIONS", "Settings", "Shipper", "Spool",
    "spool_usage", "EventLog", "Record", "shard_of", "clean_text", "Writer",
    "LogLocator", "read_run_file", "redis_client",
]
