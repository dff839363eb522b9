"""What a projection is to the workers that feed it: a ``Projection`` (a name, a version and an
idempotent ``apply(batch)``) and the ``Delivery`` of one stream entry it is given.

The consumer group of a projection is ``{name}.v{version}``; ``apply`` must be idempotent
with the event id as its key, because a crash between applying and acking redelivers.
A projection may also have ``prepare()``: run by its consumer's thread before it reads
(after every start or restart of the thread: a look once its work is done), for a
one-time migration of what an older release wrote (the facts' event → facts index).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from memstream.producers import EntryFields, Event
from memstream.projections.replicas import replica_group


@dataclass(slots=True)
class Delivery:
    stream: str
    entry_id: str
    fields: EntryFields
    event: Event
    deliveries: int = 1


class Versioned(Protocol):
    """Anything with a projection's name and version (a projection, or what builds one)."""

    name: str
    version: int


class Projection(Versioned, Protocol):
    def apply(self, batch: Sequence[Delivery]) -> None:
        """Apply events idempotently (event id = idempotency key), in order."""


def group_name(projection: Versioned | type[Any]) -> str:
    """The consumer group of ``projection`` (an instance or its class): ``{name}.v{version}``;
    a read replica's projection (its ``replica``, 1 or more) has the replica's group of that
    version (``projections.replicas``: ``{name}.v{version}~r{replica}``)."""
    return replica_group(f"{projection.name}.v{projection.version}", int(getattr(projection, "replica", 0) or 0))
