"""importers: history from elsewhere as events of the log (``memstream import``).

Each reader turns a file into events and checks every one before anything is appended
(``ImportFileError`` names the file and the line or table of the first problem):
``read_hermes`` (Hermes's ``state.db`` and memory files), ``read_jsonl`` (a ``memstream
export`` file). ``existing_ids``, ``new_events`` and ``append_events`` are the append
side: an event whose id the log holds is not appended again.
"""

from memstream.producers.importers.append import BATCH, append_events, existing_ids, new_events
from memstream.producers.importers.checks import ImportFileError, check_event
from memstream.producers.importers.hermes import (
    ENTRY_DELIMITER,
    HERMES_SCHEMA_VERSIONS,
    MEMORY_FILES,
    STATE_DB,
    HermesHistory,
    read_hermes,
)
from memstream.producers.importers.hermes_schema import HERMES_SCHEMA_SQL, HERMES_SCHEMA_VERSION
from memstream.producers.importers.jsonl import read_jsonl

__all__ = [
    "append_events",
    "BATCH",
    "check_event",
    "ENTRY_DELIMITER",
    "existing_ids",
    "HermesHistory",
    "ImportFileError",
    "MEMORY_FILES",
    "new_events",
    "read_hermes",
    "read_jsonl",
    "HERMES_SCHEMA_SQL",
    "HERMES_SCHEMA_VERSION",
    "HERMES_SCHEMA_VERSIONS",
    "STATE_DB",
]
