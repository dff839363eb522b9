"""Read replicas of the vector projections: a replica's consumer groups, and the registry
of the groups every replica runs.

A read replica (``memstream up --query-replicas N``: a child of the service running a
``workers.Pipeline`` with ``PipelineConfig.replica``) runs the vector projections over a
store of its own, fed from the log through consumer groups of its own: the version's group
and the replica's number (``replica_group``: ``turns.v1~r1``). Its projections name their
per-group records (positions, health, counters, dense backlog) after that group, so two
processes never share one.

``Replicas`` is the registry, under ``P:replicas:*`` (``core.keys``): every replica lists
its groups in one set (``replica_groups``) and beats (``replica_beat``: the groups it answers
from, in a key that expires ``BEAT_TTL_S`` after its last beat). A replica is live while its
beat stands: a restart after a kill is shorter than the beat's life, so it stays live
meanwhile. ``serving`` (the groups live replicas answer from) is what read-your-writes waits
for besides the primary's groups (``registry.memory_write_groups``); ``retire`` removes a replica that is gone for good (the
service runs fewer): its groups on every stream, their records, its rows in the set, so
that no forget waits for a group that nobody reads.
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterable

import redis

from memstream.core import as_str, keys

__all__ = ["BEAT_EVERY_S", "BEAT_TTL_S", "SEP", "Replicas", "replica_group", "replica_of"]

SEP = "~r"  # between a version's group and the replica's number
BEAT_EVERY_S = 2.0  # how often a replica beats
BEAT_TTL_S = 20  # a replica not heard of for this long is not live (its restart takes less)


def replica_group(group: str, replica: int) -> str:
    """Replica ``replica``'s consumer group of the version whose group is ``group``
    (``group`` itself for 0, the primary)."""
    if replica < 0:
        raise ValueError(f"a replica's number is 0 or more, not {replica}")
    return f"{group}{SEP}{replica}" if replica else group


def replica_of(group: str) -> tuple[str, int] | None:
    """(the version's group, the replica's number) of a replica's group; None for another."""
    base, sep, number = group.rpartition(SEP)
    if not sep or not base or not number.isdigit() or number.startswith("0"):
        return None
    return base, int(number)


def group_records(prefix: str, group: str) -> list[str]:
    """The records a group's consumers keep under its name (what dropping it deletes)."""
    return [
        keys.positions(prefix, group),
        keys.applied_at(prefix, group),
        keys.counters(prefix, group),
        keys.health(prefix, group),
        keys.embed_backlog(prefix, group),
    ]


class Replicas:
    """The replicas' registry under ``prefix`` (see the module docstring)."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.key = keys.replica_groups(prefix)

    def beat(self, replica: int, groups: Iterable[str], serving: Iterable[str]) -> None:
        """Replica ``replica`` runs ``groups`` (its own), answers from those of ``serving``,
        and is live for ``BEAT_TTL_S`` more."""
        pipe = self.client.pipeline(transaction=False)
        listed = list(groups)
        if listed:
            pipe.sadd(self.key, *listed)
        beat = json.dumps({"at": time.time(), "serving": sorted(serving)})
        pipe.set(keys.replica_beat(self.prefix, replica), beat, ex=BEAT_TTL_S)
        pipe.execute()

    def serving(self, names: Iterable[str]) -> list[str]:
        """The groups live replicas answer from, of the projections called ``names``: what
        read-your-writes waits for besides the primary's groups."""
        wanted = set(names)
        numbers = sorted(self.groups())
        if not numbers or not wanted:
            return []
        out: set[str] = set()
        for raw in self.client.mget([keys.replica_beat(self.prefix, n) for n in numbers]):
            if raw is None:
                continue
            try:
                beat = json.loads(raw)
            except ValueError:
                continue  # garbage where a beat should be: no replica of ours
            groups = beat.get("serving") if isinstance(beat, dict) else None
            for g in groups if isinstance(groups, list) else ():
                found = replica_of(g) if isinstance(g, str) else None
                if found is not None and found[0].rpartition(".v")[0] in wanted:
                    out.add(g)
        return sorted(out)

    def unlist(self, groups: Iterable[str]) -> None:
        """``groups`` are no replica's any more (a dropped version's)."""
        listed = list(groups)
        if listed:
            self.client.srem(self.key, *listed)

    def groups(self) -> dict[int, list[str]]:
        """Per replica listed: its groups (sorted)."""
        out: dict[int, list[str]] = {}
        for raw in self.client.smembers(self.key):
            found = replica_of(as_str(raw))
            if found is not None:
                out.setdefault(found[1], []).append(as_str(raw))
        return {n: sorted(gs) for n, gs in sorted(out.items())}

    def live(self, replicas: Iterable[int]) -> set[int]:
        """Those of ``replicas`` whose beat stands."""
        numbers = sorted(set(replicas))
        if not numbers:
            return set()
        pipe = self.client.pipeline(transaction=False)
        for n in numbers:
            pipe.exists(keys.replica_beat(self.prefix, n))
        return {n for n, there in zip(numbers, pipe.execute()) if there}

    def of_version(self, group: str) -> list[str]:
        """Every listed replica group of the version whose group is ``group``."""
        return [g for gs in self.groups().values() for g in gs if (replica_of(g) or ("", 0))[0] == group]

    def drop(self, group: str, streams: Iterable[str]) -> None:
        """Delete a replica's ``group``: on every stream, its records, its row in the set."""
        destroy_group(self.client, self.prefix, group, streams)
        self.unlist([group])

    def retire(self, keep: int, streams: Iterable[str]) -> list[str]:
        """Remove the replicas numbered above ``keep`` whose beat is gone (their groups on
        every stream and their records); returns the groups removed."""
        listed = {n: gs for n, gs in self.groups().items() if n > keep}
        alive = self.live(listed)
        gone = [g for n, gs in listed.items() if n not in alive for g in gs]
        stream_list = list(streams)
        for group in gone:
            self.drop(group, stream_list)
        return gone


def destroy_group(client: redis.Redis, prefix: str, group: str, streams: Iterable[str]) -> None:
    """``group`` destroyed on each of ``streams``, and its records deleted."""
    for stream in streams:
        try:
            client.xgroup_destroy(stream, group)
        except redis.ResponseError:
            pass  # no such stream or group
    records: list[Any] = group_records(prefix, group)
    client.delete(*records)
