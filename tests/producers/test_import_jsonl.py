"""Reading a ``memstream export`` file (``read_jsonl``) and the append side of an import
(``existing_ids``, ``new_events``, ``append_events``) on fakeredis and a real Valkey."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memstream.producers import (
    EventLog,
    ImportFileError,
    MemoryWritten,
    Scope,
    TurnRecorded,
    append_events,
    existing_ids,
    new_events,
    read_jsonl,
    to_builtins,
)

WHEN = datetime(2026, 9, 21, 12, 0, 0, 123456, tzinfo=UTC)


def turn(i: int, tenant: str = "acme", agent: str = "a1") -> TurnRecorded:
    return TurnRecorded(
        id=f"0199{i:04d}-0000-7000-8000-000000000000",
        occurred_at=WHEN,
        scope=Scope(tenant=tenant, agent=agent, session_id="s1"),
        turn_index=i,
        user_text=f"question {i} é",
        assistant_text=f"answer {i}",
    )


def exported(events, path):
    """The file ``memstream export`` writes: each event with the stream and entry it had."""
    lines = [
        json.dumps({"stream": "memstream:events:0", "entry_id": f"{i}-0", **to_builtins(e)}, ensure_ascii=False)
        for i, e in enumerate(events, 1)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_an_export_file_reads_back_as_the_same_events_in_its_order(tmp_path):
    events = [
        turn(1),
        MemoryWritten(
            id="m-1", occurred_at=WHEN, scope=Scope(tenant="acme"), action="replace", target="user", content="new", old_text="old"
        ),
        turn(2, tenant="beta"),
    ]
    assert read_jsonl(exported(events, tmp_path / "x.jsonl")) == events


def test_blank_lines_are_ignored(tmp_path):
    path = exported([turn(1), turn(2)], tmp_path / "x.jsonl")
    path.write_text(path.read_text().replace("\n", "\n\n  \n"))
    assert [e.id for e in read_jsonl(path)] == [turn(1).id, turn(2).id]


@pytest.mark.parametrize(
    "mangle, says",
    [
        (lambda text: text[: len(text) - 30], r"line 3: cut short"),
        (lambda text: text.replace('"turn_index": 2', '"turn_index": 2,,', 1), r"line 2: not JSON"),
        (lambda text: text + "[1, 2]\n", r"line 4: a JSON list, not an event object"),
        (lambda text: text.replace('"turn.recorded"', '"turn.unknown"', 1), r"line 1: not an event of this schema"),
        (lambda text: text.replace('"turn_index": 2', '"turn_index": "two"', 1), r"line 2: not an event of this schema"),
        (
            lambda text: text.replace('"tenant": "acme"', '"tenant": ""', 1),
            r"line 1: an event admission would refuse "
            r"\(scope.tenant is empty\)",
        ),
    ],
)
def test_a_bad_line_rejects_the_file_naming_the_line(tmp_path, mangle, says):
    path = exported([turn(1), turn(2), turn(3)], tmp_path / "x.jsonl")
    path.write_text(mangle(path.read_text()))
    with pytest.raises(ImportFileError, match=rf"x\.jsonl: {says}"):
        read_jsonl(path)


def test_bytes_that_are_not_utf8_reject_the_file_naming_the_line(tmp_path):
    path = exported([turn(1), turn(2)], tmp_path / "x.jsonl")
    path.write_bytes(path.read_bytes().replace(b"answer 2", b"answer \xff"))
    with pytest.raises(ImportFileError, match=r"line 2: not UTF-8"):
        read_jsonl(path)


def test_a_missing_file_is_rejected_naming_it(tmp_path):
    with pytest.raises(ImportFileError, match=r"nope\.jsonl: no such file"):
        read_jsonl(tmp_path / "nope.jsonl")


def test_existing_ids_are_the_ids_of_every_stream_and_only_new_events_are_appended(redis_client):
    eventlog = EventLog(redis_client, "memstream", shards=4)
    first = [turn(i, agent=f"a{i}") for i in range(6)]
    eventlog.append(first)
    assert existing_ids(eventlog) == {e.id for e in first}
    again = first[2:] + [turn(7), turn(7), turn(8)]
    fresh = new_events(again, existing_ids(eventlog))
    assert [e.id for e in fresh] == [turn(7).id, turn(8).id]
    seen = []
    assert append_events(eventlog, fresh, batch=1, progress=lambda done, total: seen.append((done, total))) == 2
    assert seen == [(0, 2), (1, 2), (2, 2)]
    assert existing_ids(eventlog) == {e.id for e in first} | {turn(7).id, turn(8).id}
