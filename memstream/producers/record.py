"""One event ready to append: its encoding and where it goes (its tenant, its agent)."""

from __future__ import annotations

from dataclasses import dataclass

from memstream.producers.events import Event, encode

__all__ = ["Record"]


@dataclass(frozen=True, slots=True)
class Record:
    """One event ready to ship: its encoded payload and where it goes."""

    seq: int
    event_id: str
    type: str
    tenant: str
    agent: str
    data: bytes

    @classmethod
    def of(cls, event: Event, seq: int = 0, data: bytes | None = None) -> Record:
        """The record of ``event``; ``data`` is its encoding when already at hand."""
        return cls(
            seq=seq,
            event_id=event.id,
            type=str(type(event).__struct_config__.tag),  # every event's tag is a str
            tenant=event.scope.tenant,
            agent=event.scope.agent,
            data=encode(event) if data is None else data,
        )
